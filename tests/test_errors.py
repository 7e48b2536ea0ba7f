"""Every error number pyfsm's SQL signals maps to its own Python class."""

from __future__ import annotations

import re

import pytest

import pyfsm
from pyfsm.errors import SERVER, SIGNALLED, FsmError, from_mysql_error
from pyfsm.resources import sql_dir


def test_every_signalled_number_maps_to_a_class() -> None:
    used = {int(n) for p in sql_dir().rglob("*.sql") for n in re.findall(r"MYSQL_ERRNO\s*=\s*(\d+)", p.read_text())}
    assert used, "no MYSQL_ERRNO found in sql/"
    for errno in used:
        if errno in SERVER:  # a server condition re-raised on purpose (1213 after in-procedure retries)
            continue
        assert 31000 < errno <= 32767, f"{errno}: pyfsm's own numbers stay in 31001-32767"
        assert errno in SIGNALLED, f"{errno} is signalled in sql/ but has no Python class"
        assert SIGNALLED[errno].errno == errno


def test_each_kind_has_its_own_class_and_number() -> None:
    classes = [c for c in vars(pyfsm.errors).values()
               if isinstance(c, type) and issubclass(c, FsmError) and c is not FsmError]
    numbers = [c.errno for c in classes]
    assert len(numbers) == len(set(numbers)), "two error classes share a number"
    for cls in classes:
        assert cls.__name__ in pyfsm.__all__, cls


def test_mapping_uses_the_number_not_the_text() -> None:
    import pymysql

    err = from_mysql_error(pymysql.err.OperationalError(31005, "some unrelated text"), machine="m", key="k")
    assert isinstance(err, pyfsm.TransitionNotAllowed) and (err.machine, err.key) == ("m", "k")
    assert from_mysql_error(pymysql.err.OperationalError(1234, "deadlock found")) is None
    assert isinstance(from_mysql_error(pymysql.err.OperationalError(1213, "x")), pyfsm.Deadlock)
    assert SERVER[2013] is pyfsm.DatabaseUnavailable


def test_out_of_range_arguments_are_invalid_arguments(store, order) -> None:  # type: ignore[no-untyped-def]
    """Raw SQL past Python's checks: a value outside a parameter's type is the caller's error, by number."""
    import pymysql

    for errno in (1264, 1292, 1366):
        assert isinstance(from_mysql_error(pymysql.err.DataError(errno, "x")), pyfsm.InvalidArgument)
    store.create(order, "range-1")
    for bad in (1e12, -1, float("nan"), True):
        try:
            store.enqueue(order, "range-1", delay_seconds=bad)
        except pyfsm.InvalidArgument:
            continue
        raise AssertionError(f"delay_seconds={bad!r} was accepted")
    with pytest.raises(pyfsm.InvalidArgument):  # the procedure's own answer, mapped by number
        store._rows("fsm_definition_v1", (order.name, -1))
