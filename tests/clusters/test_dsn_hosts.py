"""A DSN naming several servers (``mysql://u@h1:p1,h2:p2/db``), tried in order, sticky.

Against real servers only: the shared test server, ports nothing listens on, a listener
that counts the connections it is offered and hangs up at once, and (slow) two MariaDB
servers of the tests' own (tests/helpers/second_server.py), the first killed while a Store works
through both. Their databases are independent (same name, same migrated schema, same
machine defined); what is shown is where calls land, not replication.
"""

from __future__ import annotations

import socket
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pymysql
import pytest
from helpers.common import fetch, order_machine, unique
from helpers.galera_cluster import distinct_ports
from helpers.kafka_broker import free_port
from helpers.second_server import INSTALL_DB, MARIADBD, SecondServer, skip_in_the_mysql_pass

from pyfsm import DatabaseUnavailable, FsmError, InvalidArgument, Machine, Store
from pyfsm.db import Database, Settings, connect, parse_dsn
from pyfsm.errors import TRANSIENT, from_mysql_error
from pyfsm.schema.install import HEAD_REVISION, current_revision, migrate

# -- parsing ------------------------------------------------------------------------------


def test_a_list_parses_in_order_with_default_ports_and_round_trips() -> None:
    settings = parse_dsn("mysql://app:s%3Acret@db1.example:3307,DB2.example,[::1]:3308,10.0.0.4/shop?tls=true")
    assert settings.hosts == (("db1.example", 3307), ("db2.example", 3306), ("::1", 3308), ("10.0.0.4", 3306))
    assert (settings.host, settings.port) == ("db1.example", 3307)  # the first one: the configuration
    assert settings.in_use == ("db1.example", 3307) and settings.host_order() == settings.hosts
    assert settings.connect_kwargs()["host"] == "db1.example" and settings.connect_kwargs()["port"] == 3307
    assert (
        settings.dsn()
        == "mysql://app:s%3Acret@db1.example:3307,db2.example:3306,[::1]:3308,10.0.0.4:3306/shop?tls=true"
    )
    assert parse_dsn(settings.dsn()) == settings
    assert settings.with_database("other").hosts == settings.hosts

    single = parse_dsn("mysql://u@[::1]/d")
    assert single.hosts == (("::1", 3306),) and single.more_hosts == ()
    assert single.dsn() == "mysql://u@[::1]:3306/d" and parse_dsn(single.dsn()) == single
    assert parse_dsn("mysql://u@h/d") == Settings(host="h", user="u", database="d")

    moved = settings.with_hosts([("a", 1), ("b", 2)])
    assert moved.hosts == (("a", 1), ("b", 2)) and moved.dsn().startswith("mysql://app:s%3Acret@a:1,b:2/shop?")


@pytest.mark.parametrize(
    ("dsn", "names"),
    [
        ("mysql://u@h1,,h2/d", "empty entry"),
        ("mysql://u@h1,/d", "empty entry"),
        ("mysql://u@,h1/d", "empty entry"),
        ("mysql://u@h1:3306,h2:x/d", "'h2:x'"),
        ("mysql://u@h1:3306,h2:0/d", "'h2:0'"),
        ("mysql://u@h1,h2:65536/d", "'h2:65536'"),
        ("mysql://u@h1,h2:-1/d", "'h2:-1'"),
        ("mysql://u@h1,h 2/d", "'h 2'"),
        ("mysql://u@h1,h2;drop/d", "'h2;drop'"),
        ("mysql://u@h1,::1:3306/d", "brackets"),
        ("mysql://u@h1,[::1/d", "IPv6"),
        ("mysql://u@h1,[not-v6]:3306/d", "IPv6"),
        ("mysql://u@h1,[::1]3306/d", "'[::1]3306'"),
        ("mysql://u@h1:3306,h1/d", "listed twice"),
    ],
)
def test_a_bad_server_in_the_list_is_refused_naming_it(dsn: str, names: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        parse_dsn(dsn)
    assert names in str(caught.value), str(caught.value)


# -- the shared server behind dead ones -------------------------------------------------------


@pytest.fixture
def counting() -> Iterator[tuple[int, list[int]]]:
    """A port that accepts connections, counts them and hangs up at once (a server that is
    going away): each attempt on it costs a connection we can count, nothing more."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    offered: list[int] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            offered.append(1)
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    yield listener.getsockname()[1], offered
    listener.close()


Host = tuple[str, int]


def listed(dsn: str, before: Sequence[Host] = (), after: Sequence[Host] = ()) -> str:
    """``dsn`` with more servers before and after its own."""
    settings = parse_dsn(dsn)
    return settings.with_hosts([*before, *settings.hosts, *after]).dsn()


def nothing_listens() -> Host:
    return ("127.0.0.1", free_port())


def port_in_use(conn: Any) -> int:
    with conn.cursor() as cur:
        cur.execute("SELECT @@port")
        return int(cur.fetchone()[0])


def test_a_closed_first_port_is_passed_over(dsn: str) -> None:
    live = parse_dsn(dsn)
    machine = order_machine()
    with Store(listed(dsn, [nothing_listens()])) as store:
        assert store.settings.hosts[1] == (live.host, live.port)
        store.define(machine)
        key = unique("k")
        assert store.create(machine, key).to_state == "new"
        assert store.send(machine, key, "pay").to_state == "paid"
        assert store.get(machine, key).version == 2
        assert store.settings.in_use == (live.host, live.port)
        assert store.settings.host_order()[0] == (live.host, live.port)  # sticky: the live one first


def test_migrations_go_through_the_list(make_database) -> None:  # type: ignore[no-untyped-def]
    """`pyfsm migrate` (Alembic's connection too) on a fresh database and from an older
    revision, with the first listed server down."""
    for revision in ("head", "0011"):
        settings = make_database("pyfsm_hosts_migrate")
        listed_settings = parse_dsn(listed(settings.dsn(), [nothing_listens()]))
        migrate(listed_settings, revision)
        migrate(listed_settings)
        conn = connect(listed_settings)
        try:
            assert current_revision(conn) == HEAD_REVISION
        finally:
            conn.close()


def test_a_dead_first_server_costs_one_attempt_not_one_per_connection(
    dsn: str, counting: tuple[int, list[int]]
) -> None:
    port, offered = counting
    machine = order_machine()
    with Store(listed(dsn, [("127.0.0.1", port)]), pool_size=6) as store:
        store.define(machine)
        assert len(offered) == 1  # the first connection tried it, then the live server
        keys = [unique("k") for _ in range(12)]

        def work(key: str) -> None:
            store.create(machine, key)
            store.send(machine, key, "pay")

        threads = [threading.Thread(target=work, args=(k,)) for k in keys]
        for t in threads:  # 12 threads on a pool of 6: six connections at once
            t.start()
        for t in threads:
            t.join(30)
        assert [store.get(machine, k).state for k in keys] == ["paid"] * len(keys)
        conns = [connect(store.settings, timeouts=True) for _ in range(3)]  # unpooled (leases, DDL) too
        try:
            assert {port_in_use(c) for c in conns} == {parse_dsn(dsn).port}
        finally:
            for c in conns:
                c.close()
        assert len(offered) == 1, len(offered)


def test_a_server_after_a_live_one_is_never_contacted(dsn: str, counting: tuple[int, list[int]]) -> None:
    port, offered = counting
    machine = order_machine(uses_global_lock=True)
    with Store(listed(dsn, after=[("127.0.0.1", port), nothing_listens()]), pool_size=4) as store:
        store.define(machine)
        key = unique("k")
        store.create(machine, key, lookup_key=unique("acct"))
        with store.lock(machine, key) as lease:
            assert lease.send("pay").to_state == "paid"
        connect(store.settings).close()
    assert offered == []


def test_a_lease_connects_through_the_list(dsn: str) -> None:
    machine = order_machine(uses_global_lock=True)
    with Store(listed(dsn, [nothing_listens()])) as store:
        store.define(machine)
        key = unique("k")
        store.create(machine, key, lookup_key=unique("acct"))
        store.settings.host_memory.forget(store.settings.hosts)  # the lease's connection finds the way itself
        with store.lock(machine, key) as lease:
            assert [h.owner for h in store.locks(lookup_key=lease.lookup_key)] == [lease.owner]
            assert lease.send("pay").to_state == "paid"
        assert store.locks(lookup_key=lease.lookup_key) == []


def test_no_server_answering_names_every_one_tried() -> None:
    ports = [free_port(), free_port()]
    with Store(f"mysql://root@127.0.0.1:{ports[0]},127.0.0.1:{ports[1]}/x?connect_timeout=1") as store:
        store.gateway._schema_ok = True  # straight to a call
        with pytest.raises(DatabaseUnavailable) as caught:
            store.get("m", "k")
        with pytest.raises(DatabaseUnavailable) as direct:
            connect(store.settings)
    for err in (caught.value, direct.value):
        message = str(err)
        assert message.startswith(f"none of the MySQL servers 127.0.0.1:{ports[0]}, 127.0.0.1:{ports[1]} answered"), (
            message
        )
        assert err.errno == 2003 and err.retryable


def test_galera_not_ready_1047_is_an_outage_worth_retrying() -> None:
    err = from_mysql_error(pymysql.err.OperationalError(1047, "WSREP has not yet prepared node for application use"))
    assert isinstance(err, DatabaseUnavailable) and err.errno == 1047 and err.retryable and 1047 in TRANSIENT


# -- two servers of the tests' own, the first killed ------------------------------------------


def needs_servers() -> None:
    if INSTALL_DB is None or MARIADBD is None:
        pytest.skip("these tests need mariadb-install-db and mariadbd on this machine")


def same_database(servers: list[SecondServer], machine: Machine) -> str:
    """One database name on every server, migrated, with ``machine`` defined."""
    name = f"pyfsm_hosts_{unique('db')}"
    for server in servers:
        conn = pymysql.connect(**server.settings.connect_kwargs(database=False))
        try:
            conn.cursor().execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
        finally:
            conn.close()
        with Store(server.settings.with_database(name).dsn()) as store:
            store.migrate()
            store.define(machine)
    return name


@pytest.fixture(scope="module")
def pair() -> Iterator[list[SecondServer]]:
    skip_in_the_mysql_pass("the tests of two servers of the tests' own")
    needs_servers()
    servers = [SecondServer(Path(tempfile.mkdtemp(prefix="pyfsm-hosts-"))) for _ in range(2)]
    try:
        for server in servers:
            server.install()
            server.start()
        yield servers
    finally:
        for server in servers:
            server.close()


def rows_on(server: SecondServer, database: str, sql: str, args: Any = None) -> list[dict[str, Any]]:
    conn = pymysql.connect(**server.settings.with_database(database).connect_kwargs())
    try:
        return fetch(conn, sql, args)
    finally:
        conn.close()


def until_acknowledged(call: Any, seconds: float = 10.0) -> tuple[Any, float]:
    """Repeat ``call`` (carrying a request id) on DatabaseUnavailable, as an application
    should; its result and the seconds it took."""
    began = time.monotonic()
    while True:
        try:
            return call(), time.monotonic() - began
        except DatabaseUnavailable:
            if time.monotonic() - began > seconds:
                raise
            time.sleep(0.05)


def test_calls_move_to_the_next_server_when_the_one_in_use_dies(pair: list[SecondServer]) -> None:
    first, second = pair
    for server in pair:
        if not server.running:
            server.start()
    machine = order_machine()
    name = same_database(pair, machine)
    table = f"fsm_{machine.name}"
    dsn = f"mysql://root@127.0.0.1:{first.port},127.0.0.1:{second.port}/{name}?connect_timeout=2"
    with Store(dsn, pool_size=4) as store, Store(second.settings.with_database(name).dsn()) as on_second:
        store.create(machine, "before")
        assert [r["instance_key"] for r in rows_on(first, name, f"SELECT instance_key FROM `{table}`")] == ["before"]
        on_second.create(machine, "held")  # on the second server too: a replay there would show
        store.create(machine, "held")

        # A write without request id, its connection killed mid-call: its outcome is unknown,
        # so it is not made again on the surviving server.
        holder = pymysql.connect(**{**first.settings.with_database(name).connect_kwargs(), "autocommit": False})
        holder.cursor().execute(f"SELECT * FROM `{table}` WHERE instance_key = 'held' FOR UPDATE")
        outcome: list[BaseException | object] = []
        sender = threading.Thread(target=lambda: outcome.append(_outcome(store.send, machine, "held", "pay")))
        sender.start()
        deadline = time.monotonic() + 10
        while not rows_on(
            first, name, f"SELECT id FROM information_schema.processlist WHERE info LIKE 'UPDATE `{table}`%held%'"
        ):  # waiting for the row
            assert time.monotonic() < deadline and sender.is_alive(), f"the send never waited for the row: {outcome}"
            time.sleep(0.05)
        first.kill()
        sender.join(30)
        holder.close()
        [err] = outcome
        assert isinstance(err, DatabaseUnavailable) and err.errno in (0, 2006, 2013), repr(err)
        assert f"127.0.0.1:{first.port}" in str(err), str(err)
        held = store.get(machine, "held")  # now read on the second server
        assert (held.state, held.version) == ("new", 1)
        assert [h.event for h in store.history(machine, "held")] == [None]

        # With request ids, calls land on the second server within a few seconds.
        created, took = until_acknowledged(lambda: store.create(machine, "after", request_id="after:0"))
        assert took < 5.0 and created.to_state == "new", took
        sent, took = until_acknowledged(lambda: store.send(machine, "after", "pay", request_id="after:1"))
        assert took < 5.0 and sent.to_state == "paid" and not sent.replayed
        assert store.settings.in_use == ("127.0.0.1", second.port)
        assert rows_on(second, name, f"SELECT current_state FROM `{table}` WHERE instance_key = 'after'") == [
            {"current_state": "paid"}
        ]

        # Sticky: the first server back does not take new connections from the second ...
        first.start()
        conn = connect(store.settings, timeouts=True)
        assert port_in_use(conn) == second.port
        conn.close()
        # ... until the second fails: then the list is tried from its start again.
        second.kill()
        sent, took = until_acknowledged(lambda: store.send(machine, "before", "pay", request_id="before:1"))
        assert took < 5.0 and sent.to_state == "paid"
        assert store.settings.in_use == ("127.0.0.1", first.port)
        second.start()


def _outcome(call: Any, *args: Any) -> BaseException | object:
    try:
        return call(*args)
    except BaseException as exc:
        return exc


# -- a Galera node that is not ready (1047) ----------------------------------------------------

PROVIDER = "/usr/lib/galera/libgalera_smm.so"


def not_ready(node: SecondServer) -> bool | None:
    """Whether a Galera node says it is not ready for use (None: it did not answer)."""
    try:
        conn = pymysql.connect(**node.settings.connect_kwargs(database=False))
        try:
            return bool(fetch(conn, "SHOW STATUS LIKE 'wsrep_ready'")[0]["Value"] == "OFF")
        finally:
            conn.close()
    except pymysql.err.MySQLError:
        return None


def _refused_with(node: SecondServer, statement: str, timeout: float = 30.0) -> int:
    """The error number a new connection gets for ``statement`` once the node has settled:
    while it leaves its cluster it also drops connections (2013), which is not the answer."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            probe = pymysql.connect(**node.settings.connect_kwargs(database=False))
            try:
                probe.cursor().execute(statement)
            finally:
                probe.close()
        except pymysql.err.OperationalError as exc:
            if exc.args[0] not in (2006, 2013) or time.monotonic() > deadline:
                return int(exc.args[0])
        assert time.monotonic() < deadline, f"{statement} was not refused"
        time.sleep(0.1)


def test_a_galera_node_not_ready_is_passed_over(dsn: str) -> None:
    """A one-node cluster cut off from its primary component answers the handshake and SET
    but refuses other statements with 1047: new connections go on to the next server."""
    needs_servers()
    if not Path(PROVIDER).exists():
        pytest.skip(f"needs the Galera library ({PROVIDER}; Debian: galera-4)")
    node = SecondServer(
        Path(tempfile.mkdtemp(prefix="pyfsm-1047-")),
        (
            "--wsrep-on=ON",
            f"--wsrep-provider={PROVIDER}",
            "--wsrep-cluster-address=gcomm://",
            "--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:{};ist.recv_addr=127.0.0.1:{}".format(
                *distinct_ports(2)
            ),
            "--wsrep-node-address=127.0.0.1",
            "--binlog-format=ROW",
            "--innodb-autoinc-lock-mode=2",
        ),
    )
    live = parse_dsn(dsn)
    try:
        node.install()
        node.start()
        # the node answers before its one-node cluster is primary (1047 until then): wait for it
        deadline = time.monotonic() + 30
        while not_ready(node) is not False:
            assert time.monotonic() < deadline, "the new one-node cluster never became ready"
            time.sleep(0.1)
        admin = pymysql.connect(**node.settings.connect_kwargs(database=False))
        admin.cursor().execute(f"CREATE DATABASE `{live.database}`")
        # leave the one-node cluster for one that does not exist: non-primary, not ready (the
        # statement itself waits about 30 s for that cluster, so it is left waiting)
        leave = f"SET GLOBAL wsrep_cluster_address = 'gcomm://127.0.0.1:{free_port()}'"
        threading.Thread(target=_outcome, args=(admin.cursor().execute, leave), daemon=True).start()
        deadline = time.monotonic() + 30
        while not_ready(node) is not True:  # (the node closes its client connections as it leaves)
            assert time.monotonic() < deadline, "the node stayed ready"
            time.sleep(0.1)
        assert _refused_with(node, "DO 0") == 1047

        machine = order_machine()
        with Store(listed(dsn, [("127.0.0.1", node.port)])) as store:
            store.define(machine)
            assert store.create(machine, unique("k")).to_state == "new"
            assert store.settings.in_use == (live.host, live.port)
            conn = connect(store.settings)
            assert port_in_use(conn) == live.port
            conn.close()
    finally:
        node.close()


def test_a_pooled_connection_whose_node_is_no_longer_the_writer_is_never_handed_out(dsn: str) -> None:
    """The checkout re-check (db._is_alive): a connection marked as a Galera node's whose node
    does not say wsrep_local_index 0 any more (a plain MariaDB never does) is closed, also
    when no replacement can be made (here: the account is locked meanwhile), where DBUtils
    would otherwise hand the old connection out again."""
    settings = parse_dsn(dsn)
    user = unique("pyfsm_writer")
    root = pymysql.connect(**settings.connect_kwargs(database=False))
    try:
        root.cursor().execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'Pw-writer-1'")
        root.cursor().execute(f"GRANT SELECT ON `{settings.database}`.* TO '{user}'@'%'")
        database = Database(replace(settings, user=user, password="Pw-writer-1"), pool_size=1)
        try:
            with database.connection() as pooled:
                raw = pooled._con._con
                first = fetch(raw, "SELECT CONNECTION_ID() AS id")[0]["id"]
                raw.pyfsm_writer_checked = time.monotonic() - 60  # as if opened on a writer node long ago
            root.cursor().execute(f"ALTER USER '{user}'@'%' ACCOUNT LOCK")  # no new connection can be made
            try:
                with database.connection() as pooled:
                    second = fetch(pooled._con._con, "SELECT CONNECTION_ID() AS id")[0]["id"]
            except (FsmError, pymysql.err.MySQLError):
                second = None  # refused: fine, as long as the old connection is not used
            assert second != first and not raw.open
        finally:
            database.close()
    finally:
        root.cursor().execute(f"DROP USER IF EXISTS '{user}'@'%'")
        root.close()
