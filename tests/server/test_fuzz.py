"""Hostile and malformed input, fuzzed with Hypothesis through every door.

Doors: the Python API (Store, Machine, parse_machines, Account.parse), the procedures called
with plain PyMySQL as a DBA would (and a raw UPDATE of current_state), and the `pyfsm`
command run as a subprocess. Inputs: identifiers with quotes, backticks, semicolons,
comments, NUL, line breaks, lone surrogates, look-alike Unicode and lengths around every
limit; JSON that is invalid, not an object, nested 10,000 deep or just over its size limit;
numbers that are negative, huge, fractional, NaN or bools.

Properties, for every input:

* the Python API raises a pyfsm.FsmError subclass (never a TypeError, OverflowError, a
  driver error, ...); a procedure fails with a pyfsm number (31001-31023) or one of the
  server numbers pyfsm maps (SERVER); the CLI exits 0, or 1 with one stderr line
  "pyfsm: <a pyfsm error class> (<errno>): ...";
* an error changes nothing: CHECKSUM TABLE of every table is the same before and after (a
  read changes nothing either), and a procedure leaves no transition context in the
  session's @fsm_* variables;
* a call that succeeds leaves the invariants intact: one most_recent history row per
  instance, sort keys increasing, an unbroken chain of states, only states and events of
  the definition, final state if and only if completed, counters equal to the instances,
  and what was stored reads back exactly;
* nothing hostile is ever spliced into SQL: no table appears or disappears (checked after
  every success), and at the end the tables, views, routines and triggers are exactly those
  of the start, the canary table included.

Each call is valid but for one to three hostile arguments (or none), so that every hostile
value meets the checks behind the first one, and the database. Outcomes are counted: run
with --hypothesis-show-statistics to see how many examples were accepted and which errors
the others got.

Known bugs are not fuzzed around silently: each has a minimal example at the end of the
file, marked xfail(strict=True), and the generators steer clear of exactly that input.

One migrated database and one machine type serve the whole module. Runs are reproducible
(derandomize=True, no example database); PYFSM_FUZZ_SCALE=10 runs ten times the examples,
and PYFSM_FUZZ_RANDOM=1 draws new ones on every run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pymysql
import pytest
from helpers import fuzz_strategies as fs
from hypothesis import HealthCheck, assume, currently_in_test_context, given, settings
from hypothesis import event as hypothesis_event
from hypothesis import strategies as st

import pyfsm.errors
from pyfsm import FsmError, InvalidArgument, InvalidData, InvalidDefinition, Machine, Store
from pyfsm.db import Settings, parse_dsn
from pyfsm.definition_file import dump_machines, parse_machines
from pyfsm.errors import from_mysql_error
from pyfsm.reporting.reads import current_machine
from pyfsm.schema.grants import Account

SCALE = float(os.environ.get("PYFSM_FUZZ_SCALE", "1"))
#: PYFSM_FUZZ_RANDOM=1: new examples on every run (to explore; CI keeps the fixed ones).
RANDOM = os.environ.get("PYFSM_FUZZ_RANDOM", "") not in ("", "0")


def fuzz(examples: int) -> settings:
    """Reproducible settings: the same examples on every run, no .hypothesis database."""
    return settings(
        max_examples=max(1, int(examples * SCALE)),
        deadline=None,
        derandomize=not RANDOM,
        database=None,
        print_blob=False,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
            HealthCheck.large_base_example,
        ],
    )


pytestmark = pytest.mark.filterwarnings("ignore::pyfsm.UnreachableStateWarning")

# --- the machine under attack --------------------------------------------------------------

M = "fz"
STATES = ("new", "paid", "done")
EVENTS = ("pay", "refund", "finish", "cancel", "abort")
STATUSES = ("running", "waiting", "paused", "completed", "failed")
MACHINE = Machine(
    name=M,
    states=STATES,
    start=["new"],
    final=["done"],
    topic="fuzz.events",
    uses_global_lock=True,
    transitions=[
        ("pay", "new", "paid"),
        ("refund", "paid", "new"),
        ("finish", "paid", "done"),
        ("cancel", ["new", "paid"], "done"),
        ("abort", "new", "done"),
    ],  # two events new -> done
)
#: Instances created before the fuzzing, and their lookup keys.
SEEDED = {
    "k1": "acct-1",
    "k2": "acct-1",
    "k3": "acct-2",
    "k4": None,
    "x`; DROP TABLE fsm_machines; --": "acct-'3",
    "ключ 🙂": "acct-2",
}
KEYS = (*SEEDED, "nobody")
LOOKUPS = ("acct-1", "acct-2", "acct-'3")
#: A machine defined through fsm_define_v5 only (never synced): the target of definition fuzzing.
DEF = "fzdef"
#: Server errors a hostile argument may legitimately get: each is mapped in pyfsm.errors.SERVER.
SERVER_ERRORS = frozenset(
    {
        1264,
        1292,
        1366,
        1406,
        3140,
        4025,
        # MySQL's own refusals of a JSON argument, before pyfsm's checks see it: JSON
        # nested deeper than 100 levels (MariaDB: pyfsm's 31001/31008), and bytes (a
        # binary string) where a JSON value is needed
        3157,
        3144,
    }
)
#: Unmapped server errors already reported; see the xfail tests at the end.
KNOWN_UNMAPPED = frozenset({1265})  # test_data_truncated_is_a_pyfsm_error
TRANSITION_CONTEXT = ("@fsm_event", "@fsm_metadata", "@fsm_handler", "@fsm_request_id", "@fsm_source", "@fsm_guard")
TESTS = Path(__file__).resolve().parents[1]
FRESH = itertools.count(1)


def outcome(text: str) -> None:
    """Count an outcome in --hypothesis-show-statistics (outside a Hypothesis test: nothing)."""
    if currently_in_test_context():
        hypothesis_event(text)


class Hang(BaseException):
    """Raised by the watchdog: not an Exception, so no driver or pyfsm handler can swallow it."""


@contextlib.contextmanager
def watchdog(seconds: float = 60.0) -> Iterator[None]:
    def expired(*_: object) -> None:
        raise Hang(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Env:
    """The shared database: a Store, a DBA's raw connection, and the checks."""

    settings: Settings
    store: Store
    raw: Any
    baseline: frozenset[tuple[str, str]] = field(default_factory=frozenset)
    baseline_tables: tuple[str, ...] = ()

    @property
    def dsn(self) -> str:
        return self.settings.dsn()

    def rows(self, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
        with self.raw.cursor() as cur:
            cur.execute(sql, args)
            rows = list(cur.fetchall())
            while cur.nextset():
                pass
            return rows

    def objects(self) -> frozenset[tuple[str, str]]:
        """Tables, views, routines and triggers (a slow query: the canaries and the teardown use it)."""
        return frozenset(
            self.rows(
                "SELECT table_type, table_name FROM information_schema.tables WHERE table_schema = DATABASE() "
                "UNION ALL SELECT routine_type, routine_name FROM information_schema.routines "
                "WHERE routine_schema = DATABASE() UNION ALL SELECT 'TRIGGER', trigger_name "
                "FROM information_schema.triggers WHERE trigger_schema = DATABASE()"
            )
        )

    def tables(self) -> tuple[str, ...]:
        return tuple(sorted(name for name, kind in self.rows("SHOW FULL TABLES") if kind == "BASE TABLE"))

    def fingerprint(self) -> tuple[Any, ...]:
        """CHECKSUM TABLE of every table: equal before and after means nothing changed (a table
        dropped meanwhile has no checksum; one created shows in invariants())."""
        return tuple(self.rows("CHECKSUM TABLE " + ", ".join(f"`{t}`" for t in self.baseline_tables)))

    def context(self) -> tuple[Any, ...]:
        return self.rows("SELECT " + ", ".join(TRANSITION_CONTEXT))[0]

    def invariants(self) -> None:
        """What must hold after any successful call, whatever its input."""
        assert self.tables() == self.baseline_tables, "a table was created or dropped"
        assert self.rows("SELECT COUNT(*) FROM fuzz_canary") == [(1,)]
        instances = self.rows(
            f"SELECT id, instance_key, current_state, status, version, JSON_TYPE(data) FROM `fsm_{M}`"
        )
        history: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
        for row in self.rows(
            "SELECT instance_id, sort_key, most_recent, event, from_state, to_state "
            f"FROM `fsm_{M}_transitions` ORDER BY id"
        ):
            history[row[0]].append(row[1:])
        for iid, key, state, status, version, kind in instances:
            assert state in STATES and status in STATUSES and kind == "OBJECT", (key, state, status, kind)
            assert (state == "done") == (status == "completed"), (key, state, status)  # done is final
            rows = history[iid]
            assert rows and rows[0][2] is None and rows[0][3] is None, (key, rows[:1])  # created first
            sort_keys = [r[0] for r in rows]
            assert sort_keys == sorted(set(sort_keys)) and sort_keys[-1] <= version, (key, sort_keys, version)
            assert [r[1] for r in rows] == [None] * (len(rows) - 1) + [1], (key, "most_recent")
            assert rows[-1][4] == state, (key, rows[-1], state)
            for before, after in itertools.pairwise(rows):
                assert after[3] == before[4] and after[2] in EVENTS and after[4] in STATES, (key, before, after)
        counted = {
            s: int(n)
            for s, n in self.rows(
                "SELECT state, SUM(instances) FROM fsm_state_counts WHERE machine = %s GROUP BY state", (M,)
            )
            if n
        }
        assert counted == dict(Counter(row[2] for row in instances)), counted


@pytest.fixture(scope="module")
def env(make_database) -> Iterator[Env]:  # type: ignore[no-untyped-def]
    settings_ = make_database("pyfsm_fuzz")
    store = Store(settings_.dsn())
    store.migrate()
    store.define(MACHINE)
    for key, lookup in SEEDED.items():
        store.create(M, key, lookup_key=lookup, data={"seed": key})
    raw = pymysql.connect(**settings_.connect_kwargs())
    e = Env(settings_, store, raw)
    e.rows("SET time_zone = '+00:00'")
    e.rows("SET SESSION innodb_lock_wait_timeout = 10")
    with contextlib.suppress(pymysql.err.MySQLError):  # MariaDB: no statement runs longer than this
        e.rows("SET SESSION max_statement_time = 30")
    e.rows("CREATE TABLE fuzz_canary (id INT PRIMARY KEY) ENGINE=InnoDB")
    e.rows("INSERT INTO fuzz_canary VALUES (1)")
    e.baseline, e.baseline_tables = e.objects(), e.tables()
    e.invariants()
    yield e
    assert e.objects() == e.baseline, "tables, views, routines or triggers changed"
    raw.close()
    store.close()


def attempt(env: Env, call: Callable[[], Any], *, reads: bool = False) -> Any:
    """Make one call: a pyfsm error that changed nothing, or a success that kept the invariants."""
    before = env.fingerprint()
    with watchdog():
        try:
            result = call()
        except FsmError as exc:
            assert type(exc) is not FsmError and isinstance(exc.errno, int), repr(exc)
            assert env.fingerprint() == before, f"{exc!r}, yet the database changed"
            outcome(f"refused: {type(exc).__name__}")
            return exc
    outcome("accepted")
    if reads:
        assert env.fingerprint() == before, "a read changed the database"
    env.invariants()
    return result


def sql_call(env: Env, sql: str, args: tuple[Any, ...]) -> tuple[list[tuple[Any, ...]] | None, int | None]:
    """A DBA's CALL: (rows, None), or (None, errno) after checking the error and that nothing changed."""
    before = env.fingerprint()
    with watchdog():
        try:
            rows = env.rows(sql, args)
        except pymysql.err.MySQLError as exc:
            errno = exc.args[0] if exc.args else None
            assert isinstance(errno, int), repr(exc)
            # 31028: send_v3's answer to an event the type does not have (the strategies' teleport)
            assert 31001 <= errno <= 31023 or errno in SERVER_ERRORS | KNOWN_UNMAPPED | {31028}, (
                f"unexpected error {exc!r}"
            )
            if errno not in KNOWN_UNMAPPED:
                assert isinstance(from_mysql_error(exc), FsmError), repr(exc)
            assert env.fingerprint() == before, f"{exc!r}, yet the database changed"
            assert env.context() == (None,) * len(TRANSITION_CONTEXT), "a failed call left a transition context"
            outcome(f"refused: {errno}")
            return None, errno
    outcome("accepted")
    assert env.context() == (None,) * len(TRANSITION_CONTEXT), "a call left a transition context"
    return rows, None


def sendable(value: Any) -> bool:
    """What PyMySQL can put into a statement as one value (lists become tuples, NaN is refused)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(value, float):
        return value == value and abs(value) != float("inf")
    if isinstance(value, Decimal):
        return value.is_finite()
    return value is None or isinstance(value, (int, bytes, datetime, date))


# --- door 1: the Python API ----------------------------------------------------------------

machines = fs.names([M], fs.MACHINE_MAX)
instance_keys = fs.keys(KEYS)
numbers = fs.numbers()
#: Each kind of argument: (what pyfsm must accept, what it must refuse or at least survive).
KINDS: dict[str, tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]] = {
    "machine": (st.just(M), machines),
    "key": (fs.valid_keys(KEYS), instance_keys),
    "lookup_required": (st.sampled_from(LOOKUPS), fs.keys(LOOKUPS)),
    "event": (st.sampled_from(EVENTS), fs.names([*EVENTS, "teleport"])),
    "state": (st.sampled_from(STATES), fs.names(STATES)),
    "start_state": (st.sampled_from([None, "new"]), st.one_of(fs.names(STATES), st.just("paid"))),
    "data": (st.one_of(st.none(), fs.valid_objects), fs.hostile_objects()),
    "version": (st.sampled_from([None, None, None, 0, 1, 2]), numbers),  # mostly no check: fewer Conflicts
    "request_id": (
        st.one_of(st.none(), st.none(), st.uuids().map(str), fs.valid_keys(["r-1"], fs.REQUEST_ID_MAX)),
        fs.keys(["r-1"], 64),
    ),
    "handler": (st.one_of(st.none(), fs.valid_keys(["dba"], fs.HANDLER_MAX)), fs.keys(["dba"], fs.HANDLER_MAX)),
    "lookup": (st.sampled_from([None, *LOOKUPS]), fs.keys(LOOKUPS)),
    "after_id": (st.sampled_from([0, 1, 2**63 - 1]), numbers),
    "limit": (st.sampled_from([1, 100, 10_000]), numbers),
    "def_version": (st.sampled_from([None, 1]), numbers),
    "moment": (
        st.one_of(
            st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)),
            st.datetimes(min_value=datetime(2000, 1, 2), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)),
        ),
        fs.moments(),
    ),
    "flag": (st.sampled_from([None, True, False]), numbers),
    "delay": (st.sampled_from([None, 0, 0.5, 60]), numbers),
    "owner": (st.one_of(st.none(), st.text(alphabet="az09._:-", min_size=1, max_size=64)), fs.owners()),
    "lease": (st.sampled_from([None, 0.1, 1, 30]), numbers),
    "not_a_lease": (st.none(), st.one_of(numbers, fs.texts(), st.sampled_from(fs.NON_STRINGS))),  # send(lease=)
    "attempts": (st.sampled_from([1, 2]), numbers),
    "backoff": (st.just(0.01), numbers),
    "reason": (fs.valid_keys(["fuzzing"], fs.REASON_MAX), fs.keys(["fuzzing"], fs.REASON_MAX)),
    "scope": (st.sampled_from([None, "*", M]), st.one_of(machines, st.just("*x"))),
}
#: Each Store method: its arguments (name, kind), how many are positional, whether it only reads.
API: dict[str, tuple[tuple[tuple[str, str], ...], int, bool]] = {
    "send": (
        (
            ("machine", "machine"),
            ("key", "key"),
            ("event", "event"),
            ("data", "data"),
            ("metadata", "data"),
            ("expected_version", "version"),
            ("request_id", "request_id"),
            ("handler", "handler"),
            ("lookup_key", "lookup"),
            ("lease", "not_a_lease"),
        ),
        3,
        False,
    ),
    "create": (
        (
            ("machine", "machine"),
            ("key", "key"),
            ("state", "start_state"),
            ("data", "data"),
            ("metadata", "data"),
            ("lookup_key", "lookup"),
            ("request_id", "request_id"),
        ),
        2,
        False,
    ),
    "get": ((("machine", "machine"), ("key", "key")), 2, True),
    "history": ((("machine", "machine"), ("key", "key")), 2, True),
    "in_state": ((("machine", "machine"), ("state", "state"), ("after_id", "after_id"), ("limit", "limit")), 2, True),
    "counts": ((("machine", "machine"),), 1, True),
    "errors": ((("machine", "machine"), ("key", "key")), 2, True),
    "run_info": ((("machine", "machine"), ("key", "key")), 2, True),
    "failed": ((("machine", "machine"), ("after_id", "after_id"), ("limit", "limit")), 1, True),
    "definition": ((("machine", "machine"), ("version", "def_version")), 2, True),
    "locks": ((("lookup_key", "lookup"),), 0, True),
    "state_at": ((("machine", "machine"), ("key", "key"), ("at", "moment")), 3, True),
    "pause": ((("machine", "machine"), ("key", "key")), 2, False),
    "resume": ((("machine", "machine"), ("key", "key")), 2, False),
    "retry": ((("machine", "machine"), ("key", "key")), 2, False),
    "enqueue": (
        (("machine", "machine"), ("key", "key"), ("delay_seconds", "delay"), ("run_immediately", "flag")),
        2,
        False,
    ),
    "set_locking": (
        (("machine", "machine"), ("key", "key"), ("global_lock", "flag"), ("local_lock", "flag")),
        2,
        False,
    ),
    "force_unlock": ((("lookup_key", "lookup_required"), ("reason", "reason"), ("scope", "scope")), 1, True),
    "lock": (
        (
            ("machine", "machine"),
            ("key", "key"),
            ("owner", "owner"),
            ("lease_seconds", "lease"),
            ("attempts", "attempts"),
            ("backoff", "backoff"),
        ),
        2,
        False,
    ),
}


def call_store(env: Env, method: str, data: st.DataObject) -> tuple[dict[str, Any], Any]:
    """One Store call, valid but for up to two hostile arguments: its arguments and outcome."""
    spec, positional, reads = API[method]
    values, _ = data.draw(fs.mixed([KINDS[kind][0] for _, kind in spec], [KINDS[kind][1] for _, kind in spec]))
    named = {name: value for (name, _), value in zip(spec, values, strict=True)}
    args, kwargs = values[:positional], dict(list(named.items())[positional:])
    if method == "lock":
        kwargs["heartbeat"] = False  # nobody else holds a lock here: even 100 attempts never wait
    return named, attempt(env, lambda: getattr(env.store, method)(*args, **kwargs), reads=reads)


@fuzz(120)
@given(data=st.data())
def test_send_refuses_hostile_arguments_and_stores_hostile_data_exactly(env: Env, data: st.DataObject) -> None:
    args, result = call_store(env, "send", data)
    if isinstance(result, FsmError):
        return
    assert (result.key, result.event, result.to_state in STATES) == (args["key"], args["event"], True)
    if not result.replayed:  # what was stored reads back exactly: keys, data and metadata are data, not SQL
        instance = env.store.get(M, args["key"])
        assert instance.key == args["key"] and (args["data"] is None or instance.data == args["data"])
        [entry] = [h for h in env.store.history(M, args["key"]) if h.id == result.transition_id]
        assert entry.metadata == (args["metadata"] or {}) and entry.handler == args["handler"]


@pytest.mark.parametrize("method", sorted(set(API) - {"send"}))
@fuzz(25)
@given(data=st.data())
def test_store_methods_refuse_hostile_arguments(env: Env, method: str, data: st.DataObject) -> None:
    args, result = call_store(env, method, data)
    if isinstance(result, FsmError):
        return
    if method == "create":
        assert (result.key, result.to_state) == (args["key"], "new")
    elif method == "get":  # a key is matched exactly: no padding, no wildcard, no case folding
        assert result.key == args["key"]
    elif method == "history":
        assert {h.instance_id for h in result} == {env.store.get(M, args["key"]).id}
    elif method == "in_state":
        assert all(i.state == args["state"] for i in result)
    elif method == "counts":
        assert set(result) <= set(STATES)
    elif method == "locks" and args["lookup_key"] is not None:
        assert all(h.lookup_key == args["lookup_key"] for h in result)
    elif method == "pause":
        env.store.resume(M, args["key"])  # keep the instance open to events for the other tests
    elif method == "lock":  # released cleanly, unless a lease of a second or less ran out first
        assert result.release() or float(args["lease_seconds"] or 60) <= 1, args
        assert env.store.locks() == []


# --- definitions: Machine, definition files, and what SQL stores --------------------------


@fuzz(150)
@given(
    doc=fs.documents(),
    name=st.one_of(st.just(DEF), fs.names([DEF], fs.MACHINE_MAX)),
    lease=st.one_of(st.just(60), numbers),
)
def test_machine_definitions_python_accepts_sql_accepts(env: Env, doc: dict[str, Any], name: Any, lease: Any) -> None:
    """Machine(...) from a broken document's fields: InvalidDefinition, or a Machine whose JSON
    fsm_define_v5 stores as it is."""
    edges = doc.get("transitions")  # a dict becomes a tuple; anything else (junk included) goes as it is
    if isinstance(edges, list):
        edges = [(e.get("event"), e.get("from"), e.get("to")) if isinstance(e, dict) else e for e in edges]
    try:
        machine = Machine(
            name=name,
            states=doc.get("states"),
            start=doc.get("start"),
            final=doc.get("final", []),
            transitions=edges,
            topic=doc.get("topic"),
            lock_lease_seconds=lease,
        )
    except InvalidDefinition:
        outcome("refused by Machine")
        return
    _, errno = sql_call(env, "CALL fsm_define_v5(%s, %s)", (DEF, machine.to_json()))
    assert errno is None, f"Python accepted {machine.to_dict()}, fsm_define_v5 refused it with {errno}"


@fuzz(150)
@given(doc=fs.documents())
def test_what_sql_stores_pyfsm_can_read_back(env: Env, doc: dict[str, Any]) -> None:
    """The same JSON to fsm_define_v5 and to the definition-file reader, which `pyfsm graph`
    reads stored bodies with: what SQL stores, pyfsm must be able to read back."""
    try:
        [parsed] = parse_machines(json.dumps({"name": DEF, **doc}), fmt="json")
    except InvalidDefinition:
        parsed = None
    _, errno = sql_call(env, "CALL fsm_define_v5(%s, %s)", (DEF, json.dumps(doc)))
    assert errno in (None, 31001), errno
    if errno is None:
        assert parsed is not None, f"fsm_define_v5 stored {doc}, which the definition-file reader refuses"
        assert current_machine(env.raw, DEF).to_dict() == parsed.to_dict()
    if parsed is not None:
        assert sql_call(env, "CALL fsm_define_v5(%s, %s)", (DEF, parsed.to_json()))[1] is None


yaml_soup = st.text(alphabet="{}[]:,-&*!|>'\"%@`#? \n\tab1.\\~=<", max_size=60)


@fuzz(120)
@given(
    text=st.one_of(
        fs.json_texts(),
        fs.texts(),
        yaml_soup,
        st.builds(lambda d: json.dumps({"name": "door", **d}), fs.documents()),
        st.builds(lambda d: "name: door\n" + "\n".join(f"{k}: {json.dumps(v)}" for k, v in d.items()), fs.documents()),
    ),
    fmt=st.sampled_from(["json", "yaml"]),
)
def test_definition_documents_fail_with_invalid_definition(text: str, fmt: str) -> None:
    with watchdog(30):
        try:
            machines_ = parse_machines(text, fmt=fmt, source="fuzz")
        except (InvalidDefinition, InvalidArgument) as exc:
            outcome(f"refused: {type(exc).__name__}")
            return
    outcome("accepted")
    assert parse_machines(dump_machines(machines_, fmt), fmt=fmt) == machines_


USER = re.compile(r"'[A-Za-z0-9_.-]{1,32}'@'[A-Za-z0-9_.%:-]{1,255}'")


@fuzz(100)
@given(
    text=st.one_of(
        fs.texts(),
        fs.keys(["app", "app@10.0.%", "a@b@c"], 40),
        fs.overlong(32),
        st.builds(lambda u, h: f"{u}@{h}", fs.texts(3), fs.texts(3)),
    ),
    role=st.one_of(st.sampled_from(["app", "reporting", "relay"]), fs.names(["app"])),
)
def test_account_names_never_carry_quotes_into_sql(text: Any, role: Any) -> None:
    try:
        account = Account.parse(text, role)
    except InvalidArgument:
        return
    assert USER.fullmatch(account.sql) and account.role in ("app", "reporting", "relay"), account


dsn_parts = st.one_of(st.sampled_from(["", "root", "u:p", "127.0.0.1", "db", "3306"]), fs.texts(3))


@fuzz(100)
@given(
    dsn=st.one_of(
        fs.texts(),
        st.builds(
            "{}://{}@{}:{}/{}?{}".format,
            st.sampled_from(["mysql", "mariadb", "postgres", "MYSQL", ""]),
            dsn_parts,
            dsn_parts,
            st.one_of(dsn_parts, st.sampled_from(["0", "65536", "-1", "1e3"])),
            dsn_parts,
            st.one_of(
                dsn_parts,
                st.sampled_from(["tls=maybe", "tls=true&tls=false", "connect_timeout=abc", "x=1", "tls_ca=%00"]),
            ),
        ),
    )
)
def test_dsns_parse_or_fail_with_invalid_argument(dsn: str) -> None:
    assume("[" not in dsn and "]" not in dsn)  # test_store_constructor_refuses_bad_arguments
    try:
        settings_ = parse_dsn(dsn)
    except InvalidArgument:
        outcome("refused")
        return
    outcome("accepted")
    assert settings_.connect_kwargs()["port"] in range(65536)


# --- door 2: the procedures, as a DBA calls them ------------------------------------------


def sql(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return strategy.filter(sendable)


sql_numbers = sql(st.one_of(numbers, st.sampled_from(["12abc", "1e3", " 1", "1.5", "-0", "0x10", "1; DROP x"])))
valid_json = st.one_of(st.none(), st.builds(json.dumps, fs.valid_objects))
#: Each kind of parameter: (valid, hostile), as PyMySQL can send them.
PARAMS: dict[str, tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]] = {
    "machine": (st.just(M), sql(machines)),
    "key": (fs.valid_keys(KEYS), sql(instance_keys)),
    "event": (st.sampled_from(EVENTS), sql(fs.names([*EVENTS, "teleport"]))),
    "state": (st.sampled_from(STATES), sql(fs.names(STATES))),
    "start_state": (st.sampled_from([None, "new"]), sql(fs.names(STATES))),
    "json": (valid_json, fs.json_texts().filter(sendable)),
    "version": (st.sampled_from([None, 0, 1, 2]), sql_numbers),
    "after_id": (st.sampled_from([None, 0, 1]), sql_numbers),
    "limit": (st.sampled_from([1, 100]), sql_numbers),
    "lease": (st.sampled_from([None, 0.1, 30]), sql_numbers),
    "text": (st.one_of(st.none(), fs.valid_keys(["t"], 64)), sql(fs.keys(["t"], 128))),
    "lookup": (st.sampled_from([None, *LOOKUPS]), sql(fs.keys(LOOKUPS))),
    "lookup_required": (st.sampled_from(LOOKUPS), sql(fs.keys(LOOKUPS))),
    "owner": (st.text(alphabet="az09._:-", min_size=1, max_size=64), sql(fs.owners())),
    "scope": (st.sampled_from([None, "*", M]), sql(machines)),
    "reason": (fs.valid_keys(["dba: fuzz"], fs.REASON_MAX), sql(fs.keys(["dba: fuzz"], fs.REASON_MAX))),
    "moment": (st.sampled_from([None, datetime(2020, 1, 1), datetime(2100, 1, 1)]), sql(fs.moments())),
    "definition": (st.builds(json.dumps, fs.documents()), fs.json_texts().filter(sendable)),
}
PROCEDURES = {
    "fsm_send_v1": ("machine", "key", "event", "json", "json", "version", "text", "text", "lookup"),
    "fsm_send_v2": ("machine", "key", "event", "json", "json", "version", "text", "text", "lookup"),
    "fsm_send_v3": ("machine", "key", "event", "json", "json", "version", "text", "text", "lookup"),
    "fsm_create_v1": ("machine", "key", "start_state", "json", "json", "text", "lookup"),
    "fsm_get_v1": ("machine", "key"),
    "fsm_history_v1": ("machine", "key"),
    "fsm_in_state_v1": ("machine", "state", "after_id", "limit"),
    "fsm_counts_v2": ("machine",),
    "fsm_define_v5": ("machine", "definition"),
    "fsm_lock_v2": ("machine", "key", "owner", "lease"),
    "fsm_force_unlock_v2": ("scope", "lookup_required", "reason"),
    "fsm_pause_v1": ("machine", "key"),
    "fsm_state_at_v1": ("machine", "key", "moment"),
    "fsm_errors_v1": ("machine", "key"),
    f"fsm_{M}_send_v1": ("key", "event", "json", "json", "version", "text", "text", "lookup"),
    f"fsm_{M}_send_v2": ("key", "event", "json", "json", "version", "text", "text", "lookup"),
    f"fsm_{M}_send_v3": ("key", "event", "json", "json", "version", "text", "text", "lookup"),
}


@pytest.mark.parametrize("procedure", sorted(PROCEDURES))
@fuzz(30)
@given(data=st.data())
def test_procedures_refuse_hostile_arguments(env: Env, procedure: str, data: st.DataObject) -> None:
    kinds = PROCEDURES[procedure]
    values, _ = data.draw(fs.mixed([PARAMS[k][0] for k in kinds], [PARAMS[k][1] for k in kinds], most=3))
    args = tuple(values)
    if procedure == "fsm_define_v5" and args[0] == M:
        args = (DEF, args[1])  # fz keeps its one definition: the invariants check against it
    _, errno = sql_call(env, f"CALL `{procedure}`({', '.join(['%s'] * len(args))})", args)
    if errno is not None:
        return
    if procedure == "fsm_lock_v2":  # give it back (and any lock of that owner a lease that ran out left behind)
        env.rows("CALL fsm_unlock_v1(%s)", (args[2],))
    elif procedure == "fsm_pause_v1":
        env.rows("CALL fsm_resume_v1(%s, %s)", args)
    env.invariants()


RAW_UPDATE = {  # (valid, hostile) for @fsm_event, @fsm_metadata, current_state, data, the row's key
    "event": (st.sampled_from([None, *EVENTS]), sql(fs.names([*EVENTS, "teleport"]))),
    "metadata": (valid_json, fs.json_texts().filter(sendable)),
    "state": (st.sampled_from(STATES), sql(fs.names(STATES))),
    "data": (st.one_of(st.none(), valid_json), fs.json_texts().filter(sendable)),
    # the WHERE clause is the DBA's own SQL: bytes that are not UTF-8 there get the server's 1300, before pyfsm
    "key": (st.one_of(st.none(), st.sampled_from(KEYS)), sql(instance_keys).filter(lambda k: not isinstance(k, bytes))),
}


@fuzz(120)
@given(data=st.data())
def test_raw_update_of_current_state(env: Env, data: st.DataObject) -> None:
    """A DBA's UPDATE with @fsm_event and @fsm_metadata: the triggers apply every rule.
    A key None is a fresh instance, in new (the seeded ones end up done or paused)."""
    values, _ = data.draw(fs.mixed([v for v, _ in RAW_UPDATE.values()], [h for _, h in RAW_UPDATE.values()]))
    fsm_event, metadata, state, new_data, key = values
    if key is None:
        key = f"raw-{next(FRESH)}"
        env.store.create(M, key, lookup_key="acct-2")
    before = env.fingerprint()
    env.rows("SET @fsm_event = %s, @fsm_metadata = %s", (fsm_event, metadata))
    try:
        with watchdog():
            env.rows(
                f"UPDATE `fsm_{M}` SET current_state = %s"
                + (", data = %s" if new_data is not None else "")
                + " WHERE instance_key = %s",
                (state, new_data, key) if new_data is not None else (state, key),
            )
    except pymysql.err.MySQLError as exc:
        assert exc.args[0] in range(31001, 31024) or exc.args[0] in SERVER_ERRORS, repr(exc)
        assert env.fingerprint() == before, f"{exc!r}, yet the database changed"
        if exc.args[0] in range(31001, 31024):  # refused by the trigger, which clears the transition context
            assert env.context() == (None,) * len(TRANSITION_CONTEXT), f"{exc!r} left a transition context"
        outcome(f"refused: {exc.args[0]}")
        return
    finally:
        env.rows("SET @fsm_event = NULL, @fsm_metadata = NULL")
    outcome("accepted")
    env.invariants()


CANARY_DOORS = (
    lambda e, s: e.store.send(s, "k1", "pay"),
    lambda e, s: e.store.send(M, s, "pay"),
    lambda e, s: e.store.get(M, s),
    lambda e, s: e.store.in_state(M, s),
    lambda e, s: e.store.force_unlock(s, reason=s, scope=s),
    lambda e, s: e.store.lock(M, "k1", owner=s),
    lambda e, s: e.store.definition(s),
    lambda e, s: e.store.sync(s),
    lambda e, s: e.store.locks(lookup_key=s),
    lambda e, s: e.store.define(Machine(name=s, states=[s], start=[s], transitions=[])),
)


@pytest.mark.parametrize("payload", fs.INJECTIONS)
def test_injections_are_never_sql(env: Env, payload: str) -> None:
    """Each payload through every door: as an identifier it is refused, as a key it is data."""
    before = env.objects()
    for door in CANARY_DOORS:
        with contextlib.suppress(FsmError):
            result = door(env, payload)
            if hasattr(result, "release"):
                result.release()
    for procedure, kinds in PROCEDURES.items():
        sql_call(env, f"CALL `{procedure}`({', '.join(['%s'] * len(kinds))})", (payload,) * len(kinds))
    env.rows("SET @fsm_event = %s, @fsm_metadata = %s", (payload, payload))
    with contextlib.suppress(pymysql.err.MySQLError):
        env.rows(f"UPDATE `fsm_{M}` SET current_state = %s WHERE instance_key = 'k3'", (payload,))
    env.rows("SET @fsm_event = NULL, @fsm_metadata = NULL")
    assert env.objects() == before
    env.invariants()


# --- door 3: the command line --------------------------------------------------------------


def argv_value(value: Any) -> str | bytes | None:
    """``value`` as an argv element: no NUL; a lone surrogate becomes the invalid UTF-8 it stands for."""
    if not isinstance(value, str):
        return None
    value = value.replace("\x00", "")
    return value if sendable(value) else value.encode("utf-8", "surrogatepass")


def cli_text(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """What can be an argv element (bytes: invalid UTF-8, which Python reads as surrogate escapes)."""
    return st.one_of(
        strategy.map(argv_value).filter(lambda v: v is not None), st.sampled_from([b"\xff", b"k\xc3", b"\xed\xa0\x80"])
    )


cli_machines = cli_text(machines)
cli_keys = cli_text(instance_keys)


def not_a_name(value: Any) -> bool:
    """Sync only what cannot be a machine (a valid one might have been defined by the fuzzing)."""
    return not (isinstance(value, str) and re.fullmatch(r"[a-z][a-z0-9_]{0,47}", value))


def _b(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


HOSTILE_FILES: tuple[str | bytes, ...] = (
    "[" * 10_000 + "]" * 10_000,
    '{"a":' * 10_000 + "1" + "}" * 10_000,
    "- " * 5_000 + "x",
    json.dumps({"name": "x`; DROP TABLE fsm_machines; --", "states": ["a"], "start": ["a"], "transitions": []}),
    json.dumps({"name": "door", "states": ["a'; DROP TABLE fsm_rules; --"], "start": ["a"], "transitions": []}),
    "name: door\nstates: [a]\nstart: [a]\ntransitions: [{event: go, from: a, to: nowhere}]\n",
    "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b]\n"
    "d: &d [*c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e]\n",
    "name: !!python/object/apply:os.system ['true']\n",
    "x" * (1024 * 1024 + 1),
    b"\xff\xfe\x00n\x00a",
    b"",
    "\ufeff",
    "null",
    "[]",
    '"door"',
    "name: door\nname: door\n",
)


@st.composite
def cli_batches(draw: Callable[[Any], Any], dsn: str, files: Path) -> list[list[Any]]:
    """Four commands with hostile arguments; options as --name=value and positionals after --,
    so every value reaches pyfsm whatever it looks like."""

    def options(**candidates: st.SearchStrategy[Any]) -> list[Any]:
        chosen = draw(st.lists(st.sampled_from(sorted(candidates)), unique=True, max_size=len(candidates)))
        return [
            f"--{name.replace('_', '-')}=".encode() + (v if isinstance(v, bytes) else v.encode())
            for name in chosen
            for v in [draw(candidates[name])]
        ]

    keyed = [
        draw(st.sampled_from(["show", "history", "pause", "resume", "retry"])),
        "--dsn",
        dsn,
        "--",
        draw(cli_machines),
        draw(cli_keys),
    ]
    json_arg = cli_text(fs.json_texts(huge=False))
    verb = draw(st.sampled_from(["send", "create"]))
    write = [
        verb,
        "--dsn",
        dsn,
        *options(
            data=json_arg,
            metadata=json_arg,
            lookup_key=cli_text(fs.keys(LOOKUPS)),
            request_id=cli_text(fs.keys(["r"], 64)),
            **({"expected_version": fs.cli_ints()} if verb == "send" else {"state": cli_text(fs.names(STATES))}),
        ),
        "--",
        draw(cli_machines),
        draw(cli_keys),
        *([draw(cli_text(fs.names(EVENTS)))] if verb == "send" else []),
    ]
    stored = [
        "send",
        "--dsn",
        dsn,
        *options(data=json_arg, metadata=json_arg),
        "--",
        M,
        draw(cli_keys),
        draw(st.sampled_from(EVENTS)),
    ]

    def install() -> list[Any]:
        path = files / f"{uuid.uuid4().hex}{draw(st.sampled_from(['.json', '.yaml', '.yml', '.txt']))}"
        path.write_bytes(_b(draw(st.one_of(cli_text(fs.json_texts()), st.sampled_from(HOSTILE_FILES)))))
        return ["install", "--dsn", dsn, "--", str(path)]

    others: dict[str, Callable[[], list[Any]]] = {
        "list": lambda: [
            "list",
            "--dsn",
            dsn,
            *options(after_id=fs.cli_ints(), limit=fs.cli_ints()),
            "--",
            draw(cli_machines),
            draw(cli_text(fs.names(STATES))),
        ],
        "counts": lambda: ["counts", "--dsn", dsn, "--", draw(cli_machines)],
        "failed": lambda: ["failed", "--dsn", dsn, *options(limit=fs.cli_ints()), "--", draw(cli_machines)],
        "locks": lambda: ["locks", "--dsn", dsn, *options(lookup_key=cli_text(fs.keys(LOOKUPS)))],
        "unlock": lambda: [
            "unlock",
            "--dsn",
            dsn,
            b"--reason=" + _b(draw(cli_text(fs.keys(["r"], 255)))),
            *options(scope=cli_text(machines)),
            "--",
            draw(cli_text(fs.keys(LOOKUPS))),
        ],
        "sync": lambda: ["sync", "--dsn", dsn, "--", draw(cli_text(machines.filter(not_a_name)))],
        "grant": lambda: [
            "grant",
            "--dsn",
            dsn,
            "--print",
            b"--"
            + draw(st.sampled_from([b"app", b"reporting", b"relay"]))
            + b"="
            + _b(draw(cli_text(fs.keys(["app_user", "u@10.0.%"], 40)))),
        ],
        "install": install,
    }
    other = others[draw(st.sampled_from(sorted(others)))]()
    return [keyed, write, stored, other]


def run_cli(batch: list[list[Any]]) -> list[tuple[int, str]]:
    environment = {k: v for k, v in os.environ.items() if k != "PYFSM_DEBUG"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "pyfsm", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=TESTS,
            env=environment,
        )
        for argv in batch
    ]
    results = []
    for proc in procs:
        try:
            _, stderr = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        results.append((proc.returncode, stderr.decode("utf-8", "replace")))
    return results


#: The names the CLI may give an error: pyfsm's classes.
ERROR_NAMES = frozenset(
    name for name, obj in vars(pyfsm.errors).items() if isinstance(obj, type) and issubclass(obj, FsmError)
)
ERROR_LINE = re.compile(r"pyfsm: (\w+) \(\d+\): ")


def one_line_error(argv: list[Any], code: int, stderr: str) -> None:
    """Exit 0, or exit 1 with one stderr line naming a pyfsm error class."""
    assert code in (0, 1), (argv, code, stderr[-500:])
    if code == 0:
        return
    match = ERROR_LINE.match(stderr)
    assert match and "Traceback" not in stderr, (argv, stderr[-500:])
    assert match.group(1) in ERROR_NAMES, (argv, stderr[-500:])
    assert stderr.count("\n") == 1 and stderr.endswith("\n"), (argv, stderr[-500:])


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz_files")


@fuzz(3)
@given(data=st.data())
def test_cli_refuses_hostile_arguments(env: Env, files: Path, data: st.DataObject) -> None:
    batch = data.draw(cli_batches(env.dsn, files))
    before = env.fingerprint()
    results = run_cli(batch)
    for argv, (code, stderr) in zip(batch, results, strict=True):
        one_line_error(argv, code, stderr)
    if all(code == 1 for code, _ in results):
        assert env.fingerprint() == before, "every command failed, yet the database changed"
    env.invariants()


# --- the size limits, to the byte -------------------------------------------------------------


@fuzz(12)
@given(
    which=st.sampled_from(["data", "metadata"]),
    over=st.sampled_from([0, 1]),
    fill=st.sampled_from(["a", "é", "🙂"]),
    door=st.sampled_from(["python", "sql"]),
)
def test_size_limits_hold_to_the_byte(env: Env, which: str, over: int, fill: str, door: str) -> None:
    """A JSON object of exactly the limit in bytes (UTF-8, compact) is stored; one byte more is InvalidData."""
    doc = fs.sized(fs.DATA_MAX if which == "data" else fs.METADATA_MAX, over, fill)
    key = f"size-{which}-{over}-{len(fill.encode())}-{door}"
    if door == "python":
        result = attempt(env, lambda: env.store.send(M, key, "pay", **{which: doc}))
        errno = getattr(result, "errno", None)
    else:
        text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
        errno = sql_call(
            env,
            "CALL fsm_send_v3(%s, %s, 'pay', %s, %s, NULL, NULL, NULL, NULL)",
            (M, key, *((text, None) if which == "data" else (None, text))),
        )[1]
    assert errno == (31008 if over else None), (which, over, fill, door, errno)


# --- known bugs: minimal examples, expected to fail until fixed ----------------------------


def test_state_at_far_from_utc(env: Env) -> None:
    at = datetime.max.replace(tzinfo=timezone(-timedelta(hours=5)))
    with pytest.raises(InvalidArgument):
        env.store.state_at(M, "k1", at)


@pytest.mark.parametrize(
    "kwargs", [{"states": None}, {"start": [["a"]]}, {"transitions": [("go", "a")]}, {"transitions": [("go", 5, "a")]}]
)
def test_machine_constructor_refuses_non_lists(kwargs: dict[str, Any]) -> None:
    spec: dict[str, Any] = {"name": "m", "states": ["a"], "start": ["a"], "transitions": [], **kwargs}
    with pytest.raises(InvalidDefinition):
        Machine(**spec)


@pytest.mark.parametrize("where", ["data", "metadata"])
@pytest.mark.parametrize("value", [{1: "a", "1": "b"}, {"a": [{"b": {None: 1}}]}, {"x": {True: 1}}])
def test_non_string_data_keys_are_refused(env: Env, where: str, value: dict[Any, Any]) -> None:
    before = env.fingerprint()
    with pytest.raises(InvalidData, match="key"):
        env.store.send(M, "nonstring-keys", "pay", **{where: value})
    assert env.fingerprint() == before


def test_raw_update_event_with_a_trailing_space(env: Env) -> None:
    env.store.create(M, "padded-event")
    env.rows("SET @fsm_event = 'pay '")
    try:
        env.rows(f"UPDATE `fsm_{M}` SET current_state = 'paid' WHERE instance_key = 'padded-event'")
    except pymysql.err.MySQLError as exc:
        assert 31001 <= exc.args[0] <= 31023, exc
    finally:
        env.rows("SET @fsm_event = NULL")
    assert [h.event for h in env.store.history(M, "padded-event")] in ([None], [None, "pay"])


def test_sql_define_refuses_non_string_names(env: Env) -> None:
    body = (
        '{"states": ["new", "done"], "start": ["new"], "transitions": [{"event": true, "from": ["new"], "to": "done"}]}'
    )
    with pytest.raises(pymysql.err.MySQLError) as info:
        env.rows("CALL fsm_define_v5('fzliteral', %s)", (body,))
    assert info.value.args[0] == 31001


def test_data_truncated_is_a_pyfsm_error(env: Env) -> None:
    with pytest.raises(pymysql.err.MySQLError) as info:
        env.rows("CALL fsm_in_state_v1(%s, 'new', '12abc', 10)", (M,))
    assert isinstance(from_mysql_error(info.value), InvalidArgument), info.value


class TextualInt(int):
    """An int that prints as something else (PyMySQL sends str() of int subclasses)."""

    def __str__(self) -> str:
        return "1 apple"


def test_int_subclass_is_checked_as_sent(env: Env) -> None:
    with pytest.raises(InvalidArgument):
        env.store.in_state(M, "new", after_id=TextualInt(1))


def test_account_parse_refuses_non_strings() -> None:
    with pytest.raises(InvalidArgument):
        Account.parse(None, "app")  # type: ignore[arg-type]


def test_cli_error_with_a_newline_is_one_line(env: Env) -> None:
    """A key may hold a newline; the server's message echoes it; stderr still gets one line."""
    [(code, stderr)] = run_cli([["show", "--dsn", env.dsn, "--", M, "a\nb"]])
    assert code == 1 and stderr.startswith("pyfsm: UnknownInstance (31003): ") and stderr.count("\n") == 1, stderr


def test_cli_usage_error_is_one_line(env: Env) -> None:
    """argparse's errors too: one line (exit 2, argparse's number for a usage error)."""
    [(code, stderr)] = run_cli([["list", "--dsn", env.dsn, M, "new", "--limit", "abc"]])
    assert code in (1, 2) and stderr.startswith("pyfsm: ") and stderr.count("\n") == 1, stderr


@pytest.mark.parametrize(
    "case",
    [
        "ipv6",
        "not a string",
        "pool_size",
        "pool_size bool",
        "connect_timeout=0",
        "connect_timeout=-1",
        "connect_timeout=nan",
        "connect_timeout=inf",
        "read_timeout=0",
        "write_timeout=nan",
        "read_timeout kwarg",
        "write_timeout kwarg",
    ],
)
def test_store_constructor_refuses_bad_arguments(env: Env, case: str) -> None:
    """Found here: urlsplit's ValueError, a non-string DSN's AttributeError and a non-int
    pool_size's TypeError came through, and a connect_timeout of 0, -1, nan or inf was
    accepted until PyMySQL's ValueError at the first call. Now InvalidArgument, at once."""
    with pytest.raises(InvalidArgument):
        if case == "ipv6":
            Store("mysql://root@[::1:3306/db")
        elif case == "not a string":
            Store(5)  # type: ignore[arg-type]
        elif case == "pool_size":
            Store(env.dsn, pool_size="8")  # type: ignore[arg-type]
        elif case == "pool_size bool":
            Store(env.dsn, pool_size=True)
        elif case == "read_timeout kwarg":
            Store(env.dsn, read_timeout=float("inf"))
        elif case == "write_timeout kwarg":
            Store(env.dsn, write_timeout="5")  # type: ignore[arg-type]
        else:
            Store(f"{env.dsn}?{case}").counts(M)


def test_send_refuses_a_lease_that_is_not_one(env: Env) -> None:
    with pytest.raises(InvalidArgument):
        env.store.send(M, "k1", "pay", lease="my-lease")  # type: ignore[arg-type]


def test_created_database_name_is_not_sql(env: Env) -> None:
    """The database migrate (and so the demo) creates when missing: its name is never SQL."""
    from pyfsm import db
    from pyfsm.schema import install as schema

    name = f"pyfsm_fuzz_inj_{uuid.uuid4().hex[:8]}"
    hostile = dataclasses.replace(env.settings, database=f"{name}` CHARACTER SET latin1 -- ")
    try:
        with pytest.raises(InvalidArgument):
            db.create_database(hostile)
        with pytest.raises((InvalidArgument, pymysql.err.MySQLError)) as refused:
            schema.migrate(hostile)
        if isinstance(refused.value, pymysql.err.MySQLError):  # MariaDB refuses such a name at connect
            assert refused.value.args[0] == 1102  # incorrect database name (not 1049: nothing to create)
        assert not env.rows(f"SELECT 1 FROM information_schema.schemata WHERE schema_name LIKE '{name}%'")
    finally:
        env.rows(f"DROP DATABASE IF EXISTS `{name}`")  # what the injected statement created


def test_force_unlock_refuses_a_padded_lookup_key(env: Env) -> None:
    with pytest.raises(pymysql.err.MySQLError) as info:
        env.rows("CALL fsm_force_unlock_v2('*', 'acct-1 ', 'fuzz')")
    assert info.value.args[0] == 31009


def test_raw_update_to_the_same_state_with_trailing_spaces(env: Env) -> None:
    env.store.create(M, "padded-state")
    with contextlib.suppress(pymysql.err.OperationalError):  # refusing it would be fine too
        env.rows(f"UPDATE `fsm_{M}` SET current_state = 'new  ' WHERE instance_key = 'padded-state'")
    assert env.store.get(M, "padded-state").state == "new"
