"""The relay's Kafka plumbing: producer settings, log routing, backoff, one line per problem."""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError

from ..errors import InvalidArgument

#: Kafka errors that retrying cannot fix: the event is parked.
PERMANENT = frozenset({KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE, KafkaError.INVALID_RECORD})

#: Producer settings the relay's guarantees rest on; a config that says otherwise is refused.
REQUIRED_PRODUCER = {"enable.idempotence": True, "acks": "all"}


def lock_name_for(database: str) -> str:
    """The relay's GET_LOCK name for a database: lowercase ASCII, at most 64 characters.

    User locks are server-wide, so the name carries a hash of the database name.
    """
    return "pyfsm_relay_" + hashlib.sha256(database.encode()).hexdigest()[:40]


class Backoff:
    """Delays that start at ``first`` and double up to ``maximum``; ``reset()`` starts over.

    >>> b = Backoff(0.01, 0.05)
    >>> [b.next() for _ in range(5)]
    [0.01, 0.02, 0.04, 0.05, 0.05]
    """

    def __init__(self, first: float, maximum: float, factor: float = 2.0) -> None:
        self.first, self.maximum, self.factor = first, maximum, factor
        self._next = first

    def next(self) -> float:
        delay = self._next
        self._next = min(self.maximum, round(delay * self.factor, 6))
        return delay

    def reset(self) -> None:
        self._next = self.first


class Problems:
    """One log line when a problem starts, one when it clears; repeats go to DEBUG."""

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger
        self.active: dict[str, str] = {}

    def report(self, key: str, message: str, level: int = logging.WARNING) -> None:
        if key in self.active:
            self.logger.debug(message)
            return
        self.active[key] = message
        self.logger.log(level, message)

    def clear(self, prefix: str) -> None:
        for key in [k for k in self.active if k.startswith(prefix)]:
            self.logger.info("resolved: %s", self.active.pop(key))


class KafkaLog:
    """librdkafka's own log lines go to DEBUG: the relay logs each problem once itself."""

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger

    def log(self, _level: int, fmt: str, *args: Any) -> None:
        self.logger.debug(fmt, *args)


def producer_config(kafka: str | Mapping[str, Any] | None, *, delivery_timeout: float) -> dict[str, Any]:
    """librdkafka settings for the relay's producer.

    ``kafka`` is ``host:port[,host:port]`` or a dict of librdkafka settings; None reads
    $PYFSM_KAFKA. Idempotence and ``acks=all`` are always on.
    """
    if kafka is None:
        kafka = os.environ.get("PYFSM_KAFKA")
    if not kafka:
        raise InvalidArgument("no Kafka brokers given: pass kafka='host:port' (or --kafka) or set PYFSM_KAFKA")
    conf: dict[str, Any] = {"bootstrap.servers": kafka} if isinstance(kafka, str) else dict(kafka)
    if not conf.get("bootstrap.servers"):
        raise InvalidArgument("the Kafka settings lack bootstrap.servers")
    if str(conf.get("enable.idempotence", True)).lower() not in ("true", "1"):
        raise InvalidArgument("the relay needs enable.idempotence=true")
    if str(conf.get("acks", "all")).lower() not in ("all", "-1"):
        raise InvalidArgument("the relay needs acks=all")
    if not 0.1 <= delivery_timeout <= 3600:
        raise InvalidArgument("delivery_timeout must be between 0.1 and 3600 seconds")
    defaults = {
        "client.id": "pyfsm-relay",
        "linger.ms": 5,
        "message.timeout.ms": int(delivery_timeout * 1000),
        "partitioner": "murmur2_random",  # the Java client's partitioner: same key, same partition
    }
    return {**defaults, **conf, **REQUIRED_PRODUCER}
