"""The event format: what one fsm_outbox row becomes on Kafka (see docs/kafka.md).

Pure functions, no connection: the relay (pyfsm.relay) and consumers' tests can use them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

#: Version of the event JSON layout (the ``schema_version`` field).
SCHEMA_VERSION = 1

# -- the event --------------------------------------------------------------------------


def event_id(machine: str, transition_id: int) -> str:
    """The event's id: stable across retries, unique within a database (``order:1234``)."""
    return f"{machine}:{transition_id}"


def message_key(machine: str, instance_key: str) -> bytes:
    """The Kafka message key: the instance's identity, so its events share a partition."""
    return f"{machine}:{instance_key}".encode()


def format_time(value: datetime) -> str:
    """UTC, ISO 8601 with microseconds: ``2026-11-22T03:04:05.123456Z``."""
    return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _json_value(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, bytes | bytearray):
        value = value.decode()
    return json.loads(value) if isinstance(value, str) else value


def build_event(row: Mapping[str, Any], *, source: str) -> dict[str, Any]:
    """The event (a JSON object) for one fsm_outbox row; see docs/kafka.md.

    ``data`` is None (JSON null) when the row holds none.

    >>> from datetime import datetime
    >>> event = build_event({"machine": "order", "transition_id": 7, "instance_key": "o-1",
    ...     "lookup_key": None, "event": "pay", "from_state": "new", "to_state": "paid", "sort_key": 2,
    ...     "data": None, "metadata": '{"by": "checkout"}',
    ...     "occurred_at": datetime(2026, 11, 22, 3, 4, 5, 123456)}, source="shop")
    >>> event["id"], event["data"], event["metadata"], event["occurred_at"]
    ('order:7', None, {'by': 'checkout'}, '2026-11-22T03:04:05.123456Z')
    """
    return {
        "schema_version": SCHEMA_VERSION,
        "id": event_id(row["machine"], int(row["transition_id"])),
        "source": source,
        "machine": row["machine"],
        "instance_key": row["instance_key"],
        "lookup_key": row["lookup_key"],
        "event": row["event"],
        "from_state": row["from_state"],
        "to_state": row["to_state"],
        "sort_key": int(row["sort_key"]),
        "transition_id": int(row["transition_id"]),
        "data": _json_value(row["data"]),
        "metadata": _json_value(row["metadata"]),
        "occurred_at": format_time(row["occurred_at"]),
    }


@dataclass(frozen=True)
class Message:
    """One Kafka message as the relay produces it."""

    topic: str
    key: bytes
    value: bytes
    headers: list[tuple[str, str | bytes | None]]
    timestamp_ms: int


def encode(row: Mapping[str, Any], *, source: str, relay: str) -> Message:
    """The Kafka message for one outbox row: key, JSON value, headers and timestamp."""
    event = build_event(row, source=source)
    value = json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode()
    occurred: datetime = row["occurred_at"]
    epoch_ms = int((occurred - datetime(1970, 1, 1)).total_seconds() * 1000)
    headers: list[tuple[str, str | bytes | None]] = [
        ("event_id", event["id"].encode()),
        ("event", event["event"].encode() if event["event"] is not None else None),
        ("machine", event["machine"].encode()),
        ("schema_version", str(SCHEMA_VERSION).encode()),
        ("relay", relay.encode()),
    ]
    return Message(row["topic"], message_key(row["machine"], row["instance_key"]), value, headers, epoch_ms)


# -- lag --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lag:
    """How far the relay is behind (from ``CALL fsm_outbox_lag_v1()``)."""

    unpublished: int
    parked: int
    oldest_id: int | None
    oldest_occurred_at: datetime | None
    oldest_age_seconds: float | None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Lag:
        age = row["oldest_age_seconds"]
        return cls(
            int(row["unpublished"]),
            int(row["parked"] or 0),
            None if row["oldest_id"] is None else int(row["oldest_id"]),
            row["oldest_occurred_at"],
            None if age is None else float(Decimal(age)),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "unpublished": self.unpublished,
            "parked": self.parked,
            "oldest_id": self.oldest_id,
            "oldest_occurred_at": None if self.oldest_occurred_at is None else format_time(self.oldest_occurred_at),
            "oldest_age_seconds": self.oldest_age_seconds,
        }

    def __str__(self) -> str:
        if not self.unpublished:
            return "unpublished 0: the relay is up to date"
        return (
            f"unpublished {self.unpublished} (parked {self.parked}); oldest: outbox id {self.oldest_id}, "
            f"occurred {self.as_dict()['oldest_occurred_at']}, {self.oldest_age_seconds:.3f} s ago"
        )
