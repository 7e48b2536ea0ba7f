"""Reporting at scale: in-state listings, one instance's history and counts per state on a big data set.

Builds (or, with ``--reuse``, reuses) a database ``pyfsm_bench_reporting`` holding one
order-like machine type with 1,000,000 instances and 10,000,000 history rows (``--instances``,
``--history-per-instance``), then measures the reporting surface of revision 0004 on it:

* in-state listing, first page of 50: ``fsm_v_order`` and ``CALL fsm_order_in_state_v1``, for
  the biggest and for the smallest state (and, a few runs, the cross-type ``fsm_v_instances``);
* one instance's history, random instances: ``fsm_v_order_transitions``,
  ``CALL fsm_order_history_v1`` and the cross-type ``fsm_v_history``;
* counts per state: ``fsm_v_state_counts`` and ``CALL fsm_counts_v2`` (the counters), beside
  the ``GROUP BY`` over the instance table that the counters replace;
* one instance through the cross-type ``fsm_v_instances`` and through ``fsm_v_order``, and
  ``CALL fsm_state_at_v1``;
* for reference, ``fsm_v_failed`` and a few runs of ``fsm_v_stuck`` and ``fsm_v_funnel``
  (the last reads all history by design);
* across types (issue 18): the first page of a state through ``CALL fsm_instances_in_state_v1``
  (a state of the order type only, the biggest and the smallest; the state ``new`` that both
  types have; the page that crosses from one type to the other), beside the cross-type view
  ``fsm_v_instances`` sorted by machine and id (a few runs); one account's history, all types,
  through ``CALL fsm_account_history_v1`` (newest first, oldest first, the next page), beside
  ``fsm_v_history WHERE lookup_key`` sorted by time. The accounts are random accounts that
  have instances of both types, each query its own;
* the INSERT+COMMIT ceiling of bench_transitions, in the same run.

Each query runs warm (a few untimed runs first, with other arguments), then ``--reps`` times
(200; the slow ones 5 times, the funnel once), on one connection: p50 and p95 as the client
sees them, every result set read. A query that takes an instance gets new random instances
for every run, its own, never read by an earlier query of the run (so the buffer pool holds
what a real lookup would find there, not what the previous query just read). Beside the
times: rows the server touched per run (the session's ``Handler_read%`` counters, procedures
and temporary tables included) and buffer pool reads from disk per run (server-wide). Every
SELECT is EXPLAINed (classic EXPLAIN: MariaDB's and MySQL 8's default, MySQL 9's FORMAT=TRADITIONAL) and every row
checked: a base table read with type ALL or a full index scan (type index) is flagged SCAN,
and so is a query that reads more than 10,000 rows per run and 20 times what it returns,
unless reading everything is its point. For a CALL, the statements inside the procedure are
EXPLAINed with the same arguments (for the cross-type procedures, the statement their internal
function ``fsm_..._sql_v1`` returns for them, checked once to give the CALL's rows).

Loading 10,000,000 history rows through the triggers would take hours, so the load goes
around them: the type's triggers are dropped, instances and history are written with
INSERT ... SELECT from a number table (bench_seq, built from a digits table: no recursive
CTE, no MariaDB-only sequence engine) in chunks, exactly as the triggers would have written
them (sort_key 1..n per instance, most_recent 1 on the last row only, left_at the next row's
created_at, the instance's state, version and status those of its last row), the counters
are rebuilt (pyfsm.schema.rebuild_state_counts) and the triggers created again
(pyfsm.schema.install_machine_objects), then ANALYZE TABLE. Nothing else writes to that
database meanwhile. A second small type (``ticket``, 2,000 instances created through the
triggers, a third each in ``new``, ``open`` and ``closed``, each of an account of the order type)
makes the cross-type views unions of two branches, as they are in any real installation. The load is
checked afterwards: counters against a GROUP BY, history invariants on a sample, and one
transition through the recreated triggers (rolled back).

The database is kept, so that later runs can skip the load (``--reuse``).
"""

from __future__ import annotations

import argparse
import datetime
import os
import random
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_transitions as bt

from pyfsm import Machine, Store
from pyfsm.db import Settings, connect, parse_dsn
from pyfsm.schema import install as schema

MARK = ("<!-- bench-reporting:start -->", "<!-- bench-reporting:end -->")
SECTION = "## Reporting at scale"
NAME = "order"
MACHINE = Machine(
    name=NAME,
    states=["new", "paid", "on_hold", "packed", "shipped", "delivered", "cancelled", "refunded"],
    start=["new"],
    final=["delivered", "cancelled", "refunded"],
    transitions=[
        ("pay", "new", "paid"),
        ("remind", "new", "new"),  # a payment reminder: a transition that stays in its state
        ("hold", ["paid", "packed"], "on_hold"),
        ("release", "on_hold", "paid"),
        ("pack", "paid", "packed"),
        ("ship", "packed", "shipped"),
        ("track", "shipped", "shipped"),  # a carrier scan
        ("deliver", "shipped", "delivered"),
        ("cancel", ["new", "paid", "on_hold"], "cancelled"),
        ("refund", ["on_hold", "shipped"], "refunded"),
    ],
)
#: A second, small type created through the triggers: it makes the cross-type views unions of two
#: branches, shares the state "new" with the order type and belongs to accounts of the order type
#: (lookup key ``acct-<25 n>``), so that the cross-type procedures merge two types' rows.
OTHER = Machine(
    name="ticket",
    states=["new", "open", "closed"],
    start=["new"],
    final=["closed"],
    transitions=[("triage", "new", "open"), ("close", "open", "closed")],
)
OTHER_INSTANCES = 2000
ACCOUNTS = 50_000  # lookup keys acct-0 .. acct-49999: an order instance's is acct-<id % ACCOUNTS>
OTHER_ACCOUNT_STEP = ACCOUNTS // OTHER_INSTANCES  # ticket t-n belongs to acct-<n * step>

#: Where instances end up: (per mille, the states of the path, the position (1-based) of the
#: state whose self-loop takes the extra rows that bring a path to its length). 70% delivered,
#: 10% cancelled, 5% refunded, 15% in the five non-final states (2-4% each).
TEMPLATES: tuple[tuple[int, tuple[str, ...], int], ...] = (
    (600, ("new", "paid", "packed", "shipped", "delivered"), 4),
    (100, ("new", "paid", "on_hold", "paid", "packed", "shipped", "delivered"), 6),
    (60, ("new", "cancelled"), 1),
    (40, ("new", "paid", "on_hold", "cancelled"), 1),
    (50, ("new", "paid", "packed", "shipped", "refunded"), 4),
    (30, ("new",), 1),
    (30, ("new", "paid"), 1),
    (20, ("new", "paid", "on_hold"), 1),
    (30, ("new", "paid", "packed"), 1),
    (40, ("new", "paid", "packed", "shipped"), 4),
)
LENGTH_SPREAD = 5  # an instance's history has h-2 .. h+2 rows (id % 5), h on average
DAYS = 730  # instances were created over two years, ending two days ago
REPS = {"fast": 200, "scan": 5, "funnel": 1}
KEYED_QUERIES = 6  # queries that take an instance (each gets its own random instances)
ACCOUNT_QUERIES = 4  # queries that take an account (each gets its own random accounts)
MANY_ROWS = 10_000  # rows read per run above which a query is flagged, unless a full read is its point
WARMUP = 10
HANDLER_READS = (
    "Handler_read_first",
    "Handler_read_key",
    "Handler_read_last",
    "Handler_read_next",
    "Handler_read_prev",
    "Handler_read_rnd",
    "Handler_read_rnd_deleted",
    "Handler_read_rnd_next",
    "Handler_read_retry",
)
DERIVED = ("<derived", "<union", "<subquery", "<materialize")  # EXPLAIN's names for temporary results


def key_of(n: int) -> str:
    return f"o-{n:010d}"


KEY_SQL = "CONCAT('o-', LPAD({}, 10, '0'))"  # key_of in SQL


# -- the data set -------------------------------------------------------------------------


def paths(h: int) -> list[tuple[int, int, int, str | None, str | None, str, int]]:
    """Every history row any instance gets: (path, row, rows in path, event, from, to, is last).

    Path ``template * LENGTH_SPREAD + r`` is template ``template`` stretched to
    ``max(h - 2 + r, len(template))`` rows with its loop state's self-loop event.
    """
    rows = []
    for t, (_, states, loop_at) in enumerate(TEMPLATES):
        for r in range(LENGTH_SPREAD):
            length = max(h - LENGTH_SPREAD // 2 + r, len(states))
            pad = length - len(states)
            walk = [*states[:loop_at], *[states[loop_at - 1]] * pad, *states[loop_at:]]
            for i, to in enumerate(walk, 1):
                frm = walk[i - 2] if i > 1 else None
                events = [] if frm is None else [e for e in MACHINE.events_from(frm) if MACHINE.target(frm, e) == to]
                assert frm is None or len(events) == 1, (frm, to, events)
                rows.append(
                    (t * LENGTH_SPREAD + r, i, length, events[0] if events else None, frm, to, int(i == length))
                )
    return rows


HELPER_TABLES = (
    "CREATE TABLE bench_meta (name VARCHAR(64) NOT NULL PRIMARY KEY, value VARCHAR(255) NOT NULL) ENGINE=InnoDB",
    "CREATE TABLE bench_digits (d TINYINT UNSIGNED NOT NULL PRIMARY KEY) ENGINE=InnoDB",
    "CREATE TABLE bench_seq (n INT UNSIGNED NOT NULL PRIMARY KEY) ENGINE=InnoDB",
    """CREATE TABLE bench_buckets (bucket SMALLINT UNSIGNED NOT NULL PRIMARY KEY,
       template TINYINT UNSIGNED NOT NULL) ENGINE=InnoDB""",
    """CREATE TABLE bench_paths (path SMALLINT UNSIGNED NOT NULL, i SMALLINT UNSIGNED NOT NULL,
       length SMALLINT UNSIGNED NOT NULL, event VARCHAR(64) NULL, from_state VARCHAR(64) NULL,
       to_state VARCHAR(64) NOT NULL, is_last TINYINT NOT NULL, is_final TINYINT NOT NULL,
       PRIMARY KEY (path, i)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin""",
    """CREATE TABLE bench_chunk (id BIGINT UNSIGNED NOT NULL PRIMARY KEY, path SMALLINT UNSIGNED NOT NULL,
       created_at DATETIME(6) NOT NULL, gap_us BIGINT NOT NULL, data VARCHAR(100) NOT NULL
       ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin""",
)


def meta(cur: Any) -> dict[str, str]:
    try:
        cur.execute("SELECT name, value FROM bench_meta")
    except pymysql.err.ProgrammingError:
        return {}
    return {name: value for name, value in cur.fetchall()}


def set_meta(cur: Any, **values: object) -> None:
    for name, value in values.items():
        cur.execute("REPLACE INTO bench_meta (name, value) VALUES (%s, %s)", (name, str(value)))


def check_disk(admin: Any, instances: int, history: int) -> None:
    """Refuse to load when the server's data directory (if on this host) has too little room."""
    need = instances * 450 + history * 380  # bytes with indexes: 1.7x what 1,000,000 + 10,000,000 took
    with admin.cursor() as cur:
        cur.execute("SELECT @@datadir")
        (datadir,) = cur.fetchone()
    if not os.path.isdir(datadir):
        print(f"data directory {datadir} is not on this host; about {need / 1e9:.1f} GB are needed", file=sys.stderr)
        return
    free = shutil.disk_usage(datadir).free
    print(f"the data set needs about {need / 1e9:.1f} GB; {free / 1e9:.1f} GB free in {datadir}", file=sys.stderr)
    if free < 2 * need + 2e9:
        raise SystemExit(f"not enough disk: {free / 1e9:.1f} GB free, want {(2 * need + 2e9) / 1e9:.1f} GB")


def build(settings: Settings, instances: int, h: int, chunk: int) -> dict[str, str]:
    """Create the database, load the data set around the triggers and check it; returns bench_meta."""
    with Store(settings.dsn(), pool_size=1) as store:
        store.migrate()
        store.define(MACHINE)
        store.define(OTHER)
        for n in range(OTHER_INSTANCES):  # through the triggers: a second branch for the cross-type views
            store.create(OTHER.name, f"t-{n}", lookup_key=f"acct-{n * OTHER_ACCOUNT_STEP}")
            for event in ("triage", "close")[: n % 3]:  # a third each in new, open and closed
                store.send(OTHER.name, f"t-{n}", event)
    conn = connect(settings)
    try:
        with conn.cursor() as cur:
            for ddl in HELPER_TABLES:
                cur.execute(ddl)
            cur.execute(bt.TABLES[0])  # the ceiling's table
            set_meta(cur, complete=0, instances=instances, history_per_instance=h)
            cur.execute(
                "SELECT d.version, d.save_after_step, d.uses_global_lock, d.uses_local_lock "
                "FROM fsm_definitions d JOIN fsm_machines m ON m.machine = d.machine "
                "AND m.current_version = d.version WHERE d.machine = %s",
                (NAME,),
            )
            definition = cur.fetchone()
            fill_helpers(cur, h, chunk)
            started = time.perf_counter()
            triggers = drop_triggers(cur)
            history = load(cur, instances, chunk, definition)
            print("rebuilding fsm_state_counts, creating the triggers again...", file=sys.stderr, flush=True)
            schema.rebuild_state_counts(cur, NAME)
        schema.install_machine_objects(conn, NAME)
        loaded = time.perf_counter() - started
        with conn.cursor() as cur:
            cur.execute(
                "SELECT trigger_name FROM information_schema.triggers WHERE trigger_schema = DATABASE() "
                "AND event_object_table IN (%s, %s)",
                (f"fsm_{NAME}", f"fsm_{NAME}_transitions"),
            )
            back = sorted(row[0] for row in cur.fetchall())
            assert back == triggers, f"triggers before the load {triggers}, after {back}"
            print("ANALYZE TABLE...", file=sys.stderr, flush=True)
            started = time.perf_counter()
            for table in (f"fsm_{NAME}", f"fsm_{NAME}_transitions", "fsm_state_counts"):
                cur.execute(f"ANALYZE TABLE `{table}`")
                cur.fetchall()
            analyzed = time.perf_counter() - started
            print(
                f"loaded {instances:,} instances and {history:,} history rows in {loaded:.0f} s "
                f"({history / loaded:,.0f} history rows/s), ANALYZE TABLE {analyzed:.0f} s",
                file=sys.stderr,
            )
            verify(conn, instances, history)
            set_meta(
                cur,
                complete=1,
                history_rows=history,
                load_seconds=f"{loaded:.0f}",
                analyze_seconds=f"{analyzed:.0f}",
                loaded_on=datetime.date.today().isoformat(),
                chunk=chunk,
            )
            return meta(cur)
    finally:
        conn.close()


def fill_helpers(cur: Any, h: int, chunk: int) -> None:
    """The number table (0 .. chunk-1, from a cross join of digits), buckets and paths."""
    cur.execute("INSERT INTO bench_digits (d) VALUES " + ", ".join(f"({d})" for d in range(10)))
    width = len(str(max(chunk - 1, 1)))
    tables = ", ".join(f"bench_digits d{k}" for k in range(width))
    number = " + ".join(f"d{k}.d * {10**k}" for k in range(width))
    cur.execute(f"INSERT INTO bench_seq (n) SELECT {number} FROM {tables} WHERE {number} < %s", (chunk,))
    buckets = [t for t, (per_mille, _, _) in enumerate(TEMPLATES) for _ in range(per_mille)]
    assert len(buckets) == 1000
    cur.executemany("INSERT INTO bench_buckets (bucket, template) VALUES (%s, %s)", list(enumerate(buckets)))
    final = set(MACHINE.final)
    cur.executemany(
        "INSERT INTO bench_paths (path, i, length, event, from_state, to_state, is_last, is_final) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
        [(*row, int(row[5] in final)) for row in paths(h)],
    )


def drop_triggers(cur: Any) -> list[str]:
    cur.execute(
        "SELECT trigger_name FROM information_schema.triggers WHERE trigger_schema = DATABASE() "
        "AND event_object_table IN (%s, %s)",
        (f"fsm_{NAME}", f"fsm_{NAME}_transitions"),
    )
    triggers = sorted(row[0] for row in cur.fetchall())
    assert len(triggers) >= 6, triggers
    for trigger in triggers:
        cur.execute(f"DROP TRIGGER `{trigger}`")
    print(f"dropped {len(triggers)} triggers: {', '.join(triggers)}", file=sys.stderr)
    return triggers


def load(cur: Any, instances: int, chunk: int, definition: tuple[int, int, int, int]) -> int:
    """Write instances 1..``instances`` and their history, ``chunk`` instances per statement."""
    version, save, global_lock, local_lock = definition
    end = datetime.datetime.now(datetime.UTC).replace(tzinfo=None, microsecond=0) - datetime.timedelta(days=2)
    start = end - datetime.timedelta(days=DAYS)
    step_us = DAYS * 86400 * 10**6 // instances  # between two instances' creations
    history, started = 0, time.perf_counter()
    for first in range(1, instances + 1, chunk):
        count = min(chunk, instances - first + 1)
        cur.execute("TRUNCATE TABLE bench_chunk")
        # The instance's path from a hash of its id (bucket) and id % 5 (length); 10 min to 2 h
        # between two transitions of an instance.
        cur.execute(
            "INSERT INTO bench_chunk (id, path, created_at, gap_us, data) "
            f"SELECT s.n + %(first)s, b.template * {LENGTH_SPREAD} + MOD(s.n + %(first)s, {LENGTH_SPREAD}), "
            "TIMESTAMPADD(MICROSECOND, (s.n + %(first)s - 1) * %(step)s, %(start)s), "
            "(600 + MOD(CRC32(CONCAT('g', s.n + %(first)s)), 6600)) * 1000000, "
            "CONCAT('{\"customer\":', MOD(s.n + %(first)s, 100000), ',\"total\":', MOD(s.n + %(first)s, 997), "
            "'.99}') "
            "FROM bench_seq s JOIN bench_buckets b ON b.bucket = MOD(CRC32(CONCAT('b', s.n + %(first)s)), 1000) "
            "WHERE s.n < %(count)s",
            {"first": first, "step": step_us, "start": start, "count": count},
        )
        cur.execute(
            f"INSERT INTO `fsm_{NAME}` (id, machine, instance_key, lookup_key, current_state, status, "
            "resume_from_step, save_after_step, kafka_topic, data, created_at, updated_at, uses_global_lock, "
            "uses_local_lock, unlocked_at, last_retry_at, definition_version, version) "
            f"SELECT c.id, %s, {KEY_SQL.format('c.id')}, CONCAT('acct-', MOD(c.id, %s)), p.to_state, "
            "IF(p.is_final, 'completed', 'running'), NULL, %s, NULL, c.data, c.created_at, "
            "TIMESTAMPADD(MICROSECOND, (p.i - 1) * c.gap_us, c.created_at), %s, %s, NULL, NULL, %s, p.i "
            "FROM bench_chunk c JOIN bench_paths p ON p.path = c.path AND p.is_last = 1 ORDER BY c.id",
            (NAME, ACCOUNTS, save, global_lock, local_lock, version),
        )
        cur.execute(
            f"INSERT INTO `fsm_{NAME}_transitions` (instance_id, sort_key, most_recent, event, from_state, "
            "to_state, handler, data_before, data_after, metadata, definition_version, request_id, source, "
            "created_at, left_at) "
            "SELECT c.id, p.i, IF(p.is_last, 1, NULL), p.event, p.from_state, p.to_state, NULL, "
            "IF(p.i = 1, NULL, c.data), c.data, '{}', %s, NULL, 'procedure', "
            "TIMESTAMPADD(MICROSECOND, (p.i - 1) * c.gap_us, c.created_at), "
            "IF(p.is_last, NULL, TIMESTAMPADD(MICROSECOND, p.i * c.gap_us, c.created_at)) "
            "FROM bench_chunk c JOIN bench_paths p ON p.path = c.path ORDER BY c.id, p.i",
            (version,),
        )
        history += cur.rowcount
        done = first + count - 1
        elapsed = time.perf_counter() - started
        print(
            f"  {done:,}/{instances:,} instances, {history:,} history rows, {elapsed:.0f} s "
            f"({history / elapsed:,.0f} rows/s, about {elapsed * (instances - done) / done:.0f} s to go)",
            file=sys.stderr,
            flush=True,
        )
    cur.execute("TRUNCATE TABLE bench_chunk")
    return history


def verify(conn: Any, instances: int, history: int) -> None:
    """Cheap checks that the load is what the triggers would have written; raises if not."""
    with conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*), MAX(id) FROM `fsm_{NAME}`")
        assert cur.fetchone() == (instances, instances)
        cur.execute(f"SELECT COUNT(*) FROM `fsm_{NAME}_transitions`")
        assert cur.fetchone()[0] == history
        cur.execute("SELECT state, instances FROM fsm_v_state_counts WHERE machine = %s AND instances <> 0", (NAME,))
        counters = {state: int(n) for state, n in cur.fetchall()}
        cur.execute(f"SELECT current_state, COUNT(*) FROM `fsm_{NAME}` GROUP BY current_state")
        counted = {state: int(n) for state, n in cur.fetchall()}
        assert counters == counted, (counters, counted)
        print(
            "counts: " + ", ".join(f"{s} {n:,}" for s, n in sorted(counted.items(), key=lambda x: -x[1])),
            file=sys.stderr,
        )
        sample = random.Random(1).sample(range(1, instances + 1), min(2000, instances))
        marks = ", ".join(["%s"] * len(sample))
        # Per instance: rows, max sort_key, rows with most_recent 1, that row agreeing with the
        # instance, left_at chained to the next row's created_at, the last row's left_at NULL.
        cur.execute(
            "SELECT COUNT(*) FROM (SELECT i.id, i.version, COUNT(*) AS n, MAX(h.sort_key) AS top, "
            "SUM(h.most_recent <=> 1) AS recent, "
            "SUM(h.most_recent <=> 1 AND h.sort_key = i.version AND h.to_state = i.current_state "
            "    AND h.created_at = i.updated_at AND h.left_at IS NULL) AS current_ok, "
            "SUM(h.most_recent IS NULL AND h.left_at = nx.created_at AND nx.from_state = h.to_state "
            "    AND h.created_at < h.left_at) AS chained "
            f"FROM `fsm_{NAME}` i JOIN `fsm_{NAME}_transitions` h ON h.instance_id = i.id "
            f"LEFT JOIN `fsm_{NAME}_transitions` nx ON nx.instance_id = i.id AND nx.sort_key = h.sort_key + 1 "
            f"WHERE i.id IN ({marks}) GROUP BY i.id, i.version) x "
            "WHERE n = version AND top = version AND recent = 1 AND current_ok = 1 AND chained = n - 1",
            sample,
        )
        good = cur.fetchone()[0]
        assert good == len(sample), f"only {good} of {len(sample)} sampled instances have a consistent history"
        # One transition through the recreated triggers, rolled back.
        cur.execute(f"SELECT id, version FROM `fsm_{NAME}` WHERE current_state = 'new' ORDER BY id LIMIT 1")
        instance_id, version = cur.fetchone()
        conn.begin()
        try:
            cur.execute("SET @fsm_event = 'pay'")
            cur.execute(f"UPDATE `fsm_{NAME}` SET current_state = 'paid' WHERE id = %s", (instance_id,))
            cur.execute(
                f"SELECT sort_key, from_state, to_state FROM `fsm_{NAME}_transitions` "
                "WHERE instance_id = %s AND most_recent = 1",
                (instance_id,),
            )
            assert cur.fetchone() == (version + 1, "new", "paid")
            cur.execute(
                f"SELECT COUNT(*) FROM `fsm_{NAME}_transitions` WHERE instance_id = %s AND left_at IS NULL",
                (instance_id,),
            )
            assert cur.fetchone()[0] == 1
            cur.execute("SELECT instances FROM fsm_v_state_counts WHERE machine = %s AND state = 'paid'", (NAME,))
            assert int(cur.fetchone()[0]) == counted.get("paid", 0) + 1
        finally:
            conn.rollback()
            cur.execute("SET @fsm_event = NULL")
    print(
        f"verified: counters = GROUP BY, {len(sample):,} sampled histories consistent, "
        "one transition through the triggers (rolled back)",
        file=sys.stderr,
    )


# -- measuring ----------------------------------------------------------------------------


@dataclass
class Query:
    label: str
    sql: str
    args: Callable[[int], Sequence[Any]]  # run number -> arguments
    kind: str = "fast"  # fast, scan (the comparison scans), funnel
    explain: Sequence[tuple[str, Callable[[int], Sequence[Any]]]] = ()  # for a CALL: its statements
    expected: tuple[str, ...] = ()  # tables (EXPLAIN's names) whose full read is expected, and why:
    why: str = ""
    times_ms: list[float] = field(default_factory=list)
    rows_read: float = 0.0
    disk_reads: float = 0.0
    verdict: str = ""
    returned: float = 0.0  # rows per run
    plan: list[str] = field(default_factory=list)
    generated: str = ""  # for a CALL of a cross-type procedure: the function returning its statement

    def pct(self, q: int) -> float:
        t = self.times_ms
        return statistics.quantiles(t, n=100, method="inclusive")[q - 1] if len(t) > 1 else t[0]


def run(cur: Any, sql: str, args: Sequence[Any]) -> int:
    """Run a statement and read every result set; returns the rows of the last one that has rows."""
    cur.execute(sql, args)
    rows = len(cur.fetchall())
    while cur.nextset():
        rows = len(cur.fetchall()) or rows
    return rows


def handler_reads(cur: Any) -> int:
    cur.execute("SHOW SESSION STATUS LIKE 'Handler_read%'")
    return sum(int(v) for k, v in cur.fetchall() if k in HANDLER_READS)


def disk_reads(cur: Any) -> int:
    cur.execute("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_reads'")
    return int(cur.fetchone()[1])


def time_query(cur: Any, q: Query, reps: int) -> None:
    """Warm up with other arguments, then time ``reps`` runs; count rows and disk reads per run."""
    for i in range(WARMUP if q.kind == "fast" else 0 if q.kind == "funnel" else 1):
        run(cur, q.sql, q.args(reps + i))
    a = handler_reads(cur)
    calibration = handler_reads(cur) - a  # what SHOW STATUS itself adds
    reads, disk, returned = handler_reads(cur), disk_reads(cur), 0
    for i in range(reps):
        args = q.args(i)
        started = time.perf_counter()
        returned += run(cur, q.sql, args)
        q.times_ms.append((time.perf_counter() - started) * 1000)
    q.returned = returned / reps
    q.disk_reads = (disk_reads(cur) - disk) / reps
    q.rows_read = (handler_reads(cur) - reads - calibration) / reps


def explain(cur: Any, sql: str, args: Sequence[Any]) -> list[dict[str, Any]]:
    # the classic table: MySQL 9's default explain_format is a tree (MariaDB has no FORMAT=TRADITIONAL)
    mariadb = "mariadb" in str(cur.connection.get_server_info()).lower()
    cur.execute(("EXPLAIN " if mariadb else "EXPLAIN FORMAT=TRADITIONAL ") + sql, args)
    names = [d[0].lower() for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def judge(rows: list[dict[str, Any]]) -> tuple[list[str], list[tuple[str, str]]]:
    """(accesses as 'table:key/type', scans as (table, description)) of an EXPLAIN.

    A scan is a base table read with type ALL or index (a full index scan), or with no key.
    Reading a temporary result (a derived table, a union) is not: its inner reads are judged.
    """
    accesses, scans = [], []
    for row in rows:
        table, kind, key = row.get("table"), row.get("type"), row.get("key")
        if table is None:
            continue
        extra = str(row.get("extra") or "")
        derived = str(table).startswith(DERIVED)
        note = "".join(
            f" +{word}" for word, text in (("filesort", "Using filesort"), ("temp", "Using temporary")) if text in extra
        )
        accesses.append(f"{table}:{key or '-'}/{kind}{note}")
        if not derived and (kind in ("ALL", "index") or key is None):
            scans.append((str(table), f"{table} ({kind}, key {key}, ~{row.get('rows')} rows)"))
    return accesses, scans


def verdict(q: Query, accesses: list[str], scans: list[tuple[str, str]]) -> str:
    unexpected = [text for table, text in scans if table not in q.expected]
    expected = [text for table, text in scans if table in q.expected]
    parts = []
    if unexpected:
        parts.append("**SCAN** " + "; ".join(unexpected))
    if expected:
        parts.append("full read, expected: " + "; ".join(expected))
    if q.rows_read > MANY_ROWS and q.rows_read > 20 * q.returned and not q.why:
        parts.append(f"**READS {q.rows_read:,.0f} ROWS PER RUN** for {q.returned:,.0f}")
    return ("; ".join(parts) + " — " if parts else "index only — ") + "keys: " + ", ".join(accesses)


def queries(
    keys: list[str], per_query: int, at: dict[str, datetime.datetime], big: str, small: str, cross: dict[str, Any]
) -> list[Query]:
    """The measured queries. Each query that takes an instance gets its own ``per_query`` keys,
    so that no query finds the pages an earlier one read for the same instances; so does each
    query that takes an account (``cross``: accounts, the state both types have, and the
    cursor of the page that crosses from one type to the other)."""
    m = NAME
    pools = iter(keys[k : k + per_query] for k in range(0, len(keys), per_query))

    def fresh(*before: Any, with_at: bool = False) -> Callable[[int], tuple[Any, ...]]:
        """Arguments for run i: ``before``, then a key of this query's own (and its time to ask about)."""
        pool = next(pools)
        if with_at:
            return lambda i: (*before, pool[i % len(pool)], at[pool[i % len(pool)]])
        return lambda i: (*before, pool[i % len(pool)])

    in_state = (
        f"SELECT id, instance_key, current_state, status, version, in_state_since, seconds_in_state "
        f"FROM `fsm_v_{m}` WHERE current_state = %s ORDER BY id LIMIT 50"
    )
    proc_in_state = (
        f"SELECT id, machine, instance_key, lookup_key, current_state, status, resume_from_step, "
        f"save_after_step, kafka_topic, data, created_at, updated_at, uses_global_lock, uses_local_lock, "
        f"unlocked_at, last_retry_at, definition_version, version FROM `fsm_{m}` "
        f"WHERE current_state = %s AND id > COALESCE(%s, 0) ORDER BY id LIMIT %s"
    )
    states_check = "SELECT 1 FROM fsm_states WHERE machine = %s AND state = %s"
    history_cols = "sort_key, event, from_state, to_state, entered_at, left_at, seconds_in_state"
    proc_history = (
        f"SELECT id, instance_id, sort_key, most_recent, event, from_state, to_state, handler, "
        f"data_before, data_after, metadata, definition_version, request_id, source, created_at "
        f"FROM `fsm_{m}_transitions` WHERE instance_id = (SELECT id FROM `fsm_{m}` "
        f"WHERE instance_key = %s) ORDER BY sort_key"
    )
    machine_check = "SELECT 1 FROM fsm_machines WHERE machine = %s AND objects_version IS NOT NULL"
    out = []
    sizes = ((big, "biggest"), (small, "smallest"))
    for state, size in sizes:
        out.append(Query(f"in-state first page: fsm_v_{m} ({size} state, {state})", in_state, lambda i, s=state: (s,)))
        out.append(
            Query(
                f"in-state first page: CALL fsm_{m}_in_state_v1 ({size} state)",
                f"CALL `fsm_{m}_in_state_v1`(%s, 0, 50)",
                lambda i, s=state: (s,),
                explain=((states_check, lambda i, s=state: (m, s)), (proc_in_state, lambda i, s=state: (s, 0, 50))),
            )
        )
    for state, size in sizes:
        out.append(
            Query(
                f"in-state first page: fsm_v_instances WHERE machine AND current_state ({size} state, cross-type)",
                "SELECT id, instance_key, current_state, status, version, in_state_since, "
                "seconds_in_state FROM fsm_v_instances WHERE machine = %s AND current_state = %s "
                "ORDER BY id LIMIT 50",
                lambda i, s=state: (m, s),
                kind="scan",
            )
        )
    out += [
        Query(
            f"history: fsm_v_{m}_transitions WHERE instance_key",
            f"SELECT {history_cols} FROM `fsm_v_{m}_transitions` WHERE instance_key = %s ORDER BY sort_key",
            fresh(),
        ),
        Query(
            f"history: CALL fsm_{m}_history_v1",
            f"CALL `fsm_{m}_history_v1`(%s)",
            history_args := fresh(),
            explain=((proc_history, history_args),),
        ),
        Query(
            "history: fsm_v_history WHERE machine AND instance_key (cross-type)",
            f"SELECT {history_cols} FROM fsm_v_history WHERE machine = %s AND instance_key = %s ORDER BY sort_key",
            fresh(m),
        ),
        Query(
            "counts: fsm_v_state_counts WHERE machine",
            "SELECT state, instances FROM fsm_v_state_counts WHERE machine = %s",
            lambda i: (m,),
        ),
        Query(
            "counts: CALL fsm_counts_v2",
            "CALL fsm_counts_v2(%s)",
            lambda i: (m,),
            explain=(
                (machine_check, lambda i: (m,)),
                (
                    "SELECT state, CAST(SUM(instances) AS SIGNED) FROM fsm_state_counts WHERE machine = %s "
                    "GROUP BY state HAVING SUM(instances) > 0 ORDER BY state",
                    lambda i: (m,),
                ),
            ),
        ),
        Query(
            f"counts, for comparison: SELECT current_state, COUNT(*) FROM fsm_{m} GROUP BY current_state",
            f"SELECT current_state, COUNT(*) FROM `fsm_{m}` GROUP BY current_state",
            lambda i: (),
            kind="scan",
            expected=(f"fsm_{m}",),
            why="the comparison: the scan the counters replace",
        ),
        Query(
            "one instance: fsm_v_instances WHERE machine AND instance_key (cross-type)",
            "SELECT instance_key, current_state, status, version, in_state_since, seconds_in_state "
            "FROM fsm_v_instances WHERE machine = %s AND instance_key = %s",
            fresh(m),
        ),
        Query(
            f"one instance: fsm_v_{m} WHERE instance_key",
            f"SELECT instance_key, current_state, status, version, in_state_since, seconds_in_state "
            f"FROM `fsm_v_{m}` WHERE instance_key = %s",
            fresh(),
        ),
        Query(
            "state at a time: CALL fsm_state_at_v1",
            "CALL fsm_state_at_v1(%s, %s, %s)",
            state_at_args := fresh(m, with_at=True),
            explain=(
                (machine_check, lambda i: (m,)),
                (f"SELECT id FROM `fsm_{m}` WHERE instance_key = %s", lambda i: state_at_args(i)[1:2]),
                (
                    f"SELECT to_state AS state, sort_key, event, created_at AS entered_at, left_at "
                    f"FROM `fsm_{m}_transitions` WHERE instance_id = (SELECT id FROM `fsm_{m}` WHERE "
                    f"instance_key = %s) AND created_at <= %s ORDER BY sort_key DESC LIMIT 1",
                    lambda i: state_at_args(i)[1:],
                ),
            ),
        ),
        Query(
            "other: fsm_v_failed WHERE machine (none failed)",
            "SELECT instance_key, current_state, handler, message FROM fsm_v_failed WHERE machine = %s LIMIT 20",
            lambda i: (m,),
        ),
        Query(
            "other: fsm_v_stuck WHERE machine, longest in state first, LIMIT 20",
            "SELECT instance_key, current_state, seconds_in_state FROM fsm_v_stuck WHERE machine = %s "
            "ORDER BY seconds_in_state DESC LIMIT 20",
            lambda i: (m,),
            kind="scan",
            why="reads every unfinished instance, by design (a view takes no parameters)",
        ),
        Query(
            f"other: fsm_v_stuck WHERE machine = the small type ({OTHER.name}, {OTHER_INSTANCES} instances)",
            "SELECT instance_key, current_state, seconds_in_state FROM fsm_v_stuck WHERE machine = %s "
            "ORDER BY seconds_in_state DESC LIMIT 20",
            lambda i: (OTHER.name,),
            kind="scan",
        ),
        Query(
            "other: fsm_v_funnel WHERE machine",
            "SELECT state, instances, entries FROM fsm_v_funnel WHERE machine = %s ORDER BY position",
            lambda i: (m,),
            kind="funnel",
            expected=("h",),
            why="reads all history, by design (an analyst's query)",
        ),
    ]
    return out + cross_type_queries(big, small, cross)


def cross_type_queries(big: str, small: str, cross: dict[str, Any]) -> list[Query]:
    """Across types: a state's first page and an account's history, by the procedures and by the views."""
    accounts = iter(cross["accounts"])
    shared, boundary = cross["shared"], cross["boundary"]
    in_state = "CALL fsm_instances_in_state_v1(%s, %s, %s, 50)"
    in_state_sql = "fsm_instances_in_state_sql_v1"
    out = []
    for label, state, after in (
        (f"biggest state, {big}, one type has it", big, (None, None)),
        (f"smallest state, {small}, one type has it", small, (None, None)),
        (f"state {shared}, both types have it", shared, (None, None)),
        (f"state {shared}, the page from {boundary[0]} into the next type", shared, boundary),
    ):
        first = "first page" if after == (None, None) else "a page"
        out.append(
            Query(
                f"cross-type in-state {first}: CALL fsm_instances_in_state_v1 ({label})",
                in_state,
                lambda i, s=state, a=after: (s, *a),
                generated=in_state_sql,
            )
        )
    view = (
        "SELECT id, machine, instance_key, current_state, status, version, in_state_since, seconds_in_state "
        "FROM fsm_v_instances WHERE current_state = %s ORDER BY machine, id LIMIT 50"
    )
    for label, state in ((f"biggest state, {big}", big), (f"state {shared}, both types", shared)):
        out.append(
            Query(
                f"cross-type in-state first page, for comparison: fsm_v_instances WHERE current_state "
                f"ORDER BY machine, id ({label})",
                view,
                lambda i, s=state: (s,),
                kind="scan",
                expected=("i",),
                why="the view a cross-type listing had before fsm_instances_in_state_v1: "
                "it sorts every instance in the state before it cuts the page",
            )
        )

    def fresh() -> Callable[[int], tuple[Any, ...]]:
        pool = next(accounts)
        return lambda i: (pool[i % len(pool)],)

    history = "CALL fsm_account_history_v1(%s, %s, %s, %s, %s, 50)"
    history_sql = "fsm_account_history_sql_v1"
    newest, oldest = fresh(), fresh()
    out.append(
        Query(
            "account history, all types: CALL fsm_account_history_v1 (newest first, first page)",
            history,
            lambda i: (*newest(i), 1, None, None, None),
            generated=history_sql,
        )
    )
    out.append(
        Query(
            "account history, all types: CALL fsm_account_history_v1 (oldest first, first page)",
            history,
            lambda i: (*oldest(i), 0, None, None, None),
            generated=history_sql,
        )
    )
    following = fresh()
    cursors = cross["cursors"]  # the last row of each account's first page, newest first (read at the start)
    out.append(
        Query(
            "account history, all types: CALL fsm_account_history_v1 (newest first, the second page; "
            "its first page was read at the start of the run)",
            history,
            lambda i: (*following(i), 1, *cursors[following(i)[0]]),
            generated=history_sql,
        )
    )
    by_view = fresh()
    out.append(
        Query(
            "account history, all types, for comparison: fsm_v_history WHERE lookup_key ORDER BY "
            "entered_at DESC, machine DESC, transition_id DESC LIMIT 50",
            "SELECT transition_id, machine, instance_key, sort_key, event, to_state, entered_at, left_at "
            "FROM fsm_v_history WHERE lookup_key = %s ORDER BY entered_at DESC, machine DESC, "
            "transition_id DESC LIMIT 50",
            by_view,
        )
    )
    return out


def accounts_for(cur: Any, per_query: int, rng: random.Random) -> list[list[str]]:
    """ACCOUNT_QUERIES pools of ``per_query`` random accounts, distinct across pools: accounts with
    instances of both types where the data set has such (the ticket type's lookup keys), else any."""
    cur.execute(f"SELECT DISTINCT lookup_key FROM `fsm_{OTHER.name}` WHERE lookup_key IS NOT NULL")
    both = sorted(row[0] for row in cur.fetchall())
    need = per_query * ACCOUNT_QUERIES
    if len(both) < need:  # an older data set: tickets without accounts, or fewer of them
        both += [f"acct-{n}" for n in rng.sample(range(ACCOUNTS), need) if f"acct-{n}" not in both]
    picked = rng.sample(both, need)
    return [picked[k : k + per_query] for k in range(0, need, per_query)]


def cross_type_setup(cur: Any, per_query: int, rng: random.Random) -> dict[str, Any]:
    """The accounts, the state both types have, the boundary cursor, and the next-page cursors."""
    cur.execute(
        "SELECT state FROM fsm_states WHERE machine = %s AND state IN (SELECT state FROM fsm_states "
        "WHERE machine = %s) ORDER BY state LIMIT 1",
        (NAME, OTHER.name),
    )
    row = cur.fetchone()
    shared = row[0] if row else "new"
    first = min((NAME, OTHER.name), key=str.encode)  # the type whose rows come first (byte order)
    cur.execute(f"SELECT id FROM `fsm_{first}` WHERE current_state = %s ORDER BY id DESC LIMIT 30", (shared,))
    ids = [r[0] for r in cur.fetchall()]
    boundary = (first, ids[-1] - 1 if ids else 0)  # 30 rows of the first type, then the second's
    accounts = accounts_for(cur, per_query, rng)
    cursors = {}
    for account in accounts[2]:  # the next-page query's: read now, as the page before it would have been
        cur.execute("CALL fsm_account_history_v1(%s, 1, NULL, NULL, NULL, 50)", (account,))
        rows = cur.fetchall()
        while cur.nextset():
            pass
        last = rows[-1] if rows else None
        cursors[account] = (last[16], last[1], last[0]) if last else (datetime.datetime(2000, 1, 1), NAME, 0)
    return {"accounts": accounts, "shared": shared, "boundary": boundary, "cursors": cursors}


def generated_statement(cur: Any, q: Query, args: Sequence[Any]) -> str:
    """The statement a cross-type procedure runs for these arguments, checked to give the CALL's rows."""
    cur.execute(f"SELECT {q.generated}({', '.join(['%s'] * (len(args) + 1))})", (*args, 50))
    (text,) = cur.fetchone()
    cur.execute(q.sql, args)
    called = [row[:2] for row in cur.fetchall()]
    while cur.nextset():
        pass
    cur.execute(text)
    assert [row[:2] for row in cur.fetchall()] == called, f"{q.label}: the statement's rows are not the CALL's"
    return str(text)


def measure(
    settings: Settings, info: dict[str, str], reps: int, ceiling_seconds: float, skip: Sequence[str]
) -> tuple[list[Query], bt.Result]:
    conn = connect(settings)
    try:
        with conn.cursor() as cur:
            instances = int(info["instances"])
            cur.execute("SELECT state, instances FROM fsm_v_state_counts WHERE machine = %s AND instances > 0", (NAME,))
            counts = {s: int(n) for s, n in cur.fetchall()}
            big, small = max(counts, key=lambda s: counts[s]), min(counts, key=lambda s: counts[s])
            rng = random.Random(7)
            per_query = reps + WARMUP
            ids = rng.sample(range(1, instances + 1), min(instances, per_query * KEYED_QUERIES))
            cur.execute(
                f"SELECT instance_key, TIMESTAMPADD(SECOND, 3600, created_at) FROM `fsm_{NAME}` "
                f"WHERE id IN ({', '.join(['%s'] * len(ids))})",
                ids,
            )
            at = dict(cur.fetchall())
            keys = [key_of(i) for i in ids]
            assert set(keys) == set(at), "the instances picked are not all there"
            cross = cross_type_setup(cur, per_query, rng)
            todo = [q for q in queries(keys, per_query, at, big, small, cross) if not any(w in q.label for w in skip)]
            for q in todo:
                statements = q.explain or ((q.sql, q.args),)
                if q.generated:
                    text = generated_statement(cur, q, q.args(0))
                    statements = ((text, lambda i: None),)
                accesses, scans = [], []
                for sql, args in statements:
                    rows = explain(cur, sql, args(0))
                    q.plan += [" ".join(f"{k}={v}" for k, v in r.items() if v is not None) for r in rows]
                    got = judge(rows)
                    accesses += got[0]
                    scans += got[1]
                n = {"fast": reps, "scan": REPS["scan"], "funnel": REPS["funnel"]}[q.kind]
                print(f"measuring {q.label} ({n} runs)...", file=sys.stderr, flush=True)
                time_query(cur, q, n)
                q.verdict = verdict(q, accesses, scans)
    finally:
        conn.close()
    cur2 = pymysql.connect(**settings.connect_kwargs())
    with cur2.cursor() as cur:
        cur.execute("TRUNCATE TABLE bench_ceiling")
    cur2.close()
    print("measuring the INSERT+COMMIT ceiling...", file=sys.stderr, flush=True)
    ceiling = bt.measure("ceiling", 1, settings, ceiling_seconds)
    return todo, ceiling


# -- report -------------------------------------------------------------------------------


def report(
    todo: list[Query],
    ceiling: bt.Result,
    info: dict[str, str],
    server: dict[str, str],
    sizes: dict[str, Any],
    ceiling_seconds: float,
) -> str:
    c50, c95 = ceiling.pct(50), ceiling.pct(95)
    lines = [
        f"Run {datetime.date.today().isoformat()}: {os.cpu_count()} CPUs (load average {server['load']} at the "
        f"start), server {server['version']}, innodb_buffer_pool_size {int(server['pool']) // 2**20} MiB, "
        f"innodb_flush_log_at_trx_commit={server['flush']}, PyMySQL {pymysql.__version__}. Database "
        f"`{server['database']}`: {int(info['instances']):,} instances and {int(info['history_rows']):,} history rows "
        f"of type `{NAME}` ({sizes['instances'] / 2**30:.2f} GiB and {sizes['history'] / 2**30:.2f} GiB with "
        f"indexes), plus {OTHER_INSTANCES} instances of a second type; loaded around the triggers on "
        f"{info['loaded_on']} in {int(info['load_seconds']):,} s (ANALYZE TABLE {info['analyze_seconds']} s more).",
        "",
        "Instances per state: " + ", ".join(f"{s} {n:,}" for s, n in sizes["counts"]) + ".",
        "",
        f"Each query warm, {REPS['fast'] if not todo else len(todo[0].times_ms)} runs with new random instances "
        f"where it takes one, its own (the slow ones {REPS['scan']} runs after 1 untimed run, the funnel "
        f"{REPS['funnel']}); rows read is the session's Handler_read% per run (procedures and temporary tables "
        "included), disk reads the buffer pool's reads from disk per run (server-wide). EXPLAIN: SCAN is a base "
        "table read with type ALL or index; the keys are EXPLAIN's `table:key/type` per access. "
        f"Ceiling: one INSERT+COMMIT, 1 client, {ceiling_seconds:g} s: p50 {c50:.2f} ms, p95 {c95:.2f} ms.",
        "",
        "| query | p50 ms | p95 ms | p50 vs ceiling p50 | rows read/run | disk reads/run | EXPLAIN |",
        "|---|---:|---:|---:|---:|---:|---|",
        f"| ceiling: INSERT+COMMIT | {c50:.2f} | {c95:.2f} | 1.0x | | | |",
    ]
    for q in todo:
        lines.append(
            f"| {q.label} | {q.pct(50):.2f} | {q.pct(95):.2f} | {q.pct(50) / c50:.1f}x | "
            f"{q.rows_read:,.0f} | {q.disk_reads:,.1f} | {q.verdict} |"
        )
    flagged = [q for q in todo if "**" in q.verdict]
    lines += [
        "",
        "Flagged (a full scan, or many more rows read than returned): "
        + ("none." if not flagged else ", ".join(q.label for q in flagged) + "."),
    ]
    lines += [f"- by design: {q.label}: {q.why}." for q in todo if q.why]
    return "\n".join(lines)


def table_sizes(cur: Any) -> dict[str, Any]:
    cur.execute(
        "SELECT table_name, data_length + index_length FROM information_schema.tables "
        "WHERE table_schema = DATABASE() AND table_name IN (%s, %s)",
        (f"fsm_{NAME}", f"fsm_{NAME}_transitions"),
    )
    found = {name: float(size) for name, size in cur.fetchall()}
    cur.execute(
        "SELECT state, instances FROM fsm_v_state_counts WHERE machine = %s AND instances > 0 ORDER BY instances DESC",
        (NAME,),
    )
    return {
        "instances": found[f"fsm_{NAME}"],
        "history": found[f"fsm_{NAME}_transitions"],
        "counts": [(s, int(n)) for s, n in cur.fetchall()],
    }


def write_section(path: Path, text: str) -> None:
    """Replace the block between MARK in ``path``; the first time, append the section with it."""
    old = path.read_text() if path.exists() else "# Benchmarks\n"
    if MARK[0] not in old:
        path.write_text(
            old.rstrip("\n")
            + f"\n\n{SECTION}\n\n"
            + (
                "`bench/bench_reporting.py` builds a database `pyfsm_bench_reporting` with 1,000,000\n"
                "instances and 10,000,000 history rows (loaded around the triggers, then checked), keeps it,\n"
                "and measures the reporting views and procedures of revision 0004 on it, with EXPLAIN for\n"
                "each. Reproduce (the first run loads the data set; `--reuse` skips the load):\n\n"
                "```sh\n.venv/bin/python bench/bench_reporting.py --write BENCHMARKS.md           # builds\n"
                ".venv/bin/python bench/bench_reporting.py --reuse --write BENCHMARKS.md   # measures only\n```\n"
            )
        )
    bt.write_results(path, text, MARK)


def refresh_objects(settings: Settings) -> None:
    """A reused data set gets this checkout's schema: migrations, then each type's objects
    (views and routines that changed since the load; the data is left alone)."""
    schema.migrate(settings)
    conn = connect(settings)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT machine FROM fsm_machines WHERE objects_version IS NOT NULL")
            machines = [row[0] for row in cur.fetchall()]
        for machine in machines:
            schema.install_machine_objects(conn, machine)
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--dsn", default="mysql://root@127.0.0.1:3306/test", help="server (its database is ignored)")
    parser.add_argument("--database", default="pyfsm_bench_reporting", help="the database holding the data set")
    parser.add_argument("--instances", type=int, default=None, help="instances of the order type (1,000,000)")
    parser.add_argument("--history-per-instance", type=int, default=None, help="history rows per instance (10)")
    parser.add_argument("--chunk", type=int, default=50_000, help="instances per INSERT ... SELECT of the load")
    parser.add_argument("--reuse", action="store_true", help="measure the data set already in --database")
    parser.add_argument(
        "--reuse-if-present",
        action="store_true",
        help="reuse a complete data set when there is one, else build it (what `make bench` does)",
    )
    parser.add_argument("--load-only", action="store_true", help="build the data set, measure nothing")
    parser.add_argument("--reps", type=int, default=REPS["fast"], help="timed runs per query")
    parser.add_argument("--ceiling-seconds", type=float, default=5.0, help="length of the ceiling measurement")
    parser.add_argument("--skip", default="", help="comma-separated words: skip queries whose label has one")
    parser.add_argument("--write", type=Path, help="update the reporting block of this file (e.g. BENCHMARKS.md)")
    parser.add_argument("--json", type=Path, help="also write the measurements to this file as JSON")
    args = parser.parse_args(argv)
    if not args.database.startswith("pyfsm_bench"):
        parser.error("--database must start with pyfsm_bench (it is dropped and rebuilt without --reuse)")
    settings = parse_dsn(args.dsn).with_database(args.database)
    admin = pymysql.connect(**settings.connect_kwargs(database=False))
    with admin.cursor() as cur:
        server = bt.server_info(cur)
        server["database"] = args.database
        cur.execute("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = %s", (args.database,))
        exists = cur.fetchone()[0] == 1
    if args.reuse_if_present and exists:
        conn = pymysql.connect(**settings.connect_kwargs())
        with conn.cursor() as cur:
            args.reuse = meta(cur).get("complete") == "1"
        conn.close()
    if args.reuse:
        if not exists:
            parser.error(f"--reuse: there is no database {args.database}")
        conn = pymysql.connect(**settings.connect_kwargs())
        with conn.cursor() as cur:
            info = meta(cur)
        conn.close()
        if info.get("complete") != "1":
            parser.error(f"--reuse: {args.database} holds no complete data set (an interrupted load?)")
        for flag, name in ((args.instances, "instances"), (args.history_per_instance, "history_per_instance")):
            if flag is not None and str(flag) != info[name]:
                parser.error(f"--reuse: {args.database} holds {info[name]} {name.replace('_', ' ')}, not {flag}")
        print(
            f"reusing {args.database}: {int(info['instances']):,} instances, {int(info['history_rows']):,} "
            f"history rows, loaded {info['loaded_on']} in {info['load_seconds']} s",
            file=sys.stderr,
        )
        refresh_objects(settings)
    else:
        instances = args.instances or 1_000_000
        h = args.history_per_instance or 10
        check_disk(admin, instances, instances * h)
        with admin.cursor() as cur:
            if exists:
                print(f"dropping the old {args.database}", file=sys.stderr)
                cur.execute(f"DROP DATABASE `{args.database}`")
            cur.execute(f"CREATE DATABASE `{args.database}`")
        info = build(settings, instances, h, min(args.chunk, instances))
    admin.close()
    if args.load_only:
        return 0
    todo, ceiling = measure(settings, info, args.reps, args.ceiling_seconds, [w for w in args.skip.split(",") if w])
    conn = pymysql.connect(**settings.connect_kwargs())
    with conn.cursor() as cur:
        sizes = table_sizes(cur)
    conn.close()
    text = report(todo, ceiling, info, server, sizes, args.ceiling_seconds)
    print(text)
    for q in todo:
        print(f"\n{q.label}:\n  " + "\n  ".join(q.plan), file=sys.stderr)
    if args.write:
        write_section(args.write, text)
    if args.json:
        bt.write_json(
            args.json,
            {
                "server": server,
                "instances": int(info["instances"]),
                "history_rows": int(info["history_rows"]),
                "ceiling": bt.result_dict(ceiling),
                "queries": [
                    {
                        "label": q.label,
                        "p50_ms": q.pct(50),
                        "p95_ms": q.pct(95),
                        "runs": len(q.times_ms),
                        "rows_read": q.rows_read,
                        "returned": q.returned,
                        "disk_reads": q.disk_reads,
                        "flagged": "**" in q.verdict,
                        "by_design": bool(q.why),
                        "verdict": q.verdict,
                    }
                    for q in todo
                ],
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
