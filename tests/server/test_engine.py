"""The handler engine in one process: steps, data, moves back, pause/resume, retries, waiting.

Worker processes, SIGKILL and the 2,000-instance drain are in test_worker_processes.py.
"""

from __future__ import annotations

import json
from typing import Any

import pymysql
import pytest
from helpers.common import explain, fetch, unique
from helpers.engine_fixtures import checkout

from pyfsm import (
    Context,
    InvalidDefinition,
    InvalidStatus,
    Machine,
    Outcome,
    Process,
    RunClaimed,
    Store,
    Worker,
)
from pyfsm.schema import routines
from pyfsm.schema.routines import Routine


def drain(store: Store, *processes: Process) -> Any:
    return Worker(store, processes, idle_min=0.01, idle_max=0.05).run(handle_signals=False, until_idle=0.3)


def test_steps_run_in_order_and_data_flows(store: Store) -> None:
    process = checkout(unique("checkout"))
    store.define(process.machine)
    result = process.start(store, "c-1", data={"items": 3})
    assert (result.state, result.status, result.steps, result.version) == ("done", "completed", 3, 4)
    instance = store.get(process.name, "c-1")
    assert instance.data == {"items": 3, "reserved": 3, "charged": 30, "trail": ["reserve", "charge", "ship"]}
    history = store.history(process.name, "c-1")
    assert [(h.from_state, h.to_state, h.handler) for h in history[1:]] == [
        ("reserve", "charge", "reserve"),
        ("charge", "ship", "charge"),
        ("ship", "done", "ship"),
    ]
    assert history[2].data_before["reserved"] == 3 and history[2].data_after["charged"] == 30  # before/after
    assert store.run_info(process.name, "c-1") is None  # completed: out of the queue


def test_a_handler_moves_back(store: Store) -> None:
    process = Process.linear(unique("review"), ["draft", "review"])

    @process.handler("draft")
    def draft(ctx: Context) -> Outcome:
        ctx.data["drafts"] = ctx.data.get("drafts", 0) + 1
        return ctx.next()

    @process.handler("review")
    def review(ctx: Context) -> Outcome:
        return ctx.back() if ctx.data["drafts"] < 2 else ctx.next()  # first review sends it back

    store.define(process.machine)
    result = process.start(store, "r-1")
    assert (result.state, result.status) == ("done", "completed")
    assert [h.event for h in store.history(process.name, "r-1")[1:]] == ["next", "back", "next", "next"]
    assert store.get(process.name, "r-1").data == {"drafts": 2}


def test_pause_in_a_handler_and_from_outside_then_resume_at_the_right_step(store: Store, raw) -> None:  # type: ignore[no-untyped-def]
    name = unique("pausing")
    process = Process.linear(name, ["a", "b", "c"])
    seen: list[str] = []

    @process.handler("a")
    def a(ctx: Context) -> Outcome:
        seen.append("a")
        store.pause(name, ctx.key)  # someone pauses while this step runs: takes effect after it
        return ctx.next()

    @process.handler("b")
    def b(ctx: Context) -> Outcome:
        seen.append("b")
        if ctx.data.get("hold", True):
            ctx.data["hold"] = False
            return ctx.pause()  # the handler itself pauses, keeping what it wrote
        return ctx.next()

    @process.handler("c")
    def c(ctx: Context) -> Outcome:
        seen.append("c")
        return ctx.next()

    store.define(process.machine)
    first = process.start(store, "p-1")
    assert (first.state, first.status, seen) == ("b", "paused", ["a"])  # a committed, then paused
    with pytest.raises(Exception, match="paused") as caught:
        store.send(name, "p-1", "next")  # a paused instance accepts no event
    assert caught.value.errno == 31011  # type: ignore[attr-defined]
    assert store.get(name, "p-1").resume_from_step == "b"
    assert drain(store, process).runs == 0  # no worker picks it up
    assert process.run(store, "p-1").status == "paused"  # nor does an explicit run ...
    info = store.run_info(name, "p-1")
    assert info is not None and (info.claimed_by, info.due_at) == (None, None)  # ... which leaves no claim
    store.resume(name, "p-1")
    second = process.run(store, "p-1")
    assert (second.state, second.status, seen) == ("b", "paused", ["a", "b"])
    assert store.get(name, "p-1").data == {"hold": False}
    assert fetch(raw, "CALL fsm_resume_v1(%s, 'p-1')", (name,))[0]["status"] == "running"  # from SQL too
    drain(store, process)
    assert (store.get(name, "p-1").state, seen) == ("done", ["a", "b", "b", "c"])
    with pytest.raises(InvalidStatus):
        store.resume(name, "p-1")
    with pytest.raises(InvalidStatus):
        store.pause(name, "p-1")


def test_run_immediately_off_runs_one_step_then_a_worker_does_the_rest(store: Store) -> None:
    process = checkout(unique("queued"), run_immediately=False)
    store.define(process.machine)
    result = process.start(store, "q-1", data={"items": 1})
    assert (result.state, result.status, result.steps) == ("charge", "running", 1)
    assert store.run_info(process.name, "q-1").claimed_by is None  # type: ignore[union-attr]
    eager = checkout(process.name)  # the same machine, run_immediately on for the process ...
    result = eager.start(store, "q-2", data={"items": 1}, run_immediately=False)  # ... off for this instance
    assert result.steps == 1 and store.run_info(process.name, "q-2").run_immediately == 0  # type: ignore[union-attr]
    stats = drain(store, process)
    assert stats.steps == 4 and stats.by_status == {"running": 2, "completed": 2}
    assert store.get(process.name, "q-1").state == store.get(process.name, "q-2").state == "done"


def test_retry_with_backoff_then_success(store: Store) -> None:
    process = checkout(unique("flaky"), backoff=0.05, max_attempts=3)
    failures = {"n": 0}

    def flaky_charge(ctx: Context) -> Outcome:
        if ctx.attempt < 3:
            failures["n"] += 1
            raise TimeoutError(f"bank timeout #{ctx.attempt}")
        ctx.data["charged"] = True
        return ctx.next()

    process.handlers.pop("charge")
    process.register("charge", flaky_charge, name="charge_card")
    store.define(process.machine)
    first = process.start(store, "f-1")
    assert (first.state, first.status, first.error) == ("charge", "running", "TimeoutError: bank timeout #1")
    info = store.run_info(process.name, "f-1")
    assert info is not None and info.attempt == 1 and info.due_at is not None  # next run time
    assert store.get(process.name, "f-1").last_retry_at is not None
    drain(store, process)
    assert store.get(process.name, "f-1").state == "done" and failures["n"] == 2
    errors = store.errors(process.name, "f-1")
    assert [(e.attempt, e.outcome, e.handler) for e in errors] == [
        (1, "retry", "charge_card"),
        (2, "retry", "charge_card"),
    ]
    assert errors[0].error_type == "builtins.TimeoutError" and "bank timeout #1" in errors[0].traceback
    delays = [(e.next_run_at - e.created_at).total_seconds() for e in errors]
    assert 0.025 <= delays[0] <= 0.075 and 0.05 <= delays[1] <= 0.15  # backoff * 2**(n-1), +-50% jitter


def test_retries_exhausted_then_failed_listed_and_retried_from_sql(store: Store, raw) -> None:  # type: ignore[no-untyped-def]
    process = checkout(unique("broken"), backoff=0.0, max_attempts=2)
    broken = {"on": True}

    def charge(ctx: Context) -> Outcome:
        if broken["on"]:
            raise ConnectionError("card processor down")
        return ctx.next()

    process.handlers.pop("charge")
    process.register("charge", charge)
    store.define(process.machine)
    process.start(store, "b-1")
    drain(store, process)
    instance = store.get(process.name, "b-1")
    assert (instance.state, instance.status) == ("charge", "failed")
    [failed] = fetch(raw, "CALL fsm_failed_v1(%s, 0, 10)", (process.name,))
    assert (failed["instance_key"], failed["attempt"], failed["message"]) == ("b-1", 2, "card processor down")
    assert store.failed(process.name)[0].error_type == "builtins.ConnectionError"
    assert [e.outcome for e in store.errors(process.name, "b-1")] == ["retry", "failed"]
    broken["on"] = False
    assert fetch(raw, "CALL fsm_retry_v1(%s, 'b-1')", (process.name,))[0]["status"] == "running"
    drain(store, process)
    assert store.get(process.name, "b-1").status == "completed"
    with pytest.raises(InvalidStatus):
        store.retry(process.name, "b-1")


def test_failure_transition_and_non_retryable_errors(store: Store) -> None:
    name = unique("refunding")
    machine = Machine(
        name=name,
        states=["charge", "refund", "done", "refunded"],
        start=["charge"],
        final=["done", "refunded"],
        transitions=[("ok", "charge", "done"), ("give_up", "charge", "refund"), ("refunded", "refund", "refunded")],
    )
    process = Process(machine, max_attempts=5, backoff=0.0, non_retryable=(PermissionError,))

    @process.handler("charge", failure_event="give_up")
    def charge(ctx: Context) -> Outcome:
        raise PermissionError("card blocked")  # non-retryable: the failure event at once

    @process.handler("refund")
    def refund(ctx: Context) -> Outcome:
        return ctx.fire("refunded")

    store.define(machine)
    result = process.start(store, "x-1")
    assert result.state == "refund"
    drain(store, process)
    assert store.get(name, "x-1").state == "refunded"
    [error] = store.errors(name, "x-1")
    assert (error.attempt, error.outcome) == (1, "failure_event")
    assert [h.event for h in store.history(name, "x-1")[1:]] == ["give_up", "refunded"]
    with pytest.raises(InvalidDefinition):
        process.register("done", refund)  # a final state runs no handler


def test_bad_handler_results_are_refused_before_anything_is_written(store: Store) -> None:
    name = unique("bad")
    process = Process.linear(name, ["a", "b"], max_attempts=3)

    @process.handler("a")
    def a(ctx: Context) -> Outcome:
        ctx.data["when"] = {1, 2}  # a set: not JSON
        return ctx.next()

    store.define(process.machine)
    result = process.start(store, "bad-1")
    assert (result.state, result.status) == ("a", "failed")  # not retried: it would fail the same way
    assert store.get(name, "bad-1").data == {} and len(store.history(name, "bad-1")) == 1
    assert store.errors(name, "bad-1")[0].error_type == "pyfsm.errors.InvalidData"

    other = Process.linear(unique("bad"), ["a", "b"])
    other.register("a", lambda ctx: ctx.fire("nope"), name="wrong_event")
    store.define(other.machine)
    assert other.start(store, "bad-2").status == "failed"
    assert store.errors(other.name, "bad-2")[0].message == (
        f"event 'nope' is not allowed from 'a': machine type {other.name!r} has no such event; its events: next, back"
    )


def test_waiting_for_an_external_event(store: Store) -> None:
    name = unique("approval")
    machine = Machine(
        name=name,
        states=["asked", "approved", "done"],
        start=["asked"],
        final=["done"],
        transitions=[("approve", "asked", "approved"), ("finish", "approved", "done")],
    )
    process = Process(machine)
    process.register("asked", lambda ctx: ctx.wait(), name="ask")
    process.register("approved", lambda ctx: ctx.fire("finish"), name="finish")
    store.define(machine)
    assert process.start(store, "w-1").status == "waiting"
    assert drain(store, process).runs == 0
    store.send(name, "w-1", "approve", metadata={"by": "manager"})  # from anyone: wakes it up
    assert store.get(name, "w-1").status == "running"
    drain(store, process)
    assert (store.get(name, "w-1").state, store.get(name, "w-1").status) == ("done", "completed")


def test_a_claimed_instance_is_not_run_twice_and_sql_controls(store: Store, raw) -> None:  # type: ignore[no-untyped-def]
    process = checkout(unique("claimed"))
    store.define(process.machine)
    store.create(process.name, "k-1")
    claim = fetch(raw, "CALL fsm_claim_v1(%s, 'dba:1', 1, 60, 'k-1')", (process.name,))
    assert claim[0]["instance_key"] == "k-1" and claim[0]["current_state"] == "reserve"
    with pytest.raises(RunClaimed):
        process.run(store, "k-1")
    assert fetch(raw, "CALL fsm_pause_v1(%s, 'k-1')", (process.name,))[0]["pending"] == 1
    steps = json.dumps([{"event": "next", "handler": "by_hand", "data": {"manual": True}}])
    done = fetch(
        raw, "CALL fsm_step_v1(%s, 'k-1', 'dba:1', 1, %s, 'running', 1, 60, NULL, NULL)", (process.name, steps)
    )[0]
    assert (done["state"], done["status"], done["continue"]) == ("charge", "paused", 0)  # the pending pause won
    with pytest.raises(Exception) as stale:  # the claim was given back: a late commit is refused
        step_v1 = Routine("fsm_step_v1", tuple(f"p{n}" for n in range(10)))  # deprecated: not in the registry
        store.gateway.call_one(
            step_v1, (process.name, "k-1", "dba:1", 2, "[]", "running", 1, 60, None, None), writes=True
        )
    assert stale.value.errno == 31021  # type: ignore[attr-defined]
    with pytest.raises(pymysql.err.OperationalError) as bad:
        fetch(raw, "CALL fsm_claim_v1(%s, 'dba:1', 0, 60, NULL)", (process.name,))
    assert bad.value.args[0] == 31009
    assert store.get(process.name, "k-1").data == {"manual": True}


def test_claims_skip_rows_another_claimer_holds_instead_of_coming_back_empty(store: Store, dsn: str) -> None:
    """SKIP LOCKED through the (machine, due_at, id) index: while one claimer holds the oldest
    due runs, another gets the next ones, never nothing."""
    from pyfsm.db import parse_dsn

    process = checkout(unique("skip"))
    store.define(process.machine)
    for n in range(12):
        store.create(process.name, f"s-{n}")
        store.enqueue(process.name, f"s-{n}")
    holder = pymysql.connect(**{**parse_dsn(dsn).connect_kwargs(), "autocommit": False})
    try:
        with holder.cursor() as cur:
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
            cur.execute(
                "SELECT id FROM fsm_runs WHERE machine = %s AND due_at <= UTC_TIMESTAMP(6) "
                "ORDER BY due_at, id LIMIT 5 FOR UPDATE SKIP LOCKED",
                (process.name,),
            )
            held = cur.fetchall()
        assert len(held) == 5
        claimed = store.gateway.call(routines.CLAIM, (process.name, "w:2", 5, 60, None))
        assert [r["instance_key"] for r in claimed] == [f"s-{n}" for n in range(5, 10)]
        rest = store.gateway.call(routines.CLAIM, (process.name, "w:3", 5, 60, None))
        assert [r["instance_key"] for r in rest] == ["s-10", "s-11"]
    finally:
        holder.rollback()
        holder.close()
    with pymysql.connect(**parse_dsn(dsn).connect_kwargs()) as conn:
        [row] = explain(
            conn,
            "SELECT id FROM fsm_runs WHERE machine = %s AND due_at <= UTC_TIMESTAMP(6) ORDER BY due_at, id LIMIT 5",
            (process.name,),
        )
    assert row["key"] == "fsm_runs_claim" and "filesort" not in (row["Extra"] or "")


def test_save_after_step_off_commits_consecutive_steps_together(dsn: str) -> None:
    commits = {}
    for save in (True, False):
        name = unique("batch")
        process = Process.linear(name, ["a", "b", "c"], machine_options={"save_after_step": save})
        for state in ("a", "b", "c"):
            process.register(state, lambda ctx: ctx.next(), name=f"step_{state}")
        with Store(dsn, pool_size=1) as one:  # one connection: its session counters are ours
            one.define(process.machine)

            def committed(conn: Any) -> int:  # COMMITs run by this session, in procedures too
                with conn.cursor() as cur:
                    cur.execute("SHOW SESSION STATUS LIKE 'Com_commit'")
                    return int(cur.fetchone()[1])

            one.create(name, "k")
            before = one.gateway.primary.on_connection(committed)
            result = process.run(one, "k")
            commits[save] = one.gateway.primary.on_connection(committed) - before
            assert (result.state, result.steps) == ("done", 3)
            history = one.history(name, "k")
            assert [(h.handler, h.from_state, h.to_state) for h in history[1:]] == [
                ("step_a", "a", "b"),
                ("step_b", "b", "c"),
                ("step_c", "c", "done"),
            ]  # every step recorded
    assert commits == {True: 1 + 3, False: 1 + 1}  # the claim, then one commit per step / one for all


def test_the_engine_takes_the_instances_locks(store: Store) -> None:
    name = unique("locked")
    process = Process.linear(name, ["a", "b"], machine_options={"uses_global_lock": True})
    process.register("a", lambda ctx: ctx.next(), name="a")
    process.register("b", lambda ctx: ctx.next(), name="b")
    store.define(process.machine)
    account = unique("acct")
    store.create(name, "l-1", lookup_key=account)
    store.create(name, "l-2", lookup_key=account)
    with store.lock(name, "l-2"):  # someone else runs this account now
        busy = process.run(store, "l-1")
        assert (busy.state, busy.status, busy.steps) == ("a", "running", 0) and "held by" in (busy.error or "")
        info = store.run_info(name, "l-1")
        assert info is not None and info.claimed_by is None and info.due_at is not None  # queued again
    done = process.run(store, "l-1")  # the engine holds the lock, so the trigger lets its steps through
    assert (done.state, done.status, done.steps) == ("done", "completed", 2)
    assert store.locks(lookup_key=account) == []


def test_procedures_refuse_an_open_transaction_and_leave_it_alone(store: Store, dsn: str) -> None:
    from pyfsm.db import parse_dsn

    process = checkout(unique("opentx"), machine_options={"uses_local_lock": True})
    store.define(process.machine)
    store.create(process.name, "t-1", lookup_key="acct")
    conn = pymysql.connect(**{**parse_dsn(dsn).connect_kwargs(), "autocommit": False})
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE TEMPORARY TABLE mine (x INT)")
            cur.execute("INSERT INTO mine VALUES (1)")  # the caller's open transaction
            for sql in (
                "CALL fsm_pause_v1(%s, 't-1')",
                "CALL fsm_enqueue_v1(%s, 't-1', NULL, NULL)",
                "CALL fsm_claim_v1(%s, 'o:1', 1, 60, 't-1')",
                "CALL fsm_lock_v2(%s, 't-1', 'o:1', 30)",
            ):
                with pytest.raises(pymysql.err.OperationalError) as caught:
                    cur.execute(sql, (process.name,))
                assert caught.value.args[0] == 31016, sql
            cur.execute("SELECT COUNT(*) FROM mine")
            assert cur.fetchone() == (1,)  # still there: nothing rolled it back
        conn.rollback()
    finally:
        conn.close()
    assert store.get(process.name, "t-1").status == "running" and store.locks(lookup_key="acct") == []


def test_review_regressions_pause_in_batch_mode_step_id_and_leftover_event(store: Store, raw) -> None:  # type: ignore[no-untyped-def]
    """A pause reaches a batch (save_after_step off) at the next step; ctx.step_id is stable
    across a retry and a pause; a leftover @fsm_event never turns a pause into a transition."""
    name = unique("batchpause")
    process = Process.linear(name, ["a", "b", "c", "d"], machine_options={"save_after_step": False}, backoff=0.0)
    ids: list[tuple[str, int, str]] = []

    def step(ctx: Context) -> Outcome:
        ids.append((ctx.state, ctx.attempt, ctx.step_id))
        if ctx.state == "a":
            store.pause(name, ctx.key)  # requested while a runs: b must not run
        if ctx.state == "c" and ctx.attempt == 1:
            raise TimeoutError("once")
        return ctx.next()

    for state in ("a", "b", "c", "d"):
        process.register(state, step, name=f"h_{state}")
    store.define(process.machine)
    first = process.start(store, "bp-1")
    assert (first.state, first.status, [s for s, _a, _i in ids]) == ("b", "paused", ["a"])
    raw.cursor().execute("SET @fsm_event = 'next'")  # left behind by some failed raw UPDATE
    store.resume(name, "bp-1")
    assert store.get(name, "bp-1").state == "b"  # resume did not move it
    raw.cursor().execute(f"CALL fsm_pause_v1('{name}', 'bp-1')")  # nor does a pause through that session
    assert store.get(name, "bp-1").state == "b"
    raw.cursor().execute("SET @fsm_event = NULL")
    store.resume(name, "bp-1")
    drain(store, process)
    assert store.get(name, "bp-1").state == "done"
    by_state: dict[str, set[str]] = {}
    for state, _attempt, step_id in ids:
        by_state.setdefault(state, set()).add(step_id)
    assert len(by_state["c"]) == 1 and [a for s, a, _i in ids if s == "c"] == [1, 2]  # same id on the retry
    assert len({next(iter(v)) for v in by_state.values()}) == 4  # and a different one for every step


def test_a_poisoned_run_fails_once_instead_of_looping(store: Store) -> None:
    name = unique("poison")
    process = Process.linear(name, ["a", "b"], machine_options={"uses_global_lock": True})
    process.register("a", lambda ctx: ctx.next(), name="a")
    store.define(process.machine)
    store.create(name, "no-account")  # uses the global lock, but has no lookup_key to lock
    store.enqueue(name, "no-account")
    stats = drain(store, process)
    assert stats.runs == 1
    instance = store.get(name, "no-account")
    assert instance.status == "failed"
    [error] = store.errors(name, "no-account")
    assert error.error_type == "pyfsm.errors.InvalidArgument" and "lookup_key" in error.message


def test_claims_that_ran_out_count_as_attempts(store: Store, raw) -> None:  # type: ignore[no-untyped-def]
    import time

    name = unique("abandoned")
    process = Process.linear(name, ["a", "b"], max_attempts=2)
    process.register("a", lambda ctx: ctx.next(), name="a")
    store.define(process.machine)
    store.create(name, "x")
    store.enqueue(name, "x")
    for dead in ("dead:1", "dead:2"):  # two workers claim it and die before finishing
        assert fetch(raw, "CALL fsm_claim_v1(%s, %s, 1, 0.1, NULL)", (name, dead))
        time.sleep(0.2)
    assert store.run_info(name, "x").attempt == 1  # type: ignore[union-attr]
    drain(store, process)  # the third claim: attempt 2 of 2 already used up
    assert store.get(name, "x").status == "failed"
    [error] = store.errors(name, "x")
    assert error.error_type == "pyfsm.StepAbandoned" and error.attempt == 2


def test_release_claims_gives_back_only_the_owners_unkept_claims(store: Store, raw) -> None:  # type: ignore[no-untyped-def]
    """fsm_release_claims_v1, what a worker calls after a claim whose reply was lost: the
    owner's claims are due again at once with their attempt unchanged, except those it keeps;
    another owner's claims stay."""
    name = unique("release")
    process = Process.linear(name, ["a", "b"])
    store.define(process.machine)
    for key in ("k1", "k2", "k3"):
        store.create(name, key)
        store.enqueue(name, key)
    mine = fetch(raw, "CALL fsm_claim_v1(%s, 'w:me', 2, 60, NULL)", (name,))
    other = fetch(raw, "CALL fsm_claim_v1(%s, 'w:other', 5, 60, NULL)", (name,))
    assert len(mine) == 2 and len(other) == 1
    keep = str(mine[0]["id"])
    assert fetch(raw, "CALL fsm_release_claims_v1('w:me', %s, %s)", (name, keep)) == [{"released": 1}]
    runs = {
        r["instance_id"]: r
        for r in fetch(
            raw,
            "SELECT instance_id, claimed_by, attempt, "
            "due_at <= UTC_TIMESTAMP(6) AS due FROM fsm_runs "
            "WHERE machine = %s",
            (name,),
        )
    }
    assert runs[mine[0]["id"]]["claimed_by"] == "w:me" and not runs[mine[0]["id"]]["due"]
    assert (runs[mine[1]["id"]]["claimed_by"], runs[mine[1]["id"]]["attempt"], runs[mine[1]["id"]]["due"]) == (
        None,
        0,
        1,
    )
    assert runs[other[0]["id"]]["claimed_by"] == "w:other"
    assert fetch(raw, "CALL fsm_release_claims_v1('w:me', %s, %s)", (name, keep)) == [{"released": 0}]  # repeatable
    [again] = fetch(raw, "CALL fsm_claim_v1(%s, 'w:next', 5, 60, NULL)", (name,))
    assert again["id"] == mine[1]["id"] and again["attempt"] == 0  # given back: no attempt counted


def test_second_review_regressions_hand_back_and_commit_time_failures(store: Store) -> None:
    """A step whose commit meets a conflict hands the run back without writing the handler's
    data (locked instances too, leaving no claim behind); a step the database refuses at
    commit time is recorded and fails instead of hanging."""
    for locked in (False, True):
        name = unique("conflict")
        process = Process.linear(name, ["a", "b"], machine_options={"uses_global_lock": locked})
        account = unique("acct")

        def a(ctx: Context) -> Outcome:
            ctx.data["mine"] = ctx.attempt
            if ctx.attempt == 1 and not ctx.data.get("external"):
                store.set_locking(ctx.machine, ctx.key, local_lock=True)  # someone else changes it meanwhile
            return ctx.next()

        process.register("a", a, name="a")
        process.register("b", lambda ctx: ctx.next(), name="b")
        store.define(process.machine)
        store.create(name, "c-1", lookup_key=account, data={"external": False})
        first = process.run(store, "c-1")
        assert (first.state, first.status, first.steps) == ("a", "running", 0), locked
        assert store.get(name, "c-1").data == {"external": False}  # the handler's "mine" was not written
        info = store.run_info(name, "c-1")
        assert info is not None and info.claimed_by is None and info.due_at is not None  # handed back
        drain(store, process)
        assert store.get(name, "c-1").state == "done"

    older = unique("versions")
    v1 = Machine(name=older, states=["a", "b"], start=["a"], final=["b"], transitions=[("go", "a", "b")])
    v2 = Machine(
        name=older, states=["a", "b"], start=["a"], final=["b"], transitions=[("go", "a", "b"), ("jump", "a", "b")]
    )
    store.define(v1)
    store.create(older, "old-1")  # created under version 1, which has no "jump"
    store.define(v2)
    process = Process(v2)
    process.register("a", lambda ctx: ctx.fire("jump"), name="jumper")
    result = process.run(store, "old-1")
    assert (result.state, result.status) == ("a", "failed")
    [error] = store.errors(older, "old-1")
    assert error.error_type == "pyfsm.errors.TransitionNotAllowed" and error.outcome == "failed"
    assert store.run_info(older, "old-1") is None


def test_ctx_fail_is_logged_as_a_deliberate_failure_not_a_retry(store: Store, caplog: pytest.LogCaptureFixture) -> None:
    """ctx.fail(reason) fails the instance at once: the log says so with the handler's
    reason, and never suggests attempts that will not happen or names a private class."""
    process = Process.linear(unique("declined"), ["charge", "ship"], max_attempts=3)
    process.register("charge", lambda ctx: ctx.fail("card declined"), name="charge_card")
    store.define(process.machine)
    with caplog.at_level("WARNING", logger="pyfsm.engine"):
        result = process.start(store, "d-1")
    assert (result.state, result.status, result.error) == ("charge", "failed", "failed by its handler: card declined")
    [record] = [r for r in caplog.records if r.name == "pyfsm.engine"]
    assert record.getMessage() == (
        f"pyfsm: {process.name} d-1: handler charge_card failed the instance on purpose "
        "(ctx.fail; not retried): card declined -> failed"
    )
    assert "attempt" not in record.getMessage() and "HandlerFailed" not in caplog.text
    [error] = store.errors(process.name, "d-1")
    assert (error.attempt, error.outcome, error.message) == (1, "failed", "card declined")
