"""The Kafka relay: publish outbox rows, and mark them published once Kafka acknowledged them.

The per-type triggers write one ``fsm_outbox`` row per state change of a machine with a
topic, in the transaction of the change itself, so a rolled-back change never has a row
and a committed one always has. The relay turns those rows into Kafka messages:

* **One active relay per database,** on one server or across a cluster
  (:mod:`pyfsm.relay.leadership`): the leader holds a row of ``fsm_relay_leaders`` with an
  expiry (``lease`` seconds), which every server of a Galera cluster sees, and a MySQL user
  lock (GET_LOCK, :attr:`Relay.lock_name`) on the pooled connection it keeps while it
  leads. A standby waits in ``GET_LOCK(name, 1)``; on the leader's own server it takes over
  within about a second of the leader's connection dying, elsewhere once the row expired.
  The leader renews the row before batches and while it waits for the broker, and resigns
  it when it stops.
* **In order, in batches, at least once.** The leader reads the oldest unpublished rows in
  id order (``batch_size`` at a time), produces them with an idempotent producer
  (``enable.idempotence=true``, ``acks=all``), waits for every delivery report (flush),
  and only then sets ``published_at`` on the rows the broker acknowledged. A crash between
  the acknowledgement and that UPDATE makes the next leader publish those rows again:
  duplicates carry the same event id, losses do not happen.
* **Per-instance order.** The message key is the instance (``machine:instance_key``), so
  one instance's events land in one partition in order. Within a batch, a row is marked
  only if every earlier row of its instance in the batch was acknowledged, and no row of
  an instance is produced after one of its rows failed to be handed to the producer, so a
  failed event is retried before anything that follows it.
* **Faults** (broker down, topic missing, database connection lost): the rows stay, the
  relay logs one line per problem (and one when it clears), backs off exponentially up to
  ``max_backoff`` and carries on by itself.
* **Parking.** An event that can never be published as it is (larger than the producer's
  or broker's message size limit, or rejected as invalid) is *parked*: ``parked_at`` and
  ``last_error`` are set and the relay goes on with other instances. Later events of the
  same instance are parked behind it ("held"), so consumers never see an instance's event
  N+1 without N. :meth:`Relay.unpark` releases them: retry (after raising the limit) or skip
  the event that cannot be published.
* **Retention.** Published rows are deleted once they are older than ``retention``
  seconds (checked every ``cleanup_interval`` seconds by the leader).
* **Latency.** While there is work the relay polls again at once; when a poll finds
  nothing it waits 10 ms, then twice as long each time, up to ``idle_max`` (1 s).

Why over 500 lines: one Relay, whose parts (leadership, reading a batch, producing, marking,
parking, backing off) share one producer, one leader connection and one set of counters and
are read together when reasoning about "at least once, in order"; the parts that stand alone
are apart (leadership.py, kafka.py, events.py).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from .. import db
from ..db import queries
from ..db.driver import errors as pymysql_errors
from ..errors import Deadlock, FsmError, InvalidArgument, SchemaVersionMismatch
from ..schema import install as schema
from ..schema import routines
from .events import Lag, Message, encode, event_id
from .kafka import PERMANENT, Backoff, KafkaLog, Problems, lock_name_for, producer_config
from .leadership import Leadership

log = logging.getLogger("pyfsm.relay")

# The statements are queries of sql/queries/relay.sql (pyfsm.db.queries). An IN list is one
# parameter, a list, which PyMySQL renders as (v1,v2,...): the text a list of %s would give.
ID_CHUNK = 1000  # ids per UPDATE ... WHERE id IN (...)
DELETE_CHUNK = 2000  # rows per DELETE: a few ms, so a batch never waits long

Row = dict[str, Any]
Instance = tuple[str, int]


_NO_REPORT = object()


@dataclass
class RelayStats:
    """Counters since the relay was created."""

    published: int = 0
    batches: int = 0
    failed: int = 0
    parked: int = 0
    held: int = 0
    order_breaks: int = 0
    deleted: int = 0
    leader_terms: int = 0
    idle_waits: list[float] = field(default_factory=list)


# -- the relay --------------------------------------------------------------------------


class Relay:
    """Publishes ``fsm_outbox`` rows to Kafka; see the module documentation.

    ``Relay(dsn, kafka="broker:9092")`` then :meth:`run` (blocks until :meth:`stop`), or
    ``pyfsm relay``. :meth:`lag`, :meth:`parked` and :meth:`unpark` need no broker.

    ``sleep`` replaces the idle/backoff wait (default: a wait that :meth:`stop` interrupts).
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        kafka: str | Mapping[str, Any] | None = None,
        batch_size: int = 1000,
        retention: float = 86400.0,
        delivery_timeout: float = 30.0,
        idle_max: float = 1.0,
        max_backoff: float = 5.0,
        cleanup_interval: float = 10.0,
        standby_wait: int = 1,
        lease: float = 10.0,
        name: str | None = None,
        sleep: Callable[[float], object] | None = None,
    ) -> None:
        self.settings = db.parse_dsn(dsn)
        if not self.settings.database:
            raise InvalidArgument("the DSN names no database: mysql://user:password@host:port/DATABASE")
        if not 1 <= batch_size <= 100_000:
            raise InvalidArgument("batch_size must be between 1 and 100000")
        if retention < 0 or idle_max <= 0 or max_backoff <= 0 or cleanup_interval <= 0:
            raise InvalidArgument("retention must be >= 0; idle_max, max_backoff, cleanup_interval > 0")
        if not 0 <= standby_wait <= 60:
            raise InvalidArgument("standby_wait must be between 0 and 60 seconds")
        if isinstance(lease, bool) or not isinstance(lease, int | float) or not 1 <= lease <= 3600:
            raise InvalidArgument(f"lease must be between 1 and 3600 seconds, got {lease!r:.40}")
        self._kafka = kafka
        self.delivery_timeout = delivery_timeout
        self.kafka_config = producer_config(kafka, delivery_timeout=delivery_timeout) if kafka is not None else None
        self.batch_size = batch_size
        self.retention = retention
        self.idle_max = idle_max
        self.max_backoff = max_backoff
        self.cleanup_interval = cleanup_interval
        self.standby_wait = standby_wait
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.source = self.settings.database
        self.lock_name = lock_name_for(self.settings.database)
        self.stats = RelayStats()
        self._db = db.Database(self.settings, pool_size=2)  # one for the lock, one for the work
        self._stop = threading.Event()
        self._sleep = sleep or self._stop.wait
        self.leadership = Leadership(
            self._db, self.lock_name, self.name, lease=float(lease), standby_wait=standby_wait, sleep=self._sleep
        )
        self._producer: Producer | None = None
        self._fatal: KafkaError | None = None
        self._problems = Problems(log)
        self._next_cleanup = 0.0
        # topic -> (monotonic time it may be tried again, its backoff): a failing topic waits
        # alone, the others go on
        self._cooling: dict[str, tuple[float, Backoff]] = {}
        self._schema_ok = False

    # -- lifecycle ------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask :meth:`run` to return after the batch under way (thread- and signal-safe)."""
        self._stop.set()

    @property
    def is_leader(self) -> bool:
        return self.leadership.held

    def close(self) -> None:
        self.stop()
        self._abdicate()
        self._close_producer()
        self._db.close()

    def __enter__(self) -> Relay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self) -> None:
        """Publish until :meth:`stop` is called: lead or stand by, batch, back off on faults."""
        if self.kafka_config is None:
            self.kafka_config = producer_config(self._kafka, delivery_timeout=self.delivery_timeout)
        idle = Backoff(0.01, self.idle_max)
        failing = Backoff(0.1, self.max_backoff)
        log.info("relay %s started for database %s (lock %s)", self.name, self.settings.database, self.lock_name)
        try:
            while not self._stop.is_set():
                try:
                    self._check_schema()  # inside the loop: a relay started before its database waits
                    if not self._lead():
                        continue  # _lead waited in GET_LOCK
                    handled = self.step()
                except (FsmError, pymysql_errors.MySQLError) as exc:
                    err = self._db.with_server(db.translate(exc))
                    if isinstance(err, SchemaVersionMismatch | InvalidArgument):
                        raise err from exc  # a configuration to fix, not a fault to wait out
                    # anything else (a lost or read-only server during a switchover, a missing
                    # privilege being fixed): keep the rows, say it once, retry with backoff
                    errno = getattr(err, "errno", None) or (exc.args[0] if getattr(exc, "args", None) else "")
                    self._problems.report(
                        "db:",
                        f"database: {type(err).__name__} ({errno}): {err}; events are kept, retrying with backoff",
                    )
                    if self.leadership.held and not isinstance(err, Deadlock):
                        self._abdicate(broken=True)  # a standby may do better meanwhile
                    self._sleep(failing.next())
                    continue
                failing.reset()
                self._problems.clear("db:")
                if handled:
                    idle.reset()
                else:
                    delay = idle.next()
                    self.stats.idle_waits.append(delay)
                    del self.stats.idle_waits[:-100]
                    self._sleep(delay)
        finally:
            self._abdicate()
            self._close_producer()
            log.info("relay %s stopped", self.name)

    # -- leadership -----------------------------------------------------------------------

    def _lead(self) -> bool:
        """True while this relay leads; otherwise try to take over (a standby waits meanwhile)."""
        before = self.leadership.terms
        leads = self.leadership.ensure()
        self.stats.leader_terms += self.leadership.terms - before
        return leads

    def _abdicate(self, *, broken: bool = False) -> None:
        """Give the leadership up (see Leadership.resign); nothing queued is published after."""
        self.leadership.resign(broken=broken)
        # whatever is queued in the producer must not be published by a relay that no longer leads
        if self._producer is not None:
            self._producer.purge()
            self._producer.poll(0)

    # -- one batch ------------------------------------------------------------------------

    def step(self) -> int:
        """Publish one batch (the caller must lead). Returns how many rows were handled."""
        if time.monotonic() >= self._next_cleanup:  # one chunk per batch: publishing never waits long
            more = self._delete_published(chunks=1) == DELETE_CHUNK
            self._next_cleanup = time.monotonic() + (0 if more else self.cleanup_interval)
        rows = self._db.on_connection(self._fetch)
        if not rows:
            return 0
        # "blocked" comes from the same statement (one snapshot) as the rows: an unpark that
        # commits meanwhile can never let a later event of its instance overtake the released ones
        held = [r for r in rows if r["blocked"]]
        if held:
            self._hold(held)
        sendable = [r for r in rows if not r["blocked"]]
        # the fetch (and a hold, a topic probe) took time: lead still, with at least two
        # thirds of the lease left (keep renews past a third), before anything is produced;
        # the advisory lock was asked about at the top of this round (_lead)
        if sendable and not self.leadership.keep(advisory=False):
            return len(held)
        results = self._produce(sendable) if sendable else {}
        # marked even if leadership was lost meanwhile: the broker did acknowledge these
        return len(held) + self._settle(sendable, results)

    def _fetch(self, conn: Any) -> list[Row]:
        """The next batch: the oldest unpublished, unparked rows in id order, leaving out the
        topics that failed; ``blocked`` says an earlier event of the row's instance is parked
        (read through fsm_outbox_instance). A failed topic whose wait is over is tried alone,
        with one row, after asking the broker whether it exists at all, so that its failures
        never make a batch of the healthy topics wait for a delivery timeout."""
        now = time.monotonic()
        for topic in [t for t, (until, _b) in self._cooling.items() if until <= now]:
            backoff = self._cooling[topic][1]
            if not self._topic_answers(topic):
                self._cooling[topic] = (now + backoff.next(), backoff)  # still missing: wait again
                continue
            rows = self._select(conn, ["relay_outbox_topic"], [topic], 1)
            if rows:
                return rows  # its own batch of one: _settle lets the topic back in, or not
            self._cooling.pop(topic)  # nothing left to send to it
        cooling = list(self._cooling)
        if cooling:
            return self._select(conn, ["relay_outbox_not_topics"], [cooling], self.batch_size)
        return self._select(conn, [], [], self.batch_size)

    @staticmethod
    def _select(conn: Any, conditions: list[str], args: list[Any], limit: int) -> list[Row]:
        """relay_fetch with the conditions (names of blocks) after relay_outbox_pending."""
        with conn.cursor() as cur:
            cur.execute(queries.sql("relay_fetch", conditions=["relay_outbox_pending", *conditions]), (*args, limit))
            return _dict_rows(cur)

    def _topic_answers(self, topic: str) -> bool:
        """Whether the broker knows ``topic`` (a quick metadata request, at most 2 s)."""
        try:
            metadata = self._ensure_producer().list_topics(topic, timeout=2)
        except KafkaException:
            return False
        found = metadata.topics.get(topic)
        return found is not None and found.error is None

    def _hold(self, rows: Sequence[Row]) -> None:
        """Park rows whose instance has a parked event, re-checked under row locks.

        Locking the parked rows first serialises this with :meth:`unpark`: a release that
        commits first is seen here, and one that comes later releases these rows too.
        """

        def hold(conn: Any) -> int:
            conn.begin()
            try:
                instances = sorted({(r["machine"], r["instance_id"]) for r in rows})
                with conn.cursor() as cur:
                    cur.execute(queries.sql("relay_hold_roots"), (instances,))
                    roots: dict[Instance, Row] = {}
                    for r in _dict_rows(cur):
                        roots.setdefault((r["machine"], r["instance_id"]), r)
                    count = 0
                    for instance, root in roots.items():
                        ids = [r["id"] for r in rows if (r["machine"], r["instance_id"]) == instance]
                        for chunk in _chunks(ids):
                            cur.execute(
                                queries.sql("relay_hold"),
                                (
                                    f"held: waits behind parked event {event_id(instance[0], root['transition_id'])} "
                                    f"(outbox id {root['id']})",
                                    chunk,
                                ),
                            )
                            count += cur.rowcount
                conn.commit()
                return count
            except BaseException:
                conn.rollback()
                raise

        count = self._db.on_connection(hold)
        self.stats.held += count

    def _produce(self, rows: Sequence[Row]) -> dict[int, Any]:
        """Produce rows in order and wait for every delivery report: id -> None (acked) or error."""
        producer = self._ensure_producer()
        results: dict[int, Any] = {}
        blocked: set[Instance] = set()
        for row in rows:
            instance = (row["machine"], row["instance_id"])
            if instance in blocked:
                continue  # never produce an event after one of its instance that could not be
            message = encode(row, source=self.source, relay=self.name)
            error = self._produce_one(producer, message, partial(_record, results, row["id"]))
            if error is not None:
                results[row["id"]] = error
                blocked.add(instance)
        try:
            remaining = self._flush(producer)
        except Exception as exc:  # a fatal producer error surfaces here, sometimes as a SystemError
            cause = exc if isinstance(exc, KafkaException) else exc.__cause__
            error = cause.args[0] if isinstance(cause, KafkaException) and cause.args else None
            self._fatal = self._fatal or (
                error if isinstance(error, KafkaError) else KafkaError(KafkaError._FATAL, str(exc))
            )
            self._problems.report("kafka:fatal", f"kafka: producer failed ({exc}); starting a new producer")
            remaining = len(producer)
        if remaining or self._fatal is not None:
            self._discard_producer()
        return results

    def _flush(self, producer: Producer) -> int:
        """Wait for every delivery report (at most delivery_timeout + 10 s); how many are missing.

        Waits a third of the lease at a time and renews the leadership in between, so that
        a slow broker does not let the lease run out and a standby publish the same rows.
        Once the leadership is lost it stops waiting: what was not acknowledged stays.
        """
        deadline = time.monotonic() + self.delivery_timeout + 10
        while True:
            left = deadline - time.monotonic()
            remaining = int(producer.flush(max(0.0, min(left, self.leadership.lease / 3))))
            if not remaining or left <= 0 or not self.leadership.keep():
                return remaining

    def _produce_one(self, producer: Producer, message: Message, callback: Callable[..., None]) -> Any:
        for _ in range(100):
            try:
                producer.produce(
                    message.topic,
                    value=message.value,
                    key=message.key,
                    headers=message.headers,
                    timestamp=message.timestamp_ms,
                    on_delivery=callback,
                )
                return None
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.1)
            except KafkaException as exc:
                return exc.args[0]
        return KafkaError(KafkaError._QUEUE_FULL, "the producer's queue stayed full")

    def _settle(self, rows: Sequence[Row], results: Mapping[int, Any]) -> int:
        """Record the outcome: mark the acknowledged prefix of each instance, park or count failures."""
        published: list[int] = []
        parked: list[tuple[Row, Any]] = []
        failed: dict[str, list[int]] = {}
        broken: set[Instance] = set()
        failing_topics: set[str] = set()
        for row in rows:
            instance = (row["machine"], row["instance_id"])
            error = results.get(row["id"], _NO_REPORT)
            if instance in broken:
                if error is None:  # acknowledged although an earlier event of its instance failed
                    self.stats.order_breaks += 1
                    log.warning(
                        "event %s was acknowledged after an earlier event of its instance failed; "
                        "it will be published again after that one",
                        event_id(row["machine"], row["transition_id"]),
                    )
                continue
            if error is None:
                published.append(row["id"])
                continue
            broken.add(instance)
            if error is _NO_REPORT or not (isinstance(error, KafkaError) and error.code() in PERMANENT):
                failing_topics.add(row["topic"])
            if error is _NO_REPORT:
                failed.setdefault("no delivery report (producer reset)", []).append(row["id"])
            elif isinstance(error, KafkaError) and error.code() in PERMANENT:
                parked.append((row, error))
            else:
                failed.setdefault(_describe(error), []).append(row["id"])
                topic_key = f"kafka:{_code_name(error)}:{row['topic']}"
                self._problems.report(
                    topic_key,
                    f"kafka: cannot publish to topic {row['topic']!r}: "
                    f"{_describe(error)}; events are kept, retrying with backoff",
                )

        def write(conn: Any) -> None:
            with conn.cursor() as cur:
                for chunk in _chunks(published):
                    cur.execute(queries.sql("relay_mark_published"), (chunk,))
                for row, error in parked:
                    cur.execute(queries.sql("relay_park"), (_describe(error)[:1024], row["id"]))
                for text, ids in failed.items():
                    for chunk in _chunks(ids):
                        cur.execute(queries.sql("relay_count_failure"), (text[:1024], chunk))

        if published or parked or failed:
            self._db.on_connection(write)  # idempotent statements: safe to repeat on a new connection
        self.stats.batches += 1
        self.stats.published += len(published)
        for row, error in parked:
            self.stats.parked += 1
            self._problems.report(
                f"parked:{row['id']}",
                f"parked event {event_id(row['machine'], row['transition_id'])} (outbox id {row['id']}, "
                f"{row['machine']} {row['instance_key']!r} #{row['sort_key']}, topic {row['topic']!r}): "
                f"{_describe(error)}; later events of this instance wait behind it; "
                f"release with `pyfsm relay --unpark {row['id']}` (add --skip to give it up)",
                logging.ERROR,
            )
        now = time.monotonic()
        for topic in {r["topic"] for r in rows} - failing_topics:
            self._cooling.pop(topic, None)  # it works: no more waiting for it
        for topic in failing_topics:  # it waits alone, longer each time; the other topics go on
            backoff = self._cooling.get(topic, (0.0, Backoff(0.1, self.max_backoff)))[1]
            self._cooling[topic] = (now + backoff.next(), backoff)
        if failed:
            self.stats.failed += sum(len(ids) for ids in failed.values())
            # A fresh producer for the retry: an idempotent producer whose deliveries timed out
            # may wait forever for a broker that forgot its producer id (a restarted broker).
            self._discard_producer()
            # no global backoff: the failing topics wait alone (above) and the next fetch goes
            # on with the others; when every topic fails, the fetch finds nothing and idles
            return len(published) + len(parked)
        self._problems.clear("kafka:")
        return len(published) + len(parked)

    # -- the producer ---------------------------------------------------------------------

    def _ensure_producer(self) -> Producer:
        if self._producer is None:
            assert self.kafka_config is not None
            self._fatal = None
            self._producer = Producer(
                {
                    **self.kafka_config,
                    "error_cb": self._on_kafka_error,
                    "logger": KafkaLog(logging.getLogger("pyfsm.relay.librdkafka")),
                }
            )
        return self._producer

    def _on_kafka_error(self, error: KafkaError) -> None:
        if error.fatal():
            self._fatal = error
            self._problems.report("kafka:fatal", f"kafka: fatal producer error, starting a new producer: {error.str()}")
        elif error.code() == KafkaError._ALL_BROKERS_DOWN:
            self._problems.report(
                "kafka:brokers", f"kafka: no broker reachable ({error.str()}); events are kept, retrying with backoff"
            )
        else:
            log.debug("kafka: %s", error.str())

    def _discard_producer(self) -> None:
        """Drop the producer (after a fatal error or unfinished deliveries): a new one starts clean."""
        self._close_producer()

    def _close_producer(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            producer.purge()
            producer.poll(0)
            producer.close()

    # -- housekeeping ---------------------------------------------------------------------

    def _check_schema(self) -> None:
        if not self._schema_ok:
            self._db.on_connection(schema.check)
            self._schema_ok = True

    def cleanup(self) -> int:
        """Delete every published row older than ``retention`` seconds; returns how many."""
        return self._delete_published(chunks=None)

    def _delete_published(self, *, chunks: int | None) -> int:
        cutoff_us = int(self.retention * 1_000_000)

        def delete(conn: Any) -> int:
            total = 0
            with conn.cursor() as cur:
                for _ in range(chunks or 1_000_000):
                    cur.execute(queries.sql("relay_delete_published"), (cutoff_us, DELETE_CHUNK))
                    total += cur.rowcount
                    if cur.rowcount < DELETE_CHUNK:
                        break
            return total

        deleted = self._db.on_connection(delete)
        self.stats.deleted += deleted
        if deleted:
            log.debug("deleted %d published outbox rows older than %s s", deleted, self.retention)
        return deleted

    def lag(self) -> Lag:
        """Count and age of the unpublished events (``CALL fsm_outbox_lag_v1()``)."""
        self._check_schema()
        rows = self._db.run(routines.OUTBOX_LAG.call_sql(), (), retry_connection=True, writes=False)
        return Lag.from_row(rows[0])

    def parked(self) -> list[dict[str, Any]]:
        """The parked events, oldest first: the ones that failed and the ones held behind them."""
        self._check_schema()

        def read(conn: Any) -> list[Row]:
            with conn.cursor() as cur:
                cur.execute(queries.sql("relay_parked"))
                return _dict_rows(cur)

        return [{**r, "event_id": event_id(r["machine"], r["transition_id"])} for r in self._db.on_connection(read)]

    def unpark(self, outbox_id: int, *, skip: bool = False) -> int:
        """Release the parked event ``outbox_id`` and every event of its instance parked behind it.

        Without ``skip`` the event is tried again (after, say, raising the size limit);
        with ``skip`` it is given up: marked published without being published, its
        ``last_error`` kept with a ``skipped:`` prefix. Returns how many rows were released.
        """
        if isinstance(outbox_id, bool) or not isinstance(outbox_id, int) or not 1 <= outbox_id < 2**64:
            raise InvalidArgument(f"outbox id must be a positive integer, got {outbox_id!r:.40}")
        if not isinstance(skip, bool):
            raise InvalidArgument(f"skip must be True or False, got {skip!r:.40}")
        self._check_schema()
        # fsm_unpark_v1 (one transaction under the parked rows' locks); a write: a lost reply
        # is not repeated (the repeat would find nothing parked)
        rows = self._db.run(routines.UNPARK.call_sql(), (outbox_id, int(skip)), retry_connection=False, writes=True)
        released = int(rows[0]["released"])
        log.info(
            "unparked event with outbox id %s%s: %d rows released", outbox_id, " (skipped)" if skip else "", released
        )
        return released


def lag(dsn: str | None = None) -> Lag:
    """The relay's lag for the database at ``dsn`` (default $PYFSM_DSN)."""
    relay = Relay(dsn)
    try:
        return relay.lag()
    finally:
        relay.close()


# -- small helpers ----------------------------------------------------------------------


def _record(results: dict[int, Any], row_id: int, error: KafkaError | None, _message: Any) -> None:
    results[row_id] = error


def _dict_rows(cur: Any) -> list[Row]:
    if cur.description is None:
        return []
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _chunks(ids: Sequence[int]) -> Iterable[list[int]]:
    for start in range(0, len(ids), ID_CHUNK):
        yield list(ids[start : start + ID_CHUNK])


def _code_name(error: Any) -> str:
    return error.name() if isinstance(error, KafkaError) else type(error).__name__


def _describe(error: Any) -> str:
    if isinstance(error, KafkaError):
        return f"{error.name()}: {error.str()}"
    return str(error)
