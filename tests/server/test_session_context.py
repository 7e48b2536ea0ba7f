"""A failed call leaves nothing behind on its connection, whatever failed (issue 19, part 1).

pyfsm's procedures hand a transition its context through session variables (@fsm_event,
@fsm_metadata, @fsm_handler, @fsm_request_id, @fsm_source) and the triggers mark their own
history writes with @fsm_guard. A deadlock inside a trigger can end the CALL without running
the trigger's or the procedure's handler (MariaDB 10.11 did, for a deadlock on the history's
most_recent flip), so whatever only a handler cleared stayed set: the next call on that
connection stamped a stale request id on the creation row it wrote (RequestIdReused for an
id in no history row). Since object set v7 the triggers take a procedure's context before
their first write and the guard names the one row it allows; and the pool never hands out a
connection again after anything but one of pyfsm's own refusals.

The storm runs several processes creating the same fresh keys with shared request ids, the
way the defect was found, and checks the connection's variables after every failed call.
"""

from __future__ import annotations

import os
import random
import time
import traceback
from collections import Counter
from typing import Any

import pymysql
import pytest
from helpers.common import errno_of, fetch, order_machine, unique

from pyfsm import Deadlock, FsmError, RequestIdReused, Store
from pyfsm.db import CLEAR_CONTEXT_SQL, CONTEXT_VARIABLES, parse_dsn
from pyfsm.schema.routines import Routine

PROCESSES = 12
#: Seconds each storm runs; PYFSM_STORM_SECONDS for longer. A 40 s run before the fix found
#: 7-20 connections with a stale context; one of 12 s sees 5-15 deadlocks.
SECONDS = float(os.environ.get("PYFSM_STORM_SECONDS", "12"))
EVENTS = ("pay", "pay", "cancel", "ship", "refund")
CONTEXT = ", ".join(f"{name} AS `{name[1:]}`" for name in CONTEXT_VARIABLES)


def _round_key(rnd: random.Random, started: float) -> tuple[str, str]:
    """A key and a request id shared with the other processes: both depend on the time slot
    (a fresh set of four keys every 50 ms), so the processes create and move the same ones."""
    slot = int((time.monotonic() - started) * 20)
    return f"k{slot}-{rnd.randrange(4)}", f"r{slot}-{rnd.randrange(3)}"


def _guard_is_inert(cur: Any, machine: str, guard: str) -> bool:
    """Whether a guard left on the connection lets a write into history through (it must not)."""
    instance_id = int(str(guard).split("/", 1)[0])  # "<id>/<time>"; an older trigger left the id alone
    try:
        cur.execute(
            f"INSERT INTO `fsm_{machine}_transitions` (instance_id, sort_key, most_recent, to_state, "
            "data_after, metadata, definition_version, source, created_at) "
            "VALUES (%s, 999999, NULL, 'new', '{}', '{}', 1, 'hand', UTC_TIMESTAMP(6))",
            (instance_id,),
        )
    except pymysql.err.MySQLError as exc:
        return exc.args[0] == 31012
    return False


def sql_storm_worker(dsn: str, machine: str, worker: int, barrier: Any, out: Any) -> None:
    """CALL fsm_{type}_send_v5 through plain PyMySQL; after each failure, the session's variables."""
    report: dict[str, Any] = {"error": None, "outcomes": Counter(), "problems": [], "guards": 0}
    conn = pymysql.connect(**parse_dsn(dsn).connect_kwargs())
    try:
        rnd = random.Random(worker)
        with conn.cursor() as cur:
            barrier.wait(timeout=60)
            started = time.monotonic()
            n = 0
            while time.monotonic() - started < SECONDS:
                n += 1
                key, request_id = _round_key(rnd, started)
                event = rnd.choice(EVENTS)
                try:
                    cur.execute(
                        f"CALL `fsm_{machine}_send_v5`(%s, %s, NULL, %s, NULL, %s, 'storm', NULL, NULL)",
                        (key, event, f'{{"w": {worker}, "n": {n}}}', request_id),
                    )
                    while cur.nextset():
                        pass
                    report["outcomes"]["ok"] += 1
                    continue
                except pymysql.err.MySQLError as exc:
                    errno = exc.args[0]
                    report["outcomes"][errno] += 1
                cur.execute(f"SELECT {CONTEXT}")
                left = dict(zip([d[0] for d in cur.description], cur.fetchone(), strict=True))
                guard = left.pop("fsm_guard")
                if any(value is not None for value in left.values()):
                    report["problems"].append(f"after {errno} on {key}/{event}/{request_id}: {left}")
                if guard is not None:
                    report["guards"] += 1
                    if not _guard_is_inert(cur, machine, guard):
                        report["problems"].append(f"after {errno}: the guard {guard!r} let a history write through")
                    cur.execute(CLEAR_CONTEXT_SQL)
    except BaseException:
        report["error"] = traceback.format_exc()
    finally:
        conn.close()
        out.put(report)


def store_storm_worker(dsn: str, machine: str, worker: int, barrier: Any, out: Any) -> None:
    """Store.send (pooled, deadlocks retried); RequestIdReused must name an id in history."""
    report: dict[str, Any] = {"error": None, "outcomes": Counter(), "problems": [], "reused": []}
    store = Store(dsn, pool_size=2)
    try:
        rnd = random.Random(1000 + worker)
        barrier.wait(timeout=60)
        started = time.monotonic()
        while time.monotonic() - started < SECONDS:
            key, request_id = _round_key(rnd, started)
            try:
                store.send(
                    machine, key, rnd.choice(EVENTS), request_id=request_id, metadata={"w": worker}, handler="storm"
                )
                report["outcomes"]["ok"] += 1
            except RequestIdReused as exc:
                report["outcomes"][exc.errno] += 1
                report["reused"].append(request_id)
            except Deadlock as exc:  # still deadlocked after Store's own retries: allowed, nothing applied
                report["outcomes"][exc.errno] += 1
            except FsmError as exc:
                report["outcomes"][exc.errno] += 1
    except BaseException:
        report["error"] = traceback.format_exc()
    finally:
        store.close()
        out.put(report)


def run_storm(target: Any, dsn: str, machine: str) -> list[dict[str, Any]]:
    """The storm's processes, each reporting once (helpers/processes.py's runner, test_concurrency's)."""
    from helpers.processes import run_processes

    return run_processes(target, lambda w: (dsn, machine, w), PROCESSES)


def test_a_storm_of_failed_calls_leaves_no_context_on_any_connection(store: Store, dsn: str) -> None:
    from helpers.fault_checks import check_invariants

    machine = order_machine(unique("storm"))
    store.define(machine)
    reports = run_storm(sql_storm_worker, dsn, machine.name)
    outcomes = sum((r["outcomes"] for r in reports), Counter())
    problems = [p for r in reports for p in r["problems"]]
    assert not problems, f"{len(problems)} failed calls left context behind, e.g. {problems[:5]}"
    # the storm must have reached what it is about: deadlocks, and refusals of every kind
    assert outcomes[1213] >= 1 and outcomes[31010] and outcomes[31005] and outcomes["ok"], outcomes
    check_invariants(parse_dsn(dsn), machine.name)


def test_store_send_storm_never_reuses_a_stale_request_id(store: Store, dsn: str) -> None:
    from helpers.fault_checks import check_invariants

    machine = order_machine(unique("storm"))
    store.define(machine)
    reports = run_storm(store_storm_worker, dsn, machine.name)
    outcomes = sum((r["outcomes"] for r in reports), Counter())
    reused = {rid for r in reports for rid in r["reused"]}
    conn = pymysql.connect(**parse_dsn(dsn).connect_kwargs())
    try:
        recorded = {
            r["request_id"]
            for r in fetch(
                conn, f"SELECT request_id FROM `fsm_{machine.name}_transitions` WHERE request_id IS NOT NULL"
            )
        }
        stamped_on_creations = fetch(
            conn,
            f"SELECT request_id FROM `fsm_{machine.name}_transitions` WHERE event IS NULL AND request_id IS NOT NULL",
        )
    finally:
        conn.close()
    assert outcomes["ok"] and outcomes[31010], outcomes
    assert reused <= recorded, f"RequestIdReused for ids in no history row: {sorted(reused - recorded)[:10]}"
    assert stamped_on_creations == []  # send creates without a request id, then applies the event with it
    check_invariants(parse_dsn(dsn), machine.name)


# -- the mechanisms, one at a time ----------------------------------------------------------


def context_of(raw: Any) -> dict[str, Any]:
    return fetch(raw, f"SELECT {CONTEXT}")[0]


def test_the_transition_trigger_takes_a_procedures_context_before_it_writes(store: Store, order: Any, raw: Any) -> None:
    """A context marked as a procedure's is gone once the trigger has read it, whatever
    happens after; a DBA's own context stays for every row of the statement, as documented."""
    store.create(order, "ctx-1")
    store.create(order, "ctx-2")
    raw.cursor().execute(
        "SET @fsm_event = 'pay', @fsm_request_id = 'ctx-r1', @fsm_metadata = '{\"by\": \"p\"}', "
        "@fsm_handler = 'h', @fsm_source = 'procedure'"
    )
    raw.cursor().execute(f"UPDATE `fsm_{order.name}` SET data = data WHERE instance_key = 'ctx-1'")
    assert set(context_of(raw).values()) == {None}
    [row] = fetch(
        raw,
        f"SELECT event, request_id, metadata, handler, source FROM `fsm_{order.name}_transitions` "
        "WHERE request_id = 'ctx-r1'",
    )
    assert (row["event"], row["handler"], row["source"]) == ("pay", "h", "procedure")
    raw.cursor().execute("SET @fsm_event = 'pay'")  # a DBA's: read for each row, theirs to clear
    raw.cursor().execute(f"UPDATE `fsm_{order.name}` SET data = data WHERE instance_key IN ('ctx-2')")
    assert context_of(raw)["fsm_event"] == "pay"
    raw.cursor().execute(CLEAR_CONTEXT_SQL)
    assert store.get(order, "ctx-1").state == store.get(order, "ctx-2").state == "paid"


def test_a_guard_left_behind_lets_no_history_write_through(store: Store, order: Any, raw: Any) -> None:
    """@fsm_guard names the instance and the time of the one row it allows. v1's guard (the
    instance id alone), as a deadlock could leave it, let the next hand-made row in."""
    store.create(order, "guard-1")
    instance_id = store.get(order, "guard-1").id
    insert = (
        f"INSERT INTO `fsm_{order.name}_transitions` (instance_id, sort_key, most_recent, to_state, "
        "data_after, metadata, definition_version, source, created_at) "
        "VALUES (%s, 50, NULL, 'paid', '{}', '{}', 1, 'hand', UTC_TIMESTAMP(6))"
    )
    flip = (
        f"UPDATE `fsm_{order.name}_transitions` SET most_recent = NULL, left_at = UTC_TIMESTAMP(6) "
        "WHERE instance_id = %s AND most_recent = 1"
    )
    # the v1 form as a number and as text (a number compared with '5/...' compares as 5)
    for guard in (instance_id, str(instance_id), f"{instance_id}/2026-01-01 00:00:00.000000"):
        raw.cursor().execute("SET @fsm_guard = %s", (guard,))
        assert errno_of(raw, insert, (instance_id,)) == 31012
        assert errno_of(raw, flip, (instance_id,)) == 31012
    raw.cursor().execute("SET @fsm_guard = NULL")
    assert [h.sort_key for h in store.history(order, "guard-1")] == [1]
    store.send(order, "guard-1", "pay")  # pyfsm's own writes pass
    assert [h.event for h in store.history(order, "guard-1")] == [None, "pay"]


def test_the_pool_never_hands_out_a_connection_after_a_failure_other_than_a_refusal(dsn: str, order: Any) -> None:
    """After a server error that is not one of pyfsm's refusals (a deadlock, or here an
    unknown procedure, which is easy to cause) the connection is closed, so a context it may
    hold is gone; after a refusal (31005) the same connection is used again."""
    with Store(dsn, pool_size=1) as one:

        def session() -> tuple[int, Any]:
            def read(conn: Any) -> tuple[int, Any]:
                with conn.cursor() as cur:
                    cur.execute("SELECT CONNECTION_ID(), @probe")
                    return cur.fetchone()  # type: ignore[no-any-return]

            return one.gateway.primary.on_connection(read)

        one.create(order, "pool-1")
        first, _ = session()
        with one.gateway.primary.connection() as pooled:  # session state, as a skipped handler's context is
            pooled.cursor().execute("SET @probe = 'left'")
        assert session() == (first, "left")
        with pytest.raises(FsmError) as refused:
            one.send(order, "pool-1", "ship")
        assert refused.value.errno == 31005
        assert session() == (first, "left")  # a refusal's reply was read whole: kept
        with one.gateway.primary.connection() as pooled:  # what a skipped handler left: a transition context
            pooled.cursor().execute("SET @fsm_event = 'pay', @fsm_source = 'procedure'")
        with pytest.raises(FsmError) as unknown:
            one.gateway.primary.run("CALL `fsm_no_such_procedure_v1`()", (), retry_connection=False, writes=True)
        assert unknown.value.errno == 1305
        second, left = session()
        assert second != first and left is None

        def raw_update(conn: Any) -> None:  # the next raw statement on the pool: not a transition
            with conn.cursor() as cur:
                cur.execute(
                    f"UPDATE `fsm_{order.name}` SET data = JSON_SET(data, '$.n', 1) WHERE instance_key = 'pool-1'"
                )

        one.gateway.primary.on_connection(raw_update)
        got = one.get(order, "pool-1")
        assert (got.state, got.data) == ("new", {"n": 1})
        assert one.send(order, "pool-1", "pay").to_state == "paid"
        assert [h.event for h in one.history(order, "pool-1")] == [None, "pay"]


def test_a_lease_keeps_its_connection_and_locks_after_a_server_error_but_not_the_context(store: Store) -> None:
    """A lease's connection holds its locks, so it is not closed after a server error; its
    transition context is cleared instead, and the lease goes on."""
    from pyfsm.db import _raw

    machine = order_machine(unique("leased"), uses_local_lock=True)
    store.define(machine)
    store.create(machine, "l-1", lookup_key=unique("acct"))
    with store.lock(machine, "l-1", heartbeat=False) as lease:
        conn = _raw(lease._conn)
        with conn.cursor() as cur:
            cur.execute("SET @fsm_event = 'ship', @fsm_source = 'procedure', @probe = 'kept'")
        with pytest.raises(FsmError) as unknown:
            lease.call(Routine("fsm_no_such_procedure_v1", ()), (), writes=True)
        assert unknown.value.errno == 1305
        assert _raw(lease._conn) is conn and conn.open
        assert fetch(conn, "SELECT @fsm_event AS e, @fsm_source AS s, @probe AS p") == [
            {"e": None, "s": None, "p": "kept"}
        ]
        assert lease.send("pay").to_state == "paid"  # it still holds the lock
        assert store.locks(lookup_key=store.get(machine, "l-1").lookup_key)[0].owner == lease.owner
