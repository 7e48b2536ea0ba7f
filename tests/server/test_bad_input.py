"""Bad input gets a clear error, the right class and number, and changes nothing."""

from __future__ import annotations

import math
from typing import Any

import pymysql
import pytest

from pyfsm import FsmError, InvalidArgument, InvalidData, Machine, Store, TransactionOpen, UnknownMachine

INJECTIONS = [
    "x`; DROP TABLE t; --",
    "a'; DROP TABLE fsm_rules; --",
    "Order",
    "order-1",
    "1order",
    "ordér",
    "a\n",
    "",
    " a",
    "a" * 65,
    "a/*x*/",
    "a;b",
]


def snapshot(store: Store, machine: Machine) -> tuple[Any, ...]:
    return (store.counts(machine), [(h.sort_key, h.to_state) for h in store.history(machine, "bad")])


@pytest.fixture
def seeded(store: Store, order: Machine) -> Machine:
    store.create(order, "bad", data={"a": 1})
    return order


@pytest.mark.parametrize("name", INJECTIONS)
def test_bad_event_names(store: Store, seeded: Machine, name: str) -> None:
    before = snapshot(store, seeded)
    with pytest.raises(InvalidArgument) as info:
        store.send(seeded, "bad", name)
    assert info.value.errno == 31009
    assert snapshot(store, seeded) == before


@pytest.mark.parametrize("name", [*INJECTIONS, "machines", "x_transitions", "a" * 49])
def test_bad_machine_names(store: Store, name: str) -> None:
    with pytest.raises(InvalidArgument):
        store.send(name, "k", "go")


@pytest.mark.parametrize("state", INJECTIONS)
def test_bad_states_in_queries(store: Store, seeded: Machine, state: str) -> None:
    with pytest.raises(InvalidArgument):
        store.in_state(seeded, state)


def test_unknown_state_in_query(store: Store, seeded: Machine) -> None:
    with pytest.raises(InvalidArgument, match="not a state"):
        store.in_state(seeded, "teleported")


class NotJson:
    pass


@pytest.mark.parametrize(
    "data",
    [
        [1, 2],
        "text",
        5,
        {"x": NotJson()},
        {"x": math.nan},
        {"x": math.inf},
        {1: {"x": {1, 2}}},
        {"big": "x" * (1024 * 1024)},
    ],
)
def test_bad_data_is_refused_before_sql(store: Store, seeded: Machine, data: Any) -> None:
    before = snapshot(store, seeded)
    with pytest.raises(InvalidData) as info:
        store.send(seeded, "bad", "pay", data=data)
    assert info.value.errno == 31008
    with pytest.raises(InvalidData):
        store.send(seeded, "bad", "pay", metadata=data)
    assert snapshot(store, seeded) == before


def test_deeply_nested_data_is_refused(store: Store, seeded: Machine) -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(5000):
        node["x"] = {}
        node = node["x"]
    with pytest.raises(InvalidData):
        store.send(seeded, "bad", "pay", data=deep)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"expected_version": -1},
        {"expected_version": 2**63},
        {"expected_version": "1"},
        {"expected_version": True},
        {"request_id": ""},
        {"request_id": "r" * 65},
        {"handler": "h" * 129},
        {"lookup_key": "k" * 192},
    ],
)
def test_bad_numbers_and_options(store: Store, seeded: Machine, kwargs: dict[str, Any]) -> None:
    before = snapshot(store, seeded)
    with pytest.raises(InvalidArgument):
        store.send(seeded, "bad", "pay", **kwargs)
    assert snapshot(store, seeded) == before


@pytest.mark.parametrize("key", ["", "k" * 192, None, 5])
def test_bad_keys(store: Store, seeded: Machine, key: Any) -> None:
    with pytest.raises(InvalidArgument):
        store.send(seeded, key, "pay")


@pytest.mark.parametrize("kwargs", [{"limit": 0}, {"limit": 10001}, {"after_id": -1}])
def test_bad_paging(store: Store, seeded: Machine, kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument):
        store.in_state(seeded, "new", **kwargs)


def test_keys_are_data_not_sql(store: Store, order: Machine) -> None:
    key = "x`; DROP TABLE fsm_rules; -- ' \" \\ é 🙂"
    store.send(order, key, "pay")
    assert store.get(order, key).state == "paid"
    assert store.counts(order) == {"paid": 1}


def test_the_procedures_check_too(store: Store, seeded: Machine, raw: Any) -> None:
    """Bypassing Python, the same inputs get the same numbers from SQL."""
    import pymysql

    name = f"fsm_{seeded.name}_send_v1"
    cases = {
        ("bad", "x`; DROP TABLE t; --", None, None): 31009,
        ("bad", "pay", "{oops", None): 31008,
        ("bad", "pay", "[1]", None): 31008,
        ("bad", "pay", None, '"text"'): 31008,
        ("", "pay", None, None): 31009,
        ("k" * 192, "pay", None, None): 31009,
        ("bad", "Pay", None, None): 31009,
        ("bad", "teleport", None, None): 31005,
    }
    for (key, event, data, metadata), errno in cases.items():
        with pytest.raises(pymysql.err.MySQLError) as info:
            raw.cursor().execute(f"CALL `{name}`(%s, %s, %s, %s, NULL, NULL, NULL, NULL)", (key, event, data, metadata))
        assert info.value.args[0] == errno, (key[:10], event, data, metadata)
    with pytest.raises(pymysql.err.MySQLError) as info:
        raw.cursor().execute(f"CALL `{name}`('bad', 'pay', NULL, NULL, -1, NULL, NULL, NULL)")
    assert info.value.args[0] == 31009
    assert store.get(seeded, "bad").version == 1


def test_refuses_to_call_inside_an_open_transaction(dsn: str, order: Machine) -> None:
    with Store(dsn, pool_size=1) as store:
        with store.gateway.primary.connection() as conn:
            conn.cursor().execute("START TRANSACTION")
        with pytest.raises(TransactionOpen):
            store.send(order, "tx", "pay")
        with store.gateway.primary.connection() as conn:
            conn.rollback()
        assert store.send(order, "tx", "pay").to_state == "paid"


def test_unknown_machine_is_its_own_error(store: Store) -> None:
    with pytest.raises(UnknownMachine) as info:
        store.counts("ghost")
    assert isinstance(info.value, FsmError)


def test_an_unknown_machine_among_many_types_is_31002_naming_the_first(make_database) -> None:  # type: ignore[no-untyped-def]
    """The message names installed types, the first twelve: listing every one of a database with
    more than about forty types overflowed GROUP_CONCAT, which MySQL reported as 1260 ('Row N
    was cut by GROUP_CONCAT()') in place of 31002 (revision 0027). Rows of fsm_machines stand
    in for the types (what the check reads); the check is the one every generic procedure
    makes, called as a DBA's CALL of one would."""
    settings = make_database("pyfsm_many_types")
    with Store(settings.dsn()) as many:
        many.migrate()
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO fsm_machines (machine, created_at, updated_at) VALUES (%s, NOW(6), NOW(6))",
                [(f"type_number_{i:03d}_with_a_long_name",) for i in range(80)],
            )
            conn.commit()
            with pytest.raises(pymysql.err.OperationalError) as info:
                cur.execute("CALL fsm_require_machine_v1('ghost')")
    finally:
        conn.close()
    number, message = info.value.args
    assert number == 31002
    assert message.startswith("fsm: unknown machine ghost; installed: type_number_000_with_a_long_name, type_n")
    assert message.endswith("...") and len(message) == 128


@pytest.mark.parametrize("where", ["data", "metadata", "key", "request_id"])
def test_lone_surrogates_are_refused(store: Store, seeded: Machine, where: str) -> None:
    bad = "x\ud800"
    kwargs: dict[str, Any] = (
        {"data": {"s": bad}}
        if where == "data"
        else {"metadata": {"s": bad}}
        if where == "metadata"
        else {"request_id": bad}
        if where == "request_id"
        else {}
    )
    key = bad if where == "key" else "bad"
    with pytest.raises((InvalidData, InvalidArgument)):
        store.send(seeded, key, "pay", **kwargs)
    assert store.get(seeded, "bad").version == 1


def test_trailing_space_keys_are_refused(store: Store, seeded: Machine) -> None:
    with pytest.raises(InvalidArgument, match="space"):
        store.get(seeded, "bad ")


def test_definition_version_out_of_range(store: Store, seeded: Machine) -> None:
    with pytest.raises(InvalidArgument):
        store.definition(seeded, version=2**40)


def test_dsn_without_database_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="no database"):
        Store("mysql://root@127.0.0.1:3306")
