"""Lost connections: reads and request-id writes recover, other writes are never re-run."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.common import explain

from pyfsm import DatabaseUnavailable, InvalidData, Machine, Store


def kill_pooled_connection(store: Store, raw: Any) -> None:
    """KILL the server side of the (only) pooled connection; the client does not know yet."""
    with store.gateway.primary.connection() as conn:
        cur = conn.cursor()
        cur.execute("SELECT CONNECTION_ID()")
        (conn_id,) = cur.fetchone()
    raw.cursor().execute(f"KILL CONNECTION {int(conn_id)}")


@pytest.fixture
def single(dsn: str) -> Any:
    with Store(dsn, pool_size=1) as store:
        yield store


def test_read_is_retried_on_a_new_connection(single: Store, order: Machine, raw: Any) -> None:
    single.create(order, "f1")
    kill_pooled_connection(single, raw)
    assert single.get(order, "f1").state == "new"


def test_write_without_request_id_is_not_retried(single: Store, order: Machine, raw: Any) -> None:
    single.create(order, "f2")
    kill_pooled_connection(single, raw)
    with pytest.raises(DatabaseUnavailable) as info:
        single.send(order, "f2", "pay")
    assert info.value.errno in (0, 2006, 2013)
    assert single.get(order, "f2").state == "new"  # the pool replaced the dead connection
    assert single.send(order, "f2", "pay").to_state == "paid"
    assert len(single.history(order, "f2")) == 2


def test_write_with_request_id_is_retried_once_applied(single: Store, order: Machine, raw: Any) -> None:
    single.create(order, "f3")
    kill_pooled_connection(single, raw)
    result = single.send(order, "f3", "pay", request_id="f3-pay")
    assert result.to_state == "paid"
    assert [h.request_id for h in single.history(order, "f3")] == [None, "f3-pay"]


def test_unreachable_server_is_reported(order: Machine) -> None:
    with Store("mysql://root@127.0.0.1:1/nothing?connect_timeout=1") as store:
        with pytest.raises(DatabaseUnavailable) as info:
            store.get(order, "x")
        assert info.value.errno == 2003


def test_bad_data_fails_before_any_sql_runs(order: Machine) -> None:
    """Against a server that does not exist: validation must win over the connection error."""
    with Store("mysql://root@127.0.0.1:1/nothing?connect_timeout=1") as store:
        with pytest.raises(InvalidData):
            store.send(order, "x", "pay", data={"s": {1, 2}})


def test_in_state_and_counts_use_the_state_index(store: Store, order: Machine, raw: Any) -> None:
    # 'paid' a minority, as in a real table: MySQL's optimizer rightly scans the primary key
    # in order when every row would match
    for i in range(100):
        store.create(order, f"new{i}")
    for i in range(20):
        store.send(order, f"ix{i}", "pay")
    # by name: MySQL 8 has an extra partitions column
    plan = explain(
        raw, f"SELECT * FROM `fsm_{order.name}` WHERE current_state = 'paid' AND id > 0 ORDER BY id LIMIT 10"
    )
    assert len(plan) == 1 and plan[0]["key"] == f"fsm_{order.name}_state", plan
    plan = explain(raw, f"SELECT current_state, COUNT(*) FROM `fsm_{order.name}` GROUP BY current_state")
    assert len(plan) == 1 and plan[0]["key"] == f"fsm_{order.name}_state" and "Using index" in str(plan[0]["Extra"]), (
        plan
    )


def test_idle_connection_closed_by_the_server_is_replaced(
    dsn: str, order: Machine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """wait_timeout closes idle connections server-side; the next write must not fail for it."""
    import time

    import pyfsm.db.pool

    monkeypatch.setattr(pyfsm.db.pool, "IDLE_PING_SECONDS", 0.5)
    with Store(dsn, pool_size=1) as store:
        store.create(order, "idle")
        with store.gateway.primary.connection() as conn:
            conn.cursor().execute("SET SESSION wait_timeout = 1")
        time.sleep(2.2)  # the server closes the connection after 1 s idle
        assert store.send(order, "idle", "pay").to_state == "paid"  # a write, no request id


def test_refused_connections_are_retried_even_for_writes(order: Machine) -> None:
    """Nothing reaches a server that drops every connection, so retrying cannot apply twice."""
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted = []

    def drop_all() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            accepted.append(1)
            conn.close()

    threading.Thread(target=drop_all, daemon=True).start()
    dsn = f"mysql://root@127.0.0.1:{listener.getsockname()[1]}/x?connect_timeout=1"
    try:
        with Store(dsn) as store:
            store.gateway._schema_ok = True  # skip the schema check (a read, retried on its own): reach the write
            with pytest.raises(DatabaseUnavailable):
                store.send(order, "k", "pay")
        assert len(accepted) == 5  # the write: the first try and four retries
        with Store(dsn) as store, pytest.raises(DatabaseUnavailable):
            store.get(order, "k")
        assert len(accepted) == 10  # the read (its schema check) likewise
    finally:
        listener.close()


def test_tls_verifies_the_server_unless_told_not_to() -> None:
    import ssl

    from pyfsm.db import parse_dsn

    ctx = parse_dsn("mysql://u@db.example:3306/app?tls=true").connect_kwargs()["ssl"]
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    lax = parse_dsn("mysql://u@db.example:3306/app?tls=true&tls_verify=false").connect_kwargs()["ssl"]
    assert lax.verify_mode == ssl.CERT_NONE and not lax.check_hostname
    assert parse_dsn("mysql://u@db.example/app").connect_kwargs()["ssl_disabled"] is True
    round_trip = parse_dsn("mysql://u%40x:p%3Aw@h:1/d?tls=true&tls_verify=false")
    assert parse_dsn(round_trip.dsn()) == round_trip
