"""How revisions upgrade what earlier ones installed: SQL frozen in migrations/sql, trigger
swaps with no moment unchecked, per-type steps that survive an interruption.

The landed revisions import these through pyfsm.schema (where they lived when they landed).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..db import queries
from ..db.driver import errors as pymysql_errors
from .ddl import ddl_session, execute_ddl, lock_wait, machine_triggers, object_name
from .resources import FIRST_REVISIONS, check_machine_name, read_frozen, render
from .views import refresh_views

#: Every per-type object set a revision installed: templates frozen in
#: migrations/sql/0001-0010/templates (and a later revision's templates/), rendered for each
#: machine in this order.
#: fsm_machines.objects_version records which set a machine has. The tests install types
#: as an older pyfsm did from these; the current set is schema.MACHINE_OBJECTS, whose files
#: are named after their objects instead (frozen ``trigger_bu_v8`` and ``send_v3`` are
#: sql/machine's ``triggers/fsm_{type}_bu_v8.sql`` and ``procedures/fsm_{type}_send_v3.sql``).
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
# the reporting views fsm_v_{type} and fsm_v_{type}_transitions.
_V3 = {"trigger_ai_v2": "trigger_ai_v3", "trigger_bu_v2": "trigger_bu_v3", "trigger_hbu_v1": "trigger_hbu_v2"}
MACHINE_TEMPLATE_SETS["v3"] = (
    "instance_table",
    "history_table",
    "history_left_at",
    *(_V3.get(name, name) for name in MACHINE_TEMPLATE_SETS["v2"][2:]),
    "view_instances_v1",
    "view_history_v1",
)
# v4 (revision 0005): the transition trigger compares names byte for byte (no PAD SPACE).
_V4 = {"trigger_bu_v3": "trigger_bu_v4"}
MACHINE_TEMPLATE_SETS["v4"] = tuple(_V4.get(name, name) for name in MACHINE_TEMPLATE_SETS["v3"])
# v5 (revision 0006): the same transition with fewer statements (trigger_bu_v5); send_v2,
# whose common case is one UPDATE, beside send_v1; step_v2, the engine's step without
# dynamic SQL (fsm_step_v1 stays for types not yet upgraded).
_V5 = {"trigger_bu_v4": "trigger_bu_v5"}
MACHINE_TEMPLATE_SETS["v5"] = tuple(
    new
    for name in MACHINE_TEMPLATE_SETS["v4"]
    for new in ((name, "send_v2", "step_v2") if name == "send_v1" else (_V5.get(name, name),))
)
# v6 (revision 0007): steps_v1, a worker's batch of steps of several instances in one
# transaction, and apply_step_v1, step_v2's body without its transaction, which it calls.
MACHINE_TEMPLATE_SETS["v6"] = tuple(
    new
    for name in MACHINE_TEMPLATE_SETS["v5"]
    for new in ((name, "apply_step_v1", "steps_v1") if name == "step_v2" else (name,))
)
# v7 (revision 0008): the transition and creation triggers take a procedure's context before
# their first write and set a history guard that names the row written (a deadlock there can
# skip every handler), which the history triggers check; text that is not UTF-8 is refused.
_V7 = {
    "trigger_ai_v3": "trigger_ai_v4",
    "trigger_bu_v5": "trigger_bu_v6",
    "trigger_hbi_v1": "trigger_hbi_v2",
    "trigger_hbu_v2": "trigger_hbu_v3",
}
MACHINE_TEMPLATE_SETS["v7"] = tuple(_V7.get(name, name) for name in MACHINE_TEMPLATE_SETS["v6"])
# v8 (revision 0009): send_many_v1, many events in one call and one transaction, and
# apply_send_v1, send_v2's work without its transaction, which it calls per item.
MACHINE_TEMPLATE_SETS["v8"] = tuple(
    new
    for name in MACHINE_TEMPLATE_SETS["v7"]
    for new in ((name, "apply_send_v1", "send_many_v1") if name == "send_v2" else (name,))
)
# v9 (revision 0010): the same transition with fewer instructions on the common path
# (trigger_bu_v7), and a history update trigger that lets that transition's own flip through
# on one comparison (trigger_hbu_v4).
_V9 = {"trigger_bu_v6": "trigger_bu_v7", "trigger_hbu_v3": "trigger_hbu_v4"}
MACHINE_TEMPLATE_SETS["v9"] = tuple(_V9.get(name, name) for name in MACHINE_TEMPLATE_SETS["v8"])
# v10 (revision 0017): the history triggers refuse a change when a NULL stands on either side
# of the guard's comparison (trigger_hbu_v5, trigger_hbi_v3; frozen in migrations/sql/0017).
_V10 = {"trigger_hbi_v2": "trigger_hbi_v3", "trigger_hbu_v4": "trigger_hbu_v5"}
MACHINE_TEMPLATE_SETS["v10"] = tuple(_V10.get(name, name) for name in MACHINE_TEMPLATE_SETS["v9"])
# v11 (revision 0018): send_many_v2 beside send_many_v1, sorting items of any size on MySQL
# (frozen in migrations/sql/0018).
MACHINE_TEMPLATE_SETS["v11"] = tuple(
    new
    for name in MACHINE_TEMPLATE_SETS["v10"]
    for new in ((name, "send_many_v2") if name == "send_many_v1" else (name,))
)
# v12 (revision 0020): send_v3 beside send_v2, answering an event the type does not have with
# 31028 (frozen in migrations/sql/0020).
MACHINE_TEMPLATE_SETS["v12"] = tuple(
    new for name in MACHINE_TEMPLATE_SETS["v11"] for new in ((name, "send_v3") if name == "send_v2" else (name,))
)
# v13 (revision 0021): the transition trigger lets fsm_{type}_upgrade_v1 move an instance to a
# newer definition version (trigger_bu_v8), and that procedure and its dry run upgrade_plan_v1;
# fsm_v_{type} counts in_state_since across such a move (view_instances_v2; frozen in
# migrations/sql/0021).
MACHINE_TEMPLATE_SETS["v13"] = tuple(
    new
    for name in MACHINE_TEMPLATE_SETS["v12"]
    for new in (
        {
            "trigger_bu_v7": ("trigger_bu_v8",),
            "steps_v1": ("steps_v1", "upgrade_v1", "upgrade_plan_v1"),
            "view_instances_v1": ("view_instances_v2",),
        }.get(name, (name,))
    )
)
# v14 (revision 0022): the transition trigger with the type's rules inline (trigger_bu_v9, a
# template whose marked spans pyfsm.schema.rendering fills in for each type; rendered as it
# stands it looks the rules up in fsm_rules, as v8 did) and the leaner send_v4 beside send_v3.
MACHINE_TEMPLATE_SETS["v14"] = tuple(
    new
    for name in MACHINE_TEMPLATE_SETS["v13"]
    for new in ({"trigger_bu_v8": ("trigger_bu_v9",), "send_v3": ("send_v3", "send_v4")}.get(name, (name,)))
)
# v15 (revision 0023): the transition trigger takes the common call's context from two variables
# (@fsm_source 'fire' and @fsm_event: trigger_bu_v10), and fire_v1, the two-parameter call that
# sets them, beside send_v4.
MACHINE_TEMPLATE_SETS["v15"] = tuple(
    new
    for name in MACHINE_TEMPLATE_SETS["v14"]
    for new in ({"trigger_bu_v9": ("trigger_bu_v10",), "send_v4": ("send_v4", "fire_v1")}.get(name, (name,)))
)
# v16 (revision 0024): the transition trigger tries a (state, event)'s rules in order and takes
# the first whose guard holds (trigger_bu_v11, rendered per type with the guards inline), and
# allowed_events_v1, the rules an instance may take now with their guards and its data.
MACHINE_TEMPLATE_SETS["v16"] = tuple(
    new
    for name in MACHINE_TEMPLATE_SETS["v15"]
    for new in ({"trigger_bu_v10": ("trigger_bu_v11",), "get_v1": ("get_v1", "allowed_events_v1")}.get(name, (name,)))
)
# v17 (revision 0025): send_v5 beside send_v4 and send_many_v3 beside send_many_v2, each taking
# a JSON merge patch of the data (data_patch) applied inside the transition's transaction.
MACHINE_TEMPLATE_SETS["v17"] = tuple(
    new
    for name in MACHINE_TEMPLATE_SETS["v16"]
    for new in (
        {"send_v4": ("send_v4", "send_v5"), "send_many_v2": ("send_many_v2", "send_many_v3")}.get(name, (name,))
    )
)
# v18 (revision 0028): the transition trigger takes the common call's context from one variable
# and leaves its result in one (trigger_bu_v12, rendered per type as bu_v11) and moves the state
# counters with one UPDATE; fire_v2, the call that uses them, beside fire_v1.
MACHINE_TEMPLATE_SETS["v18"] = tuple(
    new
    for name in MACHINE_TEMPLATE_SETS["v17"]
    for new in ({"trigger_bu_v11": ("trigger_bu_v12",), "fire_v1": ("fire_v1", "fire_v2")}.get(name, (name,)))
)
# v19 (revision 0029): the transition trigger finds the previous history row through sort_key
# (trigger_bu_v13, rendered per type as bu_v12).
MACHINE_TEMPLATE_SETS["v19"] = tuple(
    {"trigger_bu_v12": "trigger_bu_v13"}.get(name, name) for name in MACHINE_TEMPLATE_SETS["v18"]
)


def apply_files(conn: Any, files: Iterable[str], revisions: str = FIRST_REVISIONS) -> None:
    """Apply SQL files frozen for the migrations: ``migrations/sql/<revisions>/<file>``.

    Revisions 0001 to 0010 name files of their shared tree; a later revision passes its own
    number and applies the copies it carries of the files it adds or replaces.
    """
    execute_ddl(conn, [read_frozen(name, revisions) for name in files])


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
            cur.execute(queries.sql("schema_machines_at"), (from_version,))
            machines = [check_machine_name(row[0]) for row in cur.fetchall()]
        if not machines:
            break
        for machine in machines:
            upgrade(machine)
            with conn.cursor() as cur:
                cur.execute(queries.sql("schema_mark_objects_version"), (to_version, machine))
    refresh_views(conn)


def rebuild_state_counts(cur: Any, machine: str) -> None:
    """Recount ``machine``'s instances per state and shard into fsm_state_counts.

    Exact only while no one can write the instance table: called under LOCK TABLES.
    """
    name = check_machine_name(machine)
    cur.execute(queries.sql("schema_clear_state_counts"), (name,))
    cur.execute(queries.sql("schema_count_states", type=name), (name,))


def fill_left_at(conn: Any, machine: str, *, batch: int = 2000) -> int:
    """Give every history row that is not the most recent its left_at (the next row's time).

    Rows written since the v3 triggers get it when the transition happens; this fills in
    the older ones, in batches, each row once (the history trigger allows exactly this
    with @fsm_fill_left_at = 1). Returns how many rows it filled.
    """
    name = check_machine_name(machine)
    table = f"fsm_{name}_transitions"
    filled, after = 0, 0
    with conn.cursor() as cur:
        cur.execute(queries.sql("schema_fill_left_at_on"))
        try:
            while True:
                cur.execute(queries.sql("schema_left_at_batch", type=name), (after, batch))
                rows = [(row_id, left) for row_id, left in cur.fetchall()]
                if not rows:
                    return filled
                after = rows[-1][0]
                rows = [(row_id, left) for row_id, left in rows if left is not None]
                if rows:
                    cases = " ".join("WHEN %s THEN %s" for _ in rows)
                    # its shape is the batch's (a CASE arm and an IN mark per row): no block of
                    # sql/queries can hold it (tests/unit/test_queries.py lists it)
                    cur.execute(
                        f"UPDATE `{table}` SET left_at = CASE id {cases} END "
                        f"WHERE id IN ({', '.join('%s' for _ in rows)})",
                        [v for pair in rows for v in pair] + [row_id for row_id, _ in rows],
                    )
                    filled += len(rows)
        finally:
            cur.execute(queries.sql("schema_fill_left_at_off"))


def replace_machine_triggers(
    conn: Any,
    machine: str,
    pairs: Iterable[tuple[str, str]],
    objects_version: str | None,
    *,
    wait_seconds: int = 2,
    attempts: int = 15,
    also_lock: Sequence[str] = (),
    while_locked: Callable[[Any], None] | None = None,
    texts: Mapping[str, str] | None = None,
) -> None:
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
    ``texts``: the text to create for a new template, where it is rendered for the type
    (pyfsm.schema.rendering) rather than from the template alone. A pair (t, t) renders a
    trigger again under its own name; if that fails, the template as it stands is put back.
    """
    table = f"fsm_{check_machine_name(machine)}"
    pairs = list(pairs)
    present = machine_triggers(conn, machine)
    with conn.cursor() as cur:
        ddl_session(cur)
        with lock_wait(cur, wait_seconds):
            for attempt in range(attempts):
                try:
                    cur.execute("LOCK TABLES " + ", ".join(f"`{t}` WRITE" for t in (table, *also_lock)))
                    break
                except pymysql_errors.OperationalError as exc:
                    if exc.args[0] != 1205 or attempt + 1 == attempts:  # 1205: lock wait timeout
                        raise
                    time.sleep(1.0)
            try:
                done: list[tuple[str, str, bool, bool]] = []  # (old, new, old was there, new created here)
                try:
                    for old, new in pairs:
                        had_old, had_new = (object_name(t, machine) in present for t in (old, new))
                        had_new = had_new and old != new  # (t, t): created again, from its new text
                        if had_old:
                            cur.execute(f"DROP TRIGGER `{object_name(old, machine)}`")
                        done.append((old, new, had_old, False))
                        if not had_new:  # an interrupted earlier swap may have created it already
                            cur.execute((texts or {}).get(new) or render(new, machine))
                            done[-1] = (old, new, had_old, True)
                    if while_locked is not None:
                        while_locked(cur)
                except pymysql_errors.MySQLError:
                    for old, new, had_old, created in reversed(done):  # leave the tables as they were
                        if created or old == new:
                            cur.execute(f"DROP TRIGGER IF EXISTS `{object_name(new, machine)}`")
                        if had_old:
                            cur.execute(render(old, machine))
                    raise
            finally:
                cur.execute("UNLOCK TABLES")
        if objects_version is not None:  # None: the caller marks the type when all of it is done
            cur.execute(queries.sql("schema_mark_objects_version"), (objects_version, machine))
