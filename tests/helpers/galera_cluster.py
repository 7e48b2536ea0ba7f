"""A three-node MariaDB Galera cluster of the tests' own, on one machine.

Each node is a mariadbd (tests/helpers/second_server.py) with its own data directory, port and
socket; group communication (gcomm) and incremental state transfer listen on free ports of
127.0.0.1. The first node bootstraps the cluster from a fresh data directory; the others
start empty and are filled by a state transfer (rsync, whose receiving daemon runs as
``nobody``: their data directories are made its). The ``galera`` fixture skips, saying why,
where the Galera library (Debian: galera-4) is not installed; .ci/run installs it.
"""

from __future__ import annotations

import os
import pwd
import socket
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import pymysql
import pytest

from helpers.second_server import INSTALL_DB, MARIADBD, SecondServer, shared_server_flavour
from pyfsm.db import Settings

PROVIDER = "/usr/lib/galera/libgalera_smm.so"
NODES = 3


@dataclass
class GaleraCluster:
    nodes: list[SecondServer] = field(default_factory=list)
    gcomm: list[int] = field(default_factory=list)

    def database(self, prefix: str = "pyfsm_galera") -> list[Settings]:
        """A new database, created through the first node; its settings on every node, each
        writing through that node alone (``galera_writes=any``: the tests that address one
        node on purpose; ``writer_list`` gives what applications use)."""
        name = self.nodes[0].create_database(prefix).database
        return [replace(node.settings.with_database(name), galera_writes="any") for node in self.nodes]

    def writer_index(self) -> int:
        """The index of the writer node: the one Galera lists first (wsrep_local_index 0)."""
        for index, node in enumerate(self.nodes):
            if node.running and self.status(node, "wsrep_local_index") == "0":
                return index
        raise AssertionError("no running node has wsrep_local_index 0")

    def status(self, node: SecondServer, name: str) -> str:
        """A status variable of a node; "" while the node does not answer (a joiner may drop
        connections while its state transfer runs)."""
        try:
            conn = pymysql.connect(**node.settings.connect_kwargs(database=False))
        except pymysql.err.MySQLError:
            return ""
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW STATUS LIKE %s", (name,))
                row = cur.fetchone()
                return "" if row is None else str(row[1])
        except pymysql.err.MySQLError:
            return ""
        finally:
            conn.close()

    def restart(self, index: int, timeout: float = 120.0) -> float:
        """Start a node that was stopped or killed, as a joiner of the running nodes; the seconds
        until the cluster is synced again.

        The first node bootstrapped the cluster: it must not do so again (that would start a
        second cluster), so it rejoins through the others' addresses like any node. It is
        filled by a state transfer (incremental, or rsync: whose daemon writes as ``nobody``,
        so its data directory is made nobody's as the joiners' were).
        """
        began = time.monotonic()
        node = self.nodes[index]
        peers = ",".join(f"127.0.0.1:{p}" for p in self.gcomm)
        node.options = tuple(
            f"--wsrep-cluster-address=gcomm://{peers}" if o.startswith("--wsrep-cluster-address=") else o
            for o in node.options
        )
        nobody = pwd.getpwnam("nobody")
        for path in (node.datadir, *node.datadir.rglob("*")):
            os.chown(path, nobody.pw_uid, nobody.pw_gid)
        os.chmod(node.base, 0o755)  # noqa: S103  (nobody must reach the data directory)
        node.start(timeout=timeout)
        self.wait_synced(timeout)
        return time.monotonic() - began

    def wait_synced(self, timeout: float = 60.0) -> None:
        """Until every running node says Synced in a cluster of all the running nodes."""
        deadline = time.monotonic() + timeout
        running = [n for n in self.nodes if n.running]
        while True:
            states = [
                (self.status(n, "wsrep_local_state_comment"), self.status(n, "wsrep_cluster_size")) for n in running
            ]
            if all(s == ("Synced", str(len(running))) for s in states):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the cluster did not settle within {timeout} s: {states}")
            time.sleep(0.2)


def _options(index: int, gcomm: list[int], ist: list[int], sst: list[int]) -> tuple[str, ...]:
    peers = ",".join(f"127.0.0.1:{p}" for p in gcomm)
    return (
        "--wsrep-on=ON",
        f"--wsrep-provider={PROVIDER}",
        "--wsrep-cluster-name=pyfsm_test",
        f"--wsrep-cluster-address=gcomm://{'' if index == 0 else peers}",
        "--wsrep-node-address=127.0.0.1",
        f"--wsrep-node-name=node{index}",
        f"--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:{gcomm[index]};"
        f"ist.recv_addr=127.0.0.1:{ist[index]};gcache.size=64M",
        "--wsrep-sst-method=rsync",
        f"--wsrep-sst-receive-address=127.0.0.1:{sst[index]}",
        "--binlog-format=ROW",
        "--innodb-autoinc-lock-mode=2",
        "--log-bin=node-bin",
        f"--server-id={index + 1}",
        "--log-slave-updates=ON",
        # a connection served by a cached thread that a conflicting write set had aborted got
        # 1213 on its first statement (SET NAMES) on MariaDB 10.11, and pyfsm's pool a closed
        # connection (2006); without the thread cache, neither (docs/scaling.md)
        "--thread-cache-size=0",
    )


def distinct_ports(count: int) -> list[int]:
    """``count`` free ports of 127.0.0.1, all different: each is held open until all are
    found (ports found one at a time may repeat, and did: two listeners of a node clashed)."""
    held: list[socket.socket] = []
    try:
        while len(held) < count:
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            held.append(sock)
        return [sock.getsockname()[1] for sock in held]
    finally:
        for sock in held:
            sock.close()


@pytest.fixture(scope="session")
def galera() -> Iterator[GaleraCluster]:
    if shared_server_flavour() == "mysql":
        pytest.skip(
            "Galera is MariaDB's: the Galera tests run in the MariaDB pass (PYFSM_TEST_DSN a MariaDB "
            "server), not where PYFSM_TEST_DSN is MySQL"
        )
    if not os.path.isfile(PROVIDER):
        pytest.skip(f"the Galera tests need the Galera library ({PROVIDER}: apt-get install galera-4)")
    if INSTALL_DB is None or MARIADBD is None:
        pytest.skip("the Galera tests need mariadb-install-db and mariadbd on this machine")
    ports = distinct_ports(4 * NODES)
    gcomm, ist, sst, mysql = (ports[k * NODES : (k + 1) * NODES] for k in range(4))
    nodes = [
        SecondServer(Path(tempfile.mkdtemp(prefix=f"pyfsm-galera{n}-")), _options(n, gcomm, ist, sst))
        for n in range(NODES)
    ]
    for node, port in zip(nodes, mysql, strict=True):
        node.port = port  # one of the distinct ones, not a port of its own choosing
    cluster = GaleraCluster(nodes, gcomm)
    nobody = pwd.getpwnam("nobody")
    try:
        for index, node in enumerate(cluster.nodes):
            if index == 0:
                node.install()
            else:  # empty: filled by the state transfer, which rsync's daemon writes as nobody
                node.datadir.mkdir()
                os.chmod(node.base, 0o755)  # noqa: S103  (nobody must reach the data directory)
                os.chown(node.datadir, nobody.pw_uid, nobody.pw_gid)
            node.start(timeout=120)
        cluster.wait_synced()
        yield cluster
    finally:
        if os.environ.get("PYFSM_GALERA_LOGS"):  # to see what the nodes said: copy their logs there
            for n, node in enumerate(cluster.nodes):
                if node.log.exists():
                    Path(os.environ["PYFSM_GALERA_LOGS"], f"node{n}.log").write_bytes(node.log.read_bytes())
        for node in reversed(cluster.nodes):
            node.close()
