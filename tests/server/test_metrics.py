"""Prometheus metrics against the real server: the database collector's values equal what the
database holds, through a reporting account too; `pyfsm metrics` printed and served; a
worker's own metrics, in this process and in a `pyfsm worker --metrics-port` process."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pymysql
import pytest
from helpers.common import admin, order_machine
from prometheus_client.parser import text_string_to_metric_families

from pyfsm import InvalidArgument, Machine, Process, Store, Worker
from pyfsm.db import Settings, parse_dsn
from pyfsm.engine.runner import claim
from pyfsm.metrics.server import DatabaseCollector, MetricsServer, WorkerMetrics, database_registry, exposition
from pyfsm.schema.grants import Account, grant

TESTS = Path(__file__).resolve().parents[1]
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(body: bytes) -> Samples:
    """Every sample of an exposition, keyed by (name, labels); it must parse."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(body.decode("utf-8"))
        for s in family.samples
    }


def scrape(registry: Any) -> Samples:
    body, content_type = exposition(registry)
    assert content_type.startswith("text/plain")
    return parse(body)


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


@pytest.fixture
def fresh(make_database) -> Iterator[tuple[Settings, Store]]:  # type: ignore[no-untyped-def]
    """A migrated database of the test's own: outbox and locks count database-wide."""
    settings = make_database("pyfsm_metrics")
    with Store(settings.dsn()) as store:
        store.migrate()
        yield settings, store


def sql(settings: Settings, statement: str, args: Any = None) -> None:
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        conn.cursor().execute(statement, args)
    finally:
        conn.close()


def failing_process(name: str) -> Process:
    """a -> b -> done; the handler of b fails the instance when its data says so."""
    process = Process.linear(name, ["a", "b"])
    process.register("a", lambda ctx: ctx.next())
    process.register("b", lambda ctx: ctx.fail("told to") if ctx.data.get("fail") else ctx.next())
    return process


def test_values_equal_what_the_database_holds(fresh) -> None:  # type: ignore[no-untyped-def]
    settings, store = fresh
    store.define(order_machine("order"))
    store.define(
        Machine(
            name="feed",
            states=["new", "sent"],
            start=["new"],
            final=["sent"],
            transitions=[("send", "new", "sent")],
            topic="feed.events",
            uses_global_lock=True,
            uses_local_lock=True,
        )
    )
    for n in range(7):
        store.create("order", f"o-{n}")
    for n in range(4):
        store.send("order", f"o-{n}", "pay")
    store.send("order", "o-0", "ship")
    store.send("order", "o-6", "cancel")
    process = failing_process("job")
    store.define(process.machine)
    for n in range(5):  # 2 fail, 3 complete; then 3 more wait in the queue: overdue, claimed, due
        store.create("job", f"j-{n}", data={"fail": n < 2})
        store.enqueue("job", f"j-{n}")
    Worker(store, [process], idle_min=0.01, idle_max=0.05).run(handle_signals=False, until_idle=0.3)
    for n in range(5, 9):
        store.create("job", f"j-{n}")
        store.enqueue("job", f"j-{n}")
    sql(
        settings,
        "UPDATE fsm_runs SET due_at = UTC_TIMESTAMP(6) - INTERVAL 2 HOUR "
        "WHERE machine = 'job' AND instance_key = 'j-5'",
    )
    # j-8: claimed by a worker that died; its claim ran out 90 minutes ago
    sql(
        settings,
        "UPDATE fsm_runs SET claimed_by = 'dead-worker:1', due_at = UTC_TIMESTAMP(6) - INTERVAL 90 MINUTE "
        "WHERE machine = 'job' AND instance_key = 'j-8'",
    )
    [claimed] = claim(store, process, "metrics-test:1", key="j-6")
    store.create("feed", "f-1", lookup_key="acct-1")
    store.create("feed", "f-2", lookup_key="acct-2")
    sql(
        settings,
        "UPDATE fsm_outbox SET parked_at = UTC_TIMESTAMP(6), last_error = 'too large', "
        "occurred_at = UTC_TIMESTAMP(6) - INTERVAL 90 SECOND WHERE instance_key = 'f-1'",
    )
    with store.lock("feed", "f-1", heartbeat=False):
        got = scrape(database_registry(store, stuck_after=3600))
    assert claimed["instance_key"] == "j-6"

    assert value(got, "pyfsm_up") == 1 and value(got, "pyfsm_scrape_duration_seconds") > 0
    counts = store.counts("order")
    for state in ("new", "paid", "shipped", "delivered", "cancelled"):
        assert value(got, "pyfsm_instances", machine="order", state=state) == counts.get(state, 0), state
    assert value(got, "pyfsm_instances", machine="job", state="done") == 3
    for row in store.stats():
        for status in ("running", "waiting", "paused", "failed", "completed"):
            assert value(got, "pyfsm_instances_by_status", machine=row.machine, status=status) == getattr(row, status)
    assert value(got, "pyfsm_instances_by_status", machine="job", status="failed") == 2
    conn = pymysql.connect(**settings.connect_kwargs())
    with conn.cursor() as cur:
        for machine in ("order", "job", "feed"):
            cur.execute(f"SELECT MAX(id) FROM fsm_{machine}_transitions")
            assert value(got, "pyfsm_transitions_total", machine=machine) == cur.fetchone()[0], machine
        cur.execute("SELECT COUNT(*) FROM fsm_outbox WHERE published_at IS NULL")
        unpublished = cur.fetchone()[0]
    conn.close()
    assert value(got, "pyfsm_transitions_total", machine="order") >= 13  # 7 creations, 6 events
    # the queue: j-5 overdue for 2 h, j-8's claim ran out 90 min ago, j-7 due now, j-6 claimed
    assert value(got, "pyfsm_queue_due", machine="job") == 3
    assert value(got, "pyfsm_queue_claimed", machine="job") == 1
    assert value(got, "pyfsm_stuck_runs", machine="job") == 2
    # Store.stats() (fsm_stats_v2) counts the queue as the metrics do; the deprecated
    # fsm_stats_v1 counted the claim that ran out as claimed, not due
    [job] = [row for row in store.stats() if row.machine == "job"]
    assert (job.due, job.claimed) == (3, 1)
    conn = pymysql.connect(**settings.connect_kwargs())
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute("CALL fsm_stats_v1()")
        [old] = [row for row in cur.fetchall() if row["machine"] == "job"]
    conn.close()
    assert (old["due"], old["claimed"]) == (2, 2)
    assert 7200 <= value(got, "pyfsm_queue_oldest_due_seconds", machine="job") < 7300
    assert value(got, "pyfsm_queue_due", machine="order") == 0  # the store's own types are in no queue
    assert value(got, "pyfsm_outbox_unpublished") == unpublished == 2
    assert value(got, "pyfsm_outbox_parked") == 1
    assert 90 <= value(got, "pyfsm_outbox_lag_seconds") < 200
    assert value(got, "pyfsm_locks_held", kind="global") == 1 and value(got, "pyfsm_locks_held", kind="local") == 1
    assert not any("acct" in str(labels) or "f-1" in str(labels) for _, labels in got)  # no keys as labels

    after = scrape(database_registry(store, stuck_after=3600))  # the lease is released
    assert value(after, "pyfsm_locks_held", kind="global") == 0
    less = scrape(database_registry(store, stuck_after=0))  # every due run is stuck now
    assert value(less, "pyfsm_stuck_runs", machine="job") == 3  # j-5, j-7, j-8


def test_per_event_counters_count_exactly_the_transitions_between_scrapes(fresh) -> None:  # type: ignore[no-untyped-def]
    _settings, store = fresh
    store.define(order_machine("order"))
    for n in range(5):
        store.send("order", f"o-{n}", "pay")  # creations and events before the exporter started
    registry = database_registry(store, settle_seconds=0)
    first = scrape(registry)
    assert not [k for k in first if k[0] == "pyfsm_transitions_by_event_total"]  # counts from now on
    store.send_many("order", [(f"o-{n}", "ship") for n in range(3)] + [("o-4", "cancel"), ("o-9", "pay")])
    second = scrape(registry)
    assert value(second, "pyfsm_transitions_by_event_total", machine="order", event="ship") == 3
    assert value(second, "pyfsm_transitions_by_event_total", machine="order", event="cancel") == 1
    assert value(second, "pyfsm_transitions_by_event_total", machine="order", event="pay") == 1
    assert value(second, "pyfsm_transitions_by_event_total", machine="order", event="") == 1  # o-9's creation
    total = sum(v for (name, _), v in second.items() if name == "pyfsm_transitions_by_event_total")
    assert total == value(second, "pyfsm_transitions_total", machine="order") - value(
        first, "pyfsm_transitions_total", machine="order"
    )
    store.send("order", "o-0", "deliver")
    third = scrape(registry)
    assert value(third, "pyfsm_transitions_by_event_total", machine="order", event="ship") == 3
    assert value(third, "pyfsm_transitions_by_event_total", machine="order", event="deliver") == 1


def test_per_event_counters_settle_and_read_a_bounded_page_per_scrape(fresh) -> None:  # type: ignore[no-untyped-def]
    _settings, store = fresh
    store.define(order_machine("order"))
    collector = DatabaseCollector(store, settle_seconds=0.5, max_event_rows=4)
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    registry.register(collector)
    scrape(registry)
    store.send_many("order", [(f"o-{n}", "pay") for n in range(5)])  # 10 rows: 5 creations, 5 events
    assert not [k for k in scrape(registry) if k[0] == "pyfsm_transitions_by_event_total"]  # not settled yet
    time.sleep(0.6)

    def counted() -> float:
        return sum(v for (name, _), v in scrape(registry).items() if name == "pyfsm_transitions_by_event_total")

    assert counted() == 4  # one page of 4 rows per scrape
    assert counted() == 8
    assert counted() == 10
    assert counted() == 10


def test_up_is_0_when_the_database_cannot_be_read(caplog: pytest.LogCaptureFixture) -> None:
    with Store("mysql://root@127.0.0.1:1/nowhere", pool_size=1) as store:
        collector = DatabaseCollector(store)
        from prometheus_client import CollectorRegistry

        registry = CollectorRegistry()
        registry.register(collector)
        got = scrape(registry)
    assert value(got, "pyfsm_up") == 0 and value(got, "pyfsm_scrape_duration_seconds") >= 0
    assert {name for name, _ in got} == {"pyfsm_up", "pyfsm_scrape_duration_seconds"}
    assert type(collector.last_error).__name__ == "DatabaseUnavailable"
    assert "reading the database failed: DatabaseUnavailable" in caplog.text


def test_a_reporting_account_can_scrape(fresh, server: Settings) -> None:  # type: ignore[no-untyped-def]
    settings, store = fresh
    store.define(order_machine("order"))
    store.send("order", "o-1", "pay")
    user = f"pyfsm_metrics_{uuid.uuid4().hex[:8]}"
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        grant(conn, [Account.parse(user, "reporting")], passwords={f"{user}@%": "Pw-" + user})
    finally:
        conn.close()
    try:
        with Store(replace(settings, user=user, password="Pw-" + user).dsn()) as analyst:
            assert analyst.settings.user == user
            mine = database_registry(analyst, settle_seconds=0)
            scrape(mine)
            store.send("order", "o-1", "ship")
            got = scrape(mine)
        owners = scrape(database_registry(store))
        assert value(got, "pyfsm_up") == 1
        assert value(got, "pyfsm_transitions_by_event_total", machine="order", event="ship") == 1
        same = {
            k: v
            for k, v in got.items()
            if k[0] not in ("pyfsm_scrape_duration_seconds",) and not k[0].startswith("pyfsm_transitions_by_event")
        }
        assert same == {k: v for k, v in owners.items() if k in same} and len(same) > 20
    finally:
        conn = admin(server)
        conn.cursor().execute(f"DROP USER IF EXISTS '{user}'@'%'")
        conn.close()


def test_worker_metrics_in_process(fresh) -> None:  # type: ignore[no-untyped-def]
    _settings, store = fresh
    process = failing_process("job")
    store.define(process.machine)
    for n in range(6):
        store.create("job", f"j-{n}", data={"fail": n == 0})
        store.enqueue("job", f"j-{n}")
    kept = WorkerMetrics()
    stats = Worker(store, [process], batch=3, idle_min=0.01, idle_max=0.05, metrics=kept).run(
        handle_signals=False, until_idle=0.3
    )
    got = scrape(kept.registry)
    assert value(got, "pyfsm_worker_steps_total", machine="job") == stats.steps == 5 * 2 + 1
    assert value(got, "pyfsm_worker_runs_total", machine="job", status="completed") == 5
    assert value(got, "pyfsm_worker_runs_total", machine="job", status="failed") == 1
    assert value(got, "pyfsm_handler_seconds_count", machine="job", state="a") == 6
    assert value(got, "pyfsm_handler_seconds_count", machine="job", state="b") == 6
    assert value(got, "pyfsm_worker_step_commit_seconds_count", machine="job") >= 2
    assert ("pyfsm_worker_errors_total", frozenset({("machine", "job")})) not in got or value(
        got, "pyfsm_worker_errors_total", machine="job"
    ) == 0


def test_handler_exceptions_are_counted(fresh) -> None:  # type: ignore[no-untyped-def]
    _settings, store = fresh
    process = Process.linear("boom", ["a"])
    process.register("a", lambda ctx: 1 / 0, max_attempts=1)
    store.define(process.machine)
    store.create("boom", "b-1")
    store.enqueue("boom", "b-1")
    kept = WorkerMetrics()
    Worker(store, [process], batch=1, metrics=kept, idle_min=0.01).run(handle_signals=False, until_idle=0.2)
    got = scrape(kept.registry)
    assert value(got, "pyfsm_handler_exceptions_total", machine="boom", state="a") == 1
    assert value(got, "pyfsm_worker_runs_total", machine="boom", status="failed") == 1


# -- the command line ------------------------------------------------------------------------


def pyfsm(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYFSM_DSN"}
    return subprocess.run(
        [sys.executable, "-m", "pyfsm", *args], capture_output=True, text=True, timeout=60, cwd=TESTS, env=env
    )


def start(*args: str) -> tuple[subprocess.Popen[str], str]:
    """A long-running `pyfsm ...` and the metrics URL it printed on stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pyfsm", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=TESTS
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        found = re.search(r"http://[0-9.]+:\d+/metrics", line)
        if found:
            return proc, found.group(0)
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError(f"no metrics URL from pyfsm {' '.join(args)}: {proc.communicate()}")


def get(url: str) -> tuple[bytes, str]:
    with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 (a local http URL)
        return answer.read(), answer.headers["Content-Type"]


def stop(proc: subprocess.Popen[str]) -> int:
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    return proc.returncode


def test_pyfsm_metrics_prints_and_serves(fresh) -> None:  # type: ignore[no-untyped-def]
    settings, store = fresh
    store.define(order_machine("order"))
    store.send("order", "o-1", "pay")
    dsn = settings.dsn()
    printed = pyfsm("metrics", "--dsn", dsn)
    assert printed.returncode == 0, printed.stderr
    got = parse(printed.stdout.encode())
    assert value(got, "pyfsm_instances", machine="order", state="paid") == 1 and value(got, "pyfsm_up") == 1
    as_json = pyfsm("metrics", "--dsn", dsn, "--json", "--stuck-after", "60")
    families = {f["name"]: f for f in json.loads(as_json.stdout)}
    assert families["pyfsm_transitions"]["type"] == "counter"
    assert families["pyfsm_stuck_runs"]["help"].startswith("Runs due for more than 60 s")

    proc, url = start("metrics", "--dsn", dsn, "--serve", "--port", "0")
    try:
        body, content_type = get(url)
        assert content_type.startswith("text/plain")
        assert value(parse(body), "pyfsm_instances", machine="order", state="paid") == 1
        store.send("order", "o-1", "ship")
        assert value(parse(get(url)[0]), "pyfsm_instances", machine="order", state="shipped") == 1
    finally:
        assert stop(proc) == 0


def test_pyfsm_metrics_errors(fresh) -> None:  # type: ignore[no-untyped-def]
    dsn = fresh[0].dsn()
    down = pyfsm("metrics", "--dsn", "mysql://root@127.0.0.1:1/nowhere")
    assert down.returncode == 1 and value(parse(down.stdout.encode()), "pyfsm_up") == 0  # printed all the same
    assert re.fullmatch(r"pyfsm: DatabaseUnavailable \(2003\): [^\n]*\n", down.stderr), down.stderr
    for bad, why in (
        (["--port", "70000"], "must be a port number from 0 to 65535, got 70000"),
        (["--stuck-after", "-1"], "must be a number of seconds from 0 to 100000000, got -1"),
        (["--stuck-after", "soon"], "not a number of seconds"),
    ):
        result = pyfsm("metrics", "--dsn", dsn, "--serve", *bad)
        assert result.returncode == 2 and why in result.stderr and len(result.stderr.splitlines()) == 1, result.stderr
    for bad in (["--port", "9999"], ["--serve", "--json"]):
        result = pyfsm("metrics", "--dsn", dsn, *bad)
        assert result.returncode == 1 and "InvalidArgument (31009)" in result.stderr, result.stderr
    with MetricsServer(WorkerMetrics().registry, port=0) as taken:
        busy = pyfsm("metrics", "--dsn", dsn, "--serve", "--port", str(taken.port))
    assert busy.returncode == 1 and "cannot serve metrics on 127.0.0.1" in busy.stderr, busy.stderr


def test_a_worker_process_serves_its_step_counts(fresh) -> None:  # type: ignore[no-untyped-def]
    from helpers.engine_fixtures import CLI_CHECKOUT

    settings, store = fresh
    store.define(CLI_CHECKOUT.machine)
    for n in range(9):
        store.create("cli_checkout", f"w-{n}", data={"items": 1})
        store.enqueue("cli_checkout", f"w-{n}")
    proc, url = start(
        "worker", "--dsn", settings.dsn(), "helpers.engine_fixtures:CLI_CHECKOUT", "--batch", "4", "--metrics-port", "0"
    )
    try:
        deadline = time.monotonic() + 30
        while store.counts("cli_checkout") != {"done": 9}:
            assert time.monotonic() < deadline, store.counts("cli_checkout")
            time.sleep(0.05)
        # the worker counts a run after its step is committed: wait until the last one is counted
        runs = ("pyfsm_worker_runs_total", frozenset({("machine", "cli_checkout"), ("status", "completed")}))
        steps_total = ("pyfsm_worker_steps_total", frozenset({("machine", "cli_checkout")}))
        deadline = time.monotonic() + 30
        while True:
            got = parse(get(url)[0])
            if got.get(runs, 0) >= 9 and got.get(steps_total, 0) >= 27:
                break
            assert time.monotonic() < deadline, f"the worker counted {got.get(runs)} runs, {got.get(steps_total)} steps"
            time.sleep(0.05)
    finally:
        assert stop(proc) == 0
    conn = pymysql.connect(**parse_dsn(settings.dsn()).connect_kwargs())
    with conn.cursor() as cur:  # the steps are the transitions a handler fired
        cur.execute("SELECT COUNT(*) FROM fsm_cli_checkout_transitions WHERE handler IS NOT NULL")
        steps = cur.fetchone()[0]
    conn.close()
    assert steps == 27
    assert value(got, "pyfsm_worker_steps_total", machine="cli_checkout") == steps
    assert value(got, "pyfsm_worker_runs_total", machine="cli_checkout", status="completed") == 9
    assert value(got, "pyfsm_handler_seconds_count", machine="cli_checkout", state="charge") == 9
    assert value(got, "pyfsm_worker_step_commit_seconds_count", machine="cli_checkout") >= 3


def test_reading_a_replica_needs_a_store_with_one(fresh) -> None:  # type: ignore[no-untyped-def]
    _settings, store = fresh
    with pytest.raises(InvalidArgument, match="read_dsn"):
        DatabaseCollector(store, read_replica=True)
