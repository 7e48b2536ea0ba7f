"""The relay tests' tools: a type with a topic, polling with a deadline, queries, the order of
the events read back, relays as processes (`python -m pyfsm relay`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pymysql

from helpers.common import unique
from helpers.kafka_broker import Broker, Received
from pyfsm import Machine, Relay
from pyfsm.db import Settings

ROOT = Path(__file__).resolve().parents[2]


def cycle(topic: str | None, name: str | None = None) -> Machine:
    return Machine(
        name=name or unique("ev"),
        states=["a", "b"],
        start=["a"],
        transitions=[("go", "a", "b"), ("back", "b", "a")],
        topic=topic,
    )


def wait_for(check: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.05)


def query(settings: Settings, sql: str, args: Any = None) -> list[dict[str, Any]]:
    conn = pymysql.connect(**settings.connect_kwargs(), cursorclass=pymysql.cursors.DictCursor)
    try:
        with conn.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())
    finally:
        conn.close()


def unpublished(settings: Settings) -> int:
    return int(query(settings, "SELECT COUNT(*) AS n FROM fsm_outbox WHERE published_at IS NULL")[0]["n"])


@contextmanager
def running(relay: Relay) -> Iterator[Relay]:
    thread = threading.Thread(target=relay.run, daemon=True)
    thread.start()
    try:
        yield relay
    finally:
        relay.stop()
        thread.join(60)
        assert not thread.is_alive(), "the relay did not stop"
        relay.close()


def first_occurrences(messages: list[Received]) -> dict[str, list[int]]:
    """Per instance key, the sort_keys in the order their first copies appear (duplicates dropped by id)."""
    seen: set[str] = set()
    order: dict[str, list[int]] = defaultdict(list)
    for m in messages:
        if m.event["id"] in seen:
            continue
        seen.add(m.event["id"])
        order[m.event["instance_key"]].append(m.event["sort_key"])
    return order


def partition_order(messages: list[Received]) -> dict[str, list[int]]:
    """Per instance key, first occurrences in partition order (Kafka orders within a partition only)."""
    by_partition: dict[int, list[Received]] = defaultdict(list)
    for m in messages:
        by_partition[m.partition].append(m)
    order: dict[str, list[int]] = {}
    for part in by_partition.values():
        part.sort(key=lambda m: m.offset)
        order.update(first_occurrences(part))
    return order


def relay_process(settings: Settings, broker: Broker, name: str, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pyfsm",
                "relay",
                "--dsn",
                settings.dsn(),
                "--kafka",
                broker.bootstrap,
                "--name",
                name,
                *extra,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it has not exited after 90 s (the tests' other waits are 90 s
    too: once, with two servers under valgrind beside the suite on two cores, a relay that had
    published everything took over 30 s to stop, and the test took its kill for a failure)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(90)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
