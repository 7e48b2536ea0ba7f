"""Guards the database enforces, and branching by them (issue 37, revision 0024).

A guard is a condition on an instance's data, rendered into the type's transition trigger
(fsm_{type}_bu_v13), so every writer meets it: Store.send (fire_v2 and send_v5), send_many,
a DBA's CALL, a raw UPDATE with or without @fsm_event, timers, the engine. What each test
compares as is stated once, in pyfsm/guards.py's docstring, and checked here on both servers
(the same answers from MySQL and MariaDB, and from pyfsm.guards.holds, which
Store.allowed_events and the console use).
"""

from __future__ import annotations

import asyncio
import json
import re
import traceback
from typing import Any

import pymysql
import pytest
from helpers.common import errno_of, fetch, unique
from helpers.processes import run_processes

from pyfsm import (
    GuardRefused,
    InvalidDefinition,
    Machine,
    Store,
    SyncNeeded,
    TransitionNotAllowed,
    all_of,
    any_of,
    data,
    not_,
    transition,
)
from pyfsm.aio import AsyncStore
from pyfsm.db import parse_dsn
from pyfsm.definition_file import parse_machines
from pyfsm.guards import describe, holds, parse

# -- what each test compares as -------------------------------------------------------------

DOCS: list[dict[str, Any]] = [
    {},
    {
        "total": 100,
        "name": "Ann",
        "flag": True,
        "none": None,
        "tags": ["x", "y"],
        "address": {"city": "Lyon", "zip": "69001"},
    },
    {"total": "100", "name": "ann", "flag": 1, "address": {}, "tags": "x"},
    {"total": 100.0, "name": "Ann ", "flag": False, "none": 0, "tags": [None, "y"]},
    {"total": 99.5, "name": "Ände", "address": None, "tags": []},
    {"total": -0.0, "name": "", "flag": "true", "none": {}, "address": {"city": "lyon"}},
    {"total": 9007199254740993, "name": "B", "address": {"city": "Lyon", "zip": 69001}},
]

GUARDS: list[Any] = [
    data("total") == 100,
    data("total") != 100,
    data("total") > 99,
    data("total") >= 100,
    data("total") < 100.5,
    data("total") <= 0,
    data("total") == "100",
    data("total") == 9007199254740992,
    data("total").is_in([100, "100"]),
    data("name") == "Ann",
    data("name") < "B",
    data("name") > "Ann",
    data("name") >= "Ä",
    data("name") == "",
    data("flag") == True,  # noqa: E712
    data("flag") == False,  # noqa: E712
    data("flag") == 1,
    data("flag") != "true",
    data("none").is_null(),
    data("none").exists(),
    data("none").missing(),
    data("none") == None,  # noqa: E711
    data("address.zip").exists(),
    data("address.city") == "Lyon",
    data("address.zip") == "69001",
    data("address").is_null(),
    data("tags[0]") == "x",
    data("tags[1]").is_in(["y", "z"]),
    data("tags[0]").is_null(),
    not_(data("total").exists()),
    all_of(data("total") >= 100, data("name") == "Ann"),
    any_of(data("name") == "B", not_(data("flag") == True)),  # noqa: E712
    {"path": "$.address.city", "op": "in", "value": ["Lyon", "Paris", None, False, 1.5]},
]


@pytest.fixture(scope="module")
def matrix(module_db: Any) -> tuple[Store, Machine]:
    """One type with a self-loop event per guard (e0, e1, ...), so one instance tries them all."""
    _settings, store = module_db
    machine = Machine(
        name=unique("gm"),
        states=["a"],
        start=["a"],
        transitions=[transition(f"e{i}", "a", "a", guard=g) for i, g in enumerate(GUARDS)],
    )
    store.define(machine)
    return store, machine


@pytest.mark.parametrize("doc", range(len(DOCS)))
def test_every_test_compares_as_documented_on_both_servers_and_in_python(
    matrix: tuple[Store, Machine], doc: int
) -> None:
    store, machine = matrix
    key = f"doc-{doc}"
    store.create(machine, key, data=DOCS[doc])
    listed = {e.event: e for e in store.allowed_events(machine, key)}
    for i, g in enumerate(GUARDS):
        expected = holds(parse(g), DOCS[doc])
        assert listed[f"e{i}"].allowed is expected, (describe(parse(g)), DOCS[doc])
        try:
            store.send(machine, key, f"e{i}")
            got = True
        except GuardRefused as exc:
            assert exc.errno == 31032 and f"e{i}" in str(exc) and " a " in str(exc), str(exc)
            got = False
        assert got is expected, (describe(parse(g)), DOCS[doc])


def test_what_the_documentation_says_each_test_compares_as() -> None:
    """The promises of pyfsm/guards.py, spelt out (the test above holds both servers to holds())."""
    check = {
        (data("total") == 100, json.dumps({"total": 100.0})): True,  # numbers as 64-bit floats
        (data("total") == 100, json.dumps({"total": "100"})): False,  # never a string against a number
        (data("total") != 100, "{}"): True,  # a missing key is "not equal"
        (data("total") < 1, "{}"): False,  # ... and never ordered
        (data("name") == "Ann", json.dumps({"name": "Ann "})): False,  # trailing spaces count
        (data("name") == "Ann", json.dumps({"name": "ann"})): False,  # case counts
        (data("x").is_null(), "{}"): False,  # missing is not null
        (data("x").exists(), json.dumps({"x": None})): True,  # a key holding null exists
        (data("flag") == True, json.dumps({"flag": 1})): False,  # noqa: E712 - booleans are not numbers
        (data("n") == 9007199254740992, json.dumps({"n": 9007199254740993})): True,  # past 2**53, as floats
        (data("t[0]") == "x", json.dumps({"t": "x"})): True,  # [0] of a value that is no list: the value
        (data("t[1]").exists(), json.dumps({"t": "x"})): False,
    }
    for (guard, doc), expected in check.items():
        assert holds(parse(guard), json.loads(doc)) is expected, (describe(parse(guard)), doc)


# -- branching ------------------------------------------------------------------------------


def claims() -> Machine:
    return Machine(
        name=unique("claim"),
        states=["new", "review", "paid", "held", "closed"],
        start=["new"],
        final=["paid", "closed"],
        transitions=[
            transition("settle", "new", "review", guard=data("amount") >= 1000, guard_name="large"),
            transition("settle", "new", "paid", guard=data("iban").exists(), guard_name="iban given"),
            ("settle", "new", "held"),
            transition("close", ["new", "held"], "closed", guard=data("reason").exists()),
            ("approve", "review", "paid"),
            ("release", "held", "new"),
        ],
    )


def test_rules_are_tried_in_order_and_the_unguarded_one_is_the_default(store: Store) -> None:
    machine = claims()
    store.define(machine)
    cases = [
        ({"amount": 5000, "iban": "FR76"}, "review"),
        ({"amount": 10, "iban": "FR76"}, "paid"),
        ({"amount": 10}, "held"),
        ({}, "held"),
        ({"amount": "5000"}, "held"),
    ]
    for i, (doc, target) in enumerate(cases):
        store.create(machine, f"c-{i}", data=doc)
        assert machine.target("new", "settle", doc) == target
        (settle,) = [e for e in store.allowed_events(machine, f"c-{i}") if e.event == "settle"]
        assert (settle.allowed, settle.target, settle.targets) == (True, target, ("review", "paid", "held"))
        assert store.send(machine, f"c-{i}", "settle").to_state == target
    # no default: refused, the guards named, nothing written
    store.create(machine, "c-close")
    (close,) = [e for e in store.allowed_events(machine, "c-close") if e.event == "close"]
    assert (close.allowed, close.target, close.refused_by) == (False, None, ("reason exists",))
    with pytest.raises(GuardRefused) as refused:
        store.send(machine, "c-close", "close")
    assert isinstance(refused.value, TransitionNotAllowed)
    assert str(refused.value).startswith("fsm: guard reason exists refuses close from new")
    assert store.get(machine, "c-close").version == 1 and len(store.history(machine, "c-close")) == 1
    # a guard satisfied by the data the same send sets (send_v4 with data)
    assert store.send(machine, "c-close", "close", data={"reason": "duplicate"}).to_state == "closed"


def test_definitions_keep_the_default_last_in_python_files_and_sql(store: Store, raw: Any) -> None:
    with pytest.raises(InvalidDefinition, match="the default comes last"):
        Machine(
            name="m",
            states=["a", "b", "c"],
            start=["a"],
            transitions=[("go", "a", "b"), transition("go", "a", "c", guard=data("x").exists())],
        )
    with pytest.raises(InvalidDefinition, match="defined twice"):
        Machine(name="m", states=["a", "b", "c"], start=["a"], transitions=[("go", "a", "b"), ("go", "a", "c")])
    name = unique("dflt")
    body = {
        "states": ["a", "b", "c"],
        "start": ["a"],
        "transitions": [
            {"event": "go", "from": ["a"], "to": "b"},
            {"event": "go", "from": ["a"], "to": "c", "guard": {"path": "$.x", "op": "exists"}},
        ],
    }
    assert errno_of(raw, "CALL fsm_define_v8(%s, %s)", (name, json.dumps(body))) == 31001
    assert fetch(raw, "SELECT COUNT(*) AS n FROM fsm_rules WHERE machine = %s", (name,)) == [{"n": 0}]


# -- every writer ---------------------------------------------------------------------------


def paid_orders() -> Machine:
    return Machine(
        name=unique("gord"),
        states=["new", "paid", "shipped", "held"],
        start=["new"],
        final=["shipped"],
        transitions=[
            ("pay", "new", "paid"),
            transition("ship", "paid", "shipped", guard=data("address").exists(), guard_name="address set"),
            ("hold", "paid", "held"),
            ("release", "held", "paid"),
        ],
    )


@pytest.fixture
def orders(store: Store) -> Machine:
    machine = paid_orders()
    store.define(machine)
    for key in [f"w-{i}" for i in range(1, 9)]:
        store.create(machine, key)
        store.send(machine, key, "pay")
    return machine


def state(store: Store, machine: Machine, key: str) -> tuple[str, int]:
    found = store.get(machine, key)
    return found.state, found.version


def set_address(raw: Any, machine: Machine, key: str) -> None:
    raw.cursor().execute(
        f'UPDATE `fsm_{machine.name}` SET data = \'{{"address": "1 rue X"}}\' WHERE instance_key = %s', (key,)
    )


def test_every_writers_path_is_refused_and_allowed_by_the_same_guard(store: Store, raw: Any, orders: Machine) -> None:
    m = orders.name
    writers = {
        "Store.send (fire_v2)": lambda key: store.send(orders, key, "ship"),
        "Store.send with options (send_v4)": lambda key: store.send(orders, key, "ship", metadata={"by": "t"}),
        "send_many": lambda key: _send_many(store, orders, key),
        "CALL fire_v2": lambda key: raw.cursor().execute(f"CALL `fsm_{m}_fire_v2`(%s, 'ship')", (key,)),
        "CALL fire_v1 (deprecated)": lambda key: raw.cursor().execute(f"CALL `fsm_{m}_fire_v1`(%s, 'ship')", (key,)),
        "CALL fsm_send_v4": lambda key: raw.cursor().execute(
            "CALL fsm_send_v4(%s, %s, 'ship', NULL, NULL, NULL, NULL, NULL, NULL)", (m, key)
        ),
        "raw UPDATE with @fsm_event": lambda key: (
            raw.cursor().execute("SET @fsm_event = 'ship'"),
            raw.cursor().execute(f"UPDATE `fsm_{m}` SET data = data WHERE instance_key = %s", (key,)),
        ),
        "raw UPDATE of current_state": lambda key: raw.cursor().execute(
            f"UPDATE `fsm_{m}` SET current_state = 'shipped' WHERE instance_key = %s", (key,)
        ),
    }
    for i, (writer, write) in enumerate(writers.items()):
        key = f"w-{i + 1}"
        with pytest.raises((GuardRefused, pymysql.err.MySQLError)) as refused:
            write(key)
        errno = refused.value.errno if isinstance(refused.value, GuardRefused) else refused.value.args[0]
        assert errno == 31032, (writer, refused.value)
        assert state(store, orders, key) == ("paid", 2), writer  # nothing written
        set_address(raw, orders, key)
        write(key)
        raw.cursor().execute("SET @fsm_event = NULL")  # a DBA's context outlives a statement that succeeds
        assert state(store, orders, key) == ("shipped", 4), writer  # the data change, then the transition


def _send_many(store: Store, machine: Machine, key: str) -> None:
    (result,) = store.send_many(machine, [{"key": key, "event": "ship"}])
    if isinstance(result, Exception):
        raise result


def test_a_raw_update_naming_the_target_takes_its_one_event_tried_in_order(store: Store, raw: Any) -> None:
    machine = claims()
    store.define(machine)
    m = machine.name
    for key, doc in (("r-big", {"amount": 5000, "iban": "x"}), ("r-iban", {"iban": "x"}), ("r-none", {})):
        store.create(machine, key, data=doc)
    update = f"UPDATE `fsm_{m}` SET current_state = %s WHERE instance_key = %s"
    # settle's first rule that holds leads to review, not paid: not this move
    assert errno_of(raw, update, ("paid", "r-big")) == 31005
    assert errno_of(raw, update, ("paid", "r-iban")) is None
    assert errno_of(raw, update, ("review", "r-none")) == 31005  # settle takes it to held
    assert errno_of(raw, update, ("held", "r-none")) is None
    assert [h.event for h in store.history(machine, "r-none")] == [None, "settle"]
    # close from held: its guard refuses
    assert errno_of(raw, update, ("closed", "r-none")) == 31032
    assert store.get(machine, "r-none").state == "held"


def test_several_events_to_the_new_state_keep_31006(store: Store, raw: Any) -> None:
    machine = Machine(
        name=unique("amb"),
        states=["a", "b"],
        start=["a"],
        transitions=[transition("x", "a", "b", guard=data("k") == 1), ("y", "a", "b")],
    )
    store.define(machine)
    store.create(machine, "k", data={"k": 1})
    assert errno_of(raw, f"UPDATE `fsm_{machine.name}` SET current_state = 'b' WHERE instance_key = 'k'") == 31006


# -- timers -----------------------------------------------------------------------------------


def test_a_timer_refused_by_its_guard_is_dropped_and_logged(store: Store, raw: Any) -> None:
    machine = Machine(
        name=unique("gtim"),
        states=["open", "closed"],
        start=["open"],
        final=["closed"],
        transitions=[transition("close", "open", "closed", guard=data("closable") == True)],  # noqa: E712
        timeouts={"open": ("1s", "close")},
    )
    store.define(machine)
    store.create(machine, "t-no")
    store.create(machine, "t-yes", data={"closable": True})
    store.send_at(machine, "t-no", "close", after=0.001)
    raw.cursor().execute(
        "UPDATE fsm_timers SET fire_at = UTC_TIMESTAMP(6), due_at = UTC_TIMESTAMP(6) WHERE machine = %s",
        (machine.name,),
    )
    outcomes = {(o.instance_key, o.kind, o.outcome, o.errno) for o in store.fire_timers(owner="guards-test")}
    assert outcomes == {
        ("t-no", "timeout", "dropped", 31032),
        ("t-no", "scheduled", "dropped", 31032),
        ("t-yes", "timeout", "fired", None),
    }
    assert store.get(machine, "t-no").state == "open" and store.get(machine, "t-yes").state == "closed"
    logged = fetch(
        raw,
        "SELECT instance_key, outcome, errno, reason FROM fsm_timer_log WHERE machine = %s AND instance_key = 't-no'",
        (machine.name,),
    )
    assert [(r["outcome"], r["errno"]) for r in logged] == [("dropped", 31032)] * 2
    assert all("guard closable == true refuses close from open" in r["reason"] for r in logged)


# -- the definitions: checked whole, hostile text inert, versions ------------------------------

BAD_GUARDS: list[Any] = [
    {"path": "$.a'; DROP TABLE fsm_rules; --", "op": "exists"},
    {"path": "$.a\\", "op": "exists"},
    {"path": "$", "op": "exists"},
    {"path": "a", "op": "exists"},
    {"path": "$.a b", "op": "exists"},
    {"path": "$.a[x]", "op": "exists"},
    {"path": "$.1a", "op": "exists"},
    {"path": "$.a(1)", "op": "exists"},
    {"path": "$" + ".a" * 17, "op": "exists"},
    {"path": "$.a", "op": "like", "value": "x"},
    {"path": "$.a", "op": "==", "value": {"x": 1}},
    {"path": "$.a", "op": "==", "value": [1]},
    {"path": "$.a", "op": "==" + " "},
    {"path": "$.a", "op": "==", "value": 2**53 + 2},
    {"path": "$.a", "op": "<", "value": None},
    {"path": "$.a", "op": ">=", "value": True},
    {"path": "$.a", "op": "in", "value": []},
    {"path": "$.a", "op": "in", "value": list(range(65))},
    {"path": "$.a", "op": "in", "value": [[1]]},
    {"path": "$.a", "op": "exists", "value": 1},
    {"path": "$.a", "op": "==", "value": "x" * 256},
    {"path": "$.a", "op": "==", "value": 1, "extra": 1},
    {"path": 1, "op": "exists"},
    {"all": []},
    {"all": {"path": "$.a", "op": "exists"}},
    {"any": [1]},
    {"not": []},
    {"not": {"path": "$.a", "op": "exists"}, "all": []},
    [],
    "x",
    None,
    1,
    {"not": {"not": {"not": {"not": {"not": {"not": {"not": {"not": {"path": "$.a", "op": "exists"}}}}}}}}},
    {"any": [{"path": "$.a", "op": "exists"}] * 64},
]
BAD_NAMES: list[Any] = ["", " x", "x ", "a\nb", "a\tb", "a\x85b", "x" * 65, 7]


def test_hostile_definitions_are_refused_whole_in_python_and_in_sql(store: Store, raw: Any) -> None:
    name = unique("hostile")
    store.define(Machine(name=name, states=["a", "b"], start=["a"], transitions=[("go", "a", "b")]))
    before = fetch(raw, "SELECT version, from_state, event, position, guard FROM fsm_rules WHERE machine = %s", (name,))
    cases = (
        [{"guard": g} for g in BAD_GUARDS]
        + [{"guard": {"path": "$.a", "op": "exists"}, "guard_name": n} for n in BAD_NAMES]
        + [{"guard_name": "x"}, {"gaurd": {}}]
    )
    for extra in cases:
        body = {
            "states": ["a", "b"],
            "start": ["a"],
            "transitions": [
                {"event": "go", "from": ["a"], "to": "b"},
                {"event": "back", "from": ["b"], "to": "a", **extra},
            ],
        }
        with pytest.raises(InvalidDefinition):  # the same document, through Python
            parse_machines(json.dumps({"name": name, **body}), fmt="json")
        assert errno_of(raw, "CALL fsm_define_v8(%s, %s)", (name, json.dumps(body))) == 31001, extra
    assert (
        fetch(raw, "SELECT version, from_state, event, position, guard FROM fsm_rules WHERE machine = %s", (name,))
        == before
    )


HOSTILE_TEXT = [
    "x'; DROP TABLE fsm_rules; --",
    "a\\",
    '"q"',
    "' OR 1=1 #",
    "*/ SIGNAL SQLSTATE '45000'; /*",
    "ünï ☃ 𝄞",
    "0x41",
    "X'41'",
]


def test_hostile_text_in_literals_and_names_never_changes_the_sql(store: Store) -> None:
    machine = Machine(
        name=unique("inert"),
        states=["a"],
        start=["a"],
        transitions=[
            transition(f"e{i}", "a", "a", guard=data("s") == text, guard_name=text)
            for i, text in enumerate(HOSTILE_TEXT)
        ],
    )
    store.define(machine)
    for i, text in enumerate(HOSTILE_TEXT):
        store.create(machine, f"k{i}", data={"s": text})
        for j, other in enumerate(HOSTILE_TEXT):
            if i == j:
                assert store.send(machine, f"k{i}", f"e{j}").to_state == "a"
            else:
                with pytest.raises(GuardRefused) as refused:
                    store.send(machine, f"k{i}", f"e{j}")
                # error messages are utf8mb3 on both servers: a character past U+FFFF reads "?"
                shown = "".join(c if ord(c) <= 0xFFFF else "?" for c in other)
                assert str(refused.value).startswith(f"fsm: guard {shown} refuses e{j} from a"), (refused.value, other)


def test_a_changed_guard_is_a_new_version_and_instances_keep_theirs(store: Store, raw: Any) -> None:
    def version(limit: int, name: str | None = "enough") -> Machine:
        return Machine(
            name=machine_name,
            states=["a", "b"],
            start=["a"],
            transitions=[transition("go", "a", "b", guard=data("n") > limit, guard_name=name), ("back", "b", "a")],
        )

    machine_name = unique("gver")
    assert store.define(version(10)).version == 1
    assert store.define(version(10)).changed is False  # the same guard: no new version
    store.create(machine_name, "old", data={"n": 50})
    assert store.define(version(100)).version == 2
    assert store.define(version(100, None)).version == 3  # a changed name is a change too
    store.create(machine_name, "new", data={"n": 50})
    # the definitions' view shows each version's guards as defined (what reporting accounts read)
    bodies = {
        r["version"]: json.loads(r["body"])
        for r in fetch(raw, "SELECT version, body FROM fsm_v_definitions WHERE machine = %s", (machine_name,))
    }
    assert [b["transitions"][0].get("guard_name") for _, b in sorted(bodies.items())] == ["enough", "enough", None]
    assert bodies[2]["transitions"][0]["guard"] == {"path": "$.n", "op": ">", "value": 100}
    assert store.send(machine_name, "old", "go").to_state == "b"  # version 1's guard
    with pytest.raises(GuardRefused):
        store.send(machine_name, "new", "go")
    store.send(machine_name, "old", "back")
    store.upgrade_instances(machine_name)
    with pytest.raises(GuardRefused):  # upgraded: version 3's guard
        store.send(machine_name, "old", "go")


def test_a_dba_version_with_guards_waits_for_sync_and_older_defines_refuse_guards(store: Store, raw: Any) -> None:
    machine = paid_orders()
    store.define(machine)
    body = json.loads(machine.to_json())
    body["transitions"][3]["guard"] = {"path": "$.why", "op": "exists"}  # release, now guarded
    (row,) = fetch(raw, "CALL fsm_define_v8(%s, %s)", (machine.name, json.dumps(body)))
    assert (row["version"], row["changed"], row["tables_ready"]) == (2, 1, 0)
    store.create(machine, "v2")
    store.send(machine, "v2", "pay")
    store.send(machine, "v2", "hold")  # unguarded: fsm_rules answers
    with pytest.raises(SyncNeeded) as needed:  # guarded, not rendered yet: refused, never unchecked
        store.send(machine, "v2", "release")
    assert needed.value.errno == 31031 and "pyfsm sync" in str(needed.value)
    store.sync(machine.name)
    with pytest.raises(GuardRefused):
        store.send(machine, "v2", "release")
    assert store.send(machine, "v2", "release", data={"why": "paid twice"}).to_state == "paid"
    # fsm_define_v7 does not know guards: it would store the body and drop them (a new state
    # makes it a new version, not version 2 again)
    body["states"].append("extra")
    assert errno_of(raw, "CALL fsm_define_v7(%s, %s)", (machine.name, json.dumps(body))) == 31001
    assert fetch(raw, "SELECT MAX(version) AS v FROM fsm_definitions WHERE machine = %s", (machine.name,)) == [{"v": 2}]


# -- asking first ---------------------------------------------------------------------------


def test_allowed_events_one_read_async_too(store: Store, dsn: str, orders: Machine) -> None:
    events = store.allowed_events(orders, "w-1")
    assert [(e.event, e.allowed, e.target, e.refused_by) for e in events] == [
        ("hold", True, "held", ()),
        ("ship", False, None, ("address set",)),
    ]

    async def ask() -> Any:
        async with AsyncStore(dsn) as aio:
            return await aio.allowed_events(orders.name, "w-1")

    assert asyncio.run(ask()) == events
    store.send(orders, "w-1", "hold")
    assert [e.event for e in store.allowed_events(orders, "w-1")] == ["release"]


# -- processes: the guard is tested against the row under its lock ----------------------------


def racer(dsn: str, machine: str, worker: int, barrier: Any, out: Any) -> None:
    """Even workers flip ``ok`` in the data of the shared instances; odd ones send ``go`` and
    ``back`` (guarded by ok == true) on them."""
    report: dict[str, Any] = {"worker": worker, "sent": 0, "refused": [], "error": None}
    conn = pymysql.connect(**parse_dsn(dsn).connect_kwargs())
    try:
        barrier.wait(timeout=60)
        for i in range(60):
            key = f"hot-{i % 3}"
            try:
                with conn.cursor() as cur:
                    if worker % 2 == 0:
                        cur.execute(
                            f"UPDATE `fsm_{machine}` SET data = %s WHERE instance_key = %s",
                            (json.dumps({"ok": i % 2 == 0, "by": worker}), key),
                        )
                    else:
                        cur.execute(f"SELECT current_state FROM `fsm_{machine}` WHERE instance_key = %s", (key,))
                        event = "go" if cur.fetchone()[0] == "a" else "back"
                        cur.execute(f"CALL `fsm_{machine}_fire_v2`(%s, %s)", (key, event))
                        while cur.nextset():
                            pass
                        report["sent"] += 1
            except pymysql.err.MySQLError as exc:
                report["refused"].append(int(exc.args[0]))
    except BaseException:
        report["error"] = traceback.format_exc()
    finally:
        conn.close()
        out.put(report)


def test_processes_racing_sends_and_data_updates_never_pass_a_stale_guard(store: Store, dsn: str, raw: Any) -> None:
    machine = Machine(
        name=unique("grace"),
        states=["a", "b"],
        start=["a"],
        transitions=[
            transition("go", "a", "b", guard=data("ok") == True),  # noqa: E712
            transition("back", "b", "a", guard=data("ok") == True),  # noqa: E712
        ],
    )
    store.define(machine)
    for i in range(3):
        store.create(machine, f"hot-{i}", data={"ok": True})
    reports = run_processes(racer, lambda w: (dsn, machine.name, w))
    assert [r["error"] for r in reports] == [None] * len(reports)
    refused = [errno for r in reports for errno in r["refused"]]
    # refused by the guard, or not allowed from a state another sender changed first
    assert set(refused) <= {31032, 31005, 1213}, refused
    assert sum(r["sent"] for r in reports) > 0  # transitions were taken while the data changed
    for i in range(3):
        history = fetch(
            raw,
            f"SELECT t.event, t.data_after FROM `fsm_{machine.name}_transitions` t "
            f"JOIN `fsm_{machine.name}` i ON i.id = t.instance_id WHERE i.instance_key = %s "
            "AND t.event IS NOT NULL",
            (f"hot-{i}",),
        )
        # every transition was taken with the data its guard was tested against: ok was true
        assert all(json.loads(h["data_after"])["ok"] is True for h in history), history


# -- the engine, the command line, the console ----------------------------------------------


def test_the_engines_steps_meet_the_guards(store: Store) -> None:
    from pyfsm import Context, Outcome, Process

    machine = paid_orders()
    process = Process(machine)

    def packer(ctx: Context) -> Outcome:
        if ctx.data.get("pack"):
            ctx.data["address"] = "1 rue X"  # the step's data: the guard sees it
        return ctx.fire("ship")

    process.register("paid", packer, name="packer")
    store.define(machine)
    store.create(machine, "e-1")
    store.send(machine, "e-1", "pay")
    refused = process.run(store, "e-1")
    assert (refused.state, refused.status) == ("paid", "failed")
    (error,) = store.errors(machine, "e-1")
    assert error.error_type == "pyfsm.errors.GuardRefused" and "address set" in error.message
    assert [h.event for h in store.history(machine, "e-1")] == [None, "pay"]  # nothing of the step written
    store.create(machine, "e-2", data={"pack": True})
    store.send(machine, "e-2", "pay")
    assert process.run(store, "e-2").state == "shipped"


def test_pyfsm_events_and_the_console_say_which_guard_refuses(store: Store, dsn: str, orders: Machine) -> None:
    from helpers.cli import pyfsm
    from starlette.testclient import TestClient

    from pyfsm.web.app import ConsoleConfig, create_app

    shown = pyfsm("events", orders.name, "w-1", "--dsn", dsn)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert any(line.split() == ["ship", "no", "-", "address", "set"] for line in lines), shown.stdout
    assert any(line.split()[:3] == ["hold", "yes", "held"] for line in lines), shown.stdout
    as_json = pyfsm("events", orders.name, "w-1", "--dsn", dsn, "--json")
    assert {e["event"]: e["refused_by"] for e in json.loads(as_json.stdout)} == {"hold": [], "ship": ["address set"]}
    page = TestClient(create_app(ConsoleConfig(dsn=dsn))).get(f"/m/{orders.name}/i/w-1").text
    row = re.search(r'<tr id="event-ship">(.*?)</tr>', page, re.S)
    assert row is not None and "refused" in row.group(1) and "address set" in row.group(1), page


# -- the suite's hostile corpus (helpers/fuzz_strategies.py) --------------------------------


def test_the_hostile_corpus_as_paths_is_judged_alike_by_python_and_sql(store: Store, raw: Any) -> None:
    from helpers.fuzz_strategies import FRAGMENTS, INJECTIONS, encodable

    from pyfsm.guards import NAME, PATH

    name = unique("hpath")
    store.define(Machine(name=name, states=["a"], start=["a"], transitions=[("e", "a", "a")]))
    for text in (*FRAGMENTS, *INJECTIONS):
        for guard, guard_name in (
            ({"path": "$." + text, "op": "exists"}, None),
            ({"path": "$.a", "op": "exists"}, text),
        ):
            body = {
                "name": name,
                "states": ["a"],
                "start": ["a"],
                "transitions": [
                    {
                        "event": "e",
                        "from": ["a"],
                        "to": "a",
                        "guard": guard,
                        **({} if guard_name is None else {"guard_name": guard_name}),
                    }
                ],
            }
            valid = bool(PATH.fullmatch(guard["path"])) and (
                guard_name is None or (bool(NAME.fullmatch(guard_name)) and encodable(guard_name))
            )
            try:
                parse_machines(json.dumps(body), fmt="json")
                by_python = True
            except InvalidDefinition:
                by_python = False
            del body["name"]
            errno = errno_of(raw, "CALL fsm_define_v8(%s, %s)", (name, json.dumps(body)))
            assert (by_python, errno is None) == (valid, valid), (text, guard_name, errno)
            if valid:  # back to the unguarded definition, so that the next case is a change again
                store.define(Machine(name=name, states=["a"], start=["a"], transitions=[("e", "a", "a")]))


def test_the_hostile_corpus_as_literals_and_names_is_inert(store: Store) -> None:
    from helpers.fuzz_strategies import FRAGMENTS, INJECTIONS, encodable

    from pyfsm.guards import NAME

    texts = [t for t in dict.fromkeys((*FRAGMENTS, *INJECTIONS)) if encodable(t)]
    machine = Machine(
        name=unique("hlit"),
        states=["a"],
        start=["a"],
        transitions=[
            transition(f"e{i}", "a", "a", guard=data("s") == t, guard_name=t if NAME.fullmatch(t) else None)
            for i, t in enumerate(texts)
        ],
    )
    store.define(machine)
    for i, text in enumerate(texts):
        key = f"k{i}"
        store.create(machine, key, data={"s": text})
        allowed = [e.event for e in store.allowed_events(machine, key) if e.allowed]
        # == compares code point by code point: only its own literal (and no look-alike) holds
        assert allowed == [f"e{i}"], (text, allowed)
        assert store.send(machine, key, f"e{i}").to_state == "a"
        other = (i + 1) % len(texts)
        with pytest.raises(GuardRefused):
            store.send(machine, key, f"e{other}")


def test_json_only_one_server_reads_is_refused_whole_too(store: Store, raw: Any) -> None:
    """Texts MariaDB's JSON_VALID lets through (a path ending in a newline, "1.", "1e") and
    literals past the limits: 31001 from fsm_define_v8 on both servers, nothing stored."""
    name = unique("gtext")
    store.define(Machine(name=name, states=["a"], start=["a"], transitions=[("e", "a", "a")]))
    template = (
        '{"states": ["a"], "start": ["a"], "transitions": [{"event": "e", "from": ["a"], "to": "a", "guard": %s}]}'
    )
    for guard in (
        '{"path": "$.a\\n", "op": "exists"}',
        '{"path": "$.a\\r", "op": "exists"}',
        '{"path": "$.a", "op": "==", "value": 1.}',
        '{"path": "$.a", "op": "==", "value": 1e}',
        '{"path": "$.a", "op": "==", "value": 01}',
        '{"path": "$.a", "op": "==", "value": 9007199254740994}',
        json.dumps({"all": [{"path": "$.a", "op": "in", "value": list(range(33))}] * 2}),
    ):
        assert errno_of(raw, "CALL fsm_define_v8(%s, %s)", (name, template % guard)) == 31001, guard
    assert fetch(raw, "SELECT MAX(version) AS v FROM fsm_definitions WHERE machine = %s", (name,)) == [{"v": 1}]
    # 2**53 + 1 is 2**53 as a float, on both servers and in Python: accepted by both
    assert (
        errno_of(
            raw,
            "CALL fsm_define_v8(%s, %s)",
            (name, template % '{"path": "$.a", "op": "==", "value": 9007199254740993}'),
        )
        is None
    )
    assert holds(parse(data("a") == 9007199254740993), {"a": 9007199254740992})


def test_a_number_beyond_a_float_compares_as_the_largest_one(store: Store, raw: Any) -> None:
    machine = Machine(
        name=unique("gbig"), states=["a"], start=["a"], transitions=[transition("e", "a", "a", guard=data("n") > 5)]
    )
    store.define(machine)
    store.create(machine, "k")
    try:  # MariaDB's text JSON holds it; MySQL's refuses it (3140/22032): nothing to compare there
        raw.cursor().execute(f"UPDATE `fsm_{machine.name}` SET data = '{{\"n\": 1e400}}' WHERE instance_key = 'k'")
    except pymysql.err.MySQLError:
        return
    [event] = store.allowed_events(machine, "k")
    assert event.allowed is True
    assert store.send(machine, "k", "e").to_state == "a"
