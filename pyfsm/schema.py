"""Installing and checking pyfsm's schema.

Global objects come from the numbered Alembic revisions in ``migrations/``, each applying
named, versioned files from ``sql/``. Per-type objects (an instance table, a history
table, their triggers and per-type procedures) are rendered from ``sql/templates`` when a
machine is defined: MySQL cannot create triggers from a stored procedure.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from typing import Any

import pymysql
from sqlalchemy.exc import DBAPIError

from . import db
from .errors import SchemaVersionMismatch
from .resources import check_machine_name, migrations_dir, read_sql, render

#: The Alembic revision this version of the library needs. tests/test_migrations.py
#: checks that it is the head of migrations/.
HEAD_REVISION = "0003"
VERSION_TABLE = "fsm_alembic_version"

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
MACHINE_OBJECTS_VERSION = "v2"
MACHINE_TEMPLATES = MACHINE_TEMPLATE_SETS[MACHINE_OBJECTS_VERSION]

_ALREADY_EXISTS = {1050, 1304, 1359}  # table, routine, trigger already exists


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
    """Create the per-type tables, triggers and procedures of ``machine`` where missing.

    A trigger of an older set still on the table (a machine the migrations missed) is
    replaced by its current version, never left to fire beside it.
    """
    execute_ddl(conn, [render(template, machine) for template in MACHINE_TEMPLATES[:2]])  # the tables
    with conn.cursor() as cur:
        cur.execute("SELECT trigger_name FROM information_schema.triggers "
                    "WHERE trigger_schema = DATABASE() AND event_object_table = %s", (f"fsm_{machine}",))
        present = {row[0] for row in cur.fetchall()}
    stale = [(old, new) for old_set in MACHINE_TEMPLATE_SETS.values()
             for old, new in zip(old_set, MACHINE_TEMPLATES, strict=True)
             if old != new and old.startswith("trigger_") and _object_name(old, machine) in present]
    if stale:
        replace_machine_triggers(conn, machine, stale, MACHINE_OBJECTS_VERSION)
    execute_ddl(conn, [render(template, machine) for template in MACHINE_TEMPLATES[2:]])
    with conn.cursor() as cur:
        cur.execute(
            "UPDATE fsm_machines SET objects_version = %s WHERE machine = %s",
            (MACHINE_OBJECTS_VERSION, machine),
        )


def replace_machine_triggers(conn: Any, machine: str, pairs: Iterable[tuple[str, str]], objects_version: str,
                             *, wait_seconds: int = 2, attempts: int = 15) -> None:
    """Swap per-type triggers (old template, new template) for their next versions, with no
    moment where neither version fires.

    MySQL has no CREATE OR REPLACE TRIGGER that both servers accept, and DROP then CREATE
    leaves a gap in which an UPDATE would run unchecked. Under LOCK TABLES ... WRITE no other
    session can touch the table until both statements are done. Taking that lock waits for
    running transactions on the table, and every new one queues behind the wait, so it waits
    at most ``wait_seconds`` (lock_wait_timeout) and tries again later, up to ``attempts``
    times. If a CREATE fails, the old trigger is put back before the table is unlocked.
    """
    table = f"fsm_{check_machine_name(machine)}"
    pairs = list(pairs)
    with conn.cursor() as cur:
        cur.execute(f"SET SESSION sql_mode = '{db.STRICT_SQL_MODE}'")
        cur.execute("SET time_zone = '+00:00'")
        cur.execute("SELECT @@SESSION.lock_wait_timeout")
        (previous_wait,) = cur.fetchone()
        cur.execute(f"SET SESSION lock_wait_timeout = {int(wait_seconds)}")
        try:
            for attempt in range(attempts):
                try:
                    cur.execute(f"LOCK TABLES `{table}` WRITE")
                    break
                except pymysql.err.OperationalError as exc:
                    if exc.args[0] != 1205 or attempt + 1 == attempts:  # 1205: lock wait timeout
                        raise
                    time.sleep(1.0)
            try:
                swapped: list[tuple[str, str, bool]] = []  # (old, new, new one created)
                try:
                    for old, new in pairs:
                        cur.execute(f"DROP TRIGGER IF EXISTS `{_object_name(old, machine)}`")
                        swapped.append((old, new, False))
                        cur.execute(render(new, machine))
                        swapped[-1] = (old, new, True)
                except pymysql.err.MySQLError:
                    for old, new, created in reversed(swapped):  # leave the table as it was: old triggers
                        if created:
                            cur.execute(f"DROP TRIGGER IF EXISTS `{_object_name(new, machine)}`")
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
    from alembic import command

    conn = db.connect(settings)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT GET_LOCK('pyfsm_migrate', 60)")
            (got,) = cur.fetchone()
            if got != 1:
                raise SchemaVersionMismatch("another process has been migrating for 60 s; try again")
        try:
            command.upgrade(alembic_config(settings), revision)
        except DBAPIError as exc:  # SQLAlchemy wraps the driver's error
            raise db.translate(exc.orig or exc) from exc
        finally:
            with conn.cursor() as cur:
                cur.execute("SELECT RELEASE_LOCK('pyfsm_migrate')")
    finally:
        conn.close()


def current_revision(conn: Any) -> str | None:
    """The revision recorded in the database, or None if pyfsm was never installed there."""
    with conn.cursor() as cur:
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
