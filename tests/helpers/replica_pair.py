"""A primary and a read replica of the tests' own: two MariaDB servers (tests/helpers/second_server.py)
on their own ports and data directories, the second replicating the first with
``read_only=ON``. The shared server is not touched.

MariaDB's replication statements (CHANGE MASTER TO ... MASTER_USE_GTID) set it up; pyfsm
itself uses nothing of them: it only reads from the replica.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pymysql
import pytest

from helpers.second_server import INSTALL_DB, MARIADBD, SecondServer, skip_in_the_mysql_pass
from pyfsm.db import Settings

REPLICATION_PASSWORD = "Repl-" + uuid.uuid4().hex[:12]


@dataclass
class ReplicaPair:
    primary: SecondServer
    replica: SecondServer

    def database(self, prefix: str = "pyfsm_repl") -> tuple[Settings, Settings]:
        """A new database created on the primary, and the same database on the replica once it is there."""
        primary = self.primary.create_database(prefix)
        self.caught_up()
        return primary, self.replica.settings.with_database(primary.database)

    def caught_up(self, timeout: float = 30.0) -> float:
        """Wait until the replica has applied everything the primary has written; the seconds it took."""
        began = time.monotonic()
        conn = pymysql.connect(**{**self.primary.settings.connect_kwargs(database=False), "autocommit": True})
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT @@gtid_binlog_pos")
                (position,) = cur.fetchone()
        finally:
            conn.close()
        conn = pymysql.connect(**{**self.replica.settings.connect_kwargs(database=False), "autocommit": True})
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT MASTER_GTID_WAIT(%s, %s)", (position, timeout))
                (waited,) = cur.fetchone()
                if waited != 0:
                    cur.execute("SHOW SLAVE STATUS")
                    raise AssertionError(f"the replica did not catch up within {timeout} s: {cur.fetchone()}")
        finally:
            conn.close()
        return time.monotonic() - began


@pytest.fixture(scope="module")
def replica_pair() -> Iterator[ReplicaPair]:
    skip_in_the_mysql_pass("the replica and promotion tests")
    if INSTALL_DB is None or MARIADBD is None:
        pytest.skip("the replica tests need mariadb-install-db and mariadbd on this machine")
    primary = SecondServer(
        Path(tempfile.mkdtemp(prefix="pyfsm-primary-")),
        ("--log-bin=primary-bin", "--server-id=1", "--binlog-format=ROW"),
    )
    replica = SecondServer(
        Path(tempfile.mkdtemp(prefix="pyfsm-replica-")), ("--server-id=2", "--read-only=ON", "--skip-slave-start")
    )
    try:
        for server in (primary, replica):
            server.install()
            server.start()
        conn = pymysql.connect(**{**primary.settings.connect_kwargs(database=False), "autocommit": True})
        try:
            with conn.cursor() as cur:
                cur.execute(f"CREATE USER 'repl'@'127.0.0.1' IDENTIFIED BY '{REPLICATION_PASSWORD}'")
                cur.execute("GRANT REPLICATION SLAVE ON *.* TO 'repl'@'127.0.0.1'")
        finally:
            conn.close()
        conn = pymysql.connect(**{**replica.settings.connect_kwargs(database=False), "autocommit": True})
        try:
            with conn.cursor() as cur:
                cur.execute(
                    f"CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = {primary.port}, "
                    f"MASTER_USER = 'repl', MASTER_PASSWORD = '{REPLICATION_PASSWORD}', "
                    "MASTER_USE_GTID = slave_pos"
                )
                cur.execute("START SLAVE")
        finally:
            conn.close()
        pair = ReplicaPair(primary, replica)
        pair.caught_up()
        yield pair
    finally:
        replica.close()
        primary.close()
