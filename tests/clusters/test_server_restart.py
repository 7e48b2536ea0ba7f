"""The database server stopped and started, or crashed, while pyfsm works.

These tests run against a MariaDB server of their own (tests/helpers/second_server.py: its own
data directory, made with mariadb-install-db, and its own port), never the shared test
server. They stop it cleanly (SIGTERM) or crash it (SIGKILL) in the middle of the load and
start it again on the same port and data directory, and check what the issue asks: the
outage is reported as DatabaseUnavailable (retryable) quickly, the same Store recovers on
its own when the server is back, and nothing acknowledged is lost or applied twice.

Writers move their instances a -> b -> a ... with a request id per call and repeat a call
that failed with DatabaseUnavailable with the same request id until it is acknowledged, as
an application should: a call whose answer was lost may have committed, and its repeat
then returns the original transition (``replayed``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter

import pymysql
import pytest
from helpers import second_server as servers
from helpers.common import unique
from helpers.engine_fixtures import checkout
from helpers.histories import check_invariants
from helpers.kafka_broker import Broker
from helpers.relay import cycle, partition_order, query, running, unpublished, wait_for
from helpers.second_server import SecondServer

from pyfsm import DatabaseUnavailable, Machine, Relay, Store, TransitionResult, Worker, retry
from pyfsm.db import Settings

restarted = servers.restarted  # fixtures, used by name: the second server, running at the start of each test
second_server = servers.second_server

#: What a lost or refused connection may look like (DatabaseUnavailable.errno): PyMySQL's
#: closed-connection error 0, server shutdown 1053, connection killed 1927, can't connect
#: 2003, gone away 2006, lost during query 2013.
OUTAGE_ERRNOS = {0, 1053, 1927, 2003, 2006, 2013}
#: A call during an outage must fail within this many seconds (pyfsm retries about a second).
FAIL_FAST_SECONDS = 5.0


def dsn(settings: Settings) -> str:
    return settings.dsn() + "?connect_timeout=2"


class Writers:
    """Threads moving their own instances, one call at a time, each with a request id.

    A call that fails with DatabaseUnavailable is repeated with the same request id until
    it is acknowledged; only then does the thread look at ``stop``. Every failure is kept
    with the seconds the call took.
    """

    def __init__(self, store: Store, machine: Machine, *, threads: int = 2, keys: int = 10) -> None:
        self.store, self.machine, self.keys = store, machine, keys
        self.acked: list[tuple[str, TransitionResult]] = []
        self.failures: list[tuple[DatabaseUnavailable, float]] = []
        self.unexpected: list[BaseException] = []
        self.in_doubt: list[str] = []  # request ids given up at the end (none, normally)
        self._mutex = threading.Lock()
        self._stop = threading.Event()
        self._give_up = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(t,), daemon=True) for t in range(threads)]

    def __enter__(self) -> Writers:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.1, deadline - time.monotonic()))
        self._give_up.set()
        for t in self._threads:
            t.join(10)

    def count(self) -> int:
        with self._mutex:
            return len(self.acked)

    def _run(self, thread: int) -> None:
        keys = [f"t{thread}-k{i:02d}" for i in range(self.keys)]
        steps = dict.fromkeys(keys, 0)
        i = 0
        while not self._stop.is_set():
            key = keys[i % len(keys)]
            n = steps[key]
            request_id = f"{key}:{n}"
            while True:
                began = time.monotonic()
                try:
                    if n == 0:
                        result = self.store.create(self.machine, key, request_id=request_id)
                    else:
                        result = self.store.send(self.machine, key, "go" if n % 2 else "back", request_id=request_id)
                    break
                except DatabaseUnavailable as exc:
                    with self._mutex:
                        self.failures.append((exc, time.monotonic() - began))
                    if self._give_up.wait(0.02):
                        with self._mutex:
                            self.in_doubt.append(request_id)
                        return
                except BaseException as exc:
                    with self._mutex:
                        self.unexpected.append(exc)
                    return
            with self._mutex:
                self.acked.append((request_id, result))
            steps[key] += 1
            i += 1


def wait_more(writers: Writers, more: int, what: str, timeout: float = 30.0) -> None:
    target = writers.count() + more
    wait_for(lambda: writers.count() >= target or writers.unexpected, what, timeout=timeout)
    assert writers.unexpected == [], writers.unexpected


def check_acknowledged_once(settings: Settings, machine: Machine, writers: Writers) -> dict[str, int]:
    """Every acknowledged call is in history exactly once, as acknowledged; nothing else is."""
    assert writers.unexpected == [] and writers.in_doubt == []
    histories = check_invariants(settings, machine)
    rows = {r["request_id"]: r for rs in histories.values() for r in rs}
    assert len(rows) == sum(len(rs) for rs in histories.values()), "a request id twice in history"
    acked = dict(writers.acked)
    assert len(acked) == len(writers.acked), "a request id acknowledged twice as a new call"
    assert set(rows) == set(acked), (
        f"in history, not acknowledged: {sorted(set(rows) - set(acked))[:5]}; "
        f"acknowledged, not in history: {sorted(set(acked) - set(rows))[:5]}"
    )
    wrong = [
        rid
        for rid, res in acked.items()
        if (rows[rid]["id"], rows[rid]["sort_key"], rows[rid]["to_state"])
        != (res.transition_id, res.sort_key, res.to_state)
    ]
    assert wrong == [], wrong[:5]
    return {
        "acknowledged": len(acked),
        "replayed": sum(r.replayed for _rid, r in writers.acked),
        "instances": len(histories),
    }


def outage_report(writers: Writers) -> tuple[Counter[int], float]:
    errnos = Counter(exc.errno for exc, _s in writers.failures)
    slowest = max((s for _e, s in writers.failures), default=0.0)
    for exc, _seconds in writers.failures:
        assert isinstance(exc, DatabaseUnavailable) and exc.retryable, exc
    assert set(errnos) <= OUTAGE_ERRNOS, errnos
    assert slowest < FAIL_FAST_SECONDS, f"a call took {slowest:.1f} s to report the outage"
    return errnos, slowest


# -- a clean stop and start -----------------------------------------------------------------


def test_clean_restart_reported_quickly_recovered_by_the_same_store_nothing_lost(  # type: ignore[no-untyped-def]
    restarted,
) -> None:
    server: SecondServer = restarted
    settings = server.database()
    machine = cycle(None)
    with Store(dsn(settings), pool_size=4) as store:
        store.define(machine)
        with Writers(store, machine) as writers:
            wait_more(writers, 200, "writes before the stop")
            stopped = server.stop()
            time.sleep(0.2)  # an answer read just before the stop may still be on its way to the list
            before = writers.count()
            time.sleep(1.8)  # the outage, longer than pyfsm's own retries: calls fail meanwhile
            assert writers.count() == before and len(writers.failures) >= 1
            started = server.start()
            wait_more(writers, 200, "the same Store to write again after the start")
        counts = check_acknowledged_once(settings, machine, writers)
        errnos, slowest = outage_report(writers)
        assert store.get(machine, "t0-k00").state in ("a", "b")  # and it reads, too
    print(
        f"\nclean restart: stop {stopped:.2f} s, start {started:.2f} s; {len(writers.failures)} calls failed "
        f"with DatabaseUnavailable {dict(errnos)}, slowest {slowest:.2f} s; {counts}"
    )


def test_outage_message_names_the_server(restarted) -> None:  # type: ignore[no-untyped-def]
    server: SecondServer = restarted
    settings = server.database()
    machine = cycle(None)
    with Store(dsn(settings), pool_size=1) as store:
        store.define(machine)
        store.create(machine, "m1")
        server.stop()
        try:
            with pytest.raises(DatabaseUnavailable) as info:
                store.send(machine, "m1", "go", request_id="m1:1")
        finally:
            server.start()
    message, errno = str(info.value), info.value.errno
    assert errno in (2003, 2006, 2013) and "127.0.0.1" in message and str(server.port) in message, (
        f"errno {errno}, message {message!r}"
    )


def test_retry_with_a_request_id_gets_through_an_outage_shorter_than_its_budget(  # type: ignore[no-untyped-def]
    restarted,
) -> None:
    server: SecondServer = restarted
    settings = server.database()
    machine = cycle(None)
    with Store(dsn(settings), pool_size=2) as store:
        store.define(machine)
        store.create(machine, "r1")
        server.stop()
        with pytest.raises(DatabaseUnavailable):  # without retry_unavailable a lost connection is not retried
            retry(lambda: store.send(machine, "r1", "go", request_id="r1:1"), attempts=5)
        restarter = threading.Timer(2.0, server.start)
        calls: list[float] = []

        def send() -> TransitionResult:
            calls.append(time.monotonic())
            return store.send(machine, "r1", "go", request_id="r1:1")

        began = time.monotonic()
        restarter.start()
        try:
            result = retry(send, attempts=12, base_delay=0.05, max_delay=0.5, retry_unavailable=True)
        finally:
            restarter.join(60)
        took = time.monotonic() - began
        assert (result.to_state, result.sort_key) == ("b", 2)
        assert len(calls) >= 2, "the outage was seen"
        history = store.history(machine, "r1")
        assert [(h.to_state, h.request_id) for h in history] == [("a", None), ("b", "r1:1")]
        assert store.send(machine, "r1", "go", request_id="r1:1").replayed  # the repeat is the same transition
    print(f"\nretry across a restart: {len(calls)} calls, {took:.2f} s, replayed={result.replayed}")


# -- a crash --------------------------------------------------------------------------------


def test_crash_mid_load_keeps_every_acknowledged_transition_nothing_half_applied(  # type: ignore[no-untyped-def]
    restarted,
) -> None:
    server: SecondServer = restarted
    settings = server.database()
    machine = cycle(unique("t.crash"))  # with a topic: each transition writes an outbox row in its transaction
    with Store(dsn(settings), pool_size=4) as store:
        store.define(machine)
        with Writers(store, machine, threads=4) as writers:
            wait_more(writers, 400, "writes before the crash")
            server.kill()  # SIGKILL of mariadbd: calls are cut off mid-transaction
            with writers._mutex:
                before_crash = list(writers.acked)
            time.sleep(2.0)  # longer than pyfsm's own retries (about a second): the callers see the outage
            assert len(writers.failures) >= 1
            recovered = server.start()  # InnoDB crash recovery from the redo log
            ids = {r["id"] for r in query(settings, f"SELECT id FROM `fsm_{machine.name}_transitions`")}
            lost = [rid for rid, res in before_crash if res.transition_id not in ids]
            assert lost == [], f"acknowledged before the crash, gone after it: {lost[:5]}"
            wait_more(writers, 200, "the same Store to write again after the crash")
        counts = check_acknowledged_once(settings, machine, writers)
        errnos, slowest = outage_report(writers)
    history = query(settings, f"SELECT COUNT(*) AS n FROM `fsm_{machine.name}_transitions`")[0]["n"]
    outbox = query(
        settings,
        f"SELECT COUNT(*) AS n FROM fsm_outbox o JOIN `fsm_{machine.name}_transitions` t "
        f"ON t.id = o.transition_id WHERE o.machine = %s",
        (machine.name,),
    )[0]["n"]
    assert (
        query(settings, "SELECT COUNT(*) AS n FROM fsm_outbox WHERE machine = %s", (machine.name,))[0]["n"]
        == outbox
        == history
    ), "one outbox row per history row, no more, no less"
    print(
        f"\ncrash: {len(before_crash)} acknowledged before the SIGKILL, all there after recovery "
        f"({recovered:.2f} s to start); {len(writers.failures)} calls failed with DatabaseUnavailable "
        f"{dict(errnos)}, slowest {slowest:.2f} s; {counts}; {history} history rows = {outbox} outbox rows"
    )


# -- a worker and a relay across a restart --------------------------------------------------


def test_worker_drains_a_queue_across_a_restart(restarted, caplog) -> None:  # type: ignore[no-untyped-def]
    server: SecondServer = restarted
    settings = server.database()
    name = unique("rs_checkout")
    process = checkout(name, claim_seconds=1.0, max_attempts=20, backoff=0.05, max_backoff=0.2)
    keys = [f"c-{i:03d}" for i in range(300)]
    with Store(dsn(settings), pool_size=4) as store:
        store.define(process.machine)
        conn = pymysql.connect(**settings.connect_kwargs())
        try:
            conn.cursor().execute(
                f"INSERT INTO `fsm_{name}` (instance_key, data) VALUES "
                + ", ".join(["(%s, '{\"items\": 3}')"] * len(keys)),
                keys,
            )
        finally:
            conn.close()
        for key in keys:
            store.enqueue(name, key)
        caplog.set_level(logging.WARNING, logger="pyfsm")
        failed_runs: list[str] = []
        workers = [
            Worker(store, [process], idle_max=0.2, on_run=lambda r: r.error and failed_runs.append(r.error))
            for _ in range(2)
        ]
        threads = [threading.Thread(target=w.run, kwargs={"handle_signals": False}, daemon=True) for w in workers]
        for t in threads:
            t.start()
        try:
            wait_for(lambda: store.counts(name).get("done", 0) >= 50, "some instances done before the stop")
            server.stop()
            time.sleep(2.5)
            server.start()
            back = time.monotonic()
            wait_for(
                lambda: store.counts(name) == {"done": len(keys)}, "every instance done after the restart", timeout=45
            )
            done_after = time.monotonic() - back
        finally:
            for w in workers:
                w.stop()
            for t in threads:
                t.join(30)
        histories = check_invariants(settings, process.machine)
        steps = {k: [r["handler"] for r in rows] for k, rows in histories.items()}
        assert steps == {k: [None, "reserve", "charge", "ship"] for k in keys}, "each step once"
        assert all(store.get(name, k).data["charged"] == 30 for k in keys[::30])
        assert query(settings, "SELECT COUNT(*) AS n FROM fsm_runs WHERE machine = %s", (name,))[0]["n"] == 0
        errors = sum(w.stats.errors for w in workers)
        said = [r.getMessage() for r in caplog.records if r.name.startswith("pyfsm")]
        assert errors + len(failed_runs) + len(said) >= 1, "the workers met the outage"
    print(
        f"\nworkers across a restart: {len(keys)} instances done, each step once; "
        f"{sum(w.stats.steps for w in workers)} steps committed; met the outage: {errors} claim errors, "
        f"{len(failed_runs)} runs handed back {failed_runs[:2]}, {len(said)} log lines, e.g. {said[:3]}; "
        f"all done {done_after:.1f} s after the start"
    )


def test_relay_publishes_everything_across_a_restart(restarted, kafka: Broker, caplog) -> None:  # type: ignore[no-untyped-def]
    server: SecondServer = restarted
    settings = server.database("pyfsm_restart_relay")
    topic = unique("t.restart")
    kafka.create_topic(topic)
    machine = cycle(topic)
    with Store(dsn(settings), pool_size=2) as store:
        store.define(machine)
        caplog.set_level(logging.INFO, logger="pyfsm.relay")
        relay = Relay(dsn(settings), kafka=kafka.bootstrap, max_backoff=0.5, batch_size=50)
        with running(relay), Writers(store, machine, threads=1, keys=20) as writers:
            wait_more(writers, 300, "events before the stop")
            server.stop()
            time.sleep(2.0)
            server.start()
            wait_more(writers, 300, "events after the start")
            writers.stop()
            wait_for(lambda: unpublished(settings) == 0, "the relay to publish everything", timeout=60)
            terms = relay.stats.leader_terms
        check_acknowledged_once(settings, machine, writers)
    history = query(
        settings,
        f"SELECT i.instance_key, t.id FROM `fsm_{machine.name}_transitions` t "
        f"JOIN `fsm_{machine.name}` i ON i.id = t.instance_id",
    )
    messages = kafka.read(topic, count=len(history))
    assert {m.event["id"] for m in messages} == {f"{machine.name}:{h['id']}" for h in history}, "nothing lost"
    per_key = Counter(h["instance_key"] for h in history)
    assert partition_order(messages) == {k: list(range(1, n + 1)) for k, n in per_key.items()}
    assert terms >= 2, "the relay led again after the restart"
    said = [r.getMessage() for r in caplog.records if r.name == "pyfsm.relay" and r.levelno >= logging.WARNING]
    assert said, "the relay said that the database was gone"
    print(
        f"\nrelay across a restart: {len(history)} events, {len(messages) - len(history)} duplicates, "
        f"order kept, {terms} leader terms; it logged {said}"
    )


def test_relay_log_names_the_server_when_it_is_gone(restarted, kafka: Broker, caplog) -> None:  # type: ignore[no-untyped-def]
    server: SecondServer = restarted
    settings = server.database("pyfsm_restart_relaylog")
    caplog.set_level(logging.INFO, logger="pyfsm.relay")
    relay = Relay(dsn(settings), kafka=kafka.bootstrap, max_backoff=0.5)
    with running(relay):
        wait_for(lambda: relay.is_leader, "the relay to lead")
        time.sleep(0.2)  # a few idle polls on the pooled connection
        server.stop()
        try:
            said = wait_for(
                lambda: [
                    r.getMessage()
                    for r in caplog.records
                    if r.name == "pyfsm.relay" and r.getMessage().startswith("database:")
                ],
                "the relay to report the outage",
                timeout=20,
            )
        finally:
            server.start()
    assert all("127.0.0.1" in line and str(server.port) in line for line in said), said


# -- timers across a crash ---------------------------------------------------------------------


def test_timers_armed_before_a_crash_fire_after_it_once(restarted) -> None:  # type: ignore[no-untyped-def]
    """Timers live in InnoDB: armed in the transitions' own transactions, they outlive a crash
    of the server, and those due while nothing ran fire once when a firer starts."""
    server: SecondServer = restarted
    settings = server.database()
    machine = Machine(
        name=unique("t_timers"),
        states=["new", "paid", "gone"],
        start=["new"],
        final=["gone"],
        transitions=[("pay", "new", "paid"), ("cancel", ["new", "paid"], "gone")],
        timeouts={"new": ("1s", "cancel")},
    )
    with Store(dsn(settings)) as store:
        store.define(machine)
        for i in range(20):
            store.create(machine.name, f"k{i}")
        scheduled = [store.send_at(machine.name, f"k{i}", "pay", after=0.5).timer_id for i in range(10, 20)]
    server.kill()  # SIGKILL: no clean shutdown
    time.sleep(1.5)  # every timer comes due while the server is down
    server.start()
    with Store(dsn(settings)) as store:
        assert len(store.timers(machine.name)) == 30
        fired = [o for o in store.fire_timers(limit=1000) if o.machine == machine.name]
        assert [o.outcome for o in fired] == ["fired"] * 20
        assert store.timers(machine.name) == [] and store.fire_timers() == []
        states = [store.get(machine.name, f"k{i}").state for i in range(20)]
    # k10-k19: the scheduled pay (due at 0.5 s) and the timeout (due at 1 s) came due in one
    # call: they fire in the order they fell due, so each pay is sent and its transition
    # disarms the timeout of new, which neither fires nor is dropped (docs/timers.md)
    assert states == ["gone"] * 10 + ["paid"] * 10
    assert {o.timer_id for o in fired if o.kind == "scheduled"} == set(scheduled)
