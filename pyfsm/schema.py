"""Installing and checking pyfsm's schema.

Global objects come from the numbered Alembic revisions in ``migrations/``, each applying
named, versioned files from ``sql/``. Per-type objects (an instance table, a history
table, their triggers and per-type procedures) are rendered from ``sql/templates`` when a
machine is defined: MySQL cannot create triggers from a stored procedure.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pymysql

from . import db
from .errors import SchemaVersionMismatch
from .grants import grant_recorded
from .resources import PLACEHOLDER, check_machine_name, migrations_dir, read_sql, render

#: The Alembic revision this version of the library needs. tests/test_migrations.py
#: checks that it is the head of migrations/.
HEAD_REVISION = "0010"
VERSION_TABLE = "fsm_alembic_version"

@dataclass(frozen=True)
class Deprecated:
    """A public procedure that a newer version replaces (docs/sql-api.md, "Versions and retirement").

    It is kept in databases upgraded from a release that had it, is never created by a fresh
    install, and is dropped by the first migration of ``removed_in``. ``name`` names per-type
    procedures with ``<machine>``.
    """

    name: str
    replaced_by: str
    deprecated_in: str
    removed_in: str


#: The deprecated public procedures an upgraded database may still hold; `pyfsm check`
#: lists the ones present. A fresh install has none of them.
DEPRECATED = (
    Deprecated("fsm_define_v1", "fsm_define_v4", "0.3.0", "0.4.0"),
    Deprecated("fsm_define_v2", "fsm_define_v4", "0.3.0", "0.4.0"),
    Deprecated("fsm_define_v3", "fsm_define_v4", "0.3.0", "0.4.0"),
    Deprecated("fsm_counts_v1", "fsm_counts_v2", "0.3.0", "0.4.0"),
    Deprecated("fsm_force_unlock_v1", "fsm_force_unlock_v2", "0.3.0", "0.4.0"),
    Deprecated("fsm_send_v1", "fsm_send_v2", "0.3.0", "0.4.0"),
    Deprecated("fsm_<machine>_send_v1", "fsm_<machine>_send_v2", "0.3.0", "0.4.0"),
    Deprecated("fsm_step_v1", "fsm_<machine>_step_v2", "0.3.0", "0.4.0"),
)


#: What revision 0004 adds (migrations/versions/0004_*.py applies the same list).
REVISION_0004_OBJECTS = (
    "tables/fsm_state_counts.sql",
    "tables/fsm_accounts.sql",
    "views/fsm_v_state_counts.sql",
    "views/fsm_v_definitions.sql",
    "procedures/fsm_define_v3.sql",
    "procedures/fsm_counts_v2.sql",
    "procedures/fsm_schema_version_v1.sql",
    "procedures/fsm_locks_v1.sql",
    "procedures/fsm_lock_holders_v1.sql",
    "procedures/fsm_errors_v1.sql",
    "procedures/fsm_run_info_v1.sql",
    "procedures/fsm_state_at_v1.sql",
    "procedures/fsm_stats_v1.sql",
)

#: What revision 0005 adds (migrations/versions/0005_*.py applies the same list).
REVISION_0005_OBJECTS = (
    "procedures/fsm_define_v4.sql",
    "procedures/fsm_force_unlock_v2.sql",
    "procedures/fsm_release_claims_v1.sql",
)

#: What revision 0006 adds (migrations/versions/0006_*.py applies the same list).
REVISION_0006_OBJECTS = (
    "procedures/fsm_send_v2.sql",
)

#: What revision 0008 adds (migrations/versions/0008_*.py applies the same list).
REVISION_0008_OBJECTS = (
    "functions/fsm_valid_utf8_v1.sql",
)

#: The global objects of the current schema, in creation order. A database built from
#: this list must equal one built by the migrations (tests/test_migrations.py).
CURRENT_OBJECTS = (
    "tables/fsm_machines.sql",
    "tables/fsm_definitions.sql",
    "tables/fsm_states.sql",
    "tables/fsm_rules.sql",
    "tables/fsm_outbox.sql",
    "functions/fsm_valid_name_v1.sql",
    "functions/fsm_is_object_v1.sql",
    "procedures/fsm_check_args_v1.sql",
    "procedures/fsm_require_machine_v1.sql",
    "procedures/fsm_define_v1.sql",
    "procedures/fsm_definition_v1.sql",
    "procedures/fsm_send_v1.sql",
    "procedures/fsm_create_v1.sql",
    "procedures/fsm_get_v1.sql",
    "procedures/fsm_history_v1.sql",
    "procedures/fsm_in_state_v1.sql",
    "procedures/fsm_counts_v1.sql",
    # 0002
    "changes/0002_definition_options.sql",
    "changes/0002_outbox_data_nullable.sql",
    "tables/fsm_locks.sql",
    "tables/fsm_lock_log.sql",
    "views/fsm_held_locks_v1.sql",
    "procedures/fsm_define_v2.sql",
    "procedures/fsm_begin_v1.sql",
    "procedures/fsm_check_claim_v1.sql",
    "procedures/fsm_mark_unlocked_v1.sql",
    "procedures/fsm_mark_released_v1.sql",
    "procedures/fsm_lock_v1.sql",
    "procedures/fsm_renew_lock_v1.sql",
    "procedures/fsm_unlock_v1.sql",
    "procedures/fsm_force_unlock_v1.sql",
    "procedures/fsm_set_locking_v1.sql",
    "tables/fsm_runs.sql",
    "tables/fsm_errors.sql",
    "procedures/fsm_lock_instance_v1.sql",
    "procedures/fsm_update_instance_v1.sql",
    "procedures/fsm_claim_v1.sql",
    "procedures/fsm_renew_claims_v1.sql",
    "procedures/fsm_step_v1.sql",
    "procedures/fsm_step_failed_v1.sql",
    "procedures/fsm_enqueue_v1.sql",
    "procedures/fsm_pause_v1.sql",
    "procedures/fsm_resume_v1.sql",
    "procedures/fsm_retry_v1.sql",
    "procedures/fsm_failed_v1.sql",
    # 0003: the Kafka relay
    "changes/fsm_outbox_relay_v1.sql",
    "procedures/fsm_outbox_lag_v1.sql",
    # 0004: the DBA and analyst surface
    *REVISION_0004_OBJECTS,
    # 0005: hardening
    *REVISION_0005_OBJECTS,
    # 0006: faster transitions
    *REVISION_0006_OBJECTS,
    # 0008: the triggers' check for encoded surrogates
    *REVISION_0008_OBJECTS,
)

#: Every per-type object set there has been: templates in sql/templates, rendered for each
#: machine in this order. fsm_machines.objects_version records which set a machine has; a
#: migration that changes the set upgrades every machine (see replace_machine_triggers).
MACHINE_TEMPLATE_SETS: dict[str, tuple[str, ...]] = {}
MACHINE_TEMPLATE_SETS["v1"] = (
    "instance_table",
    "history_table",
    "trigger_bi_v1",
    "trigger_ai_v1",
    "trigger_bu_v1",
    "trigger_bd_v1",
    "trigger_hbi_v1",
    "trigger_hbu_v1",
    "trigger_hbd_v1",
    "send_v1",
    "create_v1",
    "get_v1",
    "history_v1",
    "in_state_v1",
    "counts_v1",
)
# v2 (revision 0002): the transition trigger checks locks; both outbox writers honour event_data.
_V2 = {"trigger_ai_v1": "trigger_ai_v2", "trigger_bu_v1": "trigger_bu_v2"}
MACHINE_TEMPLATE_SETS["v2"] = tuple(_V2.get(name, name) for name in MACHINE_TEMPLATE_SETS["v1"])
# v3 (revision 0004): history gets left_at; the triggers keep fsm_state_counts and left_at;
# the reporting views fsm_v_<type> and fsm_v_<type>_transitions.
_V3 = {"trigger_ai_v2": "trigger_ai_v3", "trigger_bu_v2": "trigger_bu_v3", "trigger_hbu_v1": "trigger_hbu_v2"}
MACHINE_TEMPLATE_SETS["v3"] = (
    "instance_table", "history_table", "history_left_at",
    *(_V3.get(name, name) for name in MACHINE_TEMPLATE_SETS["v2"][2:]),
    "view_instances_v1", "view_history_v1",
)
# v4 (revision 0005): the transition trigger compares names byte for byte (no PAD SPACE).
_V4 = {"trigger_bu_v3": "trigger_bu_v4"}
MACHINE_TEMPLATE_SETS["v4"] = tuple(_V4.get(name, name) for name in MACHINE_TEMPLATE_SETS["v3"])
# v5 (revision 0006): the same transition with fewer statements (trigger_bu_v5); send_v2,
# whose common case is one UPDATE, beside send_v1; step_v2, the engine's step without
# dynamic SQL (fsm_step_v1 stays for types not yet upgraded).
_V5 = {"trigger_bu_v4": "trigger_bu_v5"}
MACHINE_TEMPLATE_SETS["v5"] = tuple(
    new for name in MACHINE_TEMPLATE_SETS["v4"]
    for new in ((name, "send_v2", "step_v2") if name == "send_v1" else (_V5.get(name, name),)))
# v6 (revision 0007): steps_v1, a worker's batch of steps of several instances in one
# transaction, and apply_step_v1, step_v2's body without its transaction, which it calls.
MACHINE_TEMPLATE_SETS["v6"] = tuple(
    new for name in MACHINE_TEMPLATE_SETS["v5"]
    for new in ((name, "apply_step_v1", "steps_v1") if name == "step_v2" else (name,)))
# v7 (revision 0008): the transition and creation triggers take a procedure's context before
# their first write and set a history guard that names the row written (a deadlock there can
# skip every handler), which the history triggers check; text that is not UTF-8 is refused.
_V7 = {"trigger_ai_v3": "trigger_ai_v4", "trigger_bu_v5": "trigger_bu_v6", "trigger_hbi_v1": "trigger_hbi_v2",
       "trigger_hbu_v2": "trigger_hbu_v3"}
MACHINE_TEMPLATE_SETS["v7"] = tuple(_V7.get(name, name) for name in MACHINE_TEMPLATE_SETS["v6"])
# v8 (revision 0009): send_many_v1, many events in one call and one transaction, and
# apply_send_v1, send_v2's work without its transaction, which it calls per item.
MACHINE_TEMPLATE_SETS["v8"] = tuple(
    new for name in MACHINE_TEMPLATE_SETS["v7"]
    for new in ((name, "apply_send_v1", "send_many_v1") if name == "send_v2" else (name,)))
# v9 (revision 0010): the same transition with fewer instructions on the common path
# (trigger_bu_v7), and a history update trigger that lets that transition's own flip through
# on one comparison (trigger_hbu_v4).
_V9 = {"trigger_bu_v6": "trigger_bu_v7", "trigger_hbu_v3": "trigger_hbu_v4"}
MACHINE_TEMPLATE_SETS["v9"] = tuple(_V9.get(name, name) for name in MACHINE_TEMPLATE_SETS["v8"])
MACHINE_OBJECTS_VERSION = "v9"
#: The object sets whose types have the reporting views the union views are built from.
VIEW_OBJECT_VERSIONS = ("v3", "v4", "v5", "v6", "v7", "v8", "v9")
MACHINE_TEMPLATES = MACHINE_TEMPLATE_SETS[MACHINE_OBJECTS_VERSION]
#: The templates that create (or change) tables; they run before any trigger is swapped.
MACHINE_TABLE_TEMPLATES = ("instance_table", "history_table", "history_left_at")

#: Views over every machine type (sql/views), rebuilt by refresh_views whenever a type is
#: installed: the text after the CREATE line is one branch, rendered per type and joined
#: with UNION ALL. fsm_v_stuck reads fsm_v_instances, so it comes after it.
UNION_VIEWS = ("views/fsm_v_instances.sql", "views/fsm_v_history.sql", "views/fsm_v_failed.sql",
               "views/fsm_v_funnel.sql")
DEPENDENT_VIEWS = ("views/fsm_v_stuck.sql",)

_ALREADY_EXISTS = {1050, 1060, 1304, 1359}  # table, column, routine, trigger already exists


def execute_ddl(conn: Any, statements: Iterable[str]) -> None:
    """Run DDL statements on a raw PyMySQL connection under a strict sql_mode.

    Statements are sent without arguments so that PyMySQL never treats a ``%`` as a
    format marker; routines keep the sql_mode they were created under.
    """
    with conn.cursor() as cur:
        cur.execute(f"SET SESSION sql_mode = '{db.STRICT_SQL_MODE}'")
        cur.execute("SET time_zone = '+00:00'")
        for statement in statements:
            try:
                cur.execute(statement)
            except pymysql.err.MySQLError as exc:
                if exc.args and exc.args[0] in _ALREADY_EXISTS:
                    continue  # created concurrently by another installer
                raise


def apply_files(conn: Any, files: Iterable[str]) -> None:
    """Apply files from ``sql/`` (used by the migrations and by :func:`install_current`)."""
    execute_ddl(conn, [read_sql(name) for name in files])


def install_current(conn: Any) -> None:
    """Build the current global schema directly, without the migrations (tests compare both)."""
    apply_files(conn, CURRENT_OBJECTS)


def install_machine_objects(conn: Any, machine: str) -> None:
    """Create the per-type tables, triggers, procedures and views of ``machine`` where missing.

    Triggers of an older set still on the tables (a machine the migrations missed) are
    replaced by their current versions, never left to fire beside them. Then the views over
    every type are rebuilt and the accounts `pyfsm grant` recorded get the new objects.
    """
    execute_ddl(conn, [render(t, machine) for t in MACHINE_TABLE_TEMPLATES if t != "history_left_at"])
    if not _has_column(conn, f"fsm_{machine}_transitions", "left_at"):  # an ALTER waits for readers: only if needed
        _ddl_waiting_briefly(conn, [render("history_left_at", machine)])
    stale = stale_triggers(conn, machine)
    if stale:
        upgrade_machine_triggers(conn, machine, stale)
    execute_ddl(conn, [render(template, machine) for template in MACHINE_TEMPLATES
                       if template not in MACHINE_TABLE_TEMPLATES])
    with conn.cursor() as cur:
        cur.execute(
            "UPDATE fsm_machines SET objects_version = %s WHERE machine = %s",
            (MACHINE_OBJECTS_VERSION, machine),
        )
    refresh_views(conn)
    grant_recorded(conn)


def stale_triggers(conn: Any, machine: str) -> list[tuple[str, str]]:
    """(old template, current template) for each trigger of an older set on ``machine``'s tables."""
    present = _triggers(conn, machine)
    current = {_family(t): t for t in MACHINE_TEMPLATES if t.startswith("trigger_")}
    older = {t for templates in MACHINE_TEMPLATE_SETS.values() for t in templates
             if t.startswith("trigger_") and t not in MACHINE_TEMPLATES}
    return sorted((old, current[_family(old)]) for old in older if _object_name(old, machine) in present)


def _has_column(conn: Any, table: str, column: str) -> bool:
    with conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() "
                    "AND table_name = %s AND column_name = %s", (table, column))
        return bool(cur.fetchone()[0])


def _triggers(conn: Any, machine: str) -> set[str]:
    """The names of the triggers on ``machine``'s instance and history tables."""
    with conn.cursor() as cur:
        cur.execute("SELECT trigger_name FROM information_schema.triggers WHERE trigger_schema = DATABASE() "
                    "AND event_object_table IN (%s, %s)", (f"fsm_{machine}", f"fsm_{machine}_transitions"))
        return {row[0] for row in cur.fetchall()}


def _family(template: str) -> str:
    """trigger_bu_v2 -> trigger_bu: the versions of one trigger."""
    return template.rsplit("_v", 1)[0]


def current_template(family: str) -> str:
    """The template of ``family`` ("trigger_bu") in the current per-type set ("trigger_bu_v7")."""
    return next(t for t in MACHINE_TEMPLATES if _family(t) == family)


def upgrade_machine_triggers(conn: Any, machine: str, pairs: Iterable[tuple[str, str]]) -> None:
    """Swap older triggers for the current set and bring what they maintain up to date.

    The v3 triggers keep fsm_state_counts, so the counts are rebuilt from the instance
    table while it is locked, between the swap and the first write the new triggers see;
    history rows written before left_at existed get it afterwards (fill_left_at).
    """
    name = check_machine_name(machine)
    replace_machine_triggers(
        conn, name, pairs, MACHINE_OBJECTS_VERSION,
        also_lock=(f"fsm_{name}_transitions", "fsm_state_counts"),
        while_locked=lambda cur: rebuild_state_counts(cur, name))
    fill_left_at(conn, name)


def upgrade_machines(conn: Any, from_version: str, to_version: str, upgrade: Callable[[str], None]) -> None:
    """Run ``upgrade(machine)`` for every type at object set ``from_version`` and mark it
    ``to_version`` (a migration's per-type step), then rebuild the views.

    ``conn``: a connection of the migration's own with autocommit, so an interrupted run
    leaves finished types finished and running it again goes over the rest. The types are
    read again until none is left: an older pyfsm may define one meanwhile. ``upgrade``
    may mark the type itself (replace_machine_triggers does).
    """
    while True:
        with conn.cursor() as cur:
            cur.execute("SELECT machine FROM fsm_machines WHERE objects_version = %s ORDER BY machine",
                        (from_version,))
            machines = [check_machine_name(row[0]) for row in cur.fetchall()]
        if not machines:
            break
        for machine in machines:
            upgrade(machine)
            with conn.cursor() as cur:
                cur.execute("UPDATE fsm_machines SET objects_version = %s WHERE machine = %s", (to_version, machine))
    refresh_views(conn)


def rebuild_state_counts(cur: Any, machine: str) -> None:
    """Recount ``machine``'s instances per state and shard into fsm_state_counts.

    Exact only while no one can write the instance table: called under LOCK TABLES.
    """
    name = check_machine_name(machine)
    cur.execute("DELETE FROM fsm_state_counts WHERE machine = %s", (name,))
    cur.execute(f"INSERT INTO fsm_state_counts (machine, state, shard, instances) SELECT %s, current_state, "
                f"MOD(id, 16), COUNT(*) FROM `fsm_{name}` GROUP BY current_state, MOD(id, 16)", (name,))


def fill_left_at(conn: Any, machine: str, *, batch: int = 2000) -> int:
    """Give every history row that is not the most recent its left_at (the next row's time).

    Rows written since the v3 triggers get it when the transition happens; this fills in
    the older ones, in batches, each row once (the history trigger allows exactly this
    with @fsm_fill_left_at = 1). Returns how many rows it filled.
    """
    table = f"fsm_{check_machine_name(machine)}_transitions"
    filled, after = 0, 0
    with conn.cursor() as cur:
        cur.execute("SET @fsm_fill_left_at = 1")
        try:
            while True:
                cur.execute(  # GREATEST: a clock stepped back must not end a state before it began
                    f"SELECT a.id, GREATEST(a.created_at, (SELECT b.created_at FROM `{table}` b "
                    f"WHERE b.instance_id = a.instance_id AND b.sort_key > a.sort_key ORDER BY b.sort_key LIMIT 1)) "
                    f"FROM `{table}` a WHERE a.id > %s AND a.most_recent IS NULL AND a.left_at IS NULL "
                    "ORDER BY a.id LIMIT %s", (after, batch))
                rows = [(row_id, left) for row_id, left in cur.fetchall()]
                if not rows:
                    return filled
                after = rows[-1][0]
                rows = [(row_id, left) for row_id, left in rows if left is not None]
                if rows:
                    cases = " ".join("WHEN %s THEN %s" for _ in rows)
                    cur.execute(f"UPDATE `{table}` SET left_at = CASE id {cases} END "
                                f"WHERE id IN ({', '.join('%s' for _ in rows)})",
                                [v for pair in rows for v in pair] + [row_id for row_id, _ in rows])
                    filled += len(rows)
        finally:
            cur.execute("SET @fsm_fill_left_at = NULL")


def refresh_views(conn: Any) -> None:
    """(Re)create the views over every installed machine type (fsm_v_instances, ...).

    Each is a UNION ALL with one branch per type whose objects are installed; with no type
    installed yet they do not exist. Two installers at once are serialised, and each reads
    the installed types only once it holds the lock: the last one to rebuild sees every type
    installed before it (each marks its type installed before it asks for the lock).
    """
    with conn.cursor() as cur:
        cur.execute("SELECT GET_LOCK('pyfsm_views', 60)")
        if cur.fetchone()[0] != 1:
            raise SchemaVersionMismatch("another process has been rebuilding pyfsm's views for 60 s; try again")
        try:
            # a type still at an object set before v3 (installed by an older pyfsm during a
            # rolling deploy) has no reporting views yet: left out until `pyfsm sync` upgrades
            # it. v3 and later have them (and a migration run by this library may stop at v3).
            cur.execute("SELECT machine FROM fsm_machines WHERE objects_version IN %s ORDER BY machine",
                        (VIEW_OBJECT_VERSIONS,))
            machines = [check_machine_name(row[0]) for row in cur.fetchall()]
            if not machines:
                return
            statements = []
            for view in UNION_VIEWS:
                head, create, branch = _split_view(read_sql(view))
                branches = "\nUNION ALL\n".join(branch.replace(PLACEHOLDER, m) for m in machines)
                statements.append(head + create + branches)
            _ddl_waiting_briefly(conn, statements + [read_sql(view) for view in DEPENDENT_VIEWS])
        finally:
            cur.execute("SELECT RELEASE_LOCK('pyfsm_views')")


def _ddl_waiting_briefly(conn: Any, statements: list[str], *, wait_seconds: int = 2, attempts: int = 15) -> None:
    """DDL on objects readers may be using (views): a statement waiting for a metadata lock
    makes every later reader queue behind it, so it waits at most ``wait_seconds`` at a time
    and tries again a second later, ``attempts`` times, instead of lock_wait_timeout's day."""
    with conn.cursor() as cur:
        cur.execute("SELECT @@SESSION.lock_wait_timeout")
        (previous,) = cur.fetchone()
        cur.execute(f"SET SESSION lock_wait_timeout = {int(wait_seconds)}")
        try:
            for statement in statements:
                for attempt in range(attempts):
                    try:
                        execute_ddl(conn, [statement])
                        break
                    except pymysql.err.OperationalError as exc:
                        if exc.args[0] != 1205 or attempt + 1 == attempts:  # 1205: lock wait timeout
                            raise
                        time.sleep(1.0)
        finally:
            cur.execute(f"SET SESSION lock_wait_timeout = {int(previous)}")


def _split_view(text: str) -> tuple[str, str, str]:
    """A union view file: (header comments, the CREATE ... AS line, the branch for one type)."""
    found = re.search(r"^CREATE [^\n]* AS\n", text, re.M)
    assert found, "a view file must have its CREATE ... AS on one line"
    return text[:found.start()], found.group(0), text[found.end():]


def replace_machine_triggers(conn: Any, machine: str, pairs: Iterable[tuple[str, str]], objects_version: str,
                             *, wait_seconds: int = 2, attempts: int = 15, also_lock: Sequence[str] = (),
                             while_locked: Callable[[Any], None] | None = None) -> None:
    """Swap per-type triggers (old template, new template) for their next versions, with no
    moment where neither version fires.

    MySQL has no CREATE OR REPLACE TRIGGER that both servers accept, and DROP then CREATE
    leaves a gap in which an UPDATE would run unchecked. Under LOCK TABLES ... WRITE no other
    session can touch the table until both statements are done. Taking that lock waits for
    running transactions on the table, and every new one queues behind the wait, so it waits
    at most ``wait_seconds`` (lock_wait_timeout) and tries again later, up to ``attempts``
    times. If a CREATE fails, the old trigger is put back before the table is unlocked. It
    can be run again after an interruption: a new trigger already there is kept, and only the
    triggers that were there before are ever put back.
    ``also_lock``: more tables to lock for writing (the history table when one of its
    triggers is swapped, tables ``while_locked`` writes); ``while_locked(cursor)`` runs after
    the swap, before the unlock, and a failure there also puts the old triggers back.
    """
    table = f"fsm_{check_machine_name(machine)}"
    pairs = list(pairs)
    present = _triggers(conn, machine)
    with conn.cursor() as cur:
        cur.execute(f"SET SESSION sql_mode = '{db.STRICT_SQL_MODE}'")
        cur.execute("SET time_zone = '+00:00'")
        cur.execute("SELECT @@SESSION.lock_wait_timeout")
        (previous_wait,) = cur.fetchone()
        cur.execute(f"SET SESSION lock_wait_timeout = {int(wait_seconds)}")
        try:
            for attempt in range(attempts):
                try:
                    cur.execute("LOCK TABLES " + ", ".join(f"`{t}` WRITE" for t in (table, *also_lock)))
                    break
                except pymysql.err.OperationalError as exc:
                    if exc.args[0] != 1205 or attempt + 1 == attempts:  # 1205: lock wait timeout
                        raise
                    time.sleep(1.0)
            try:
                done: list[tuple[str, str, bool, bool]] = []  # (old, new, old was there, new created here)
                try:
                    for old, new in pairs:
                        had_old, had_new = (_object_name(t, machine) in present for t in (old, new))
                        if had_old:
                            cur.execute(f"DROP TRIGGER `{_object_name(old, machine)}`")
                        done.append((old, new, had_old, False))
                        if not had_new:  # an interrupted earlier swap may have created it already
                            cur.execute(render(new, machine))
                            done[-1] = (old, new, had_old, True)
                    if while_locked is not None:
                        while_locked(cur)
                except pymysql.err.MySQLError:
                    for old, new, had_old, created in reversed(done):  # leave the tables as they were
                        if created:
                            cur.execute(f"DROP TRIGGER IF EXISTS `{_object_name(new, machine)}`")
                        if had_old:
                            cur.execute(render(old, machine))
                    raise
            finally:
                cur.execute("UNLOCK TABLES")
        finally:
            cur.execute(f"SET SESSION lock_wait_timeout = {int(previous_wait)}")
        cur.execute("UPDATE fsm_machines SET objects_version = %s WHERE machine = %s", (objects_version, machine))


def _object_name(template: str, machine: str) -> str:
    """The name a template creates: the first backticked name of its CREATE statement."""
    found = re.search(r"^CREATE [A-Z ]+?`([^`]+)`", render(template, machine), re.M)
    assert found, template
    return found.group(1)


# -- migrations -------------------------------------------------------------------------


def alembic_config(settings: db.Settings) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.attributes["pyfsm_settings"] = settings
    return cfg


def migrate(settings: db.Settings, revision: str = "head") -> None:
    """Bring the database's pyfsm schema up to ``revision`` (default: the newest).

    Serialised with GET_LOCK so that several processes starting at once migrate once.
    """
    # imported here: SQLAlchemy and Alembic take a third of a second to import, which every
    # CLI command and every worker process would pay for without migrating
    from alembic import command
    from sqlalchemy.exc import DBAPIError

    conn = db.connect(settings)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT GET_LOCK('pyfsm_migrate', 60)")
            (got,) = cur.fetchone()
            if got != 1:
                raise SchemaVersionMismatch("another process has been migrating for 60 s; try again")
        try:
            command.upgrade(alembic_config(settings), revision)
            grant_recorded(conn)  # a new revision's routines and views, for the accounts `pyfsm grant` made
        except DBAPIError as exc:  # SQLAlchemy wraps the driver's error
            raise db.translate(exc.orig or exc) from exc
        finally:
            with conn.cursor() as cur:
                cur.execute("SELECT RELEASE_LOCK('pyfsm_migrate')")
    finally:
        conn.close()


def current_revision(conn: Any) -> str | None:
    """The revision recorded in the database, or None if pyfsm was never installed there.

    Asked through fsm_schema_version_v1 (an account that may only EXECUTE procedures can
    call it); a schema older than 0004 has no such procedure and its table is read instead.
    """
    with conn.cursor() as cur:
        try:
            cur.execute("CALL fsm_schema_version_v1()")
            row = cur.fetchone()
            while cur.nextset():
                pass
            return None if row is None else str(row[0])
        except pymysql.err.MySQLError as exc:
            if not (exc.args and exc.args[0] == 1305):  # 1305: no such procedure
                raise
        try:
            cur.execute(f"SELECT version_num FROM `{VERSION_TABLE}`")
        except pymysql.err.ProgrammingError as exc:
            if exc.args and exc.args[0] == 1146:  # table does not exist
                return None
            raise
        row = cur.fetchone()
        return None if row is None else str(row[0])


def known_revisions() -> list[str]:
    return sorted(p.name.split("_", 1)[0] for p in (migrations_dir() / "versions").glob("[0-9]*.py"))


def check(conn: Any, dsn_hint: str = "$PYFSM_DSN") -> None:
    """Refuse to run against a schema older or newer than this library, naming the fix."""
    found = current_revision(conn)
    if found == HEAD_REVISION:
        return
    if found is None:
        raise SchemaVersionMismatch(
            f"this database has no pyfsm schema: run `pyfsm migrate --dsn {dsn_hint}` (or Store.migrate())",
            found=None, expected=HEAD_REVISION)
    if found in known_revisions() and found < HEAD_REVISION:
        raise SchemaVersionMismatch(
            f"the pyfsm schema is at {found}, this pyfsm needs {HEAD_REVISION}: "
            f"run `pyfsm migrate --dsn {dsn_hint}` (or Store.migrate())",
            found=found, expected=HEAD_REVISION)
    raise SchemaVersionMismatch(
        f"the pyfsm schema is at {found}, newer than this pyfsm ({HEAD_REVISION}): "
        "upgrade pyfsm (pip install -U pyfsm)", found=found, expected=HEAD_REVISION)
