"""Every error number pyfsm's SQL signals maps to its own Python class."""

from __future__ import annotations

import re

import pytest

import pyfsm
from pyfsm.errors import SERVER, SIGNALLED, FsmError, from_mysql_error
from pyfsm.schema import routines
from pyfsm.schema.resources import sql_dir


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
    classes = [
        c for c in vars(pyfsm.errors).values() if isinstance(c, type) and issubclass(c, FsmError) and c is not FsmError
    ]
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
        store.gateway.call(routines.DEFINITION, (order.name, -1))


def test_refusals_of_the_dsn_have_their_own_classes() -> None:
    """A refused login and an unknown database are the DSN's errors, not outages: mapped by
    number to classes that are not DatabaseUnavailable and never retried."""
    import pymysql

    from pyfsm.errors import TRANSIENT

    for errno, cls in ((1045, pyfsm.LoginFailed), (1698, pyfsm.LoginFailed), (1049, pyfsm.UnknownDatabase)):
        err = from_mysql_error(pymysql.err.OperationalError(errno, "some text"))
        assert type(err) is cls and err.errno == errno, errno
        assert not isinstance(err, pyfsm.DatabaseUnavailable) and not err.retryable and errno not in TRANSIENT


def _refused(call, cls):  # type: ignore[no-untyped-def]
    """The error ``call`` raises (of class ``cls``), and how often pyfsm.retry called it
    when asked to retry even lost connections."""
    calls = []

    def once():  # type: ignore[no-untyped-def]
        calls.append(1)
        return call()

    with pytest.raises(cls) as info:
        pyfsm.retry(once, retry_unavailable=True, sleep=lambda _s: None)
    return info.value, len(calls)


def test_a_wrong_password_is_login_failed(server, dsn: str) -> None:  # type: ignore[no-untyped-def]
    """A real account with a wrong password: LoginFailed (1045) saying what to fix, raised
    once (no retry, no other server tried, no driver traceback chained to it); also when
    the DSN lists a server that is down before the one that refuses the login."""
    from dataclasses import replace

    from helpers.common import granted_accounts

    from pyfsm.db import connect, parse_dsn

    with granted_accounts(server, parse_dsn(dsn), ["app"], "pyfsm_pw") as accounts:
        good = accounts["app"]
        connect(good).close()  # the account and its password work
        wrong = replace(good, password=good.password + "x")
        with pyfsm.Store(wrong.dsn()) as store:
            err, calls = _refused(lambda: store.get("order", "k"), pyfsm.LoginFailed)
        assert calls == 1 and err.errno == 1045 and not isinstance(err, pyfsm.DatabaseUnavailable)
        message = str(err)
        assert f"the MySQL server at {good.host}:{good.port} refused the login" in message
        assert f"'{good.user}'@" in message and "check the user name and password in the DSN" in message
        assert "unavailable" not in message and err.__cause__ is None and err.__suppress_context__
        # a server that is down first (passed over), then the one that refuses: named
        two = wrong.with_hosts([("127.0.0.1", 1), (good.host, good.port)])
        with pytest.raises(pyfsm.LoginFailed) as info:
            connect(two)
        assert f"at {good.host}:{good.port} refused the login" in str(info.value)
        assert info.value.fields["servers"] == [f"{good.host}:{good.port}"]


def test_an_unknown_database_is_unknown_database(server) -> None:  # type: ignore[no-untyped-def]
    """A DSN naming a database the server does not have: UnknownDatabase (1049) naming it
    and `pyfsm migrate`, raised once."""
    import uuid

    name = f"pyfsm_nodb_{uuid.uuid4().hex[:10]}"
    with pyfsm.Store(server.with_database(name).dsn()) as store:
        err, calls = _refused(store.stats, pyfsm.UnknownDatabase)
    assert calls == 1 and err.errno == 1049 and not isinstance(err, pyfsm.DatabaseUnavailable)
    message = str(err)
    assert f"the MySQL server at {server.host}:{server.port} has no such database" in message
    assert name in message and "`pyfsm migrate`" in message and "unavailable" not in message
    assert err.__cause__ is None and err.__suppress_context__
