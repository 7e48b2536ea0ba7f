"""The web console at scale: every page's server time on 1,000,000 instances and 10,000,000 history rows.

Target (issue 17): every page of `pyfsm web` renders in under 200 ms of server time.

The data set is bench_reporting's (database ``pyfsm_bench_reporting``: 1,000,000 ``order``
instances, 10,000,000 history rows, a small ``ticket`` type), reused when it is complete
(its ``bench_meta`` row ``complete`` is 1). When it is missing, this script waits for a load
under way (another benchmark may be building it: a long statement in that database in
SHOW PROCESSLIST, polled every 30 s) or builds it with ``bench_reporting.py --load-only``
(about 3 minutes). Then it migrates the database to this checkout's head (``Store.migrate``:
revision 0013 has the views the console reads).

The operations pages need rows that the data set does not have, so before measuring the
script adds, for the order type (``--quick`` scales them down): 20,000 runs in ``fsm_runs``
(stuck: due for 10 minutes to 3 days; claimed by four workers; due now; due later; waiting),
1,000 instances set ``failed`` by a raw UPDATE (the triggers allow a status change; it bumps
version and updated_at) with 5,000 ``fsm_errors`` rows (5 attempts each, with a traceback),
2,000 unpublished ``fsm_outbox`` rows (50 parked), 10,000 ``fsm_locks`` rows (100 held, the
rest released) and 1,000 ``fsm_operator_log`` rows. What it added is recorded in the table
``bench_console_added`` (id ranges per table, and each failed instance's status, version and
updated_at before) and removed at the end, the instances put back as they were (a second
UPDATE of version and updated_at alone passes the triggers unchanged); a run that died is
cleaned up by the next one (or ``--undo``). ``--keep`` leaves the rows in place.

The console runs in this process (Starlette's TestClient on ``create_app``) with the root
DSN for reads and for actions (``allow_actions``, so that /confirm renders). Each page gets
3 untimed requests, then ``--reps`` timed ones; the pages take turns (one request of each per
round), so a noisy moment is spread over all of them. Pages about one instance get a new
random instance on every request, never read before in the run. Server time is the
``Server-Timing: app;dur=`` header the console sets (request in, response built); client
time is what the TestClient call took (in process: no network, no HTTP parsing by a server).

Then, to say where a page's time goes, one more request of each page runs with every
statement recorded (pymysql's Cursor.execute, wrapped in this process only), and each
statement is run again on a connection of its own: its time, the rows the server read (the
session's Handler_read% counters), and its EXPLAIN (for ``CALL fsm_stats_v2()``, the
statement it prepares for the big type).

The INSERT+COMMIT ceiling (bench_transitions.measure, 1 client) is measured at the start and
at the end, in a small database of its own (``pyfsm_bench_console_ceiling``, dropped after),
so as not to touch the tables another benchmark may be using.

    .venv/bin/python bench/bench_console.py --reuse --write BENCHMARKS.md
    .venv/bin/python bench/bench_console.py --quick      # a small data set of its own; writes nothing
"""

from __future__ import annotations

import argparse
import datetime
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_reporting as br
import bench_transitions as bt

from pyfsm import Store
from pyfsm.db import Settings, parse_dsn

HERE = Path(__file__).resolve().parent
MARK = ("<!-- bench-console:start -->", "<!-- bench-console:end -->")
SECTION = "## The web console at scale"
TARGET_MS = 200.0
WARMUP = 3
NAME = br.NAME  # "order"
CEILING_DB = "pyfsm_bench_console_ceiling"
WORKERS = ("worker-a", "worker-b", "worker-c", "worker-d")
BUILD_POLL_S = 30
BUILD_WAIT_S = 900


@dataclass(frozen=True)
class Scale:
    """What the script adds for the operations pages."""

    runs: int = 20_000
    failed: int = 1_000
    errors_per_failed: int = 5
    outbox: int = 2_000
    parked: int = 50
    locks: int = 10_000
    held: int = 100
    operator_log: int = 1_000


FULL, QUICK = Scale(), Scale(runs=2_000, failed=100, outbox=200, parked=10, locks=1_000, held=20, operator_log=100)


@dataclass
class Page:
    label: str
    path: Callable[[int], str]  # request number -> the path to get
    server_ms: list[float] = field(default_factory=list)
    client_ms: list[float] = field(default_factory=list)
    statuses: set[int] = field(default_factory=set)
    size: int = 0  # bytes of the last response
    statements: list[tuple[str, Any, float]] = field(default_factory=list)  # one request's (sql, args, ms)
    first_ms: float | None = None  # the first request's server time (cold: nothing cached by the app)

    def pct(self, values: list[float], q: int) -> float:
        return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


@dataclass
class Diagnosis:
    sql: str
    ms: float  # as the console ran it
    rerun_ms: float
    rows_read: int
    explain: str


# -- the data set -------------------------------------------------------------------------


def connect(settings: Settings) -> pymysql.connections.Connection:
    conn = pymysql.connect(**{**settings.connect_kwargs(), "autocommit": True})
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
    return conn


def building(admin: Any, database: str) -> list[str]:
    """Statements of other sessions running for over 10 s in ``database`` (a load under way)."""
    with admin.cursor() as cur:
        cur.execute(
            "SELECT id, time, LEFT(info, 80) FROM information_schema.processlist WHERE db = %s "
            "AND command = 'Query' AND time > 10 AND id <> CONNECTION_ID()",
            (database,),
        )
        return [f"#{i} {t}s {info}" for i, t, info in cur.fetchall()]


def complete(settings: Settings, admin: Any) -> bool:
    with admin.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = %s", (settings.database,))
        if not cur.fetchone()[0]:
            return False
    conn = connect(settings)
    try:
        with conn.cursor() as cur:
            return br.meta(cur).get("complete") == "1"
    finally:
        conn.close()


def ensure_data_set(settings: Settings, args: argparse.Namespace) -> dict[str, str]:
    """Reuse the complete data set; wait for a load under way; else build it (bench_reporting --load-only)."""
    admin = pymysql.connect(**settings.connect_kwargs(database=False))
    try:
        waited = 0
        while not complete(settings, admin):
            running = building(admin, settings.database)
            if not running:
                break
            if waited >= BUILD_WAIT_S:
                raise SystemExit(f"{settings.database} is still being built after {waited} s: {running}")
            print(
                f"{settings.database} is being built by another session ({running[0]}); waiting...",
                file=sys.stderr,
                flush=True,
            )
            time.sleep(BUILD_POLL_S)
            waited += BUILD_POLL_S
        if not complete(settings, admin):
            if args.reuse:
                raise SystemExit(f"--reuse: {settings.database} holds no complete data set")
            command = [
                sys.executable,
                str(HERE / "bench_reporting.py"),
                "--load-only",
                "--dsn",
                args.dsn,
                "--database",
                settings.database,
                *(["--instances", "20000"] if args.quick else []),
            ]
            print("building the data set: " + " ".join(command[1:]), file=sys.stderr, flush=True)
            subprocess.run(command, check=True)
    finally:
        admin.close()
    with Store(settings.dsn(), pool_size=1) as store:  # this checkout's head (0013: the console's views)
        store.migrate()
    conn = connect(settings)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT version_num FROM fsm_alembic_version")
            revision = str(cur.fetchone()[0])
            info = {**br.meta(cur), "revision": revision}
    finally:
        conn.close()
    return info


# -- the operations pages' rows -----------------------------------------------------------

ADDED = """CREATE TABLE IF NOT EXISTS bench_console_added (
  tbl VARCHAR(64) NOT NULL, first_id BIGINT UNSIGNED NOT NULL, last_id BIGINT UNSIGNED NOT NULL,
  PRIMARY KEY (tbl, first_id)) ENGINE=InnoDB"""
FAILED = """CREATE TABLE IF NOT EXISTS bench_console_failed (
  id BIGINT UNSIGNED NOT NULL PRIMARY KEY, status VARCHAR(16) NOT NULL, version BIGINT UNSIGNED NOT NULL,
  updated_at DATETIME(6) NULL) ENGINE=InnoDB"""
OPS_TABLES = ("fsm_runs", "fsm_errors", "fsm_outbox", "fsm_locks", "fsm_operator_log")
TRACEBACK = "".join(
    f'  File "/srv/shop/handlers/{m}.py", line {40 + 7 * n}, in {m}\n    result = client.{m}(order["id"], timeout=5)\n'
    for n, m in enumerate(("charge", "reserve", "capture", "notify", "charge", "reserve"))
)


def insert_many(cur: Any, table: str, columns: str, rows: list[tuple[Any, ...]]) -> None:
    """Insert ``rows`` (one statement per 1,000: consecutive ids, innodb_autoinc_lock_mode 1) and record
    their id ranges in bench_console_added."""
    marks = "(" + ", ".join(["%s"] * len(rows[0])) + ")"
    for k in range(0, len(rows), 1000):
        part = rows[k : k + 1000]
        cur.execute(
            f"INSERT INTO `{table}` ({columns}) VALUES " + ", ".join([marks] * len(part)),
            [v for row in part for v in row],
        )
        first = cur.lastrowid
        cur.execute(
            "INSERT INTO bench_console_added (tbl, first_id, last_id) VALUES (%s, %s, %s)",
            (table, first, first + len(part) - 1),
        )


def add_operations_rows(conn: Any, scale: Scale, rng: random.Random) -> dict[str, Any]:
    """The rows the operations pages show (see the module's docstring); returns what the pages need."""
    with conn.cursor() as cur:
        cur.execute("SELECT @@innodb_autoinc_lock_mode")
        assert cur.fetchone()[0] in (0, 1), "the id ranges recorded need consecutive ids per INSERT"
        cur.execute(ADDED)
        cur.execute(FAILED)
        cur.execute(f"SELECT id FROM `fsm_{NAME}` WHERE status = 'running'")
        running = [r[0] for r in cur.fetchall()]
        cur.execute(f"SELECT id FROM `fsm_{NAME}` WHERE status = 'failed'")
        already_failed = {r[0] for r in cur.fetchall()}
        cur.execute("SELECT instance_id FROM fsm_runs WHERE machine = %s", (NAME,))
        already_run = {r[0] for r in cur.fetchall()}
        pool = [i for i in running if i not in already_failed and i not in already_run]
        picked = rng.sample(pool, scale.failed + scale.runs)
        failed, runs = sorted(picked[: scale.failed]), picked[scale.failed :]
        ids = sorted(set(failed) | set(runs[: scale.outbox]) | set(rng.sample(running, scale.operator_log)))
        instances: dict[int, tuple[str, str, str]] = {}
        for k in range(0, len(ids), 5000):
            part = ids[k : k + 5000]
            cur.execute(
                f"SELECT id, instance_key, lookup_key, current_state FROM `fsm_{NAME}` "
                f"WHERE id IN ({', '.join(['%s'] * len(part))})",
                part,
            )
            instances.update({r[0]: r[1:] for r in cur.fetchall()})
        cur.execute("SELECT UTC_TIMESTAMP(6)")
        now = cur.fetchone()[0]

        def ago(seconds: float) -> datetime.datetime:
            return now - datetime.timedelta(seconds=seconds)

        # failed instances: their status and what it was, then 5 errors each
        conn.begin()
        cur.executemany(
            f"INSERT INTO bench_console_failed (id, status, version, updated_at) "
            f"SELECT id, status, version, updated_at FROM `fsm_{NAME}` WHERE id = %s",
            failed,
        )
        cur.execute(f"UPDATE `fsm_{NAME}` i JOIN bench_console_failed f ON f.id = i.id SET i.status = 'failed'")
        conn.commit()
        errors = []
        for n, iid in enumerate(failed):
            key, _, state = instances[iid]
            started = rng.uniform(3600, 30 * 86400)
            for attempt in range(1, scale.errors_per_failed + 1):
                last = attempt == scale.errors_per_failed
                at = started - attempt * 60
                errors.append(
                    (
                        NAME,
                        iid,
                        key,
                        state,
                        f"shop.handlers.{state}",
                        attempt,
                        "shop.payments.GatewayTimeout",
                        f"payment gateway timed out after 5.0 s (order {key}, attempt {attempt})",
                        f"Traceback (most recent call last):\n{TRACEBACK}"
                        f"shop.payments.GatewayTimeout: payment gateway timed out after 5.0 s (#{n})",
                        "failed" if last else "retry",
                        None if last else ago(at - 60),
                        ago(at),
                    )
                )
        insert_many(
            cur,
            "fsm_errors",
            "machine, instance_id, instance_key, state, handler, attempt, error_type, "
            "message, traceback, outcome, next_run_at, created_at",
            errors,
        )
        # runs: 10% stuck, 5% claimed, 5% due now, 50% due later, 30% waiting
        rows = []
        for n, iid in enumerate(runs):
            share = n * 100 // len(runs)
            claimed = None
            if share < 10:
                due: datetime.datetime | None = ago(rng.uniform(600, 3 * 86400))
            elif share < 15:
                due, claimed = ago(-3600 - rng.uniform(0, 60)), WORKERS[n % len(WORKERS)]  # a lease ending later
            elif share < 20:
                due = ago(rng.uniform(0, 60))
            elif share < 70:
                due = ago(-rng.uniform(60, 86400))
            else:
                due = None
            rows.append(
                (
                    NAME,
                    iid,
                    f"{br.key_of(iid)}",
                    due,
                    claimed,
                    int(share < 10) * rng.randint(0, 3),
                    ago(rng.uniform(86400, 10 * 86400)),
                    ago(rng.uniform(0, 86400)),
                )
            )
        insert_many(
            cur,
            "fsm_runs",
            "machine, instance_id, instance_key, due_at, claimed_by, attempt, created_at, updated_at",
            rows,
        )
        # outbox: unpublished events of the latest transition of some instances, the first ones parked
        events = runs[: scale.outbox]
        found: dict[int, tuple[int, int, str | None, str | None, str]] = {}
        for k in range(0, len(events), 1000):
            part = events[k : k + 1000]
            cur.execute(
                f"SELECT instance_id, id, sort_key, event, from_state, to_state FROM `fsm_{NAME}_transitions` "
                f"WHERE most_recent = 1 AND instance_id IN ({', '.join(['%s'] * len(part))})",
                part,
            )
            found.update({r[0]: r[1:] for r in cur.fetchall()})
        cur.execute("SELECT transition_id FROM fsm_outbox WHERE machine = %s", (NAME,))
        taken = {r[0] for r in cur.fetchall()}
        rows = []
        for n, iid in enumerate(e for e in events if found[e][0] not in taken):
            tid, sort_key, event, frm, to = found[iid]
            key, lookup, _ = instances[iid]
            parked = n < scale.parked
            rows.append(
                (
                    NAME,
                    "shop.orders",
                    iid,
                    key,
                    lookup,
                    tid,
                    sort_key,
                    event,
                    frm,
                    to,
                    '{"total": 12.99}',
                    "{}",
                    ago(rng.uniform(0, 600) + (86400 if parked else 0)),
                    5 if parked else 0,
                    "MessageSizeTooLargeError: the message is 1,200,000 bytes" if parked else None,
                    ago(3600) if parked else None,
                )
            )
        insert_many(
            cur,
            "fsm_outbox",
            "machine, topic, instance_id, instance_key, lookup_key, transition_id, "
            "sort_key, event, from_state, to_state, data, metadata, occurred_at, attempts, last_error, "
            "parked_at",
            rows,
        )
        # locks: one row per account (scope order, a tenth global), the first ones held
        cur.execute("SELECT scope, lookup_key FROM fsm_locks")
        taken_locks = set(cur.fetchall())
        accounts = rng.sample(range(br.ACCOUNTS), min(br.ACCOUNTS, scale.locks))
        cur.execute(f"SELECT MAX(id) FROM `fsm_{NAME}`")
        top = cur.fetchone()[0]
        rows = []
        for n, a in enumerate(accounts):
            scope, lookup = ("*" if n % 10 == 0 else NAME), f"acct-{a}"
            if (scope, lookup) in taken_locks:
                continue
            iid = a if a >= 1 else br.ACCOUNTS  # an instance of that account (id % ACCOUNTS)
            iid = min(iid, top)
            held = n < scale.held
            locked = ago(rng.uniform(0, 600) if held else rng.uniform(600, 30 * 86400))
            rows.append(
                (
                    scope,
                    lookup,
                    NAME,
                    iid,
                    br.key_of(iid),
                    f"api-{n % 7}",
                    locked,
                    None if held else locked + datetime.timedelta(seconds=rng.uniform(0.01, 5)),
                    ago(-3600) if held else locked + datetime.timedelta(seconds=30),
                    f"fsm_lock_{n:08x}",
                    None,
                )
            )
        insert_many(
            cur,
            "fsm_locks",
            "scope, lookup_key, machine, instance_id, instance_key, owner, locked_at, "
            "unlocked_at, expires_at, advisory_name, connection_id",
            rows,
        )
        # operator log: actions on random instances, most done, some refused
        rows = []
        actions = ("send", "retry", "pause", "resume", "force_unlock", "unpark")
        for n, iid in enumerate(rng.sample(sorted(instances), scale.operator_log)):
            key, lookup, _ = instances[iid]
            action = actions[n % len(actions)]
            at = ago(rng.uniform(60, 90 * 86400))
            refused = n % 9 == 0
            rows.append(
                (
                    f"operator{n % 12}",
                    "pyfsm_app@10.0.0.%",
                    action,
                    NAME,
                    key,
                    '{"event": "cancel"}' if action == "send" else "{}",
                    at,
                    "refused" if refused else "done",
                    31005 if refused else None,
                    "transition not allowed" if refused else None,
                    at + datetime.timedelta(milliseconds=30),
                )
            )
        insert_many(
            cur,
            "fsm_operator_log",
            "operator, account, action, machine, instance_key, detail, requested_at, "
            "outcome, errno, message, finished_at",
            rows,
        )
        for table in OPS_TABLES:
            cur.execute(f"ANALYZE TABLE `{table}`")
            cur.fetchall()
    return {"failed_keys": [instances[i][0] for i in failed]}


def remove_operations_rows(conn: Any) -> str:
    """Undo add_operations_rows (also what a run that died left); returns what it did."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() "
            "AND table_name IN ('bench_console_added', 'bench_console_failed')"
        )
        if cur.fetchone()[0] < 2:
            return "nothing to remove"
        cur.execute("SELECT tbl, first_id, last_id FROM bench_console_added")
        removed: dict[str, int] = {}
        for table, first, last in cur.fetchall():
            assert table in OPS_TABLES, table
            cur.execute(f"DELETE FROM `{table}` WHERE id BETWEEN %s AND %s", (first, last))
            removed[table] = removed.get(table, 0) + cur.rowcount
        conn.begin()
        cur.execute(f"UPDATE `fsm_{NAME}` i JOIN bench_console_failed f ON f.id = i.id SET i.status = f.status")
        restored = cur.rowcount
        # version and updated_at alone: the triggers let them through as given
        cur.execute(
            f"UPDATE `fsm_{NAME}` i JOIN bench_console_failed f ON f.id = i.id "
            "SET i.version = f.version, i.updated_at = f.updated_at"
        )
        cur.execute(
            f"SELECT COUNT(*) FROM `fsm_{NAME}` i JOIN bench_console_failed f ON f.id = i.id "
            "WHERE NOT (i.status <=> f.status AND i.version <=> f.version AND i.updated_at <=> f.updated_at)"
        )
        left = cur.fetchone()[0]
        if left:
            conn.rollback()
            raise RuntimeError(f"{left} instances did not get their status, version and updated_at back")
        conn.commit()
        cur.execute("DROP TABLE bench_console_added, bench_console_failed")
        for table in OPS_TABLES:
            cur.execute(f"ANALYZE TABLE `{table}`")
            cur.fetchall()
    return (
        ", ".join(f"{n:,} rows of {t}" for t, n in removed.items()) or "no rows"
    ) + f" removed, {restored:,} instances' status, version and updated_at restored"


# -- the pages ----------------------------------------------------------------------------


def pages(settings: Settings, info: dict[str, str], ops: dict[str, Any], reps: int, rng: random.Random) -> list[Page]:
    instances = int(info["instances"])
    n = WARMUP + reps + 1  # requests per page: warm-up, timed, the recorded one
    conn = connect(settings)
    with conn.cursor() as cur:
        cur.execute("SELECT state, instances FROM fsm_v_state_counts WHERE machine = %s AND instances > 0", (NAME,))
        counts = {s: int(c) for s, c in cur.fetchall()}
        cur.execute("SELECT UTC_TIMESTAMP()")
        now = cur.fetchone()[0]
    conn.close()
    big, small = max(counts, key=counts.__getitem__), min(counts, key=counts.__getitem__)
    fresh = iter(rng.sample(range(1, instances + 1), 3 * n))  # instance pages: never the same instance twice

    def keys() -> Callable[[int], str]:
        pool = [br.key_of(next(fresh)) for _ in range(n)]
        return lambda i: pool[i % n]

    instance, confirm = keys(), keys()
    failed = ops["failed_keys"]
    accounts = rng.sample(range(br.ACCOUNTS), n)
    middle = [rng.randint(instances * 4 // 10, instances * 6 // 10) for _ in range(n)]
    week, year = (
        (now - datetime.timedelta(days=7)).strftime("%Y-%m-%dT%H:%M"),
        (now - datetime.timedelta(days=365)).strftime("%Y-%m-%dT%H:%M"),
    )
    m = f"/m/{NAME}"
    fixed: list[tuple[str, str]] = [
        ("/", "/"),
        (f"{m} (first page)", m),
        (f"{m}?state={big} (biggest state)", f"{m}?state={big}"),
        (f"{m}?state={small} (smallest state)", f"{m}?state={small}"),
        (f"{m}?status=failed", f"{m}?status=failed"),
        (f"{m}?status=completed", f"{m}?status=completed"),
        (f"{m}?updated_after=<7 days ago> (windowed)", f"{m}?updated_after={week}"),
        (f"{m}?updated_before=<a year ago> (windowed, none in the window)", f"{m}?updated_before={year}"),
        (f"{m}?state=shipped&status=running (windowed)", f"{m}?state=shipped&status=running"),
        (f"{m}?state=new&status=failed (windowed, few match)", f"{m}?state=new&status=failed"),
    ]
    out = [Page(label, lambda i, p=path: p) for label, path in fixed]
    out[2:2] = [Page(f"{m}?before=<an id near the middle> (a deep page)", lambda i: f"{m}?before={middle[i % n]}")]
    out.insert(7, Page(f"{m}?lookup_key=<an account>", lambda i: f"{m}?lookup_key=acct-{accounts[i % n]}"))
    out += [
        Page(f"{m}/i/<key> (a random instance, ~10 history rows)", lambda i: f"{m}/i/{instance(i)}"),
        Page(
            f"{m}/i/<key> (a failed instance: 5 errors with tracebacks)", lambda i: f"{m}/i/{failed[i % len(failed)]}"
        ),
        Page("/failed", lambda i: "/failed"),
        Page(f"/failed?machine={NAME}", lambda i: f"/failed?machine={NAME}"),
        Page("/stuck", lambda i: "/stuck"),
        Page("/queue", lambda i: "/queue"),
        Page("/locks", lambda i: "/locks"),
        Page("/outbox", lambda i: "/outbox"),
        Page("/metrics", lambda i: "/metrics"),
        Page(f"{m}/diagram.svg", lambda i: f"{m}/diagram.svg"),
        Page(
            f"/confirm?action=send&machine={NAME}&key=<key>",
            lambda i: f"/confirm?action=send&machine={NAME}&key={confirm(i)}",
        ),
    ]
    return out


def server_ms(response: Any, client_ms: float) -> float:
    """The Server-Timing header's time (app;dur=12.3); a response without one (an exception the
    console did not catch) counts its client time."""
    value = response.headers.get("server-timing", "")
    return float(value.split("dur=", 1)[1]) if "dur=" in value else client_ms


class Recorder:
    """Every statement pymysql runs in this process while on: (sql, args, ms)."""

    def __init__(self) -> None:
        self.on: list[tuple[str, Any, float]] | None = None
        self._execute = pymysql.cursors.Cursor.execute
        recorder, original = self, self._execute

        def execute(cur: Any, query: str, args: Any = None) -> int:
            started = time.perf_counter()
            try:
                return original(cur, query, args)
            finally:
                if recorder.on is not None:
                    recorder.on.append((query, args, (time.perf_counter() - started) * 1000))

        pymysql.cursors.Cursor.execute = execute  # type: ignore[method-assign]

    def close(self) -> None:
        pymysql.cursors.Cursor.execute = self._execute  # type: ignore[method-assign]


def measure_pages(settings: Settings, todo: list[Page], reps: int) -> None:
    from starlette.testclient import TestClient

    from pyfsm.web.app import ConsoleConfig, create_app

    dsn = settings.dsn()
    app = create_app(ConsoleConfig(dsn=dsn, actions_dsn=dsn, allow_actions=True))
    with TestClient(app, raise_server_exceptions=False) as client:

        def get(page: Page, i: int) -> tuple[float, float]:
            started = time.perf_counter()
            response = client.get(page.path(i), follow_redirects=False)
            took = (time.perf_counter() - started) * 1000
            page.statuses.add(response.status_code)
            page.size = len(response.content)
            return server_ms(response, took), took

        for w in range(WARMUP):
            for page in todo:
                dur, _ = get(page, reps + w)
                if w == 0:
                    page.first_ms = dur
        print(f"timing {len(todo)} pages, {reps} rounds...", file=sys.stderr, flush=True)
        for i in range(reps):
            for page in todo:
                dur, took = get(page, i)
                page.server_ms.append(dur)
                page.client_ms.append(took)
        recorder = Recorder()
        try:
            for page in todo:
                recorder.on = []
                get(page, reps + WARMUP)
                page.statements, recorder.on = recorder.on, None
        finally:
            recorder.close()


# -- where the time goes ------------------------------------------------------------------


def inner_statement(sql: str) -> str | None:
    """What a CALL runs, to EXPLAIN: the big type's part of fsm_stats_v2 (fsm_outbox_lag_v1's is one range)."""
    if "fsm_stats_v2" in sql:
        return (
            f"SELECT SUM(status = 'running'), SUM(status = 'waiting'), SUM(status = 'paused'), "
            f"SUM(status = 'failed') FROM `fsm_{NAME}` WHERE status IN ('running', 'waiting', 'paused', 'failed')"
        )
    if "fsm_outbox_lag_v1" in sql:
        return "SELECT COUNT(*), SUM(parked_at IS NOT NULL), MIN(id) FROM fsm_outbox WHERE published_at IS NULL"
    return None


def diagnose(settings: Settings, page: Page) -> list[Diagnosis]:
    """Each statement of the page's recorded request again, on a connection of its own."""
    conn = connect(settings)
    out = []
    try:
        with conn.cursor() as cur:
            for sql, args, ms in page.statements:
                text = sql.strip()
                if not text.upper().startswith(("SELECT", "CALL", "(SELECT")):
                    continue
                calibration = br.handler_reads(cur)
                calibration = br.handler_reads(cur) - calibration
                before = br.handler_reads(cur)
                started = time.perf_counter()
                br.run(cur, text, args or ())
                rerun = (time.perf_counter() - started) * 1000
                rows = br.handler_reads(cur) - before - calibration
                target = inner_statement(text) if text.upper().startswith("CALL") else text
                plan = ""
                if target:
                    try:
                        accesses, scans = br.judge(br.explain(cur, target, () if target != text else args or ()))
                        plan = ("SCAN " + "; ".join(s for _, s in scans) + " - " if scans else "") + ", ".join(accesses)
                    except pymysql.MySQLError as exc:
                        plan = f"(no EXPLAIN: {exc.args[-1]})"
                out.append(Diagnosis(" ".join(text.split()), ms, rerun, rows, plan))
    finally:
        conn.close()
    return out


# -- report -------------------------------------------------------------------------------


def short(sql: str, width: int = 110) -> str:
    return sql if len(sql) <= width else sql[: width - 3] + "..."


def report(
    todo: list[Page],
    diagnoses: dict[str, list[Diagnosis]],
    ceilings: list[bt.Result],
    env: dict[str, Any],
    info: dict[str, str],
    reps: int,
    scale: Scale,
) -> str:
    c50 = statistics.mean(c.pct(50) for c in ceilings)
    missed = [p for p in todo if p.pct(p.server_ms, 95) >= TARGET_MS or p.statuses != {200}]
    lines = [
        f"Run {env['date']}: {os.cpu_count()} CPUs, load average {env['load_start']} at the start and "
        f"{env['load_end']} at the end; server {env['version']}, innodb_buffer_pool_size {env['pool_mib']} MiB; "
        f"graphviz {env['dot']}. Database `{env['database']}` (revision {info['revision']}): "
        f"{int(info['instances']):,} `{NAME}` instances and {int(info['history_rows']):,} history rows "
        f"(bench_reporting's data set, loaded {info.get('loaded_on', '?')}), plus, for this run only: "
        f"{scale.runs:,} runs in fsm_runs (10% stuck, 5% claimed by {len(WORKERS)} workers, 5% due now, 50% due "
        f"later, 30% waiting), {scale.failed:,} instances failed with {scale.failed * scale.errors_per_failed:,} "
        f"errors (tracebacks), {scale.outbox:,} unpublished outbox rows ({scale.parked} parked), {scale.locks:,} "
        f"lock rows ({scale.held} held), {scale.operator_log:,} operator actions; removed afterwards. "
        f"Other sessions busy at the start: {env['busy_start']}; at the end: {env['busy_end']}.",
        "",
        f"Console in process (Starlette TestClient, `create_app`, actions allowed so that /confirm renders), "
        f"{WARMUP} untimed requests per page, then {reps} rounds of one request per page; instance pages get a "
        "new random instance each request. Server time is the `Server-Timing: app;dur` header; client time the "
        f"TestClient call. Ceiling: one INSERT+COMMIT, 1 client, p50 {ceilings[0].pct(50):.2f} ms at the start, "
        f"{ceilings[-1].pct(50):.2f} ms at the end (x ceiling: server p50 over their mean, {c50:.2f} ms). "
        f"Target: every page under {TARGET_MS:.0f} ms server time (judged on p95).",
        "",
        "| page | p50 ms | p95 ms | max ms | first ms | client p50 ms | x ceiling p50 | statements | "
        f"< {TARGET_MS:.0f} ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for p in todo:
        s = p.server_ms
        ok = p.pct(s, 95) < TARGET_MS and p.statuses == {200}
        status = "" if p.statuses == {200} else f" (HTTP {', '.join(map(str, sorted(p.statuses)))})"
        lines.append(
            f"| `{p.label}` | {p.pct(s, 50):.1f} | {p.pct(s, 95):.1f} | {max(s):.1f} | {p.first_ms:.1f} | "
            f"{p.pct(p.client_ms, 50):.1f} | {p.pct(s, 50) / c50:,.0f}x | {len(p.statements)} | "
            f"{'MET' if ok else '**MISSED**'}{status} |"
        )
    lines += [
        "",
        "Missed: " + (", ".join(f"`{p.label}`" for p in missed) if missed else "none") + ".",
        "",
        "Where the time goes: the slowest statement of one recorded request of each page, run again on a "
        "connection of its own (ms as the console ran it / again; rows read: the session's Handler_read%; "
        "EXPLAIN `table:key/type`; for `CALL fsm_stats_v2()` the big type's status count it prepares).",
        "",
        "| page | DB ms of the request | slowest statement | ms (console / again) | rows read | EXPLAIN |",
        "|---|---:|---|---:|---:|---|",
    ]
    for p in todo:
        found = diagnoses.get(p.label) or []
        total = sum(ms for _, _, ms in p.statements)
        if not found:
            lines.append(f"| `{p.label}` | {total:.1f} | | | | |")
            continue
        d = max(found, key=lambda x: x.ms)
        lines.append(
            f"| `{p.label}` | {total:.1f} | `{short(d.sql).replace('|', '/')}` | {d.ms:.1f} / "
            f"{d.rerun_ms:.1f} | {d.rows_read:,} | {d.explain.replace('|', '/')} |"
        )
    return "\n".join(lines)


def write_section(path: Path, text: str) -> None:
    old = path.read_text() if path.exists() else "# Benchmarks\n"
    if MARK[0] not in old:
        path.write_text(
            old.rstrip("\n")
            + f"\n\n{SECTION}\n\n"
            + (
                "`bench/bench_console.py` measures every page of `pyfsm web` (server time, the `Server-Timing`\n"
                "header) on bench_reporting's data set (1,000,000 instances, 10,000,000 history rows), with\n"
                "rows added for the operations pages and removed afterwards, beside the INSERT+COMMIT ceiling.\n"
                "Target (issue 17): every page under 200 ms. Reproduce:\n\n"
                "```sh\n.venv/bin/python bench/bench_console.py --reuse --write BENCHMARKS.md\n```\n"
            )
        )
    bt.write_results(path, text, MARK)


def ceiling(settings: Settings, seconds: float) -> bt.Result:
    admin = pymysql.connect(**settings.connect_kwargs(database=False))
    try:
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{CEILING_DB}`")
            cur.execute(f"CREATE DATABASE `{CEILING_DB}`")
            cur.execute(f"USE `{CEILING_DB}`")
            cur.execute(bt.TABLES[0])
        print("measuring the INSERT+COMMIT ceiling...", file=sys.stderr, flush=True)
        return bt.measure("ceiling", 1, settings.with_database(CEILING_DB), seconds)
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{CEILING_DB}`")
        admin.close()


def busy(settings: Settings) -> str:
    """Other sessions running a statement right now (what else loads the server)."""
    admin = pymysql.connect(**settings.connect_kwargs(database=False))
    try:
        with admin.cursor() as cur:
            cur.execute(
                "SELECT COUNT(*), COALESCE(MAX(time), 0) FROM information_schema.processlist "
                "WHERE command = 'Query' AND id <> CONNECTION_ID()"
            )
            count, longest = cur.fetchone()
    finally:
        admin.close()
    return f"{count} statements running (longest {longest} s)" if count else "none"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--dsn", default="mysql://root@127.0.0.1:3306/test", help="server (its database is ignored)")
    parser.add_argument("--database", default=None, help="the data set's database (pyfsm_bench_reporting)")
    parser.add_argument("--reuse", action="store_true", help="require the data set to be there: never build it")
    parser.add_argument("--reps", type=int, default=30, help="timed requests per page")
    parser.add_argument("--ceiling-seconds", type=float, default=5.0, help="length of each ceiling measurement")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a small data set of its own (20,000 instances, "
        "pyfsm_bench_reporting_quick), 5 requests per page; writes nothing",
    )
    parser.add_argument("--keep", action="store_true", help="leave the operations rows in place afterwards")
    parser.add_argument("--undo", action="store_true", help="only remove the rows a previous run left")
    parser.add_argument("--write", type=Path, help="update the console block of this file (e.g. BENCHMARKS.md)")
    args = parser.parse_args(argv)
    if args.quick:
        args.database = args.database or "pyfsm_bench_reporting_quick"
        args.reps = min(args.reps, 5)
        args.ceiling_seconds = min(args.ceiling_seconds, 1.5)
        if args.write:
            parser.error("--quick numbers are not comparable with a full run: no --write")
    settings = parse_dsn(args.dsn).with_database(args.database or "pyfsm_bench_reporting")
    if not settings.database.startswith("pyfsm_bench"):
        parser.error("--database must start with pyfsm_bench")
    if args.undo:
        conn = connect(settings)
        print(remove_operations_rows(conn), file=sys.stderr)
        conn.close()
        return 0
    env: dict[str, Any] = {
        "date": datetime.date.today().isoformat(),
        "database": settings.database,
        "load_start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }
    info = ensure_data_set(settings, args)
    conn = connect(settings)
    with conn.cursor() as cur:
        cur.execute("SELECT @@version, @@innodb_buffer_pool_size")
        version, pool = cur.fetchone()
    env.update(version=version, pool_mib=int(pool) // 2**20, busy_start=busy(settings))
    try:
        env["dot"] = subprocess.run(["dot", "-V"], capture_output=True, text=True).stderr.strip() or "present"
    except OSError:
        env["dot"] = "MISSING (the diagram page answers 404)"
    ceilings = [ceiling(settings, args.ceiling_seconds)]
    print(f"ceiling p50 {ceilings[0].pct(50):.2f} ms", file=sys.stderr)
    left = remove_operations_rows(conn)  # a run that died before cleaning up
    if left != "nothing to remove":
        print(f"a previous run's rows: {left}", file=sys.stderr)
    scale = QUICK if args.quick else FULL
    rng = random.Random(17)
    diagnoses: dict[str, list[Diagnosis]] = {}
    try:
        print("adding the operations pages' rows...", file=sys.stderr, flush=True)
        ops = add_operations_rows(conn, scale, rng)
        todo = pages(settings, info, ops, args.reps, rng)
        measure_pages(settings, todo, args.reps)
        for page in todo:
            diagnoses[page.label] = diagnose(settings, page)
    finally:
        if args.keep:
            print("--keep: the operations rows stay (remove them with --undo)", file=sys.stderr)
        else:
            print(remove_operations_rows(conn), file=sys.stderr)
        conn.close()
    env.update(load_end=" ".join(f"{x:.2f}" for x in os.getloadavg()), busy_end=busy(settings))
    ceilings.append(ceiling(settings, args.ceiling_seconds))
    text = report(todo, diagnoses, ceilings, env, info, args.reps, scale)
    print(text)
    for page in todo:
        print(f"\n{page.label} ({page.size:,} bytes):", file=sys.stderr)
        for d in diagnoses.get(page.label, []):
            print(
                f"  {d.ms:7.1f} ms / {d.rerun_ms:7.1f} ms again, {d.rows_read:>9,} rows: {short(d.sql, 160)}\n"
                f"      {d.explain}",
                file=sys.stderr,
            )
    if args.write:
        write_section(args.write, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
