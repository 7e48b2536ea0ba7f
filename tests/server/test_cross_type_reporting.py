"""Cross-type reporting (issue 18, part 5): the instances in a state across every machine type and
the history of one account across every type, a keyset page at a time, through
fsm_instances_in_state_v1 and fsm_account_history_v1, Store.instances_in_state and
Store.account_history, and `pyfsm in-state` / `pyfsm account`.

Each answer is checked against the union views it replaces (fsm_v_instances, fsm_v_history),
page by page at several page sizes, across type boundaries and ties; bad input is refused with
pyfsm's own error numbers and changes nothing; a reporting account may call both procedures.
Speed is measured in bench/bench_reporting.py, not here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pymysql
import pytest
from helpers.common import errno_of, fetch, granted_accounts, is_mariadb

from pyfsm import FsmError, InvalidArgument, InvalidEncoding, Machine, Store, cli
from pyfsm.db import Settings
from pyfsm.errors import error_for

IN_STATE = "CALL fsm_instances_in_state_v1(%s, %s, %s, %s)"
HISTORY = "CALL fsm_account_history_v1(%s, %s, %s, %s, %s, %s)"
SURROGATE = b"\xed\xa0\x80"  # U+D800 encoded: not UTF-8, yet MariaDB's utf8mb4 takes it
#: The refusal of an encoded surrogate: pyfsm's on MariaDB (31024, InvalidEncoding); MySQL's
#: utf8mb4 refuses the bytes itself first (1366, InvalidArgument)
ENCODED_SURROGATE = -1

#: 'ab_x' < 'abx' byte for byte ('_' is 0x5F), but 'abx' < 'ab_x' under utf8mb4_general_ci
#: (letters weigh as upper case, 'X' is 0x58): the order must be the bytes'.
AB_X = Machine(
    name="ab_x",
    states=["new", "open", "done"],
    start=["new"],
    final=["done"],
    transitions=[("open", "new", "open"), ("finish", "open", "done")],
)
ABX_V1 = Machine(
    name="abx",
    states=["new", "open", "done", "legacy"],
    start=["new", "legacy"],
    final=["done"],
    transitions=[("open", "new", "open"), ("finish", "open", "done"), ("revive", "legacy", "new")],
)
ABX = Machine(
    name="abx",
    states=["new", "open", "done"],
    start=["new"],
    final=["done"],
    transitions=[("open", "new", "open"), ("finish", "open", "done")],
)  # v2: "legacy" is gone
ORDER = Machine(
    name="order", states=["new", "paid"], start=["new"], final=["paid"], transitions=[("pay", "new", "paid")]
)
LATER = '{"states": ["pending"], "start": ["pending"], "transitions": []}'  # defined, never installed
TIE = datetime(2026, 1, 2, 3, 4, 5, 678901)  # every row of account acct-tie is entered at this microsecond


@pytest.fixture(scope="module")
def data(make_database) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """Three installed types sharing states and accounts, an installed-never type, an instance in a
    state only an older definition has, and an account whose every history row shares one time."""
    settings = make_database("pyfsm_xrep")
    with Store(settings.dsn()) as store:
        store.migrate()
        store.define(ABX_V1)
        store.create("abx", "x-legacy", state="legacy", lookup_key="acct-1")
        for machine in (AB_X, ABX, ORDER):
            store.define(machine)
        for n in range(7):
            store.create("ab_x", f"a-{n}", lookup_key=f"acct-{n % 3}", data={"n": n})
            if n % 3 == 0:
                store.send("ab_x", f"a-{n}", "open")
        for n in range(5):
            store.create("abx", f"x-{n}", lookup_key=f"acct-{n % 3}")
            if n == 1:
                store.send("abx", f"x-{n}", "open")
                store.send("abx", f"x-{n}", "finish")
        for n in range(6):
            store.create("order", f"o-{n}", lookup_key=f"acct-{n % 3}")
            if n % 2:
                store.send("order", f"o-{n}", "pay")
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        fetch(conn, "CALL fsm_define_v5('later', %s)", (LATER,))
        # ties: the server's clock stands still for this session (SET timestamp moves UTC_TIMESTAMP too)
        fetch(conn, "SET timestamp = %s", (TIE.replace(tzinfo=UTC).timestamp(),))
        for machine in ("order", "abx", "ab_x"):
            fetch(conn, "CALL fsm_create_v1(%s, %s, NULL, NULL, NULL, NULL, 'acct-tie')", (machine, f"{machine}-tie"))
        fetch(conn, "CALL fsm_send_v2('ab_x', 'ab_x-tie', 'open', NULL, NULL, NULL, NULL, NULL, NULL)")
        fetch(conn, "CALL fsm_send_v2('ab_x', 'ab_x-tie', 'finish', NULL, NULL, NULL, NULL, NULL, NULL)")
        fetch(conn, "CALL fsm_send_v2('order', 'order-tie', 'pay', NULL, NULL, NULL, NULL, NULL, NULL)")
        fetch(conn, "SET timestamp = DEFAULT")
        tied = fetch(conn, "SELECT DISTINCT entered_at FROM fsm_v_history WHERE lookup_key = 'acct-tie'")
        assert [r["entered_at"] for r in tied] == [TIE]
    finally:
        conn.close()
    return {"settings": settings}


@pytest.fixture
def dba(data: dict[str, Any]) -> Iterator[pymysql.connections.Connection]:
    conn = pymysql.connect(**data["settings"].connect_kwargs())
    yield conn
    conn.close()


def in_state_expected(conn: Any, state: str) -> list[dict[str, Any]]:
    rows = fetch(
        conn,
        "SELECT machine, id, instance_key, lookup_key, current_state, status, version, "
        "in_state_since FROM fsm_v_instances WHERE current_state = %s",
        (state,),
    )
    return sorted(rows, key=lambda r: (r["machine"].encode(), r["id"]))


def history_expected(conn: Any, lookup_key: str, newest_first: bool) -> list[dict[str, Any]]:
    rows = fetch(
        conn,
        "SELECT transition_id, machine, instance_key, lookup_key, instance_id, sort_key, event, "
        "from_state, to_state, entered_at, left_at, is_current FROM fsm_v_history "
        "WHERE lookup_key = %s",
        (lookup_key,),
    )
    return sorted(
        rows, key=lambda r: (r["entered_at"], r["machine"].encode(), r["transition_id"]), reverse=newest_first
    )


def walk_in_state(conn: Any, state: str, limit: int) -> list[dict[str, Any]]:
    """Every page of a state, each from the last row of the one before."""
    found: list[dict[str, Any]] = []
    after: tuple[Any, Any] = (None, None)
    while True:
        page = fetch(conn, IN_STATE, (state, *after, limit))
        assert len(page) <= limit
        found += page
        if len(page) < limit:
            return found
        after = (page[-1]["machine"], page[-1]["id"])


def walk_history(conn: Any, lookup_key: str, newest_first: int | None, limit: int) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    after: tuple[Any, Any, Any] = (None, None, None)
    while True:
        page = fetch(conn, HISTORY, (lookup_key, newest_first, *after, limit))
        assert len(page) <= limit
        found += page
        if len(page) < limit:
            return found
        after = (page[-1]["entered_at"], page[-1]["machine"], page[-1]["transition_id"])


def project(rows: list[dict[str, Any]], columns: list[str]) -> list[tuple[Any, ...]]:
    return [tuple(r[c] for c in columns) for r in rows]


INSTANCE_COLUMNS = [
    "machine",
    "id",
    "instance_key",
    "lookup_key",
    "current_state",
    "status",
    "version",
    "in_state_since",
]
HISTORY_COLUMNS = [
    "transition_id",
    "machine",
    "instance_key",
    "lookup_key",
    "instance_id",
    "sort_key",
    "event",
    "from_state",
    "to_state",
    "entered_at",
    "left_at",
    "is_current",
]


# -- the instances in a state ---------------------------------------------------------------


@pytest.mark.parametrize("limit", [1, 2, 3, 5, 8, 10000])
def test_in_state_pages_are_the_view_in_machine_then_id_order(dba: Any, limit: int) -> None:
    for state in ("new", "open", "done", "paid"):
        expected = in_state_expected(dba, state)
        assert expected, state
        got = walk_in_state(dba, state, limit)
        assert project(got, INSTANCE_COLUMNS) == project(expected, INSTANCE_COLUMNS), (state, limit)
    new = [r["machine"] for r in walk_in_state(dba, "new", limit)]
    assert new == sorted(new, key=str.encode) and new.index("ab_x") < new.index("abx") < new.index("order")


def test_in_state_rows_have_every_instance_column(dba: Any) -> None:
    rows = fetch(dba, IN_STATE, ("open", None, None, 100))
    table = {r["instance_key"]: r for r in fetch(dba, "SELECT * FROM fsm_ab_x UNION ALL SELECT * FROM fsm_abx")}
    for row in rows:
        extra = {"in_state_since", "seconds_in_state"}
        assert {k: v for k, v in row.items() if k not in extra} == table[row["instance_key"]]
        assert row["seconds_in_state"] >= 0
    assert [r["instance_key"] for r in rows] == [r["instance_key"] for r in in_state_expected(dba, "open")]


def test_in_state_page_that_spans_two_types(dba: Any) -> None:
    ab_x = [r for r in in_state_expected(dba, "new") if r["machine"] == "ab_x"]
    abx = [r for r in in_state_expected(dba, "new") if r["machine"] == "abx"]
    page = fetch(dba, IN_STATE, ("new", "ab_x", ab_x[-2]["id"], 3))
    assert project(page, ["machine", "id"]) == [("ab_x", ab_x[-1]["id"]), ("abx", abx[0]["id"]), ("abx", abx[1]["id"])]


def test_in_state_cursor_between_types_and_past_the_end(dba: Any) -> None:
    expected = in_state_expected(dba, "new")
    # a cursor naming no type starts with the next type (byte order), not an error
    assert [r["machine"] for r in fetch(dba, IN_STATE, ("new", "ab_y", 0, 100))] == [
        r["machine"] for r in expected if r["machine"].encode() > b"ab_y"
    ]
    assert fetch(dba, IN_STATE, ("new", "order", expected[-1]["id"], 10)) == []
    assert fetch(dba, IN_STATE, ("new", "zzz", 0, 10)) == []
    assert len(fetch(dba, IN_STATE, ("new", "order", 0, 10000))) == sum(r["machine"] == "order" for r in expected)


def test_in_state_of_an_older_definition_and_of_a_type_without_tables(dba: Any) -> None:
    legacy = fetch(dba, IN_STATE, ("legacy", None, None, 10))
    assert project(legacy, ["machine", "instance_key", "definition_version"]) == [("abx", "x-legacy", 1)]
    with dba.cursor() as cur:  # an empty page still has the columns
        cur.execute(IN_STATE, ("pending", None, None, 10))
        assert cur.fetchall() == () and [d[0] for d in cur.description][:3] == ["id", "machine", "instance_key"]
        while cur.nextset():
            pass


# -- an account's history -------------------------------------------------------------------


@pytest.mark.parametrize("limit", [1, 2, 3, 7, 10000])
def test_account_history_pages_are_the_view_in_time_order(dba: Any, limit: int) -> None:
    for key in ("acct-0", "acct-1", "acct-2", "acct-tie"):
        for newest_first in (1, 0):
            expected = history_expected(dba, key, bool(newest_first))
            assert len({r["machine"] for r in expected}) == 3, key  # every account spans the three types
            got = walk_history(dba, key, newest_first, limit)
            assert project(got, HISTORY_COLUMNS) == project(expected, HISTORY_COLUMNS), (key, newest_first, limit)
    assert project(walk_history(dba, "acct-0", None, 5), HISTORY_COLUMNS) == project(
        walk_history(dba, "acct-0", 1, 5), HISTORY_COLUMNS
    )  # NULL: newest first


def test_ties_keep_each_instance_in_sort_key_order(dba: Any) -> None:
    oldest = walk_history(dba, "acct-tie", 0, 2)
    assert {r["entered_at"] for r in oldest} == {TIE} and len(oldest) == 6
    assert project(oldest, ["machine", "instance_key", "sort_key", "to_state"]) == [
        ("ab_x", "ab_x-tie", 1, "new"),
        ("ab_x", "ab_x-tie", 2, "open"),
        ("ab_x", "ab_x-tie", 3, "done"),
        ("abx", "abx-tie", 1, "new"),
        ("order", "order-tie", 1, "new"),
        ("order", "order-tie", 2, "paid"),
    ]
    assert project(walk_history(dba, "acct-tie", 1, 4), HISTORY_COLUMNS) == project(oldest[::-1], HISTORY_COLUMNS)


def test_account_history_rows_have_the_view_columns(dba: Any) -> None:
    rows = fetch(dba, HISTORY, ("acct-1", 0, None, None, None, 10000))
    view = {
        (r["machine"], r["transition_id"]): r
        for r in fetch(dba, "SELECT * FROM fsm_v_history WHERE lookup_key = 'acct-1'")
    }
    assert len(rows) == len(view)
    for row in rows:
        assert list(row) == list(view[(row["machine"], row["transition_id"])])
        same = {k: v for k, v in row.items() if k != "seconds_in_state"}
        assert same == {k: v for k, v in view[(row["machine"], row["transition_id"])].items() if k in same}


def test_account_without_history_and_a_cursor_past_the_end(dba: Any) -> None:
    assert fetch(dba, HISTORY, ("acct-nobody", 1, None, None, None, 10)) == []
    assert fetch(dba, HISTORY, ("acct-0", 0, datetime(2999, 1, 1), "order", 0, 10)) == []
    assert fetch(dba, HISTORY, ("acct-0", 1, datetime(2000, 1, 1), "ab_x", 0, 10)) == []


def test_before_any_type_is_installed(make_database) -> None:  # type: ignore[no-untyped-def]
    settings = make_database("pyfsm_xrep0")
    with Store(settings.dsn()) as store:
        store.migrate()
        assert store.account_history("acct-0") == []
        with pytest.raises(InvalidArgument):  # no type has any state yet
            store.instances_in_state("new")
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        with conn.cursor() as cur:  # an empty page still has the columns
            cur.execute(HISTORY, ("acct-0", 1, None, None, None, 10))
            assert cur.fetchall() == () and "entered_at" in [d[0] for d in cur.description]
            while cur.nextset():
                pass
    finally:
        conn.close()


# -- bad input ------------------------------------------------------------------------------


BAD = (
    (IN_STATE, ("Open", None, None, 10), 31009),  # not a name
    (IN_STATE, (None, None, None, 10), 31009),
    (IN_STATE, ("nope", None, None, 10), 31009),  # no type has it
    (IN_STATE, ("new", None, None, 0), 31009),
    (IN_STATE, ("new", None, None, 10001), 31009),
    (IN_STATE, ("new", None, None, None), 31009),
    (IN_STATE, ("new", "abx", None, 10), 31009),  # half a cursor
    (IN_STATE, ("new", None, 5, 10), 31009),
    (IN_STATE, ("new", "Bad Name", 5, 10), 31009),
    (IN_STATE, ("new", "abx`; DROP TABLE fsm_abx; --", 5, 10), 31009),
    (IN_STATE, ("new", "abx", -1, 10), 31009),
    (IN_STATE, ("new", None, None, "ten"), 1366),  # the server's: not a number
    (HISTORY, (None, 1, None, None, None, 10), 31009),  # NULL lookup key
    (HISTORY, ("", 1, None, None, None, 10), 31009),
    (HISTORY, ("acct-0 ", 1, None, None, None, 10), 31009),  # would match 'acct-0' (PAD SPACE)
    (HISTORY, ("k" * 192, 1, None, None, None, 10), 31009),
    (HISTORY, (b"acct-" + SURROGATE, 1, None, None, None, 10), ENCODED_SURROGATE),
    (HISTORY, (b"acct-\xff", 1, None, None, None, 10), 1366),  # the server's: not UTF-8 at all
    (HISTORY, ("acct-0", 2, None, None, None, 10), 31009),
    (HISTORY, ("acct-0", 1, None, None, None, 0), 31009),
    (HISTORY, ("acct-0", 1, None, None, None, None), 31009),
    (HISTORY, ("acct-0", 1, datetime(2026, 1, 1), None, None, 10), 31009),  # a third of a cursor
    (HISTORY, ("acct-0", 1, None, "abx", 3, 10), 31009),
    (HISTORY, ("acct-0", 1, datetime(2026, 1, 1), "Bad Name", 3, 10), 31009),
    (HISTORY, ("acct-0", 1, datetime(2026, 1, 1), "abx", -3, 10), 31009),
    (HISTORY, ("acct-0", 1, "not a time", "abx", 3, 10), 1292),  # the server's: not a DATETIME
)


def fingerprint(conn: Any) -> list[dict[str, Any]]:
    names = [
        r["t"]
        for r in fetch(
            conn,
            "SELECT table_name AS t FROM information_schema.tables "
            "WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE' ORDER BY 1",
        )
    ]
    return fetch(conn, "CHECKSUM TABLE " + ", ".join(f"`{n}`" for n in names))


def test_bad_input_is_refused_with_pyfsms_errors_and_changes_nothing(dba: Any) -> None:
    before = fingerprint(dba)
    fetch(dba, "SET @fsm_sql = NULL")
    for sql, args, errno in BAD:
        if errno == ENCODED_SURROGATE:
            errno = 31024 if is_mariadb(dba) else 1366
        assert errno_of(dba, sql, args) == errno, args
        assert isinstance(error_for(errno, ""), InvalidEncoding if errno == 31024 else FsmError), args
        assert fetch(dba, "SELECT @fsm_sql AS s") == [{"s": None}], args
    assert fingerprint(dba) == before
    assert fetch(dba, "SELECT COUNT(*) AS n FROM fsm_abx")[0]["n"] > 0  # the injection attempt was only refused


# -- Python and the command line -------------------------------------------------------------


def test_store_pages_with_the_rows_cursor(data: dict[str, Any], dba: Any) -> None:
    with Store(data["settings"].dsn()) as store:
        got, after = [], None
        while True:
            page = store.instances_in_state("new", after=after, limit=2)
            got += page
            if len(page) < 2:
                break
            after = (page[-1].machine, page[-1].id)
        assert [(i.machine, i.id, i.key) for i in got] == project(
            in_state_expected(dba, "new"), ["machine", "id", "instance_key"]
        )
        assert got[0].created_at.tzinfo is UTC and isinstance(got[0].data, dict)
        for newest_first in (True, False):
            entries, cursor = [], None
            while True:
                page = store.account_history("acct-tie", newest_first=newest_first, after=cursor, limit=4)
                entries += page
                if len(page) < 4:
                    break
                cursor = page[-1].cursor
            assert [(e.machine, e.id, e.sort_key) for e in entries] == project(
                history_expected(dba, "acct-tie", newest_first), ["machine", "transition_id", "sort_key"]
            )
        [first] = store.account_history("acct-1", newest_first=False, limit=1)
        assert (first.machine, first.key, first.to_state, first.event) == ("abx", "x-legacy", "legacy", None)
        assert first.entered_at.tzinfo is UTC and first.data_before is None and first.data_after == {}
        # an aware cursor is the same moment as a naive UTC one
        aware = (first.entered_at.astimezone(timezone(timedelta(hours=2))), first.machine, first.id)
        naive = (first.entered_at.replace(tzinfo=None), first.machine, first.id)
        assert store.account_history("acct-1", newest_first=False, after=aware) == store.account_history(
            "acct-1", newest_first=False, after=naive
        )
        assert store.instances_in_state("pending") == [] and store.account_history("acct-nobody") == []


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda s: s.instances_in_state("Open"), InvalidArgument),
        (lambda s: s.instances_in_state("new", limit=0), InvalidArgument),
        (lambda s: s.instances_in_state("new", after=("abx",)), InvalidArgument),
        (lambda s: s.instances_in_state("new", after=("abx", True)), InvalidArgument),
        (lambda s: s.instances_in_state("new", after=("Bad Name", 1)), InvalidArgument),
        (lambda s: s.instances_in_state("new", after=("abx", -1)), InvalidArgument),
        (lambda s: s.account_history(None), InvalidArgument),
        (lambda s: s.account_history("acct-0 "), InvalidArgument),
        (lambda s: s.account_history("acct-\ud800"), InvalidEncoding),
        (lambda s: s.account_history("acct-0", newest_first=1), InvalidArgument),
        (lambda s: s.account_history("acct-0", limit=10001), InvalidArgument),
        (lambda s: s.account_history("acct-0", after=("2026-01-01", "abx", 1)), InvalidArgument),
        (lambda s: s.account_history("acct-0", after=(datetime(2026, 1, 1), "abx")), InvalidArgument),
    ],
)
def test_store_refuses_bad_input_before_any_sql(call: Any, error: type[Exception]) -> None:
    store = Store("mysql://nobody@127.0.0.1:1/none")  # never connects: the checks come first
    try:
        with pytest.raises(error) as info:
            call(store)
        assert type(info.value) is error
    finally:
        store.close()


def test_store_maps_the_servers_refusal_by_number(data: dict[str, Any]) -> None:
    with Store(data["settings"].dsn()) as store, pytest.raises(InvalidArgument) as info:
        store.instances_in_state("nope")
    assert info.value.errno == 31009 and "nope" in str(info.value)


def test_cli_in_state_and_account(data: dict[str, Any], dba: Any, capsys: pytest.CaptureFixture[str]) -> None:
    dsn = data["settings"].dsn()
    expected = in_state_expected(dba, "new")
    assert cli.main(["in-state", "new", "--limit", "2", "--dsn", dsn]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:3] == ["machine", "id", "key"] and out[1].split()[:3] == [
        "ab_x",
        str(expected[0]["id"]),
        expected[0]["instance_key"],
    ]
    assert out[-1] == f"(more: --after-machine ab_x --after-id {expected[1]['id']})"
    assert (
        cli.main(
            [
                "in-state",
                "new",
                "--after-machine",
                "ab_x",
                "--after-id",
                str(expected[1]["id"]),
                "--limit",
                "10000",
                "--json",
                "--dsn",
                dsn,
            ]
        )
        == 0
    )
    rest = json.loads(capsys.readouterr().out)
    assert [(r["machine"], r["id"]) for r in rest] == project(expected[2:], ["machine", "id"])
    history = history_expected(dba, "acct-2", True)
    assert cli.main(["account", "acct-2", "--limit", "3", "--dsn", dsn]) == 0
    out = capsys.readouterr().out.splitlines()
    third = history[2]
    assert out[-1] == (
        f"(more: --after-at {third['entered_at'].isoformat(timespec='microseconds')} "
        f"--after-machine {third['machine']} --after-id {third['transition_id']})"
    )
    flags = out[-1][len("(more: ") : -1].split()
    assert cli.main(["account", "acct-2", *flags, "--limit", "10000", "--json", "--dsn", dsn]) == 0
    rest = json.loads(capsys.readouterr().out)
    assert [(r["machine"], r["id"]) for r in rest] == project(history[3:], ["machine", "transition_id"])
    assert cli.main(["account", "acct-2", "--oldest-first", "--limit", "1", "--json", "--dsn", dsn]) == 0
    assert json.loads(capsys.readouterr().out)[0]["id"] == history[-1]["transition_id"]
    assert cli.main(["account", "acct-2", "--after-machine", "abx", "--dsn", dsn]) == 1
    assert "InvalidArgument (31009)" in capsys.readouterr().err
    assert cli.main(["in-state", "nope", "--dsn", dsn]) == 1
    assert "InvalidArgument (31009)" in capsys.readouterr().err


# -- rights -------------------------------------------------------------------------------------


@pytest.fixture
def accounts(server: Settings, data: dict[str, Any]) -> Iterator[dict[str, Settings]]:
    """A reporting and an app account granted on the module's database (dropped afterwards)."""
    with granted_accounts(server, data["settings"], ("reporting", "app"), "pyfsm_x") as made:
        yield made


def test_reporting_and_app_accounts_may_call_both(accounts: dict[str, Settings], dba: Any) -> None:
    expected_state = project(in_state_expected(dba, "new"), ["machine", "id"])
    expected_history = project(history_expected(dba, "acct-0", True), ["machine", "transition_id"])
    for role in ("reporting", "app"):
        with Store(accounts[role].dsn()) as store:  # the Store's schema check works for both
            assert [(i.machine, i.id) for i in store.instances_in_state("new", limit=10000)] == expected_state
            assert [(e.machine, e.id) for e in store.account_history("acct-0", limit=10000)] == expected_history
    conn = pymysql.connect(**accounts["reporting"].connect_kwargs())
    try:
        assert errno_of(conn, "SELECT fsm_instances_in_state_sql_v1('new', NULL, NULL, 10)") == 1370  # internal
        assert errno_of(conn, "SELECT * FROM fsm_abx") == 1142
        assert errno_of(conn, "CALL fsm_abx_in_state_v1('new', 0, 10)") == 1370
        assert errno_of(conn, "CALL fsm_send_v2('abx', 'x-0', 'open', NULL, NULL, NULL, NULL, NULL, NULL)") == 1370
        assert errno_of(conn, "SELECT COUNT(*) FROM fsm_v_history") is None
    finally:
        conn.close()
