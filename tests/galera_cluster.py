"""A three-node MariaDB Galera cluster of the tests' own, on one machine.

Each node is a mariadbd (tests/second_server.py) with its own data directory, port and
socket; group communication (gcomm) and incremental state transfer listen on free ports of
127.0.0.1. The first node bootstraps the cluster from a fresh data directory; the others
start empty and are filled by a state transfer (rsync, whose receiving daemon runs as
``nobody``: their data directories are made its). The ``galera`` fixture skips, saying why,
where the Galera library (Debian: galera-4) is not installed; .ci/run installs it.
"""

from __future__ import annotations

import os
import pwd
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pymysql
import pytest
from kafka_broker import free_port
from second_server import INSTALL_DB, MARIADBD, SecondServer

from pyfsm.db import Settings

PROVIDER = "/usr/lib/galera/libgalera_smm.so"
NODES = 3


@dataclass
class GaleraCluster:
    nodes: list[SecondServer] = field(default_factory=list)

    def database(self, prefix: str = "pyfsm_galera") -> list[Settings]:
        """A new database, created through the first node; its settings on every node."""
        name = self.nodes[0].create_database(prefix).database
        return [node.settings.with_database(name) for node in self.nodes]

    def status(self, node: SecondServer, name: str) -> str:
        conn = pymysql.connect(**node.settings.connect_kwargs(database=False))
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW STATUS LIKE %s", (name,))
                row = cur.fetchone()
                return "" if row is None else str(row[1])
        finally:
            conn.close()

    def wait_synced(self, timeout: float = 60.0) -> None:
        """Until every running node says Synced in a cluster of all the running nodes."""
        deadline = time.monotonic() + timeout
        running = [n for n in self.nodes if n.running]
        while True:
            states = [(self.status(n, "wsrep_local_state_comment"), self.status(n, "wsrep_cluster_size"))
                      for n in running]
            if all(s == ("Synced", str(len(running))) for s in states):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the cluster did not settle within {timeout} s: {states}")
            time.sleep(0.2)


def _options(index: int, gcomm: list[int], ist: list[int], sst: list[int]) -> tuple[str, ...]:
    peers = ",".join(f"127.0.0.1:{p}" for p in gcomm)
    return (
        "--wsrep-on=ON", f"--wsrep-provider={PROVIDER}", "--wsrep-cluster-name=pyfsm_test",
        f"--wsrep-cluster-address=gcomm://{'' if index == 0 else peers}",
        "--wsrep-node-address=127.0.0.1", f"--wsrep-node-name=node{index}",
        f"--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:{gcomm[index]};"
        f"ist.recv_addr=127.0.0.1:{ist[index]};gcache.size=64M",
        "--wsrep-sst-method=rsync", f"--wsrep-sst-receive-address=127.0.0.1:{sst[index]}",
        "--binlog-format=ROW", "--innodb-autoinc-lock-mode=2", "--log-bin=node-bin", f"--server-id={index + 1}",
        "--log-slave-updates=ON",
        # a connection served by a cached thread that a conflicting write set had aborted got
        # 1213 on its first statement (SET NAMES) on MariaDB 10.11, and pyfsm's pool a closed
        # connection (2006); without the thread cache, neither (docs/scaling.md)
        "--thread-cache-size=0",
    )


@pytest.fixture(scope="module")
def galera() -> Iterator[GaleraCluster]:
    if not os.path.isfile(PROVIDER):
        pytest.skip(f"the Galera tests need the Galera library ({PROVIDER}: apt-get install galera-4)")
    if INSTALL_DB is None or MARIADBD is None:
        pytest.skip("the Galera tests need mariadb-install-db and mariadbd on this machine")
    gcomm, ist, sst = ([free_port() for _ in range(NODES)] for _ in range(3))
    cluster = GaleraCluster([SecondServer(Path(tempfile.mkdtemp(prefix=f"pyfsm-galera{n}-")),
                                          _options(n, gcomm, ist, sst)) for n in range(NODES)])
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
