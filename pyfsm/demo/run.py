"""The README's demo: an order machine driven end to end.

Works in a database of its own, :data:`DEMO_DATABASE` (or ``--database NAME``), on the server
of ``--dsn``, else $PYFSM_DSN, else DEFAULT_DSN: never in the database a DSN names (an
application's, whose DSN is exported) unless ``--here`` asks for it, since the types it adds
there could not be removed. Its first line says where. Migrates (which creates the database
if needed), defines an order machine, creates a few hundred orders
and moves each along a random but allowed path, then prints the counts per state and one
order's history, including a rejected move the database refused. Then the
handler engine (pyfsm/demo/processes.py). When a Kafka broker answers (``--kafka``,
$PYFSM_KAFKA, else localhost:9092), a relay publishes the outbox and the demo prints the
events it read back for one order.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from typing import Any

from .. import db
from ..checks import check_int
from ..db.hosts import where
from ..definition import Machine
from ..errors import InvalidArgument, TransitionNotAllowed
from ..schema import install as schema
from ..store import Store

#: The demo's own database, on whichever server the DSN names.
DEMO_DATABASE = "pyfsm_demo"
#: The demo's server when neither --dsn nor $PYFSM_DSN names one.
DEFAULT_DSN = f"mysql://root@127.0.0.1:3306/{DEMO_DATABASE}"
DEFAULT_KAFKA = "localhost:9092"
TOPIC = "pyfsm.demo.orders"

ORDER = Machine(
    name="demo_order",  # not "order": the README's example defines that one, with other states
    states=["new", "paid", "packed", "shipped", "delivered", "cancelled"],
    start=["new"],
    final=["delivered", "cancelled"],
    transitions=[
        ("pay", "new", "paid"),
        ("pack", "paid", "packed"),
        ("ship", "packed", "shipped"),
        ("deliver", "shipped", "delivered"),
        ("cancel", ["new", "paid", "packed"], "cancelled"),
        ("unpack", "packed", "paid"),
    ],
    topic=TOPIC,
)

# How far each order goes: weights give a realistic spread over the states.
PATHS = [
    (["pay"], 2),
    (["pay", "pack"], 2),
    (["pay", "pack", "ship"], 3),
    (["pay", "pack", "ship", "deliver"], 8),
    (["cancel"], 1),
    (["pay", "pack", "unpack", "cancel"], 1),
    ([], 1),
]


def demo_settings(
    dsn: str | None = None, *, database: str | None = None, here: bool = False
) -> tuple[db.Settings, str]:
    """Where the demo works, and the line that says so (the demo's first).

    The server of ``dsn`` (--dsn), else of $PYFSM_DSN, else of :data:`DEFAULT_DSN`; the database
    ``database``, else :data:`DEMO_DATABASE`; with ``here``, the one the DSN names. An
    application's DSN is often exported: the demo must not add its types there by default.
    """
    source = "--dsn" if dsn else "$PYFSM_DSN" if os.environ.get("PYFSM_DSN") else None
    given = db.parse_dsn(dsn or os.environ.get("PYFSM_DSN") or DEFAULT_DSN)
    if here and database is not None:
        raise InvalidArgument("give --database NAME or --here, not both")
    if here and not given.database:
        raise InvalidArgument(
            f"--here works in the database the DSN names, and {source or 'the DSN'} names none "
            "(mysql://user:password@host:port/DATABASE)"
        )
    settings = given.with_database(given.database if here else database or DEMO_DATABASE)
    if here:
        why = f"the one {source or 'the default DSN'} names (--here)"
    elif database is not None:
        why = "named by --database"
    else:
        why = "the demo's own"
        if source is not None and given.database and given.database != settings.database:
            why += f", not `{given.database}` that {source} names (--here works there)"
    return settings, f"demo database: `{settings.database}` at {where(*settings.in_use)}, {why}"


def run(
    dsn: str | None = None,
    *,
    orders: int = 300,
    workers: int = 3,
    seed: int = 7,
    kafka: str | None = None,
    database: str | None = None,
    here: bool = False,
) -> None:
    check_int("orders", orders, minimum=1)  # `pyfsm demo` refuses them first, as a usage error
    check_int("workers", workers, minimum=1)
    settings, first_line = demo_settings(dsn, database=database, here=here)
    rng = random.Random(seed)
    print(first_line, flush=True)
    with Store(settings.dsn()) as store:
        if schema.migrate(store.settings):  # as store.migrate(), which creates a missing database too
            print(f"created database `{settings.database}` ({db.DATABASE_CHARSET})")
        defined = store.define(ORDER)
        print(f"machine demo_order: definition version {defined.version} ({'new' if defined.changed else 'unchanged'})")
        run_id = time.strftime("%H%M%S")
        paths, weights = zip(*PATHS, strict=True)
        started = time.perf_counter()
        moves = 0
        sample = None
        for n in range(orders):
            key = f"demo-{run_id}-{n:04d}"
            store.create("demo_order", key, data={"total": rng.randint(5, 500)}, lookup_key=f"customer-{n % 40}")
            path = rng.choices(paths, weights)[0]
            for event in path:
                store.send("demo_order", key, event, metadata={"by": "demo"})
                moves += 1
            if sample is None and path and path[-1] == "deliver":
                sample = key
        elapsed = time.perf_counter() - started
        print(
            f"created {orders} orders and applied {moves} transitions in {elapsed:.2f} s "
            f"({(orders + moves) / elapsed:.0f} per second)"
        )

        sample = sample or f"demo-{run_id}-0000"
        try:
            store.send("demo_order", sample, "pay")  # a delivered order cannot be paid again
        except TransitionNotAllowed as exc:
            print(f"refused by the database: {exc} [errno {exc.errno}]")

        print("\norders per state (all runs):")
        for state, count in sorted(store.counts("demo_order").items(), key=lambda kv: ORDER.states.index(kv[0])):
            print(f"  {state:<10} {count:>6}")

        print(f"\nhistory of {sample}:")
        for h in store.history("demo_order", sample):
            move = f"{h.from_state} --{h.event}--> {h.to_state}" if h.event else f"created in {h.to_state}"
            print(f"  #{h.sort_key} {h.created_at:%H:%M:%S.%f} {move}")

        from .processes import run as fulfil

        fulfil(store, settings.dsn(), run_id, orders=max(1, orders // 3), workers=workers)

        from .timers import run as baskets

        baskets(store, run_id)
    publish_and_show(settings, kafka or os.environ.get("PYFSM_KAFKA") or DEFAULT_KAFKA, sample)


class _Quiet:
    """Keeps librdkafka's connection-refused lines off the demo's output."""

    def log(self, *_args: Any) -> None:
        pass


def publish_and_show(settings: db.Settings, bootstrap: str, sample: str) -> None:
    """Run a relay until the outbox is drained, then print the sample order's events from Kafka."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient

    from ..relay.publisher import Relay

    try:
        AdminClient({"bootstrap.servers": bootstrap, "logger": _Quiet()}).list_topics(timeout=3)  # type: ignore[dict-item]
    except KafkaException:
        print(
            f"\nno Kafka broker reachable at {bootstrap} (set PYFSM_KAFKA=host:port); "
            "the events wait in fsm_outbox for `pyfsm relay`"
        )
        return
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "pyfsm-demo", "enable.auto.commit": False, "logger": _Quiet()}
    )
    try:
        topic = consumer.list_topics(TOPIC, timeout=5).topics.get(TOPIC)
        starts = {}
        if topic is not None and topic.error is None:  # read only what this run publishes
            for p in topic.partitions:
                starts[p] = consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=5)[1]
        relay = Relay(settings.dsn(), kafka=bootstrap, delivery_timeout=10)
        worker = threading.Thread(target=relay.run, daemon=True)
        started = time.perf_counter()
        worker.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            lag = relay.lag()
            if lag.unpublished == lag.parked:
                break
            time.sleep(0.1)
        relay.stop()
        worker.join(30)
        relay.close()
        elapsed = time.perf_counter() - started
        partitions = consumer.list_topics(TOPIC, timeout=5).topics[TOPIC].partitions
        consumer.assign([TopicPartition(TOPIC, p, starts.get(p, OFFSET_BEGINNING)) for p in partitions])
        events, quiet_polls = [], 0
        while quiet_polls < 5:
            msg = consumer.poll(0.2)
            if msg is None:
                quiet_polls += 1
            elif not msg.error():
                quiet_polls = 0
                events.append(json.loads(msg.value() or b"{}"))
        print(
            f"\nKafka at {bootstrap}: the relay published {relay.stats.published} events in {elapsed:.2f} s; "
            f"read back {len(events)} from topic {TOPIC}; the events of {sample}:"
        )
        for event in sorted((e for e in events if e["instance_key"] == sample), key=lambda e: e["sort_key"]):
            print("  " + json.dumps(event, separators=(",", ":")))
    finally:
        consumer.close()
