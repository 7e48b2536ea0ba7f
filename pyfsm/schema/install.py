"""Installing and checking pyfsm's schema.

``sql/`` is the current schema, one file per object. A fresh install (``pyfsm migrate`` or
Store.migrate() on a database without pyfsm) creates it directly and records the head
revision; a database at an older revision is brought up by the numbered Alembic revisions
in ``migrations/``, which apply SQL frozen as it was when they landed (pyfsm.schema.upgrades).
tests/server/test_migrations.py checks that both roads end in the same schema. The landed
revisions import each helper from the module that defines it (pyfsm.schema.upgrades,
.ddl, .resources); 0.3.0 moved those modules into this package and changed only those
import lines of the revisions, never what they apply. Per-type objects
(an instance table, a history table, their triggers and per-type procedures and views) are
rendered from ``sql/machine`` when a machine is defined: MySQL cannot create triggers from
a stored procedure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .. import db
from ..db import queries
from ..db.driver import errors as pymysql_errors
from ..errors import SchemaVersionMismatch
from . import routines
from .ddl import ddl_waiting_briefly, execute_ddl, has_column, machine_triggers, object_name
from .grants import grant_recorded
from .rendering import install_transition_trigger
from .resources import FIRST_REVISIONS, check_machine_name, migrations_dir, read_frozen, read_sql, render
from .upgrades import fill_left_at, rebuild_state_counts, replace_machine_triggers
from .views import refresh_views

#: The Alembic revision this version of the library needs. tests/server/test_migrations.py
#: checks that it is the head of migrations/.
HEAD_REVISION = "0029"
#: Alembic's version table (migrations/env.py); sql/queries/schema.sql's schema_revision_table
#: names it too (tests/unit/test_queries.py keeps them equal).
VERSION_TABLE = "fsm_alembic_version"


@dataclass(frozen=True)
class Deprecated:
    """A public procedure a newer version replaces (docs/sql-api.md, "Versions and retirement").

    Until the release ``removed_in`` it stays in every database, fresh or upgraded, so that
    its callers work the same everywhere while they move: a fresh install creates it from the
    file frozen in migrations/sql (``frozen``: a path in the tree of ``revisions``, or a
    per-type template name), never from sql/, and `pyfsm check` lists it. The first migration of ``removed_in`` drops
    it and the entry goes. ``name`` names per-type procedures with ``{type}``.
    """

    name: str
    replaced_by: str
    deprecated_in: str
    removed_in: str
    frozen: str
    revisions: str = FIRST_REVISIONS


#: The deprecated public procedures, in creation order. tests/server/test_migrations.py checks that
#: none outlives its removal release.
DEPRECATED = (
    Deprecated("fsm_define_v1", "fsm_define_v8", "0.3.0", "0.4.0", "procedures/fsm_define_v1.sql"),
    Deprecated("fsm_define_v2", "fsm_define_v8", "0.3.0", "0.4.0", "procedures/fsm_define_v2.sql"),
    Deprecated("fsm_define_v3", "fsm_define_v8", "0.3.0", "0.4.0", "procedures/fsm_define_v3.sql"),
    Deprecated("fsm_define_v4", "fsm_define_v8", "0.3.0", "0.4.0", "procedures/fsm_define_v4.sql", "0011"),
    Deprecated("fsm_counts_v1", "fsm_counts_v2", "0.3.0", "0.4.0", "procedures/fsm_counts_v1.sql"),
    Deprecated("fsm_force_unlock_v1", "fsm_force_unlock_v2", "0.3.0", "0.4.0", "procedures/fsm_force_unlock_v1.sql"),
    Deprecated("fsm_send_v1", "fsm_send_v4", "0.3.0", "0.4.0", "procedures/fsm_send_v1.sql"),
    Deprecated("fsm_step_v1", "fsm_{type}_step_v2", "0.3.0", "0.4.0", "procedures/fsm_step_v1.sql"),
    Deprecated("fsm_{type}_send_v1", "fsm_{type}_send_v5", "0.3.0", "0.4.0", "send_v1"),
    Deprecated("fsm_stats_v1", "fsm_stats_v3", "0.3.0", "0.4.0", "procedures/fsm_stats_v1.sql"),
    Deprecated("fsm_lock_v1", "fsm_lock_v2", "0.3.0", "0.4.0", "procedures/fsm_lock_v1.sql"),
    Deprecated("fsm_{type}_send_many_v1", "fsm_{type}_send_many_v3", "0.3.0", "0.4.0", "send_many_v1"),
    Deprecated("fsm_define_v5", "fsm_define_v8", "0.3.0", "0.4.0", "procedures/fsm_define_v5.sql", "0014"),
    Deprecated("fsm_resume_v1", "fsm_resume_v2", "0.3.0", "0.4.0", "procedures/fsm_resume_v1.sql"),
    Deprecated(
        "fsm_operator_action_v1",
        "fsm_operator_action_v3",
        "0.3.0",
        "0.4.0",
        "procedures/fsm_operator_action_v1.sql",
        "0013",
    ),
    Deprecated("fsm_enqueue_v1", "fsm_enqueue_v2", "0.3.0", "0.4.0", "procedures/fsm_enqueue_v1.sql"),
    Deprecated("fsm_send_v2", "fsm_send_v4", "0.3.0", "0.4.0", "procedures/fsm_send_v2.sql"),
    Deprecated("fsm_{type}_send_v2", "fsm_{type}_send_v5", "0.3.0", "0.4.0", "send_v2"),
    Deprecated("fsm_send_at_v1", "fsm_send_at_v2", "0.3.0", "0.4.0", "procedures/fsm_send_at_v1.sql", "0019"),
    Deprecated("fsm_define_v6", "fsm_define_v8", "0.3.0", "0.4.0", "procedures/fsm_define_v6.sql", "0019"),
    Deprecated("fsm_send_v3", "fsm_send_v4", "0.3.0", "0.4.0", "procedures/fsm_send_v3.sql", "0020"),
    Deprecated("fsm_{type}_send_v3", "fsm_{type}_send_v5", "0.3.0", "0.4.0", "send_v3", "0020"),
    Deprecated("fsm_define_v7", "fsm_define_v8", "0.3.0", "0.4.0", "procedures/fsm_define_v7.sql", "0022"),
    Deprecated(
        "fsm_fire_timers_v1", "fsm_fire_timers_v3", "0.3.0", "0.4.0", "procedures/fsm_fire_timers_v1.sql", "0019"
    ),
    # revision 0025 (issue 46): data_patch, the statuses idle and running, timers in the order they fall due
    # still called by the generic fsm_send_v4 (which moves to a version that calls send_v5 before
    # the release that removes it: test_migrations holds that date) and by the deprecated
    # fsm_{type}_fire_v1's long path (fire_v2, since revision 0028, calls send_v5)
    Deprecated("fsm_{type}_send_v4", "fsm_{type}_send_v5", "0.3.0", "0.4.0", "send_v4", "0022"),
    Deprecated("fsm_{type}_send_many_v2", "fsm_{type}_send_many_v3", "0.3.0", "0.4.0", "send_many_v2", "0018"),
    Deprecated("fsm_stats_v2", "fsm_stats_v3", "0.3.0", "0.4.0", "procedures/fsm_stats_v2.sql", "0015"),
    Deprecated(
        "fsm_fire_timers_v2", "fsm_fire_timers_v3", "0.3.0", "0.4.0", "procedures/fsm_fire_timers_v2.sql", "0024"
    ),
    Deprecated(
        "fsm_operator_action_v2",
        "fsm_operator_action_v3",
        "0.3.0",
        "0.4.0",
        "procedures/fsm_operator_action_v2.sql",
        "0019",
    ),
    # revision 0028 (issue 49): the common call with one context variable and one result variable
    Deprecated("fsm_{type}_fire_v1", "fsm_{type}_fire_v2", "0.3.0", "0.4.0", "fire_v1", "0023"),
)
#: (path, revisions) of each global one's frozen file, for read_frozen.
DEPRECATED_FILES = tuple((d.frozen, d.revisions) for d in DEPRECATED if "{type}" not in d.name)
DEPRECATED_TEMPLATES = tuple(d.frozen for d in DEPRECATED if "{type}" in d.name)


#: The global objects of the current schema (files in sql/), in creation order: what a
#: fresh install creates, with the DEPRECATED procedures. A database upgraded by the
#: migrations must equal it (tests/server/test_migrations.py). Each file is named after the object
#: it creates, version included (sql/README.md; tests/unit/test_sql_file_names.py).
CURRENT_OBJECTS = (
    "tables/fsm_machines.sql",
    "tables/fsm_definitions.sql",
    "tables/fsm_states.sql",
    "tables/fsm_rules.sql",
    "tables/fsm_outbox.sql",
    "tables/fsm_locks.sql",
    "tables/fsm_lock_log.sql",
    "tables/fsm_runs.sql",
    "tables/fsm_errors.sql",
    "tables/fsm_state_counts.sql",
    "tables/fsm_accounts.sql",
    "tables/fsm_relay_leaders.sql",
    "tables/fsm_operator_log.sql",
    "tables/fsm_timers.sql",
    "tables/fsm_timer_log.sql",
    "tables/fsm_attachments.sql",
    "triggers/fsm_definitions_bi_v1.sql",
    "functions/fsm_valid_name_v1.sql",
    "functions/fsm_reserved_name_v1.sql",  # the deprecated fsm_define_v5's
    "functions/fsm_reserved_name_v2.sql",
    "functions/fsm_timer_triggers_ready_v1.sql",
    "functions/fsm_rendered_ready_v1.sql",
    "functions/fsm_is_object_v1.sql",
    "functions/fsm_valid_utf8_v1.sql",
    "functions/fsm_instances_in_state_sql_v1.sql",
    "functions/fsm_account_history_sql_v1.sql",
    "functions/fsm_quote_name_v1.sql",
    "views/fsm_held_locks_v1.sql",
    "views/fsm_v_state_counts.sql",
    "views/fsm_v_definitions.sql",
    "views/fsm_v_runs.sql",
    "views/fsm_v_errors.sql",
    "views/fsm_v_outbox.sql",
    "views/fsm_v_operator_log.sql",
    "views/fsm_v_timers.sql",
    "views/fsm_v_timer_log.sql",
    # helpers of the procedures below, not for callers (docs/sql-api.md, "Internal")
    "internal/fsm_begin_v1.sql",
    "internal/fsm_check_args_v1.sql",
    "internal/fsm_check_claim_v1.sql",
    "internal/fsm_require_machine_v1.sql",
    "internal/fsm_lock_instance_v1.sql",
    "internal/fsm_update_instance_v1.sql",
    "internal/fsm_mark_released_v1.sql",
    "internal/fsm_mark_unlocked_v1.sql",
    "internal/fsm_upgrade_check_v1.sql",
    "internal/fsm_check_guard_v1.sql",
    # definitions and instances
    "procedures/fsm_define_v8.sql",
    "procedures/fsm_definition_v1.sql",
    "procedures/fsm_create_v1.sql",
    "procedures/fsm_send_v4.sql",
    "procedures/fsm_get_v1.sql",
    "procedures/fsm_history_v1.sql",
    "procedures/fsm_in_state_v1.sql",
    "procedures/fsm_counts_v2.sql",
    # locks
    "procedures/fsm_set_locking_v1.sql",
    "procedures/fsm_lock_v2.sql",
    "procedures/fsm_renew_lock_v1.sql",
    "procedures/fsm_unlock_v1.sql",
    "procedures/fsm_force_unlock_v2.sql",
    "procedures/fsm_locks_v1.sql",
    "procedures/fsm_lock_holders_v1.sql",
    # the handler engine
    "procedures/fsm_claim_v1.sql",
    "procedures/fsm_renew_claims_v1.sql",
    "procedures/fsm_release_claims_v1.sql",
    "procedures/fsm_step_failed_v1.sql",
    "procedures/fsm_enqueue_v2.sql",
    "procedures/fsm_pause_v1.sql",
    "procedures/fsm_resume_v2.sql",
    "procedures/fsm_retry_v1.sql",
    "procedures/fsm_failed_v1.sql",
    "procedures/fsm_errors_v1.sql",
    "procedures/fsm_run_info_v1.sql",
    # reporting and the relay
    "procedures/fsm_state_at_v1.sql",
    "procedures/fsm_stats_v3.sql",
    "procedures/fsm_instances_in_state_v1.sql",
    "procedures/fsm_account_history_v1.sql",
    "procedures/fsm_outbox_lag_v1.sql",
    "procedures/fsm_relay_lead_v1.sql",
    "procedures/fsm_relay_resign_v1.sql",
    "procedures/fsm_unpark_v1.sql",
    # timers: state timeouts and scheduled events
    "procedures/fsm_send_at_v2.sql",
    "procedures/fsm_cancel_timer_v1.sql",
    "procedures/fsm_fire_timers_v3.sql",
    "procedures/fsm_timers_v1.sql",
    "procedures/fsm_arm_timeouts_v1.sql",
    # changing machines: instances moved to a newer definition version
    "procedures/fsm_upgrade_plan_v1.sql",
    "procedures/fsm_upgrade_instances_v1.sql",
    "procedures/fsm_instances_per_version_v1.sql",
    # the web console's audit log
    "procedures/fsm_operator_action_v3.sql",
    "procedures/fsm_operator_outcome_v1.sql",
    "procedures/fsm_schema_version_v1.sql",
    # machines on the application's own tables
    "procedures/fsm_attach_v1.sql",
)

#: The per-type objects of the current schema (files in sql/machine), in creation order. Each
#: file is named after the object it creates with the type written ``type``
#: (``fsm_{type}_send_v4.sql`` creates fsm_{type}_send_v4; sql/README.md).
MACHINE_OBJECTS = (
    "machine/tables/fsm_{type}.sql",
    "machine/tables/fsm_{type}_transitions.sql",
    "machine/triggers/fsm_{type}_bi_v1.sql",
    "machine/triggers/fsm_{type}_ai_v4.sql",
    "machine/triggers/fsm_{type}_bu_v13.sql",
    "machine/triggers/fsm_{type}_bd_v1.sql",
    "machine/triggers/fsm_{type}_hbi_v3.sql",
    "machine/triggers/fsm_{type}_hbu_v5.sql",
    "machine/triggers/fsm_{type}_hbd_v1.sql",
    "machine/procedures/fsm_{type}_create_v1.sql",
    "machine/procedures/fsm_{type}_get_v1.sql",
    "machine/procedures/fsm_{type}_allowed_events_v1.sql",
    "machine/procedures/fsm_{type}_history_v1.sql",
    "machine/procedures/fsm_{type}_in_state_v1.sql",
    "machine/procedures/fsm_{type}_counts_v1.sql",
    "machine/procedures/fsm_{type}_send_v5.sql",
    "machine/procedures/fsm_{type}_fire_v2.sql",
    "machine/internal/fsm_{type}_apply_send_v1.sql",
    "machine/procedures/fsm_{type}_send_many_v3.sql",
    "machine/procedures/fsm_{type}_step_v2.sql",
    "machine/internal/fsm_{type}_apply_step_v1.sql",
    "machine/procedures/fsm_{type}_steps_v1.sql",
    "machine/procedures/fsm_{type}_upgrade_v1.sql",
    "machine/procedures/fsm_{type}_upgrade_plan_v1.sql",
    "machine/views/fsm_v_{type}.sql",
    "machine/views/fsm_v_{type}_transitions.sql",
)
#: The timer triggers (sql/machine/triggers/fsm_{type}_*_timer_v1.sql): installed only for a type
#: whose definition gives a state a timeout (any version), so a type without timeouts pays
#: nothing per transition. Not part of the object set version (installed beside it).
MACHINE_TIMER_OBJECTS = (
    "machine/triggers/fsm_{type}_ai_timer_v1.sql",
    "machine/triggers/fsm_{type}_au_timer_v1.sql",
)
#: What fsm_machines.objects_version says of a type with the current per-type objects.
MACHINE_OBJECTS_VERSION = "v19"
MACHINE_TABLES = tuple(name for name in MACHINE_OBJECTS if name.startswith("machine/tables/"))
#: The current trigger of each family (the name revisions 0001 to 0010 gave its templates).
#: Version N of family ``trigger_bu`` creates fsm_{type}_bu_vN and is frozen in migrations/sql
#: as ``templates/trigger_bu_vN.sql``; the current version's file is
#: ``machine/triggers/fsm_{type}_bu_vN.sql``. A new version is a new file (named by its version)
#: and this entry follows it (tests/unit/test_sql_file_names.py checks each entry's family).
CURRENT_TRIGGERS = {
    "trigger_bi": "machine/triggers/fsm_{type}_bi_v1.sql",
    "trigger_ai": "machine/triggers/fsm_{type}_ai_v4.sql",
    "trigger_bu": "machine/triggers/fsm_{type}_bu_v13.sql",
    "trigger_bd": "machine/triggers/fsm_{type}_bd_v1.sql",
    "trigger_hbi": "machine/triggers/fsm_{type}_hbi_v3.sql",
    "trigger_hbu": "machine/triggers/fsm_{type}_hbu_v5.sql",
    "trigger_hbd": "machine/triggers/fsm_{type}_hbd_v1.sql",
}


def install_current(conn: Any) -> None:
    """Create the current global schema from sql/, and the DEPRECATED procedures from their
    frozen files (a fresh install; the tests compare it with a database built by the migrations)."""
    execute_ddl(
        conn,
        [read_sql(name) for name in CURRENT_OBJECTS]
        + [read_frozen(name, revisions) for name, revisions in DEPRECATED_FILES],
    )


def install_machine_objects(conn: Any, machine: str) -> None:
    """Create the per-type tables, triggers, procedures and views of ``machine`` where missing.

    Triggers of an older set still on the tables (a type an older pyfsm installed during a
    rolling upgrade) are replaced by their current versions, never left to fire beside them.
    Then the views over every type are rebuilt and the accounts `pyfsm grant` recorded get
    the new objects.
    """
    execute_ddl(conn, [render(t, machine) for t in MACHINE_TABLES])
    if not has_column(conn, f"fsm_{machine}_transitions", "left_at"):  # a history table from before 0004
        ddl_waiting_briefly(conn, [render("history_left_at", machine)])  # an ALTER waits for readers: only if needed
    stale = stale_triggers(conn, machine)
    if stale:
        upgrade_machine_triggers(conn, machine, stale)
    bu = CURRENT_TRIGGERS["trigger_bu"]
    install_transition_trigger(conn, machine, bu)  # rendered with the type's rules (pyfsm.schema.rendering)
    execute_ddl(
        conn,
        [
            render(name, machine)
            for name in (*MACHINE_OBJECTS, *DEPRECATED_TEMPLATES)
            if name not in MACHINE_TABLES and name != bu
        ],
    )
    with conn.cursor() as cur:
        cur.execute(queries.sql("schema_mark_objects_version"), (MACHINE_OBJECTS_VERSION, machine))
    install_timer_triggers(conn, machine)
    refresh_views(conn)
    grant_recorded(conn)


def has_timeouts(conn: Any, machine: str) -> bool:
    """Does a state of any of ``machine``'s definition versions have a timeout?"""
    with conn.cursor() as cur:
        cur.execute(queries.sql("schema_has_timeouts"), (machine,))
        return cur.fetchone() is not None


def install_timer_triggers(conn: Any, machine: str) -> None:
    """Give a type with timeouts its timer triggers, then arm the timeouts of instances that
    were already in such a state (a DBA defined the timeouts before `pyfsm sync`). A type
    without timeouts gets none: its transitions carry no timer code."""
    if not has_timeouts(conn, machine):
        return
    execute_ddl(conn, [render(name, machine) for name in MACHINE_TIMER_OBJECTS])
    with conn.cursor() as cur:
        cur.execute(routines.ARM_TIMEOUTS.call_sql(), (machine,))
        while cur.nextset():
            pass


def _family(template: str) -> str:
    """trigger_bu_v2 -> trigger_bu: the versions of one trigger."""
    return template.rsplit("_v", 1)[0]


def current_template(family: str) -> str:
    """The current file of a trigger family ("trigger_bu" -> "machine/triggers/fsm_{type}_bu_v13.sql")."""
    return CURRENT_TRIGGERS[family]


def stale_triggers(conn: Any, machine: str) -> list[tuple[str, str]]:
    """(old template, current file) for each trigger of an older set on ``machine``'s tables.

    Every trigger pyfsm ever created is named fsm_{type}_<family>_v<N>, and its template
    trigger_<family>_v<N> is frozen in migrations/sql (it is put back if the swap fails).
    Triggers of other names on those tables are not pyfsm's and are left alone.
    """
    current = {object_name(path, machine) for path in CURRENT_TRIGGERS.values()}
    pyfsm_trigger = re.compile(re.escape(f"fsm_{machine}_") + r"((?:bi|ai|bu|bd|hbi|hbu|hbd)_v\d+)")
    pairs = []
    for name in sorted(machine_triggers(conn, machine) - current):
        found = pyfsm_trigger.fullmatch(name)
        if found:  # anything else is the owners' own (an audit trigger, CDC): left alone
            old = f"trigger_{found.group(1)}"
            pairs.append((old, CURRENT_TRIGGERS[_family(old)]))
    return pairs


def upgrade_machine_triggers(conn: Any, machine: str, pairs: Iterable[tuple[str, str]]) -> None:
    """Swap older triggers for the current set and bring what they maintain up to date.

    The v3 triggers keep fsm_state_counts, so the counts are rebuilt from the instance
    table while it is locked, between the swap and the first write the new triggers see;
    history rows written before left_at existed get it afterwards (fill_left_at). The type
    keeps its objects_version: install_machine_objects marks it current once its
    procedures exist too, so that Store.define syncs again a type whose upgrade stopped.
    """
    name = check_machine_name(machine)
    replace_machine_triggers(  # objects_version None: install_machine_objects marks it at the end
        conn,
        name,
        pairs,
        None,
        also_lock=(f"fsm_{name}_transitions", "fsm_state_counts"),
        while_locked=lambda cur: rebuild_state_counts(cur, name),
    )
    fill_left_at(conn, name)


def deprecated_present(conn: Any) -> list[tuple[str, str, Deprecated]]:
    """The DEPRECATED procedures this database holds: (routine name, what replaces it, its entry).

    Read from information_schema alone, which every account may read (it shows an account
    the routines it may use), so that `pyfsm check` works for least-privilege accounts too.
    """
    with conn.cursor() as cur:
        cur.execute(queries.sql("schema_procedures"))
        routines = [row[0] for row in cur.fetchall()]
    found = []
    for entry in DEPRECATED:
        if "{type}" not in entry.name:
            found += [(entry.name, entry.replaced_by, entry) for name in routines if name == entry.name]
            continue
        head, tail = entry.name.split("{type}")
        pattern = re.compile(re.escape(head) + r"([a-z][a-z0-9_]*)" + re.escape(tail))
        for name in routines:
            matched = pattern.fullmatch(name)
            replacement = entry.replaced_by.replace("{type}", matched.group(1)) if matched else ""
            if matched and replacement in routines:  # a type has both (fsm_{type}_apply_send_v1 is no type's)
                found.append((name, replacement, entry))
    return found


# -- migrations -------------------------------------------------------------------------


def alembic_config(settings: db.Settings) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.attributes["pyfsm_settings"] = settings
    return cfg


def migrate(settings: db.Settings, revision: str = "head") -> bool:
    """Bring the database's pyfsm schema up to ``revision`` (default: the newest); whether
    the database itself had to be created.

    A database the server does not have is created first (utf8mb4 / utf8mb4_bin, logged on
    ``pyfsm.db``) when the account may; otherwise AccessDenied names the statement to run
    (:func:`pyfsm.db.connect_creating`). Serialised with GET_LOCK so that several processes
    starting at once migrate once.
    """
    # imported here: SQLAlchemy and Alembic take a third of a second to import, which every
    # CLI command and every worker process would pay for without migrating
    from alembic import command
    from sqlalchemy.exc import DBAPIError

    conn, created = db.connect_creating(settings)
    try:
        with conn.cursor() as cur:
            cur.execute(queries.sql("schema_migrate_lock"))
            row = cur.fetchone()
            if row is None or row[0] != 1:
                raise SchemaVersionMismatch("another process has been migrating for 60 s; try again")
        try:
            if revision in ("head", HEAD_REVISION) and current_revision(conn) is None and install_fresh(conn):
                command.stamp(alembic_config(settings), HEAD_REVISION)
                finish_fresh(conn)
            else:
                command.upgrade(alembic_config(settings), revision)
            grant_recorded(conn)  # a new revision's routines and views, for the accounts `pyfsm grant` made
        except DBAPIError as exc:  # SQLAlchemy wraps the driver's error
            raise db.translate(exc.orig or exc) from exc
        finally:
            with conn.cursor() as cur:
                cur.execute(queries.sql("schema_migrate_unlock"))
    finally:
        conn.close()
    return created


#: The comment the version table carries while a fresh install runs: an empty version table
#: without it, beside pyfsm's tables, is an interrupted replay of the revisions instead.
FRESH_MARK = "pyfsm: fresh install in progress"


def install_fresh(conn: Any) -> bool:
    """Create the current schema on a database without pyfsm, instead of replaying every
    revision; False when the database is not for a fresh install but for the revisions.

    The version table is created first, marked (FRESH_MARK) until the head is recorded in it
    (finish_fresh): a fresh install that was interrupted is recognised by the mark and simply
    run again (every statement skips what exists). An empty version table without the mark
    beside pyfsm's tables is a first replay of the revisions that was interrupted (an older
    pyfsm's, or ``migrate(revision=...)``): that one is resumed by the revisions (False). A
    database with pyfsm's tables but no version table was not built by pyfsm: refused.
    """
    with conn.cursor() as cur:
        cur.execute(queries.sql("schema_fresh_install_tables"), (VERSION_TABLE,))
        found = dict(cur.fetchall())
        if "fsm_machines" in found and VERSION_TABLE not in found:
            raise SchemaVersionMismatch(
                "this database has pyfsm's tables but no record of their revision (fsm_alembic_version): "
                "restore that table, or install into an empty database",
                found=None,
                expected=HEAD_REVISION,
            )
        if "fsm_machines" in found and found[VERSION_TABLE] != FRESH_MARK:
            return False
        # as Alembic creates it, so that it then records the head in it
        cur.execute(
            f"CREATE TABLE IF NOT EXISTS `{VERSION_TABLE}` (version_num VARCHAR(32) NOT NULL, "
            f"CONSTRAINT `{VERSION_TABLE}_pkc` PRIMARY KEY (version_num))"
        )
        cur.execute(f"ALTER TABLE `{VERSION_TABLE}` COMMENT = '{FRESH_MARK}'")
    install_current(conn)
    return True


def finish_fresh(conn: Any) -> None:
    """The head is recorded: the version table loses the fresh install's mark."""
    with conn.cursor() as cur:
        cur.execute(f"ALTER TABLE `{VERSION_TABLE}` COMMENT = ''")


def current_revision(conn: Any) -> str | None:
    """The revision recorded in the database, or None if pyfsm was never installed there.

    Asked through fsm_schema_version_v1 (an account that may only EXECUTE procedures can
    call it); a schema older than 0004 has no such procedure and its table is read instead.
    """
    with conn.cursor() as cur:
        try:
            cur.execute(queries.sql("schema_revision"))
            row = cur.fetchone()
            while cur.nextset():
                pass
            return None if row is None else str(row[0])
        except pymysql_errors.MySQLError as exc:
            if exc.args and exc.args[0] == 1146:  # the procedure is there, its version table is not
                return None
            if not (exc.args and exc.args[0] == 1305):  # 1305: no such procedure
                raise
        try:
            cur.execute(queries.sql("schema_revision_table"))  # VERSION_TABLE (a unit test checks)
        except pymysql_errors.ProgrammingError as exc:
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
            found=None,
            expected=HEAD_REVISION,
        )
    if found in known_revisions() and found < HEAD_REVISION:
        raise SchemaVersionMismatch(
            f"the pyfsm schema is at {found}, this pyfsm needs {HEAD_REVISION}: "
            f"run `pyfsm migrate --dsn {dsn_hint}` (or Store.migrate())",
            found=found,
            expected=HEAD_REVISION,
        )
    raise SchemaVersionMismatch(
        f"the pyfsm schema is at {found}, newer than this pyfsm ({HEAD_REVISION}): "
        "upgrade pyfsm (pip install -U pyfsm-mysql)",
        found=found,
        expected=HEAD_REVISION,
    )
