"""What the docs say of the corners a new user's checks found (issue 46, item 8, and the
`pyfsm check` example of cli.md), held against both servers:

* fsm_define_v7, frozen before guards, answers "unchanged" to a body whose only change is a
  guard and refuses one that changes more (31001); fsm_define_v8 stores the guard
  (docs/sql-api.md, docs/guards.md);
* a server's error message shows a character outside the Basic Multilingual Plane as `?`,
  while the names are stored and listed exactly (docs/errors.md, docs/guards.md);
* an instance not yet upgraded is refused a new version's event as UnknownEvent (31028), or
  TransitionNotAllowed (31005) when its version has the event from other states only
  (docs/changing-machines.md);
* a state map's key written twice: MariaDB reads the first value, MySQL the last, and the
  other is neither used nor checked; a map has at most 1000 entries (docs/changing-machines.md,
  docs/sql-api.md);
* `pyfsm check` on a fresh database prints the line cli.md shows, its count growing with the
  types defined."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pymysql
import pytest
from helpers.cli import pyfsm
from helpers.common import errno_of, fetch, is_mariadb, unique

from pyfsm import GuardRefused, Machine, Store, TransitionNotAllowed, UnknownEvent, UpgradeRefused, data, transition
from pyfsm.db import parse_dsn
from pyfsm.errors import InstanceExists

ROOT = Path(__file__).resolve().parents[2]
BOX = "\U0001f4e6"  # 📦: four bytes in UTF-8, outside the Basic Multilingual Plane


@pytest.fixture
def conn(dsn: str) -> Any:
    """A DBA's plain connection to the session's migrated database."""
    connection = pymysql.connect(**parse_dsn(dsn).connect_kwargs())
    connection.autocommit(True)
    yield connection
    connection.close()


def body(*, guard: dict[str, Any] | None = None, extra_state: bool = False) -> str:
    rule: dict[str, Any] = {"event": "go", "from": ["a"], "to": "b"}
    if guard is not None:
        rule |= {"guard": guard, "guard_name": "x set"}
    states = ["a", "b", "c"] if extra_state else ["a", "b"]
    return json.dumps({"states": states, "start": ["a"], "transitions": [rule]})


def versions(conn: Any, machine: str) -> list[tuple[int, Any]]:
    rows = fetch(conn, "SELECT version, guard_name FROM fsm_rules WHERE machine = %s ORDER BY version", (machine,))
    return [(r["version"], r["guard_name"]) for r in rows]


GUARD = {"path": "$.x", "op": "exists"}


def test_define_v7_does_not_see_a_guard_and_v8_stores_it(conn: Any) -> None:
    machine = unique("gv7")
    [first] = fetch(conn, "CALL fsm_define_v8(%s, %s)", (machine, body()))
    assert (first["version"], first["changed"]) == (1, 1)
    # only a guard differs: "unchanged" to v7, nothing stored, no error
    [same] = fetch(conn, "CALL fsm_define_v7(%s, %s)", (machine, body(guard=GUARD)))
    assert (same["version"], same["changed"]) == (1, 0)
    assert versions(conn, machine) == [(1, None)]
    # a guard and another change: refused rather than stored without the guard
    assert errno_of(conn, "CALL fsm_define_v7(%s, %s)", (machine, body(guard=GUARD, extra_state=True))) == 31001
    assert versions(conn, machine) == [(1, None)]
    # v8: the same body is a new version, with its guard
    [stored] = fetch(conn, "CALL fsm_define_v8(%s, %s)", (machine, body(guard=GUARD)))
    assert (stored["version"], stored["changed"]) == (2, 1)
    assert versions(conn, machine) == [(1, None), (2, "x set")]
    # the guarded current version, given to v7 with or without its guard: unchanged, the guard stays
    for given in (body(guard=GUARD), body()):
        [again] = fetch(conn, "CALL fsm_define_v7(%s, %s)", (machine, given))
        assert (again["version"], again["changed"]) == (2, 0)
    assert versions(conn, machine) == [(1, None), (2, "x set")]


def test_define_v7_refuses_branching(conn: Any) -> None:
    machine = unique("gv7b")
    rules = [{"event": "go", "from": ["a"], "to": "b"}, {"event": "go", "from": ["a"], "to": "c"}]
    branching = json.dumps({"states": ["a", "b", "c"], "start": ["a"], "transitions": rules})
    assert errno_of(conn, "CALL fsm_define_v7(%s, %s)", (machine, branching)) == 31001


def test_the_sql_api_page_shows_v7_ignoring_a_guard_only_change() -> None:
    """The example of fsm_define_v7's section is the case above (test_sql_api runs it)."""
    page = (ROOT / "docs" / "sql-api.md").read_text()
    v7 = page[page.index("### `fsm_define_v7`") : page.index("### `fsm_define_v6`")]
    assert "CALL fsm_define_v7('ticket', JSON_SET(@ticket, '$.transitions[0].guard'" in v7
    assert '"unchanged"' in v7 and "31001" in v7 and "`fsm_define_v8` is the one that stores guards" in v7


def test_a_guard_name_beyond_the_bmp_is_a_question_mark_in_the_message_only(dsn: str, conn: Any) -> None:
    machine = unique("emo")
    name = f"{BOX} boxed"
    with Store(dsn) as store:
        store.define(
            Machine(
                name=machine,
                states=["a", "b"],
                start=["a"],
                final=["b"],
                transitions=[transition("go", "a", "b", guard=data("x").exists(), guard_name=name)],
            )
        )
        store.create(machine, "e-1")
        with pytest.raises(GuardRefused) as refused:
            store.send(machine, "e-1", "go")
        # the message guards.md shows, from Python and from a DBA's CALL alike
        assert str(refused.value).startswith("fsm: guard ? boxed refuses go from a")
        assert name not in json.dumps(refused.value.fields, ensure_ascii=False)  # no field carries the names
        with pytest.raises(pymysql.err.OperationalError) as raw:
            fetch(conn, f"CALL `fsm_{machine}_fire_v2`('e-1', 'go')")
        assert raw.value.args[0] == 31032 and str(raw.value.args[1]).startswith("fsm: guard ? boxed refuses")
        # where the exact name is readable
        [event] = store.allowed_events(machine, "e-1")
        assert event.refused_by == (name,)
    rows = fetch(conn, "SELECT guard_name FROM fsm_rules WHERE machine = %s", (machine,))
    assert [r["guard_name"] for r in rows] == [name]
    shown = pyfsm("events", machine, "e-1", "--dsn", dsn)
    assert shown.returncode == 0 and name in shown.stdout, shown


def test_a_key_beyond_the_bmp_is_a_question_mark_in_the_message_and_exact_in_the_error(dsn: str) -> None:
    """errors.md's example: the key x📦 of an order."""
    machine = unique("order")
    with Store(dsn) as store:
        store.define(Machine(name=machine, states=["a"], start=["a"], transitions=[]))
        store.create(machine, f"x{BOX}")
        with pytest.raises(InstanceExists) as exists:
            store.create(machine, f"x{BOX}")
    assert str(exists.value) == f"fsm: {machine} x? already exists"
    assert exists.value.key == f"x{BOX}"
    assert "(`fsm: order x? already exists` for the key `x📦`)" in " ".join(
        (ROOT / "docs" / "errors.md").read_text().split()
    )


def test_an_instance_not_yet_upgraded_is_refused_a_new_versions_event(store: Store) -> None:
    machine = unique("shop")
    v1 = Machine(
        name=machine,
        states=["new", "paid", "delivered", "cancelled"],
        start=["new"],
        final=["delivered", "cancelled"],
        transitions=[("pay", "new", "paid"), ("deliver", "paid", "delivered"), ("cancel", "new", "cancelled")],
    )
    v2 = Machine(
        name=machine,
        states=["new", "paid", "delivered", "refunded", "cancelled"],
        start=["new"],
        final=["refunded", "cancelled"],
        transitions=[
            ("pay", "new", "paid"),
            ("deliver", "paid", "delivered"),
            ("refund", "delivered", "refunded"),  # an event version 1 does not have at all
            ("cancel", ["new", "paid"], "cancelled"),  # an event it has, from new only
        ],
    )
    store.define(v1)
    store.create(machine, "s-1")
    for event in ("pay", "deliver"):
        store.send(machine, "s-1", event)
    store.create(machine, "s-2")
    store.send(machine, "s-2", "pay")
    store.define(v2)
    with pytest.raises(UnknownEvent) as unknown:
        store.send(machine, "s-1", "refund")
    assert unknown.value.errno == 31028
    with pytest.raises(TransitionNotAllowed) as not_allowed:
        store.send(machine, "s-2", "cancel")
    assert not_allowed.value.errno == 31005 and not isinstance(not_allowed.value, UnknownEvent)
    store.upgrade_instances(machine)
    assert store.send(machine, "s-1", "refund").to_state == "refunded"
    assert store.send(machine, "s-2", "cancel").to_state == "cancelled"


@pytest.fixture
def renamed(store: Store) -> str:
    """A type whose version 2 renamed `shipped` (instance s-1 is there) and has `sent` and `lost`."""
    machine = unique("dupmap")
    store.define(
        Machine(
            name=machine,
            states=["new", "shipped"],
            start=["new"],
            final=["shipped"],
            transitions=[("ship", "new", "shipped")],
        )
    )
    store.create(machine, "s-1")
    store.send(machine, "s-1", "ship")
    store.define(
        Machine(
            name=machine,
            states=["new", "sent", "lost"],
            start=["new"],
            final=["sent", "lost"],
            transitions=[("ship", "new", "sent"), ("lose", "new", "lost")],
        )
    )
    return machine


def test_a_state_written_twice_in_a_map_is_read_differently_by_the_servers(conn: Any, renamed: str) -> None:
    twice = '{"shipped": "sent", "shipped": "lost"}'
    read = "sent" if is_mariadb(conn) else "lost"  # MariaDB: the first value; MySQL: the last
    plan = fetch(conn, "CALL fsm_upgrade_plan_v1(%s, NULL, %s, NULL)", (renamed, twice))
    assert [(r["from_state"], r["to_state"]) for r in plan] == [("shipped", read)]
    # the value not read is not checked either: a state version 2 lacks passes
    unread = (
        '{"shipped": "sent", "shipped": "nowhere"}' if is_mariadb(conn) else '{"shipped": "nowhere", "shipped": "lost"}'
    )
    assert errno_of(conn, "CALL fsm_upgrade_plan_v1(%s, NULL, %s, NULL)", (renamed, unread)) is None
    moved = fetch(conn, "CALL fsm_upgrade_instances_v1(%s, NULL, %s, NULL, 0, 100)", (renamed, twice))
    assert [(r["from_state"], r["to_state"], r["outcome"]) for r in moved] == [("shipped", read, "moved")]
    [row] = fetch(conn, f"SELECT current_state FROM `fsm_{renamed}` WHERE instance_key = 's-1'")
    assert row["current_state"] == read


def test_a_state_map_has_at_most_1000_entries(conn: Any, renamed: str, store: Store) -> None:
    def refusal(entries: int) -> str:
        states = {f"s{i}": "sent" for i in range(entries)}
        with pytest.raises(pymysql.err.OperationalError) as refused:
            fetch(conn, "CALL fsm_upgrade_plan_v1(%s, NULL, %s, NULL)", (renamed, json.dumps(states)))
        assert refused.value.args[0] == 31030
        return str(refused.value.args[1])

    assert refusal(1001) == "fsm: the state map has more than 1000 entries"
    assert "more than 1000" not in refusal(1000)  # 1000 are counted in: refused only for naming no state
    with pytest.raises(UpgradeRefused):
        store.upgrade_instances(renamed, states={f"s{i}": "sent" for i in range(1001)})
    # and `only` lists at most 1000 states and 1000 versions
    many = json.dumps({"states": [f"s{i}" for i in range(1001)]})
    assert errno_of(conn, "CALL fsm_upgrade_plan_v1(%s, NULL, NULL, %s)", (renamed, many)) == 31030
    with pytest.raises(UpgradeRefused):
        store.upgrade_instances(renamed, only={"states": [f"s{i}" for i in range(1001)]})
    store.upgrade_instances(renamed, only={"states": [f"s{i}" for i in range(1000)]}, dry_run=True)


def test_pyfsm_check_on_a_fresh_database_prints_what_cli_md_shows(make_database) -> None:  # type: ignore[no-untyped-def]
    page = " ".join((ROOT / "docs" / "cli.md").read_text().split())
    [shown] = re.findall(r"`info: N (deprecated procedures are installed [^`]*?) …`", page)
    dsn = make_database("pyfsm_check").dsn()
    assert pyfsm("migrate", "--dsn", dsn).returncode == 0

    def count() -> int:
        result = pyfsm("check", "--dsn", dsn)
        assert result.returncode == 0, result.stderr
        [info] = [line for line in result.stdout.splitlines() if line.startswith("info: ")]
        number = re.match(r"info: (\d+) (.*)", info)
        assert number and number.group(2).startswith(shown), info
        return int(number.group(1))

    fresh = count()
    with Store(dsn) as store:
        store.define(
            Machine(name="door", states=["shut", "open"], start=["shut"], transitions=[("push", "shut", "open")])
        )
    assert count() > fresh  # a type has its own deprecated per-type procedures


def test_the_refusal_errors_md_and_python_md_quote_is_what_send_says(make_database) -> None:  # type: ignore[no-untyped-def]
    """The README's order o-1001, paid, sent `deliver`: the message both pages quote, with its fields."""
    from pyfsm.definition_file import load_machines

    [order] = load_machines(ROOT / "examples" / "order.yaml")
    with Store(make_database("pyfsm_refusal").dsn()) as store:
        store.migrate()
        store.define(order)
        store.create("order", "o-1001")
        store.send("order", "o-1001", "pay")
        with pytest.raises(TransitionNotAllowed) as refused:
            store.send("order", "o-1001", "deliver")
    message = str(refused.value)
    assert refused.value.fields == {"allowed_events": ["unpay", "ship", "cancel"], "final": False}
    for page in ("errors.md", "python.md"):
        assert f"`{message}`" in " ".join((ROOT / "docs" / page).read_text().split()), page
