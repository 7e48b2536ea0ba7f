"""Connection faults between pyfsm and the server: a TCP proxy (tests/helpers/fault_proxy.py) drops,
resets, stalls and refuses connections on command, also in the middle of a given call.

Under transitions, handler runs, lock renewals and relay batches the caller must see
success or a pyfsm error (never a raw driver error, never a hang), nothing may be applied
half or twice, dead pooled connections must be replaced without help, and afterwards the
invariants hold (:func:`check_invariants`): one most_recent row per instance, strictly
increasing sort_key, only allowed transitions, the instance equal to its last history row,
counters equal to the instances, one outbox row per history row of a type with a topic,
and history equal to the calls that were acknowledged (a call whose connection died after
the request was sent may or may not be there, but never twice).

Nothing is mocked: the proxy forwards to the real server, the relay publishes to tansu.
Several processes go through the same proxy where concurrency matters (senders, workers).
"""

from __future__ import annotations

import dataclasses
import logging
import multiprocessing
import queue
import random
import threading
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pymysql
import pytest
from helpers.common import unique
from helpers.fault_checks import Call, check_invariants, direct
from helpers.fault_proxy import DIRECTIONS, Fault, FaultProxy, proxy_fixture  # noqa: F401  (the proxy fixture)
from helpers.kafka_broker import Broker

import pyfsm
from pyfsm import (
    DatabaseUnavailable,
    FsmError,
    LockLost,
    LockNotAcquired,
    Machine,
    Process,
    Relay,
    Store,
    Worker,
)
from pyfsm.db import Settings, parse_dsn
from pyfsm.schema import routines

SPAWN = multiprocessing.get_context("spawn")
#: the errors a send may end with under connection faults (docs/errors.md)
SEND_ERRORS = {"DatabaseUnavailable", "TransitionNotAllowed", "Deadlock"}
QUERY_MOMENTS = ("before_request", "mid_request", "after_request", "before_reply")


# -- machines and processes ---------------------------------------------------------------


def ring(name: str | None = None, **options: Any) -> Machine:
    """a -> b -> c -> a with "next", and "reset" back to a from b or c (not allowed from a)."""
    return Machine(
        name=name or unique("fault"),
        states=["a", "b", "c"],
        start=["a"],
        transitions=[("next", "a", "b"), ("next", "b", "c"), ("next", "c", "a"), ("reset", ["b", "c"], "a")],
        **options,
    )


def step(ctx: pyfsm.Context) -> pyfsm.Outcome:
    """A handler that takes a moment (so that faults land during runs) and leaves a trail."""
    time.sleep(0.01)
    ctx.data.setdefault("trail", []).append(ctx.state)
    return ctx.next()


def fault_checkout(name: str) -> Process:
    """A linear reserve -> charge -> ship -> done process (as engine_fixtures.checkout) with
    short claims, so that a claim a fault left behind runs out quickly. max_attempts 10: a
    lost claim counts as an attempt (see test_lost_claim_replies_do_not_fail_an_instance),
    which random faults must not turn into a failed instance here."""
    process = Process.linear(
        name, ["reserve", "charge", "ship"], claim_seconds=1.5, backoff=0.01, max_backoff=0.2, max_attempts=10
    )
    for state in ("reserve", "charge", "ship"):
        process.register(state, step, name=state)
    return process


# -- the invariants (checked by tests/helpers/fault_checks.py) -----------------------------


def query(settings: Settings, sql: str, args: Any = None) -> list[dict[str, Any]]:
    conn = direct(settings)
    try:
        with conn.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())
    finally:
        conn.close()


# -- calls and faults ---------------------------------------------------------------------


def send_call(store: Store, machine: str, key: str, event: str, caller: str, seq: int, *, request_id: bool) -> Call:
    """One send, classified. Calls with a request id go through pyfsm.retry (safe to repeat)."""
    call_id = f"{caller}-{seq}"
    rid = call_id if request_id else None
    tries = 0

    def send() -> pyfsm.TransitionResult:
        nonlocal tries
        tries += 1
        return store.send(machine, key, event, metadata={"call": call_id}, request_id=rid)

    call = Call(caller, seq, key, event, call_id, rid, "ok")
    try:
        if rid is None:
            result = send()
        else:
            result = pyfsm.retry(send, attempts=8, base_delay=0.05, max_delay=0.5, retry_unavailable=True)
        call.replayed = result.replayed
    except DatabaseUnavailable as exc:
        call.outcome, call.error = "unknown", f"DatabaseUnavailable({exc.errno}, retryable={exc.retryable})"
    except FsmError as exc:
        call.outcome, call.error = "failed", type(exc).__name__
    except Exception as exc:  # a finding: not a pyfsm error
        call.outcome, call.error = "raw", f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
    call.attempts = tries
    return call


def chaos(
    proxy: FaultProxy,
    seconds: float,
    seed: int,
    matches: list[str | None],
    enough: Callable[[], bool] = lambda: True,
    at_most: float = 10.0,
) -> Counter[str]:
    """Faults at random moments for ``seconds`` (and on until ``enough()``, ``at_most`` s in
    all: a loaded machine gets the same amount of work done under faults): drops, resets,
    cuts of a query at a random moment of it, cuts after a random number of bytes, short
    refusals. Then heal."""
    rng = random.Random(seed)
    done: Counter[str] = Counter()
    pending_query: Fault | None = None
    pending_bytes: Fault | None = None
    started = time.monotonic()
    try:
        while True:
            elapsed = time.monotonic() - started
            if elapsed >= at_most or (elapsed >= seconds and enough()):
                break
            time.sleep(rng.uniform(0.03, 0.12))
            kind = rng.choice(["drop_all", "reset_all", "query", "query", "query", "bytes", "refuse"])
            if kind == "drop_all":
                proxy.drop_all()
            elif kind == "reset_all":
                proxy.reset_all()
            elif kind == "query":
                if pending_query is not None and not pending_query.fired.is_set():
                    continue
                when = rng.choice(QUERY_MOMENTS)
                pending_query = proxy.drop_on_next_query(rng.choice(matches), when=when, reset=rng.random() < 0.3)
                kind = f"query:{when}"
            elif kind == "bytes":
                if pending_bytes is not None and not pending_bytes.fired.is_set():
                    continue
                pending_bytes = proxy.drop_after(rng.randint(0, 600), rng.choice(DIRECTIONS))
            else:
                proxy.refuse(True)
                time.sleep(rng.uniform(0.05, 0.3))
                proxy.refuse(False)
            done[kind] += 1
    finally:
        proxy.heal()
    return done


def collect(out: Any, n: int, what: str, timeout: float = 30.0) -> dict[str, Any]:
    """``n`` messages ("kind", caller, payload) of kind ``what`` from the children."""
    got: dict[str, Any] = {}
    deadline = time.monotonic() + timeout
    while len(got) < n:
        try:
            kind, caller, payload = out.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"only {len(got)} of {n} children said {what!r} within {timeout} s") from None
        if isinstance(payload, dict) and payload.get("crash"):
            raise AssertionError(f"child {caller} crashed:\n{payload['crash']}")
        assert kind == what, (kind, caller, payload)
        got[caller] = payload
    return got


def wait_for(check: Callable[[], Any], what: str, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.05)


@contextmanager
def in_thread(fn: Callable[[], Any]) -> Iterator[dict[str, Any]]:
    """Run ``fn`` in a daemon thread; the dict gets "result" or "error" and "seconds"."""
    box: dict[str, Any] = {}

    def run() -> None:
        started = time.monotonic()
        try:
            box["result"] = fn()
        except BaseException as exc:
            box["error"] = exc
        box["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    box["thread"] = thread
    yield box


@pytest.fixture(scope="module")
def settings(dsn: str) -> Settings:
    return parse_dsn(dsn)


@pytest.fixture(scope="module")
def ring_machine(store: Store) -> Machine:
    """One ring machine for the module (DDL is slow); each test uses keys of its own."""
    machine = ring()
    store.define(machine)
    return machine


# -- the proxy itself ----------------------------------------------------------------------


def test_the_proxy_faults_do_what_they_say(settings: Settings, proxy: FaultProxy) -> None:
    """Raw PyMySQL through the proxy: each fault cuts, holds or refuses as documented."""

    def connect() -> pymysql.connections.Connection:
        return pymysql.connect(**{**proxy.settings(settings).connect_kwargs(), "read_timeout": 5})

    def one(conn: pymysql.connections.Connection, sql: str) -> Any:
        with conn.cursor() as cur:
            cur.execute(sql)
            return cur.fetchone()[0]

    conn = connect()
    assert one(conn, "SELECT 1") == 1 and proxy.live == 1 and proxy.accepted == 1
    for direction in DIRECTIONS:
        fault = proxy.drop_after(3, direction)
        with pytest.raises(pymysql.err.OperationalError):
            one(conn, "SELECT 2")
        assert fault.wait(2) and proxy.live == 0
        conn = connect()
    watch = proxy.watch_query("SELECT 3")
    assert one(conn, "SELECT 3") == 3 and watch.wait(2) and watch.query == "SELECT 3"
    held = proxy.drop_on_next_query("SELECT SLEEP(0)", when="stall_reply")
    with in_thread(lambda: one(conn, "SELECT SLEEP(0), 4")) as box:
        assert held.wait(2)
        box["thread"].join(0.5)
        assert box["thread"].is_alive()  # the reply is held back
        proxy.unstall()
        box["thread"].join(5)
    assert box.get("result") == 0
    proxy.refuse(True, count=2)
    for _ in range(2):
        with pytest.raises(pymysql.err.OperationalError):
            connect()
    other = connect()
    assert one(other, "SELECT 5") == 5 and proxy.refused == 2
    assert proxy.drop_all() == 2 and proxy.live == 0
    for dropped in (conn, other):
        with pytest.raises(pymysql.err.OperationalError):
            one(dropped, "SELECT 6")
    assert proxy.dropped == 4 and proxy.queries >= 5


# -- transitions: the "did the commit happen?" cases, one at a time -----------------------------


def test_cut_before_the_reply_the_caller_gets_database_unavailable_and_the_commit_happened(  # type: ignore[no-untyped-def]
    store: Store, settings: Settings, ring_machine: Machine, proxy: FaultProxy
) -> None:
    name = ring_machine.name
    key = unique("k")
    store.create(name, key)
    with Store(proxy.dsn(settings), pool_size=1) as through:
        through.get(name, key)
        fault = proxy.drop_on_next_query(routines.SEND.name_for(name), when="before_reply")
        with pytest.raises(DatabaseUnavailable) as info:
            through.send(name, key, "next", metadata={"call": "t-1"})  # no request id: never re-run
        assert fault.wait(5) and info.value.retryable and info.value.errno == 2013
        # the server committed before its reply was cut: applied once, never half
        history = store.history(name, key)
        assert [(h.event, h.metadata) for h in history] == [(None, {}), ("next", {"call": "t-1"})]
        accepted = proxy.accepted
        # the dead pooled connection is replaced, no reset by hand
        assert through.send(name, key, "next", metadata={"call": "t-2"}).to_state == "c"
        assert proxy.accepted == accepted + 1
    check_invariants(
        settings,
        name,
        [Call("t", 1, key, "next", "t-1", None, "unknown"), Call("t", 2, key, "next", "t-2", None, "ok")],
        keys={key},
    )


@pytest.mark.parametrize(
    ("when", "reset"),
    [
        ("before_request", False),
        ("mid_request", False),
        ("after_request", True),
        ("before_reply", False),
        ("before_reply", True),
    ],
)
def test_cut_mid_call_with_a_request_id_is_retried_and_applied_once(  # type: ignore[no-untyped-def]
    store: Store, settings: Settings, ring_machine: Machine, proxy: FaultProxy, when: str, reset: bool
) -> None:
    name = ring_machine.name
    key = unique("k")
    store.create(name, key)
    with Store(proxy.dsn(settings), pool_size=1) as through:
        through.get(name, key)
        fault = proxy.drop_on_next_query(routines.SEND.name_for(name), when=when, reset=reset)
        result = through.send(name, key, "next", metadata={"call": "r-1"}, request_id=f"{key}-r-1")
        assert fault.wait(5)
        assert result.to_state == "b" and result.version == 2
        if when in ("before_request", "mid_request"):
            assert not result.replayed  # the first try never ran: the retry applied it
        elif when == "before_reply":
            assert result.replayed  # the first try committed: the retry returned it
        assert proxy.accepted == 2  # one new connection replaced the cut one
    history = check_invariants(settings, name, [Call("r", 1, key, "next", "r-1", f"{key}-r-1", "ok")], keys={key})[key]
    assert [h["request_id"] for h in history] == [None, f"{key}-r-1"]


@pytest.mark.parametrize("when", ["before_request", "mid_request"])
def test_write_without_request_id_cut_before_it_ran_fails_and_applies_nothing(  # type: ignore[no-untyped-def]
    store: Store, settings: Settings, ring_machine: Machine, proxy: FaultProxy, when: str
) -> None:
    """pyfsm cannot tell this from a cut after the commit, so it does not retry: the caller
    gets DatabaseUnavailable (retryable) and, here, nothing was applied."""
    name = ring_machine.name
    key = unique("k")
    store.create(name, key)
    with Store(proxy.dsn(settings), pool_size=1) as through:
        through.get(name, key)
        proxy.drop_on_next_query(routines.FIRE.name_for(name), when=when)  # key and event alone: fire_v2
        with pytest.raises(DatabaseUnavailable):
            through.send(name, key, "next")
        assert [h.event for h in store.history(name, key)] == [None]
        assert through.send(name, key, "next").to_state == "b"
    check_invariants(settings, name, keys={key})


def test_idle_pooled_connections_dropped_are_replaced(  # type: ignore[no-untyped-def]
    store: Store, settings: Settings, ring_machine: Machine, proxy: FaultProxy
) -> None:
    """Every pooled connection is cut while idle. Reads recover on their own; a write without
    request id on a connection the client still believes open fails (its request was sent);
    the pool replaces every dead connection without help."""
    name = ring_machine.name
    key = unique("k")
    store.create(name, key)
    with Store(proxy.dsn(settings), pool_size=3) as through:
        with (
            through.gateway.primary.connection(),
            through.gateway.primary.connection(),
            through.gateway.primary.connection(),
        ):
            pass  # three live pooled connections
        assert proxy.live == 3
        calls: list[Call] = []
        for fault in (proxy.drop_all, proxy.reset_all):
            assert fault() == 3
            assert through.get(name, key).key == key  # a read: retried on a new connection
            sent = [send_call(through, name, key, "next", fault.__name__, i, request_id=False) for i in range(4)]
            assert {c.outcome for c in sent} <= {"ok", "unknown"}, sent
            assert sent[-1].outcome == "ok"
            calls += sent
            check_invariants(settings, name, calls, keys={key})
            with (
                through.gateway.primary.connection(),
                through.gateway.primary.connection(),
                through.gateway.primary.connection(),
            ):
                pass
            assert proxy.live == 3


def test_retry_helper_recovers_from_an_outage(  # type: ignore[no-untyped-def]
    store: Store, settings: Settings, ring_machine: Machine, proxy: FaultProxy
) -> None:
    """Every connection dropped and new ones refused: a call gives up within its bound
    (about a second of retries) with DatabaseUnavailable, and nothing was applied; then
    pyfsm.retry with a request id outlasts a refusal longer than one call's own retries
    (8 connections: one call tries 5) and applies the call once."""
    name = ring_machine.name
    key = unique("k")
    store.create(name, key)
    with Store(proxy.dsn(settings), pool_size=2) as through:
        through.get(name, key)
        proxy.drop_all()
        proxy.refuse(True)
        try:
            started = time.monotonic()
            with pytest.raises(DatabaseUnavailable) as info:
                through.send(name, key, "next", request_id=f"{key}-x", metadata={"call": "x"})
            assert time.monotonic() - started < 3.0
            assert info.value.retryable
            refused = proxy.refused
            assert refused >= 4
            proxy.refuse(True, count=8)
            call = send_call(through, name, key, "next", "y", 1, request_id=True)
        finally:
            proxy.refuse(False)
        assert call.outcome == "ok" and call.attempts >= 2, call
        assert proxy.refused == refused + 8
    check_invariants(settings, name, [Call("x", 0, key, "next", "x", f"{key}-x", "failed"), call], keys={key})


def test_an_unreachable_server_after_a_drop_is_reported_clearly(  # type: ignore[no-untyped-def]
    store: Store, settings: Settings, ring_machine: Machine, proxy: FaultProxy
) -> None:
    """A pooled connection died and new ones are refused: the caller gets DatabaseUnavailable
    naming the server, with a real error number."""
    name = ring_machine.name
    key = unique("k")
    store.create(name, key)
    with Store(proxy.dsn(settings), pool_size=1) as through:
        through.get(name, key)
        proxy.drop_all()
        proxy.refuse(True)
        try:
            with pytest.raises(DatabaseUnavailable) as info:
                through.get(name, key)
        finally:
            proxy.refuse(False)
    # found by this test: it used to be errno 0 with an empty message (DBUtils swallows the
    # failed reconnect and hands back the closed connection); fixed in 6e82066
    assert info.value.retryable and info.value.errno != 0, info.value.errno
    assert f"127.0.0.1:{proxy.port}" in str(info.value), str(info.value)


# -- transitions: random faults, several processes ---------------------------------------


def sender_main(
    dsn: str, machine: str, keys: list[str], caller: str, seed: int, go: Any, stop: Any, out: Any, progress: Any
) -> None:
    """Send random events to shared keys until told to stop, then a few after the faults ended."""
    rng = random.Random(seed)
    logging.disable(logging.WARNING)
    try:
        store = Store(dsn, pool_size=2)
        store.gateway.ensure_schema()  # the schema check and a first connection before the start
        out.put(("ready", caller, None))
        go.wait(60)
        calls: list[Call] = []
        while not stop.is_set():
            calls.append(
                send_call(
                    store,
                    machine,
                    rng.choice(keys),
                    rng.choice(["next", "next", "reset"]),
                    caller,
                    len(calls),
                    request_id=rng.random() < 0.5,
                )
            )
            with progress.get_lock():
                progress.value += 1
        faulty = len(calls)
        for i in range(10):  # the faults are over: every call must succeed, on replaced connections
            calls.append(
                send_call(store, machine, keys[i % len(keys)], "next", caller, len(calls), request_id=i % 2 == 0)
            )
        store.close()
        out.put(("done", caller, {"calls": [dataclasses.asdict(c) for c in calls], "faulty": faulty}))
    except BaseException:
        out.put(("done", caller, {"crash": traceback.format_exc()}))


def test_three_processes_sending_through_random_faults_keep_the_invariants(  # type: ignore[no-untyped-def]
    store: Store, settings: Settings, ring_machine: Machine, proxy: FaultProxy
) -> None:
    name = ring_machine.name
    keys = [unique("s") for _ in range(6)]
    out, go, stop, progress = SPAWN.Queue(), SPAWN.Event(), SPAWN.Event(), SPAWN.Value("i", 0)
    procs = [
        SPAWN.Process(
            target=sender_main,
            args=(proxy.dsn(settings), name, keys, f"p{n}", 100 + n, go, stop, out, progress),
            daemon=True,
        )
        for n in range(3)
    ]
    for p in procs:
        p.start()
    try:
        for key in keys:  # while the children start
            store.create(name, key)
        collect(out, len(procs), "ready")
        go.set()
        send = routines.SEND.name_for(name)
        faults = chaos(proxy, 2.0, seed=7, matches=[None, send, send, "fsm_"], enough=lambda: progress.value >= 200)
        stop.set()
        reports = collect(out, len(procs), "done")
    finally:
        stop.set()
        for p in procs:
            p.join(20)
            if p.is_alive():
                p.kill()
    calls = [Call(**c) for r in reports.values() for c in r["calls"]]
    raw = [c for c in calls if c.outcome == "raw"]
    assert not raw, f"errors that are not pyfsm errors: {raw[:5]}"
    errors = Counter((c.error or "").split("(")[0] for c in calls if c.error)
    assert set(errors) <= SEND_ERRORS, errors
    assert all(c.error is None or "retryable=True" in c.error for c in calls if c.outcome == "unknown")
    rid_unknown = [c for c in calls if c.request_id and c.outcome == "unknown"]
    assert not rid_unknown, f"pyfsm.retry did not recover calls with a request id: {rid_unknown[:5]}"
    for report in reports.values():  # after the faults: no error at all, no reset by hand
        after = [Call(**c) for c in report["calls"][report["faulty"] :]]
        assert all(c.outcome == "ok" for c in after), after
    assert proxy.dropped >= 10, (proxy.dropped, faults)
    check_invariants(settings, name, calls, keys=set(keys))
    outcomes = Counter(c.outcome for c in calls)
    assert sum(r["faulty"] for r in reports.values()) >= 200 and outcomes["ok"] > 100, outcomes
    print(
        f"\n{len(calls)} calls {dict(outcomes)}, errors {dict(errors)}, "
        f"retried with a request id {sum(c.attempts > 1 for c in calls)}, "
        f"replayed {sum(c.replayed for c in calls)}; faults {dict(faults)}; "
        f"connections cut {proxy.dropped}, accepted {proxy.accepted}"
    )


# -- handler runs: workers in two processes ------------------------------------------------


def worker_main(dsn: str, name: str, caller: str, go: Any, stop: Any, out: Any) -> None:
    logging.disable(logging.WARNING)
    try:
        store = Store(dsn, pool_size=2)
        worker = Worker(store, [fault_checkout(name)], idle_min=0.01, idle_max=0.1)
        store.gateway.ensure_schema()  # the schema check and a first connection before the start
        out.put(("ready", caller, None))
        go.wait(60)
        threading.Thread(target=lambda: (stop.wait(), worker.stop()), daemon=True).start()
        stats = worker.run(handle_signals=False)
        store.close()
        out.put(("done", caller, {"runs": stats.runs, "steps": stats.steps, "errors": stats.errors}))
    except BaseException:
        out.put(("done", caller, {"crash": traceback.format_exc()}))


def test_workers_complete_every_instance_through_faults_and_apply_each_step_once(  # type: ignore[no-untyped-def]
    store: Store, settings: Settings, proxy: FaultProxy
) -> None:
    name = unique("fault_run")
    process = fault_checkout(name)
    keys = [f"w{i}" for i in range(30)]
    out, go, stop = SPAWN.Queue(), SPAWN.Event(), SPAWN.Event()
    procs = [
        SPAWN.Process(target=worker_main, args=(proxy.dsn(settings), name, f"w{n}", go, stop, out), daemon=True)
        for n in range(2)
    ]
    for p in procs:
        p.start()

    def completed() -> int:
        return int(
            query(settings, f"SELECT COUNT(*) AS n FROM `fsm_{name}` WHERE status IN ('completed', 'failed')")[0]["n"]
        )

    try:
        store.define(process.machine)  # while the children start
        for key in keys:
            store.create(name, key, data={"items": 1})
            store.enqueue(name, key)
        collect(out, len(procs), "ready")
        go.set()
        faults = chaos(
            proxy,
            2.0,
            seed=11,
            matches=[None, "fsm_step_v1", "fsm_claim_v1", "fsm_renew_claims_v1", "fsm_step_v1"],
            enough=lambda: completed() >= len(keys) // 2,
        )
        wait_for(lambda: completed() == len(keys), "every instance to finish after the faults", 30)
        stop.set()
        reports = collect(out, len(procs), "done")
    finally:
        stop.set()
        for p in procs:
            p.join(20)
            if p.is_alive():
                p.kill()
    histories = check_invariants(settings, name, exact_version=False)
    steps = [(None, None), ("next", "reserve"), ("next", "charge"), ("next", "ship")]
    for key in keys:
        instance = store.get(name, key)
        assert (instance.state, instance.status) == ("done", "completed"), (key, instance, store.errors(name, key))
        assert [(h["event"], h["handler"]) for h in _with_handlers(settings, name, key)] == steps  # each step once
        assert instance.data["trail"] == ["reserve", "charge", "ship"]  # each step's data written once
        assert len(histories[key]) == 4
    assert proxy.dropped >= 5, (proxy.dropped, faults)
    print(f"\nworkers {reports}; faults {dict(faults)}; connections cut {proxy.dropped}")


def _with_handlers(settings: Settings, name: str, key: str) -> list[dict[str, Any]]:
    return query(
        settings,
        f"SELECT t.event, t.handler FROM `fsm_{name}_transitions` t JOIN `fsm_{name}` i "
        "ON i.id = t.instance_id WHERE i.instance_key = %s ORDER BY t.sort_key",
        (key,),
    )


def test_lost_claim_replies_do_not_fail_an_instance(  # type: ignore[no-untyped-def]
    store: Store, settings: Settings, proxy: FaultProxy
) -> None:
    name = unique("fault_claim")
    process = Process.linear(name, ["one", "two"], claim_seconds=0.3, backoff=0.01)
    for state in ("one", "two"):
        process.register(state, step, name=state)
    store.define(process.machine)
    store.create(name, "k")
    store.enqueue(name, "k")
    with Store(proxy.dsn(settings), pool_size=1) as through:
        worker = Worker(through, [process], idle_min=0.01, idle_max=0.05)
        try:
            for _ in range(3):
                fault = proxy.drop_on_next_query("fsm_claim_v1", when="before_reply")
                assert worker.run_once() == 0  # the claim committed; the worker got DatabaseUnavailable
                assert fault.wait(5)
                # ... and gave the claim back at once (fsm_release_claims_v1): due now, no attempt counted
                run = query(
                    settings,
                    "SELECT claimed_by, attempt, due_at <= UTC_TIMESTAMP(6) AS due FROM fsm_runs WHERE machine = %s",
                    (name,),
                )
                assert run == [{"claimed_by": None, "attempt": 0, "due": 1}], run
            assert worker.stats.handed_back == 3
            wait_for(lambda: worker.run_once() or store.get(name, "k").status != "running", "a run", 5)
        finally:
            worker.close()
    instance = store.get(name, "k")
    assert (instance.state, instance.status) == ("done", "completed"), (instance.status, store.errors(name, "k"))


def test_a_lost_reply_to_a_keyed_claim_gives_the_claim_back(  # type: ignore[no-untyped-def]
    store: Store, settings: Settings, proxy: FaultProxy
) -> None:
    """Process.run claims its key under an owner of its own: when that claim's reply is lost,
    the claim is given back before the error reaches the caller, so a repeat (or a worker)
    can run the instance at once and no attempt is counted."""
    name = unique("fault_keyed")
    process = Process.linear(name, ["one", "two"], claim_seconds=60, backoff=0.01)
    for state in ("one", "two"):
        process.register(state, step, name=state)
    store.define(process.machine)
    store.create(name, "k")
    with Store(proxy.dsn(settings), pool_size=1) as through:
        fault = proxy.drop_on_next_query("fsm_claim_v1", when="before_reply")
        with pytest.raises(pyfsm.DatabaseUnavailable):
            process.run(through, "k")
        assert fault.wait(5)
    run = query(settings, "SELECT claimed_by, attempt FROM fsm_runs WHERE machine = %s", (name,))
    assert run == [{"claimed_by": None, "attempt": 0}], run  # committed, then given back
    assert process.run(store, "k").status == "completed"  # not "being run by" a 60 s claim nobody holds


# -- lock renewals ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def locked(store: Store) -> Machine:
    machine = Machine(
        name=unique("fault_lock"),
        states=["idle", "busy"],
        start=["idle"],
        transitions=[("go", "idle", "busy"), ("back", "busy", "idle")],
        uses_global_lock=True,
    )
    store.define(machine)
    return machine


LEASE = 1.5


def take_over(store: Store, machine: str, key: str, timeout: float = 10.0) -> tuple[pyfsm.Lease, int]:
    """A second holder (not through the proxy) tries until it gets the lock: (lease, refusals)."""
    refused = 0
    deadline = time.monotonic() + timeout
    while True:
        try:
            return store.lock(machine, key, attempts=1, lease_seconds=5, heartbeat=False), refused
        except LockNotAcquired:
            refused += 1
            assert time.monotonic() < deadline, "the second holder never got the lock"
            time.sleep(0.05)


def held_since(lease: pyfsm.Lease) -> Any:
    assert lease.expires_at is not None
    return lease.expires_at - timedelta(seconds=lease.lease_seconds)


@pytest.mark.parametrize("fault", ["drop", "stall"])
def test_lease_under_a_fault_never_has_two_holders(  # type: ignore[no-untyped-def]
    store: Store, settings: Settings, locked: Machine, proxy: FaultProxy, fault: str
) -> None:
    """A lease through the proxy renews fine, then its holder is cut off from the server: its
    connection cut and new ones refused (a partition; a cut alone is healed by a new
    connection, see test_lease_survives_a_cut_connection), or every connection stalled. A
    second holder connected directly gets the lock only once the first lease's expiry (as
    its holder knew it) has passed, never before; the first holder cannot move the instance
    afterwards, sees only LockLost, and releasing never raises."""
    name = locked.name
    key = unique("k")
    store.create(name, key, lookup_key=unique("acct"))
    with Store(proxy.dsn(settings), pool_size=1) as through:
        first = through.lock(name, key, lease_seconds=LEASE)
        try:
            acquired = first.expires_at
            wait_for(lambda: first.expires_at > acquired, "a renewal", 3)  # type: ignore[operator]
            assert not first.lost
            if fault == "drop":
                proxy.refuse(True)
                proxy.drop_all()
            else:
                proxy.stall()
            second, refused = take_over(store, name, key)
            assert refused >= 1  # refused while the first lease was still valid
            assert held_since(second) >= first.expires_at, (held_since(second), first.expires_at)
            if fault == "stall":
                proxy.unstall()
                wait_for(lambda: first.lost, "the stalled renewal to report the loss", 3)
            assert first.lost
            with pytest.raises(FsmError) as info:
                first.send("go")
            assert isinstance(info.value, LockLost), repr(info.value)
            assert store.get(name, key).state == "idle"
            assert second.send("go").to_state == "busy"
            assert second.release()
        finally:
            proxy.unstall()
            proxy.refuse(False)
            started = time.monotonic()
            assert first.release() is False  # gave back nothing of its own: never raises
            assert time.monotonic() - started < 5
    assert store.locks(lookup_key=store.get(name, key).lookup_key) == []
    check_invariants(settings, name, keys={key})


def test_lease_renews_fine_through_a_short_stall(  # type: ignore[no-untyped-def]
    store: Store, settings: Settings, locked: Machine, proxy: FaultProxy
) -> None:
    name = locked.name
    key = unique("k")
    store.create(name, key, lookup_key=unique("acct"))
    with Store(proxy.dsn(settings), pool_size=1) as through, through.lock(name, key, lease_seconds=LEASE) as first:
        before = first.expires_at
        proxy.stall(0.3)
        with pytest.raises(LockNotAcquired):
            store.lock(name, key, attempts=3, heartbeat=False)
        wait_for(lambda: first.expires_at > before + timedelta(seconds=0.6), "renewals after the stall", 3)  # type: ignore[operator]
        assert not first.lost
        assert first.send("go").to_state == "busy"
    check_invariants(settings, name, keys={key})


@pytest.mark.parametrize("fault", ["reset", "stall"])
def test_lease_reports_the_loss_once_another_owner_holds_the_lock(  # type: ignore[no-untyped-def]
    store: Store, settings: Settings, locked: Machine, proxy: FaultProxy, fault: str
) -> None:
    """Found here: the heartbeat logged DatabaseUnavailable and retried forever on the dead
    connection (or blocked forever in a read on a stalled one), so lease.lost stayed False
    after the lease expired and another owner took the lock, and lease.send raised
    DatabaseUnavailable (or hung). Now the holder counts its expiry on its own clock: its
    connection reset and new ones refused, or everything stalled, the lease is lost at its
    expiry and lease.send raises LockLost at once."""
    name = locked.name
    key = unique("k")
    store.create(name, key, lookup_key=unique("acct"))
    with Store(proxy.dsn(settings), pool_size=1) as through:
        first = through.lock(name, key, lease_seconds=LEASE)
        try:
            if fault == "reset":
                proxy.refuse(True)
                proxy.reset_all()
            else:
                proxy.stall()
            second, _refused = take_over(store, name, key)
            time.sleep(0.4)  # a heartbeat interval and then some
            lost = first.lost
            with in_thread(lambda: first.send("go")) as sent:
                sent["thread"].join(1)
            second.release()
            assert lost, "lease.lost is False although its lease expired and another owner took the lock"
            assert isinstance(sent.get("error"), LockLost), f"lease.send: {sent}"
            assert sent["seconds"] < 0.2, sent  # at once: not behind a stalled heartbeat
        finally:
            proxy.unstall()
            proxy.refuse(False)
            first.release()


@pytest.mark.parametrize("fault", ["drop", "reset", "refused for a while"])
def test_lease_survives_a_cut_connection(  # type: ignore[no-untyped-def]
    store: Store, settings: Settings, locked: Machine, proxy: FaultProxy, fault: str
) -> None:
    """The lease's connection is cut while the server stays reachable (or new connections are
    refused for less than the lease): the heartbeat renews on a new connection before the
    expiry, then binds the locks to it. The lease is never lost, nobody else gets the lock,
    and sends under the lease go through the new connection."""
    name = locked.name
    key = unique("k")
    store.create(name, key, lookup_key=unique("acct"))
    with Store(proxy.dsn(settings), pool_size=1) as through:
        first = through.lock(name, key, lease_seconds=LEASE)
        try:
            accepted = proxy.accepted
            if fault == "reset":
                proxy.reset_all()
            else:
                if fault != "drop":
                    proxy.refuse(True)
                proxy.drop_all()
                if fault != "drop":
                    time.sleep(LEASE / 4)  # renewals fail meanwhile; the lease holds
                    assert not first.lost
                    proxy.refuse(False)
            deadline = time.monotonic() + 1.3 * LEASE
            while time.monotonic() < deadline:  # past the expiry: only renewals on a new connection keep it
                with pytest.raises(LockNotAcquired):
                    store.lock(name, key, attempts=1, heartbeat=False)
                assert not first.lost
                time.sleep(0.1)
            assert proxy.accepted > accepted  # a new connection
            held = store.locks(lookup_key=store.get(name, key).lookup_key)
            assert [h.owner for h in held] == [first.owner]
            assert first.send("go").to_state == "busy"
            assert not first.lost
        finally:
            proxy.refuse(False)
            released = first.release()
        assert released  # everything given back, on the new connection
    assert store.locks(lookup_key=store.get(name, key).lookup_key) == []
    check_invariants(settings, name, keys={key})


# -- stalls -------------------------------------------------------------------------------


def test_a_call_in_flight_during_a_short_stall_completes(  # type: ignore[no-untyped-def]
    store: Store, settings: Settings, ring_machine: Machine, proxy: FaultProxy
) -> None:
    name = ring_machine.name
    key = unique("k")
    store.create(name, key)
    with Store(proxy.dsn(settings), pool_size=1) as through:
        through.get(name, key)
        proxy.stall(0.8)
        started = time.monotonic()
        assert through.send(name, key, "next", metadata={"call": "s-1"}).to_state == "b"
        assert time.monotonic() - started >= 0.5
    check_invariants(settings, name, [Call("s", 1, key, "next", "s-1", None, "ok")], keys={key})


#: read_timeout of the stores below; a timed-out call is not retried, so it fails after one
STALL_TIMEOUT = 0.5
STALL_BOUND = 1.5


def test_a_stalled_connection_fails_with_a_pyfsm_error_in_bounded_time(  # type: ignore[no-untyped-def]
    store: Store, settings: Settings, ring_machine: Machine, proxy: FaultProxy
) -> None:
    """Found here: no read or write timeout (connect_timeout covers only the TCP connect,
    not the server's greeting), so a call on a stalled connection, or a new connection to a
    server that accepts but does not answer, waited forever. Now both fail after one
    read_timeout (given here as a DSN option and as Store's argument) with
    DatabaseUnavailable 2013, a send's message saying its outcome is unknown; the connection
    that timed out is closed and replaced once the stall ends."""
    name = ring_machine.name
    key = unique("k")
    store.create(name, key)
    dsn = proxy.dsn(settings) + "?connect_timeout=1"
    with (
        Store(f"{dsn}&read_timeout={STALL_TIMEOUT}", pool_size=1) as established,
        Store(dsn, pool_size=1, read_timeout=STALL_TIMEOUT) as connecting,
    ):
        established.get(name, key)
        connecting._schema_ok = True  # its first call must open a connection: the handshake stalls
        proxy.stall()
        try:
            with (
                in_thread(lambda: established.send(name, key, "next")) as sending,
                in_thread(lambda: connecting.get(name, key)) as reading,
            ):
                deadline = time.monotonic() + STALL_BOUND
                for box in (sending, reading):
                    box["thread"].join(max(0.0, deadline - time.monotonic()))
                for what, box in (
                    ("a send on an established connection", sending),
                    ("a read on a new connection", reading),
                ):
                    assert not box["thread"].is_alive(), f"{what} still waits after {STALL_BOUND} s of stall"
                    error = box.get("error")
                    assert isinstance(error, DatabaseUnavailable), f"{what}: {box}"
                    assert error.errno == 2013 and error.retryable and error.fields.get("timed_out"), repr(error)
                    assert box["seconds"] >= STALL_TIMEOUT * 0.9, box
                assert "outcome is unknown" in str(sending["error"]), str(sending["error"])
                assert "did not answer" in str(reading["error"]), str(reading["error"])
                assert f"127.0.0.1:{proxy.port}" in str(reading["error"])
        finally:
            proxy.unstall()
            for box in (sending, reading):
                box["thread"].join(10)
        accepted = proxy.accepted
        assert established.get(name, key).key == key  # the connection that timed out is not reused
        assert connecting.get(name, key).key == key
        assert proxy.accepted == accepted + 2
    check_invariants(settings, name, keys={key})


# -- relay batches ------------------------------------------------------------------------


def unpublished(settings: Settings) -> bool:
    return bool(query(settings, "SELECT 1 FROM fsm_outbox WHERE published_at IS NULL LIMIT 1"))


@contextmanager
def relay_running(relay: Relay) -> Iterator[dict[str, Any]]:
    state: dict[str, Any] = {}

    def run() -> None:
        try:
            relay.run()
        except BaseException as exc:
            state["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        relay.stop()
        thread.join(30)
        assert not thread.is_alive(), "the relay did not stop"
        relay.close()


def test_relay_publishes_every_event_through_database_faults(  # type: ignore[no-untyped-def]
    make_database, kafka: Broker, proxy: FaultProxy
) -> None:
    """The relay's database connection goes through the proxy; the broker is reached directly.
    Random faults hit its batches (the fetch, the published mark, the leader lock), then one
    cut of the published mark with new connections refused long enough that the relay gives
    up on the batch: it publishes those events again (duplicates, with the same id)."""
    settings = make_database("pyfsm_fault_relay")
    with Store(settings.dsn()) as writer:
        writer.migrate()
        topic = unique("t.fault")
        kafka.create_topic(topic, partitions=4)
        machine = ring(topic=topic)
        writer.define(machine)
        name = machine.name
        keys = [f"e{i}" for i in range(20)]
        for key in keys:
            writer.create(name, key)
        stop_writing = threading.Event()

        def write() -> int:
            rng, n = random.Random(3), 0
            while not stop_writing.is_set():
                writer.send(name, rng.choice(keys), "next")
                n += 1
                time.sleep(0.005)
            return n

        relay = Relay(
            proxy.dsn(settings),
            kafka=kafka.bootstrap,
            batch_size=15,
            max_backoff=0.3,
            idle_max=0.05,
            name="fault-relay",
        )
        with relay_running(relay) as state, in_thread(write) as writing:
            faults = chaos(
                proxy, 2.0, seed=5, matches=[None, "`fsm_outbox`", "SET `published_at`", "GET_LOCK", "IS_USED_LOCK"]
            )
            stop_writing.set()
            writing["thread"].join(10)
            assert "error" not in writing, writing
            wait_for(lambda: not unpublished(settings), "every outbox row to be published after the faults", 30)
            # The relay fetches again only once the batch under way is settled: from then on
            # no mark is in flight (a retry of a mark that a random fault cut after it ran would
            # find its rows marked already), and the next mark is a fresh one. Its request is
            # cut before it reaches the server and the relay's own retries (4 new connections)
            # are refused: the batch fails, and the relay publishes those events again.
            assert proxy.watch_query("FROM `fsm_outbox` o WHERE").wait(10), "the relay fetches nothing"
            refused = proxy.refused
            cut = proxy.drop_on_next_query("SET `published_at`", when="before_request", and_refuse=5)
            for key in keys[:5]:
                writer.send(name, key, "next")
            assert cut.wait(10), "the relay marked nothing"
            wait_for(lambda: proxy.refused >= refused + 5, "the refusals", 10)
            wait_for(lambda: not unpublished(settings), "every outbox row to be published", 30)
            assert "error" not in state, f"the relay stopped: {state}"
        stats = relay.stats
    rows = query(settings, "SELECT transition_id, published_at FROM fsm_outbox WHERE machine = %s", (name,))
    assert rows and all(r["published_at"] is not None for r in rows)
    expected = {f"{name}:{r['transition_id']}" for r in rows}
    # at least one more message than events: the duplicates of the lost mark (read until they are in)
    messages = kafka.read(topic, count=len(expected) + 1, timeout=30)
    copies = Counter(m.event["id"] for m in messages)
    assert set(copies) == expected, f"lost: {sorted(expected - set(copies))[:10]}, strangers: {set(copies) - expected}"
    first_copy: dict[str, dict[str, Any]] = {}
    for m in messages:  # a duplicate is the same event: same id, same content
        assert first_copy.setdefault(m.event["id"], m.event) == m.event
    duplicated = sum(n - 1 for n in copies.values())
    assert duplicated >= 1, f"the batch whose mark was lost was not published again: {stats}"
    # per instance, the first copies arrive in sort_key order within their partition
    by_partition: dict[int, list[Any]] = defaultdict(list)
    for m in messages:
        by_partition[m.partition].append(m)
    for part in by_partition.values():
        seen: set[str] = set()
        order: dict[str, list[int]] = defaultdict(list)
        for m in sorted(part, key=lambda m: m.offset):
            if m.event["id"] not in seen:
                seen.add(m.event["id"])
                order[m.event["instance_key"]].append(m.event["sort_key"])
        for key, sort_keys in order.items():
            assert sort_keys == sorted(sort_keys), (key, sort_keys)
    check_invariants(settings, name)
    print(
        f"\n{len(expected)} events, {len(messages)} messages ({duplicated} duplicates), relay {stats.batches} "
        f"batches, {stats.leader_terms} leader terms; faults {dict(faults)}; connections cut {proxy.dropped}"
    )


def test_a_reply_the_driver_cannot_read_is_a_lost_reply(
    proxy: FaultProxy, settings: Settings, store: Store, order: Machine
) -> None:
    """A reply PyMySQL cannot parse (a column packet cut short, as a Galera node sent once
    when its applier aborted a call) is DatabaseUnavailable 2013, a lost reply: the
    connection is closed, a write without request id is not repeated (it did commit), and
    one with a request id is repeated and answers replayed."""
    key, other = unique("g"), unique("g")
    store.create(order, key)
    store.create(order, other)
    with Store(proxy.dsn(settings), pool_size=1) as through:
        through.get(order, key)  # connected and checked before the fault
        fault = proxy.drop_on_next_query(routines.FIRE.suffix, when="garble_reply")  # key and event alone: fire_v2
        with pytest.raises(DatabaseUnavailable) as lost:
            through.send(order, key, "pay")
        assert fault.fired.is_set() and lost.value.errno == 2013 and lost.value.retryable
        assert store.get(order, key).state == "paid"  # the server ran it; only the reply was lost
        proxy.drop_on_next_query(routines.SEND.suffix, when="garble_reply")
        again = through.send(order, other, "pay", request_id=f"{other}-pay")
        assert (again.to_state, again.replayed) == ("paid", True)
        assert store.get(order, other).version == 2
