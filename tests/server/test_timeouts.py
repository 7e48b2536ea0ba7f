"""Read and write timeouts, argument checks of Store(), and leases that outlive their connection.

The fault-proxy versions (stalls, cuts, partitions) are in test_fault_proxy.py; these use a
silent listener and the real server (a query longer than the read timeout, KILL).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest
from helpers.common import fetch, order_machine, unique

from pyfsm import DatabaseUnavailable, InvalidArgument, LockLost, LockNotAcquired, Store
from pyfsm.db import READ_TIMEOUT, WRITE_TIMEOUT, Settings, connect, parse_dsn

# -- settings -----------------------------------------------------------------------------


def test_timeouts_have_defaults_dsn_options_and_store_arguments() -> None:
    plain = parse_dsn("mysql://u@h/d")
    assert (plain.read_timeout, plain.write_timeout) == (READ_TIMEOUT, WRITE_TIMEOUT) == (300.0, 60.0)
    kwargs = plain.connect_kwargs()
    assert (kwargs["read_timeout"], kwargs["write_timeout"]) == (300.0, 60.0)
    assert "read_timeout" not in plain.connect_kwargs(timeouts=False)  # DDL: unbounded
    assert plain.dsn() == "mysql://u@h:3306/d"
    given = parse_dsn("mysql://u@h/d?read_timeout=2.5&write_timeout=7")
    assert (given.read_timeout, given.write_timeout) == (2.5, 7.0)
    assert parse_dsn(given.dsn()) == given
    with Store("mysql://u@h/d?read_timeout=2.5", read_timeout=9, pool_size=1) as store:
        assert (store.settings.read_timeout, store.settings.write_timeout) == (9.0, 60.0)  # the argument wins
    with Store("mysql://u@h/d?read_timeout=2.5", pool_size=1) as store:
        assert store.settings.read_timeout == 2.5


@pytest.mark.parametrize(
    "option",
    [
        "read_timeout=0",
        "read_timeout=-1",
        "read_timeout=nan",
        "read_timeout=inf",
        "write_timeout=abc",
        "write_timeout=1e9",
        "connect_timeout=0",
        "connect_timeout=nan",
    ],
)
def test_bad_timeouts_in_a_dsn_are_refused(option: str) -> None:
    with pytest.raises(InvalidArgument, match=option.split("=")[0]):
        parse_dsn(f"mysql://u@h/d?{option}")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"read_timeout": 0},
        {"read_timeout": float("nan")},
        {"write_timeout": True},
        {"write_timeout": "5"},
        {"pool_size": 0},
        {"pool_size": 2.0},
    ],
)
def test_bad_store_arguments_are_refused_before_anything_connects(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument):
        Store("mysql://u@127.0.0.1:1/d", **kwargs)


# -- a server that accepts and says nothing -----------------------------------------------


@pytest.fixture
def silent() -> Iterator[tuple[int, list[socket.socket]]]:
    """A listener that accepts connections and never sends the server's greeting."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield listener.getsockname()[1], accepted
    listener.close()
    for conn in accepted:
        conn.close()


def test_a_server_that_never_greets_fails_after_one_read_timeout(silent: tuple[int, list[socket.socket]]) -> None:
    port, accepted = silent
    machine = order_machine()
    with Store(f"mysql://root@127.0.0.1:{port}/x?connect_timeout=1&read_timeout=0.3", pool_size=1) as store:
        store.gateway._schema_ok = True  # straight to a write
        started = time.monotonic()
        with pytest.raises(DatabaseUnavailable) as info:
            store.send(machine.name, "k", "pay")
        elapsed = time.monotonic() - started
    assert 0.25 <= elapsed < 1.0, elapsed  # one bound: a timed-out handshake is not retried
    assert len(accepted) == 1
    err = info.value
    assert err.errno == 2013 and err.retryable and err.fields["timed_out"], repr(err)
    assert "did not answer within 0.3 s" in str(err) and "nothing was sent" in str(err) and str(port) in str(err)


# -- the real server: a call longer than the bound ----------------------------------------


def connection_id(store: Store) -> int:
    return int(
        store.gateway.primary.run("SELECT CONNECTION_ID() AS id", (), retry_connection=True, writes=False)[0]["id"]
    )


@pytest.mark.parametrize("writes", [False, True])
def test_a_call_longer_than_the_read_timeout_fails_once_and_its_connection_is_replaced(dsn: str, writes: bool) -> None:
    with Store(dsn, pool_size=1, read_timeout=0.3) as store:
        before = connection_id(store)
        assert (
            store.gateway.primary.run("DO SLEEP(0.1)", (), retry_connection=True, writes=writes) == []
        )  # within the bound
        started = time.monotonic()
        with pytest.raises(DatabaseUnavailable) as info:
            # retry_connection=True: a lost connection would be retried, a timeout is not
            store.gateway.primary.run("DO SLEEP(2)", (), retry_connection=True, writes=writes)
        assert time.monotonic() - started < 1.0
        err = info.value
        assert err.errno == 2013 and err.retryable and err.fields["timed_out"], repr(err)
        assert "no reply within 0.3 s" in str(err)
        assert ("outcome is unknown" in str(err)) is writes
        after = connection_id(store)
        assert after != before  # the connection that timed out went back closed and was replaced


def test_ddl_connections_have_no_read_timeout(dsn: str) -> None:
    settings = parse_dsn(dsn).with_timeouts(read_timeout=0.2)
    conn = connect(settings)  # DDL and tools: a migration's ALTER TABLE takes as long as it takes
    try:
        assert fetch(conn, "SELECT SLEEP(0.4) AS s") == [{"s": 0}]
    finally:
        conn.close()
    bounded = connect(settings, timeouts=True)
    try:
        with pytest.raises(pymysql.err.OperationalError):
            fetch(bounded, "SELECT SLEEP(0.4) AS s")
    finally:
        bounded.close()


# -- leases -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def locked(store: Store) -> str:
    machine = order_machine(uses_global_lock=True)
    store.define(machine)
    return machine.name


def kill(raw: pymysql.connections.Connection, lease: Any) -> None:
    """KILL the lease's connection from another one (the server closes it; the client learns later)."""
    fetch(raw, f"KILL CONNECTION {int(lease._conn.thread_id())}")


def test_a_lease_runs_out_on_its_own_clock_and_stays_lost(store: Store, locked: str) -> None:
    key = unique("o")
    store.create(locked, key, lookup_key=unique("acct"))
    lease = store.lock(locked, key, lease_seconds=0.3, heartbeat=False)
    try:
        assert not lease.lost
        lease.renew()
        assert not lease.lost
        time.sleep(0.35)  # nobody took it over, but the holder can no longer count on it
        assert lease.lost
        with pytest.raises(LockLost):
            lease.renew()
        with pytest.raises(LockLost):
            lease.send("pay")
        assert lease.lost
    finally:
        assert lease.release() is False


def test_a_killed_lease_connection_is_replaced_by_the_heartbeat(
    store: Store, locked: str, raw: pymysql.connections.Connection
) -> None:
    key = unique("o")
    store.create(locked, key, lookup_key=unique("acct"))
    with store.lock(locked, key, lease_seconds=0.6) as lease:
        old = lease._conn
        kill(raw, lease)
        deadline = time.monotonic() + 1.5  # past two expiries: renewals on a new connection keep it
        while time.monotonic() < deadline:
            with pytest.raises(LockNotAcquired):
                store.lock(locked, key, attempts=1, heartbeat=False)
            assert not lease.lost
            time.sleep(0.05)
        assert lease._conn is not old
        assert lease.send("pay").to_state == "paid"
    assert store.locks(lookup_key=store.get(locked, key).lookup_key) == []


def test_a_lease_without_heartbeat_reconnects_on_its_next_use(
    store: Store, locked: str, raw: pymysql.connections.Connection
) -> None:
    key = unique("o")
    store.create(locked, key, lookup_key=unique("acct"))
    lease = store.lock(locked, key, lease_seconds=30, heartbeat=False)
    try:
        kill(raw, lease)
        with pytest.raises(DatabaseUnavailable):  # the client learns of the kill on this call
            lease.send("pay")
        assert store.get(locked, key).state == "new"
        assert not lease.lost
        assert lease.send("pay").to_state == "paid"  # on a new connection, the locks bound to it
        kill(raw, lease)
        with pytest.raises(DatabaseUnavailable):
            lease.renew()
        lease.renew()  # a new connection again
        assert [h.connection_id for h in store.locks(lookup_key=store.get(locked, key).lookup_key)] == [
            lease._conn.thread_id()
        ]
    finally:
        assert lease.release() is True
    assert store.locks(lookup_key=store.get(locked, key).lookup_key) == []


def test_settings_of_another_process_keep_their_timeouts() -> None:
    settings = Settings(read_timeout=12.0)
    assert parse_dsn(settings.dsn()).read_timeout == 12.0
