"""The Kafka relay against the real MariaDB and a real Kafka-protocol broker (tansu).

Nothing is mocked: events go through the triggers into fsm_outbox, through the relay and
the broker, and are read back with a consumer. Waits poll with deadlines.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections import defaultdict
from datetime import UTC
from pathlib import Path

import pymysql
import pytest
from helpers.common import explain, unique
from helpers.kafka_broker import Broker, Received
from helpers.relay import (
    cycle,
    first_occurrences,
    partition_order,
    query,
    relay_process,
    running,
    stop_process,
    unpublished,
    wait_for,
)

from pyfsm import InvalidArgument, Lag, Machine, Relay, Store
from pyfsm.relay.events import build_event
from pyfsm.relay.kafka import producer_config

ROOT = Path(__file__).resolve().parents[2]

# the helpers are in tests/helpers/relay.py; the fixture fresh (a migrated database of its own)
# in tests/server/conftest.py


# -- the event --------------------------------------------------------------------------


def test_event_fields_key_headers_and_marking(fresh, kafka: Broker) -> None:  # type: ignore[no-untyped-def]
    settings, store = fresh
    topic = unique("t.fmt")
    kafka.create_topic(topic)
    machine = cycle(topic)
    store.define(machine)
    created = store.create(machine, "k/1:ü", data={"total": 42}, lookup_key="customer-7")
    sent = store.send(machine, "k/1:ü", "go", metadata={"by": "test"})
    history = store.history(machine, "k/1:ü")
    assert query(settings, "SELECT COUNT(*) AS n FROM fsm_outbox WHERE published_at IS NOT NULL")[0]["n"] == 0

    with running(Relay(settings.dsn(), kafka=kafka.bootstrap, name="relay-fmt")) as relay:
        wait_for(lambda: unpublished(settings) == 0, "the relay to publish")
        # the relay counts a batch after its marks are committed: wait for the count too
        wait_for(lambda: relay.stats.published >= 2, "the relay to count what it published")
        assert relay.stats.published == 2 and unpublished(settings) == 0
    messages = kafka.read(topic, count=2)
    assert len(messages) == 2
    first, second = messages
    assert first.partition == second.partition and first.offset < second.offset
    assert first.key == second.key == f"{machine.name}:k/1:ü".encode()
    assert second.event == {
        "schema_version": 1,
        "id": f"{machine.name}:{sent.transition_id}",
        "source": settings.database,
        "machine": machine.name,
        "instance_key": "k/1:ü",
        "lookup_key": "customer-7",
        "event": "go",
        "from_state": "a",
        "to_state": "b",
        "sort_key": 2,
        "transition_id": sent.transition_id,
        "data": {"total": 42},
        "metadata": {"by": "test"},
        "occurred_at": history[1].created_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    }
    assert first.event["id"] == f"{machine.name}:{created.transition_id}"
    assert (first.event["event"], first.event["from_state"], first.event["sort_key"]) == (None, None, 1)
    assert second.headers == {
        "event_id": second.event["id"].encode(),
        "event": b"go",
        "machine": machine.name.encode(),
        "schema_version": b"1",
        "relay": b"relay-fmt",
    }
    assert first.headers["event"] is None
    occurred = history[1].created_at.replace(tzinfo=UTC)  # stored as naive UTC
    assert second.timestamp_ms == int(occurred.timestamp() * 1000)  # the Kafka timestamp is when it happened
    rows = query(settings, "SELECT published_at, attempts, last_error, parked_at FROM fsm_outbox ORDER BY id")
    assert all(r["published_at"] is not None and r["attempts"] == 0 and r["parked_at"] is None for r in rows)


def test_event_data_null_when_the_row_has_none() -> None:
    from datetime import datetime

    event = build_event(
        {
            "machine": "m",
            "transition_id": 5,
            "instance_key": "k",
            "lookup_key": None,
            "event": "go",
            "from_state": "a",
            "to_state": "b",
            "sort_key": 3,
            "data": None,
            "metadata": "{}",
            "occurred_at": datetime(2026, 1, 2, 3, 4, 5, 6),
        },
        source="db",
    )
    assert event["data"] is None and event["occurred_at"] == "2026-01-02T03:04:05.000006Z"
    assert json.loads(json.dumps(event))["data"] is None


def test_producer_settings_keep_idempotence_and_acks_all() -> None:
    conf = producer_config({"bootstrap.servers": "b:9092", "linger.ms": 50}, delivery_timeout=5)
    assert (conf["enable.idempotence"], conf["acks"], conf["linger.ms"], conf["message.timeout.ms"]) == (
        True,
        "all",
        50,
        5000,
    )
    for bad in ({"acks": "1"}, {"enable.idempotence": False}):
        with pytest.raises(InvalidArgument):
            producer_config({"bootstrap.servers": "b:9092", **bad}, delivery_timeout=5)


# -- ordering and atomicity -------------------------------------------------------------


def test_2000_transitions_across_50_instances_arrive_in_order(fresh, kafka: Broker) -> None:  # type: ignore[no-untyped-def]
    settings, store = fresh
    topic = unique("t.order")
    kafka.create_topic(topic, partitions=4)
    machine = cycle(topic)
    store.define(machine)
    keys = [f"i{n:02d}" for n in range(50)]
    for key in keys:
        store.create(machine, key)
    with running(Relay(settings.dsn(), kafka=kafka.bootstrap, batch_size=200)):
        for round_ in range(40):  # written while the relay publishes
            for key in keys:
                store.send(machine, key, "go" if round_ % 2 == 0 else "back")
        wait_for(lambda: unpublished(settings) == 0, "the relay to drain 2,050 events")
    messages = kafka.read(topic, count=2050)
    ids = [m.event["id"] for m in messages]
    assert len(ids) == len(set(ids)) == 2050, "no loss and, without faults, no duplicate"
    order = partition_order(messages)
    assert order == {key: list(range(1, 42)) for key in keys}
    partitions = defaultdict(set)
    for m in messages:
        partitions[m.key].add(m.partition)
    assert all(len(p) == 1 for p in partitions.values()) and len({p for s in partitions.values() for p in s}) > 1


def test_rolled_back_transition_is_never_published_and_no_topic_writes_nothing(fresh, kafka) -> None:  # type: ignore[no-untyped-def]
    settings, store = fresh
    topic = unique("t.rb")
    kafka.create_topic(topic)
    machine, quiet = cycle(topic), cycle(None)
    store.define(machine)
    store.define(quiet)
    store.create(machine, "r1")
    store.create(quiet, "q1")
    store.send(quiet, "q1", "go")
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        conn.begin()
        conn.cursor().execute(f"UPDATE `fsm_{machine.name}` SET current_state = 'b' WHERE instance_key = 'r1'")
        assert conn.cursor().execute("SELECT * FROM fsm_outbox WHERE event = 'go'") == 1  # written, not committed
        conn.rollback()
    finally:
        conn.close()
    store.send(machine, "r1", "go", metadata={"try": 2})
    assert query(settings, "SELECT COUNT(*) AS n FROM fsm_outbox WHERE machine = %s", (quiet.name,))[0]["n"] == 0
    with running(Relay(settings.dsn(), kafka=kafka.bootstrap)):
        wait_for(lambda: unpublished(settings) == 0, "the relay to publish")
    events = [m.event for m in kafka.read(topic, count=2)]
    history = store.history(machine, "r1")
    assert [(e["transition_id"], e["event"], e["metadata"]) for e in events] == [
        (history[0].id, None, {}),
        (history[1].id, "go", {"try": 2}),
    ]
    assert all(e["machine"] == machine.name for e in events)


# -- faults -----------------------------------------------------------------------------


def test_broker_down_nothing_marked_then_everything_flows(fresh, caplog) -> None:  # type: ignore[no-untyped-def]
    settings, store = fresh
    broker = Broker()
    broker.start()
    try:
        topic = unique("t.down")
        machine = cycle(topic)
        store.define(machine)
        store.create(machine, "d0")
        caplog.set_level(logging.INFO, logger="pyfsm.relay")
        relay = Relay(settings.dsn(), kafka=broker.bootstrap, delivery_timeout=2, max_backoff=0.5)
        with running(relay):
            wait_for(lambda: unpublished(settings) == 0, "the first event")
            broker.stop()
            for n in range(1, 31):
                store.create(machine, f"d{n}")
                store.send(machine, f"d{n}", "go")
            wait_for(
                lambda: query(settings, "SELECT COUNT(*) AS n FROM fsm_outbox WHERE attempts > 0")[0]["n"] > 0,
                "a failed delivery to be recorded",
            )
            assert unpublished(settings) == 60, "nothing is marked published while the broker is down"
            broker.start()  # same port, empty memory storage
            wait_for(lambda: unpublished(settings) == 0, "the backlog to flow after the broker came back")
        messages = broker.read(topic, count=60)
        assert partition_order(messages) == {f"d{n}": [1, 2] for n in range(1, 31)}
        lines = [r.getMessage() for r in caplog.records if r.name == "pyfsm.relay"]
        problems = [line for line in lines if "retrying with backoff" in line]
        assert problems and len(problems) <= 4, problems  # one line per problem, not one per retry
        assert any(line.startswith("resolved:") for line in lines)
    finally:
        broker.stop()


def test_missing_topic_keeps_events_until_it_exists(fresh, kafka, caplog) -> None:  # type: ignore[no-untyped-def]
    settings, store = fresh
    topic = unique("t.missing")
    machine = cycle(topic)
    store.define(machine)
    store.create(machine, "m1")
    store.send(machine, "m1", "go")
    caplog.set_level(logging.INFO, logger="pyfsm.relay")
    conf = {
        "bootstrap.servers": kafka.bootstrap,
        "allow.auto.create.topics": False,
        "topic.metadata.propagation.max.ms": 500,
    }
    with running(Relay(settings.dsn(), kafka=conf, delivery_timeout=2, max_backoff=0.5)):
        row = wait_for(
            lambda: query(settings, "SELECT * FROM fsm_outbox WHERE attempts > 0 LIMIT 1"), "a failed attempt"
        )[0]
        assert "UNKNOWN_TOPIC" in row["last_error"] and row["parked_at"] is None
        assert unpublished(settings) == 2
        kafka.create_topic(topic)
        wait_for(lambda: unpublished(settings) == 0, "the events once the topic exists")
    assert partition_order(kafka.read(topic, count=2)) == {"m1": [1, 2]}
    assert any(f"cannot publish to topic {topic!r}" in r.getMessage() for r in caplog.records)


def test_too_large_event_is_parked_its_instance_waits_others_go_on(fresh, kafka, caplog) -> None:  # type: ignore[no-untyped-def]
    settings, store = fresh
    topic = unique("t.big")
    kafka.create_topic(topic)
    machine = cycle(topic)
    store.define(machine)
    caplog.set_level(logging.INFO, logger="pyfsm.relay")
    store.create(machine, "big")
    big = store.send(machine, "big", "go", data={"blob": "x" * 1_010_000})  # > message.max.bytes (1,000,000)
    store.send(machine, "big", "back", data={})
    store.send(machine, "big", "go")
    store.create(machine, "small")
    store.send(machine, "small", "go")
    relay = Relay(settings.dsn(), kafka=kafka.bootstrap)
    with running(relay):
        wait_for(
            lambda: unpublished(settings) == 3 and relay.lag().parked == 3, "everything but big's events from #2 on"
        )
        lag = relay.lag()
        assert (lag.unpublished, lag.parked) == (3, 3)
        parked = relay.parked()
        assert next((p["sort_key"], p["event_id"]) for p in parked) == (2, f"{machine.name}:{big.transition_id}")
        assert "MSG_SIZE_TOO_LARGE" in parked[0]["last_error"]
        assert [p["last_error"].startswith("held: waits behind parked event") for p in parked[1:]] == [True, True]
        store.send(machine, "big", "back")  # arrives later: held as well
        wait_for(lambda: relay.lag().parked == 4, "the new event of big to be held")
        assert relay.unpark(parked[0]["id"]) == 4  # retry: parked again, the rest held again
        wait_for(
            lambda: (
                relay.lag().parked == 4
                and query(settings, "SELECT attempts FROM fsm_outbox WHERE id = %s", (parked[0]["id"],))[0]["attempts"]
                == 2
            ),
            "the retried event to be parked again",
        )
        assert relay.unpark(parked[0]["id"], skip=True) == 4  # give it up: the instance goes on
        wait_for(lambda: unpublished(settings) == 0, "big's later events")
        assert relay.stats.parked == 2
    skipped = query(settings, "SELECT last_error, published_at FROM fsm_outbox WHERE id = %s", (parked[0]["id"],))[0]
    assert skipped["last_error"].startswith("skipped: MSG_SIZE_TOO_LARGE") and skipped["published_at"] is not None
    order = partition_order(kafka.read(topic, count=6))
    assert order == {"big": [1, 3, 4, 5], "small": [1, 2]}
    assert sum("parked event" in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR) == 1
    with pytest.raises(InvalidArgument):
        Relay(settings.dsn()).unpark(parked[0]["id"])  # no longer parked


def test_database_connections_killed_the_relay_recovers(fresh, kafka, server, caplog) -> None:  # type: ignore[no-untyped-def]
    settings, store = fresh
    topic = unique("t.dbkill")
    kafka.create_topic(topic)
    machine = cycle(topic)
    store.define(machine)
    store.create(machine, "c1")
    caplog.set_level(logging.INFO, logger="pyfsm.relay")
    relay = Relay(settings.dsn(), kafka=kafka.bootstrap, max_backoff=0.5)
    with running(relay):
        wait_for(lambda: unpublished(settings) == 0 and relay.is_leader, "the first event")
        admin = pymysql.connect(**server.connect_kwargs(database=False))
        try:
            with admin.cursor() as cur:
                cur.execute(
                    "SELECT id FROM information_schema.processlist WHERE db = %s AND id <> CONNECTION_ID()",
                    (settings.database,),
                )
                for (conn_id,) in cur.fetchall():
                    try:
                        cur.execute(f"KILL {int(conn_id)}")
                    except pymysql.err.OperationalError:
                        pass  # already gone
        finally:
            admin.close()
        with Store(settings.dsn()) as writer:  # the test's own pooled connections were killed too
            for n in range(2, 12):
                writer.send(machine, f"c{n}", "go")
        wait_for(lambda: unpublished(settings) == 0, "the events written after the kill")
        wait_for(lambda: relay.stats.leader_terms >= 2, "the relay to lead again")
    assert set(partition_order(kafka.read(topic, count=21))) == {f"c{n}" for n in range(1, 12)}
    assert any("leadership lost" in r.getMessage() for r in caplog.records)


# -- restarts and failover --------------------------------------------------------------


def _backlog(store: Store, machine: Machine, instances: int, sends: int) -> int:
    for n in range(instances):
        store.create(machine, f"s{n:02d}")
    for round_ in range(sends):
        for n in range(instances):
            store.send(machine, f"s{n:02d}", "go" if round_ % 2 == 0 else "back")
    return instances * (sends + 1)


def test_sigkill_mid_stream_then_restart_loses_nothing(fresh, kafka, tmp_path) -> None:  # type: ignore[no-untyped-def]
    settings, store = fresh
    topic = unique("t.kill")
    kafka.create_topic(topic)
    machine = cycle(topic)
    store.define(machine)
    total = _backlog(store, machine, 40, 59)  # 2,400 events waiting
    log = tmp_path / "relay.log"
    proc = relay_process(settings, kafka, "first", log, "--batch-size", "20")
    try:
        wait_for(lambda: unpublished(settings) <= total - 300, "the relay to publish a few batches", timeout=90)
        proc.kill()  # SIGKILL: no cleanup, no release, mid-stream
        proc.wait(10)
    finally:
        stop_process(proc)
    pending = {
        r["transition_id"] for r in query(settings, "SELECT transition_id FROM fsm_outbox WHERE published_at IS NULL")
    }
    assert 0 < len(pending) < total, "the kill landed mid-stream"
    proc = relay_process(settings, kafka, "second", log)
    try:
        wait_for(lambda: unpublished(settings) == 0, "the restarted relay to finish", timeout=90)
    finally:
        stop_process(proc)
    messages = kafka.read(topic, count=total)
    ids = [m.event["id"] for m in messages]
    assert len(set(ids)) == total, "nothing lost"
    duplicated = {m.event["transition_id"] for m in messages if ids.count(m.event["id"]) > 1}
    assert duplicated <= pending, "only events produced but not yet marked are sent twice"
    assert partition_order(messages) == {f"s{n:02d}": list(range(1, 61)) for n in range(40)}
    assert proc.returncode == 0, log.read_text()[-3000:]


def test_two_relays_one_publishes_and_sigkill_hands_over(fresh, kafka, tmp_path) -> None:  # type: ignore[no-untyped-def]
    settings, store = fresh
    topic = unique("t.ha")
    kafka.create_topic(topic)
    machine = cycle(topic)
    store.define(machine)
    logs = {name: tmp_path / f"{name}.log" for name in ("A", "B")}
    procs = {"A": relay_process(settings, kafka, "A", logs["A"])}
    wait_for(lambda: "leader: relay A" in logs["A"].read_text(), "A to lead")
    procs["B"] = relay_process(settings, kafka, "B", logs["B"])
    wait_for(lambda: "standby:" in logs["B"].read_text(), "B to stand by")

    stop_writing = threading.Event()
    written = [0]

    def write() -> None:
        with Store(settings.dsn(), pool_size=1) as writer:
            n = 0
            while not stop_writing.is_set():
                key = f"h{n % 20:02d}"
                if n < 20:
                    writer.create(machine, key)
                else:
                    writer.send(machine, key, "go" if (n // 20) % 2 == 1 else "back")
                n += 1
                written[0] = n
                time.sleep(0.002)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        wait_for(lambda: written[0] > 400 and unpublished(settings) < written[0] - 200, "A to publish a stream")
        killed_at = time.time()
        procs["A"].kill()
        procs["A"].wait(10)
        wait_for(lambda: "leader: relay B" in logs["B"].read_text(), "B to take over", timeout=30)
        takeover = time.time() - killed_at
        wait_for(lambda: written[0] > 1200, "more writes after the failover")
    finally:
        stop_writing.set()
        writer.join(30)
    try:
        wait_for(lambda: unpublished(settings) == 0, "B to drain the outbox")
    finally:
        for proc in procs.values():
            stop_process(proc)
    total = written[0]
    messages = kafka.read(topic, count=total)
    assert len({m.event["id"] for m in messages}) == total, "no committed event is lost"
    by_partition: dict[int, list[Received]] = defaultdict(list)
    for m in messages:
        by_partition[m.partition].append(m)
    for part in by_partition.values():  # in each partition: A's messages, then B's, never interleaved
        names = [m.headers["relay"] for m in sorted(part, key=lambda m: m.offset)]
        assert names == sorted(names), "one relay publishes at a time"
    assert {m.headers["relay"] for m in messages} == {b"A", b"B"}
    counts = defaultdict(int)
    for n in range(total):
        counts[f"h{n % 20:02d}"] += 1
    assert partition_order(messages) == {key: list(range(1, c + 1)) for key, c in counts.items()}
    assert "leader: relay B" not in logs["A"].read_text()
    print(f"\nfailover: B led {takeover:.2f} s after A was killed; {total} events, {len(messages) - total} duplicates")
    assert takeover < 10


# -- retention, lag, latency ------------------------------------------------------------


def test_retention_deletes_only_old_published_rows(fresh, kafka) -> None:  # type: ignore[no-untyped-def]
    settings, store = fresh
    machine = cycle(unique("t.ret"))
    store.define(machine)
    for n in range(10):
        store.create(machine, f"r{n}")
    relay = Relay(settings.dsn(), kafka=kafka.bootstrap, retention=3600)
    with running(relay):
        wait_for(lambda: unpublished(settings) == 0, "the events")
    store.create(machine, "waiting")  # unpublished: never deleted
    conn = pymysql.connect(**settings.connect_kwargs())
    conn.cursor().execute(
        "UPDATE fsm_outbox SET published_at = published_at - INTERVAL 2 HOUR "
        "WHERE published_at IS NOT NULL ORDER BY id LIMIT 4"
    )
    conn.close()
    with Relay(settings.dsn(), retention=3600) as keeper:
        assert keeper.cleanup() == 4
        assert keeper.cleanup() == 0
    with Relay(settings.dsn(), retention=0) as eager:
        assert eager.cleanup() == 6
    assert [r["instance_key"] for r in query(settings, "SELECT instance_key FROM fsm_outbox")] == ["waiting"]


def test_lag_from_sql_cli_and_python(fresh, kafka) -> None:  # type: ignore[no-untyped-def]
    settings, store = fresh
    machine = cycle(unique("t.lag"))
    store.define(machine)
    for n in range(5):
        store.create(machine, f"l{n}")
    time.sleep(0.01)  # a measurable age
    sql = query(settings, "CALL fsm_outbox_lag_v1()")[0]
    assert sql["unpublished"] == 5 and sql["parked"] == 0 and float(sql["oldest_age_seconds"]) > 0
    cli = subprocess.run(
        [sys.executable, "-m", "pyfsm", "relay", "--lag", "--json", "--dsn", settings.dsn()],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert cli.returncode == 0, cli.stderr
    shown = json.loads(cli.stdout)
    assert (shown["unpublished"], shown["parked"], shown["oldest_id"]) == (5, 0, sql["oldest_id"])
    assert shown["oldest_occurred_at"].endswith("Z") and shown["oldest_age_seconds"] > 0
    text = subprocess.run(
        [sys.executable, "-m", "pyfsm", "relay", "--lag", "--dsn", settings.dsn()],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert text.stdout.startswith("unpublished 5 (parked 0)")
    from pyfsm.relay.publisher import lag

    python = lag(settings.dsn())
    assert isinstance(python, Lag) and python.unpublished == 5 and python.oldest_id == sql["oldest_id"]
    with running(Relay(settings.dsn(), kafka=kafka.bootstrap)) as relay:
        wait_for(lambda: relay.lag().unpublished == 0, "the relay to catch up")
        assert relay.lag() == Lag(0, 0, None, None, None)


def test_idle_polls_back_off_and_work_resets_them(fresh, kafka) -> None:  # type: ignore[no-untyped-def]
    settings, store = fresh
    machine = cycle(unique("t.idle"))
    store.define(machine)
    waits: list[float] = []
    relay: Relay

    def sleep(delay: float) -> None:  # stands in for the wait: records it, adds work once, then stops
        waits.append(delay)
        if len(waits) == 3:
            store.create(machine, "wake")
        if len(waits) == 9:
            relay.stop()

    relay = Relay(settings.dsn(), kafka=kafka.bootstrap, idle_max=0.1, sleep=sleep)
    with running(relay):
        wait_for(lambda: len(waits) >= 9, "nine idle waits")
    assert waits == [0.01, 0.02, 0.04, 0.01, 0.02, 0.04, 0.08, 0.1, 0.1]
    assert relay.stats.published == 1 and unpublished(settings) == 0


def test_cli_relay_help_and_missing_kafka() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "pyfsm", "relay", "--help"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert shown.returncode == 0 and "example:" in shown.stdout and "--lag" in shown.stdout
    env = {k: v for k, v in os.environ.items() if k != "PYFSM_KAFKA"}
    failed = subprocess.run(
        [sys.executable, "-m", "pyfsm", "relay", "--dsn", "mysql://root@127.0.0.1:3306/x"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=env,
    )
    assert failed.returncode == 1 and "PYFSM_KAFKA" in failed.stderr and len(failed.stderr.splitlines()) == 1


def test_a_failing_topic_does_not_hold_back_the_others(fresh, kafka) -> None:  # type: ignore[no-untyped-def]
    """30 events of a topic that does not exist come first; a healthy topic's 5 come after,
    with batches of 10: the healthy ones are published while the missing topic waits alone."""
    settings, store = fresh
    missing, healthy = unique("t.absent"), unique("t.ok")
    kafka.create_topic(healthy)
    bad, good = cycle(missing), cycle(healthy)
    store.define(bad)
    store.define(good)
    for n in range(15):
        store.send(bad, f"b{n}", "go")  # creation + go: 2 events each
    for n in range(5):
        store.create(good, f"g{n}")
    conf = {
        "bootstrap.servers": kafka.bootstrap,
        "allow.auto.create.topics": False,
        "topic.metadata.propagation.max.ms": 500,
    }
    relay = Relay(settings.dsn(), kafka=conf, delivery_timeout=2, max_backoff=30, batch_size=10)
    with running(relay):
        wait_for(
            lambda: (
                query(
                    settings,
                    "SELECT COUNT(*) AS n FROM fsm_outbox WHERE topic = %s AND published_at IS NULL",
                    (healthy,),
                )[0]["n"]
                == 0
            ),
            "the healthy topic's events",
            timeout=30,
        )
        assert (
            query(
                settings, "SELECT COUNT(*) AS n FROM fsm_outbox WHERE topic = %s AND published_at IS NULL", (missing,)
            )[0]["n"]
            == 30
        )  # kept, waiting for their topic
    assert sorted(first_occurrences(kafka.read(healthy, count=5))) == [f"g{n}" for n in range(5)]


def test_skipping_a_held_event_is_refused(fresh, kafka) -> None:  # type: ignore[no-untyped-def]
    settings, store = fresh
    topic = unique("t.held")
    kafka.create_topic(topic)
    machine = cycle(topic)
    store.define(machine)
    store.create(machine, "big")
    store.send(machine, "big", "go", data={"blob": "x" * 1_010_000})
    store.send(machine, "big", "back", data={})
    relay = Relay(settings.dsn(), kafka=kafka.bootstrap)
    with running(relay):
        wait_for(lambda: relay.lag().parked == 2, "the big event parked and the next one held")
        root, held = relay.parked()
        with pytest.raises(InvalidArgument, match="waits behind"):
            relay.unpark(held["id"], skip=True)  # it could be published: never give it up
        assert relay.unpark(root["id"], skip=True) == 2
        wait_for(lambda: unpublished(settings) == 0, "the held event, published")


def test_a_relay_started_before_its_database_waits_for_it(make_database, kafka) -> None:  # type: ignore[no-untyped-def]
    settings = make_database()
    relay = Relay(
        settings.with_database(settings.database).dsn().replace(f":{settings.port}/", ":1/"),
        kafka=kafka.bootstrap,
        max_backoff=0.2,
    )
    thread = threading.Thread(target=relay.run, daemon=True)
    thread.start()
    time.sleep(1.0)
    assert thread.is_alive()  # no server on port 1: it waits and retries instead of exiting
    relay.stop()
    thread.join(30)
    assert not thread.is_alive()
    relay.close()


def test_lag_reads_only_the_unpublished_rows(fresh) -> None:  # type: ignore[no-untyped-def]
    settings, _store = fresh
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        [plan] = explain(
            conn, "SELECT COUNT(*), SUM(parked_at IS NOT NULL), MIN(id) FROM fsm_outbox WHERE published_at IS NULL"
        )
    finally:
        conn.close()
    assert plan["key"] == "fsm_outbox_pending" and "Using index" in (plan["Extra"] or "")
