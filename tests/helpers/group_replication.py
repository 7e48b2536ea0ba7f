"""A three-member MySQL Group Replication group of the tests' own (single-primary), on one machine.

Group Replication is the engine under MySQL InnoDB Cluster. Each member is a mysqld of the
private MySQL that ``scripts/mysql-server`` fetches and unpacks (``scripts/mysql-server
runner`` says how to run it: through the unpacked loader), with its own data directory,
port and socket in a temporary directory, and its group communication (XCom) on another
free port of 127.0.0.1. One data directory is initialised (``--initialize-insecure``: root
without a password) and copied for the others, less ``auto.cnf``, so each member makes a
server UUID of its own at its first start. The first member bootstraps the group; the
others join it one at a time and receive what they miss from a donor (distributed recovery,
over a replication account the first member created before the bootstrap, so every member
has it; caching_sha2_password without TLS, hence ``group_replication_recovery_get_public_key``).

The ``group_replication`` fixture skips, saying why, unless ``$PYFSM_TEST_DSN`` is a MySQL
server (these tests belong to the MySQL pass of CI; the Galera ones to MariaDB's). At the end
it kills the mysqld it started, and no other, and deletes their directories.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql
import pytest

from helpers.galera_cluster import distinct_ports, shared_server_flavour
from pyfsm.db import Settings

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "mysql-server"
MEMBERS = 3
RECOVERY_USER, RECOVERY_PASSWORD = "pyfsm_gr_recovery", "Recovery-pw-1"  # the test group's own


def mysql_runner() -> tuple[Path, list[str]]:
    """The unpacked root of scripts/mysql-server (fetched if missing) and the command prefix
    that runs one of its binaries (its loader and libraries)."""

    def ask(command: str) -> str:
        done = subprocess.run([str(SCRIPT), command], capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            pytest.skip(
                f"the Group Replication tests need the private MySQL of scripts/mysql-server, whose "
                f"'{command}' failed: {done.stderr.strip()[-500:]}"
            )
        return done.stdout

    root = Path(ask("root").strip())
    return root, ask("runner").splitlines()


@dataclass
class Member:
    """One mysqld of the group."""

    index: int
    base: Path
    port: int
    xcom: int
    command: list[str]  # the runner and mysqld with every option but the datadir's own
    proc: subprocess.Popen[bytes] | None = None

    @property
    def datadir(self) -> Path:
        return self.base / "data"

    @property
    def log(self) -> Path:
        return self.base / "error.log"

    @property
    def settings(self) -> Settings:
        return Settings(host="127.0.0.1", port=self.port, user="root", password="", connect_timeout=2.0)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 90.0) -> float:
        """Start mysqld and wait until it answers (Group Replication not started: start_on_boot
        is off); the seconds it took."""
        assert not self.running, "already running"
        began = time.monotonic()
        with open(self.base / "stdout.log", "ab") as out:
            self.proc = subprocess.Popen(
                self.command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )
        deadline = began + timeout
        while True:
            try:
                pymysql.connect(**self.settings.connect_kwargs(database=False)).close()
                return time.monotonic() - began
            except pymysql.err.MySQLError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"mysqld exited with {self.proc.returncode}: {self.tail()}") from None
                if time.monotonic() > deadline:
                    raise RuntimeError(f"mysqld did not answer within {timeout} s: {self.tail()}") from None
                time.sleep(0.1)

    def kill(self) -> None:
        """A crash: SIGKILL (the loader runs mysqld in its own process, so this is mysqld's pid)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else "(no error log)"

    def sql(self, statement: str, args: Any = None, *, timeout: float = 30.0) -> list[tuple[Any, ...]]:
        """Run one statement as root on this member (autocommit); its rows."""
        conn = pymysql.connect(
            **{**self.settings.connect_kwargs(database=False), "autocommit": True, "read_timeout": timeout}
        )
        try:
            with conn.cursor() as cur:
                cur.execute(statement, args)
                return list(cur.fetchall())
        finally:
            conn.close()


@dataclass
class GroupReplication:
    members: list[Member] = field(default_factory=list)
    group_name: str = ""

    def view(self, member: Member) -> list[tuple[str, str, str, int]]:
        """The group as ``member`` sees it: (server uuid, state, role, port) per member; [] while it
        does not answer."""
        try:
            return [
                (str(u), str(s), str(r), int(p or 0))
                for u, s, r, p in member.sql(
                    "SELECT MEMBER_ID, MEMBER_STATE, MEMBER_ROLE, MEMBER_PORT "
                    "FROM performance_schema.replication_group_members",
                    timeout=5,
                )
            ]
        except pymysql.err.MySQLError:
            return []

    def wait_online(self, timeout: float = 60.0) -> None:
        """Until every running member sees every running member ONLINE, one of them PRIMARY."""
        deadline = time.monotonic() + timeout
        running = [m for m in self.members if m.running]
        ports = sorted(m.port for m in running)
        while True:
            views = [self.view(m) for m in running]
            if all(
                sorted(p for _, s, _, p in v if s == "ONLINE") == ports
                and len(v) == len(ports)
                and sum(1 for _, _, r, _ in v if r == "PRIMARY") == 1
                for v in views
            ):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the group did not settle within {timeout} s: {views}")
            time.sleep(0.1)

    def primary_index(self) -> int:
        """The index of the member the running members name PRIMARY."""
        for member in self.members:
            if member.running:
                for _, state, role, port in self.view(member):
                    if role == "PRIMARY" and state == "ONLINE":
                        return next(m.index for m in self.members if m.port == port)
        raise AssertionError("no running member names an ONLINE primary")

    def database(self, prefix: str = "pyfsm_gr") -> list[Settings]:
        """A new database, created through the primary; its settings on every member, in member order."""
        name = f"{prefix}_{uuid.uuid4().hex[:8]}"
        self.members[self.primary_index()].sql(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
        self.wait_applied()
        return [m.settings.with_database(name) for m in self.members]

    def listing(self, databases: list[Settings], order: list[int] | None = None) -> Settings:
        """What an application uses: one DSN naming every member (in ``order``, default member order)."""
        order = list(range(len(databases))) if order is None else order
        first = databases[order[0]]
        return first.with_hosts([(databases[n].host, databases[n].port) for n in order])

    def wait_applied(self, timeout: float = 60.0) -> None:
        """Until every running member has applied every transaction the primary committed so far
        (a secondary applies the group's transactions a moment after the primary's commit)."""
        primary = self.members[self.primary_index()]
        executed = str(primary.sql("SELECT @@GLOBAL.gtid_executed")[0][0])
        for member in self.members:
            if member.running and member is not primary:
                waited = member.sql(
                    "SELECT WAIT_FOR_EXECUTED_GTID_SET(%s, %s)", (executed, timeout), timeout=timeout + 10
                )[0][0]
                assert waited == 0, f"member {member.index} did not apply {executed} within {timeout} s"

    def start_group_replication(self, member: Member, *, bootstrap: bool = False) -> None:
        if bootstrap:
            member.sql("SET GLOBAL group_replication_bootstrap_group = ON")
            try:
                member.sql("START GROUP_REPLICATION", timeout=120)
            finally:
                member.sql("SET GLOBAL group_replication_bootstrap_group = OFF")
        else:
            member.sql("START GROUP_REPLICATION", timeout=120)

    def restart(self, index: int, timeout: float = 120.0) -> float:
        """Start a member that was killed and have it join the group again (it must not bootstrap:
        that would make a second group); the seconds until every running member is ONLINE."""
        began = time.monotonic()
        member = self.members[index]
        member.start(timeout=timeout)
        self.start_group_replication(member)
        self.wait_online(timeout)
        return time.monotonic() - began

    def heal(self) -> None:
        """Every member running and ONLINE again (a test before may have killed one)."""
        for member in self.members:
            if not member.running:
                self.restart(member.index)
        self.wait_online()

    def close(self) -> None:
        for member in reversed(self.members):
            member.kill()
            member.proc = None
        for member in self.members:
            shutil.rmtree(member.base, ignore_errors=True)


def _member_options(index: int, group: str, ports: list[int], xcom: list[int]) -> list[str]:
    return [
        f"--server-id={index + 1}",
        "--gtid-mode=ON",
        "--enforce-gtid-consistency=ON",
        "--plugin-load-add=group_replication.so",
        f"--group-replication-group-name={group}",
        f"--group-replication-local-address=127.0.0.1:{xcom[index]}",
        "--group-replication-group-seeds=" + ",".join(f"127.0.0.1:{p}" for p in xcom),
        "--group-replication-single-primary-mode=ON",
        "--group-replication-start-on-boot=OFF",
        "--group-replication-bootstrap-group=OFF",
        "--group-replication-ip-allowlist=127.0.0.1/8",
        # the recovery account authenticates with caching_sha2_password over a connection without
        # TLS: the donor's RSA key is fetched for it
        "--group-replication-recovery-get-public-key=ON",
        # distributed recovery connects to a donor by the address it reports
        "--report-host=127.0.0.1",
        f"--report-port={ports[index]}",
        "--innodb-buffer-pool-size=64M",
        "--innodb-redo-log-capacity=64M",
        "--max-connections=300",
        # expel a member that stopped answering as soon as it is suspected (5 s), not 5 s later:
        # the primary killed, writes came back after about 7 s instead of 21 s (docs/scaling.md)
        "--group-replication-member-expel-timeout=0",
        *os.environ.get("PYFSM_GR_OPTS", "").split(),  # more options (e.g. the expel timeout back at 5)
    ]


def _fixed_options(root: Path, base: Path, port: int) -> list[str]:
    options = [
        "--no-defaults",
        f"--basedir={root / 'usr'}",
        f"--datadir={base / 'data'}",
        f"--tmpdir={base}",  # not /tmp: a server deletes the #sql* files of its tmpdir at start
        f"--lc-messages-dir={root / 'usr/share/mysql'}",
        f"--character-sets-dir={root / 'usr/share/mysql/charsets'}",
        f"--plugin-dir={root / 'usr/lib/mysql/plugin'}",
        f"--port={port}",
        "--bind-address=127.0.0.1",
        f"--socket={base / 'mysqld.sock'}",
        "--mysqlx=OFF",
        "--secure-file-priv=",
        f"--log-error={base / 'error.log'}",
        f"--pid-file={base / 'mysqld.pid'}",
    ]
    if os.geteuid() == 0:
        options.append("--user=root")  # mysqld refuses to run as root otherwise
    return options


def start_group() -> GroupReplication:
    """Three members, the first bootstrapping the group, the others joining; all ONLINE."""
    root, runner = mysql_runner()
    mysqld = [*runner, str(root / "usr/sbin/mysqld")]
    ports = distinct_ports(2 * MEMBERS)
    mysql_ports, xcom = ports[:MEMBERS], ports[MEMBERS:]
    group = GroupReplication(group_name=str(uuid.uuid4()))
    try:
        for n in range(MEMBERS):
            base = Path(tempfile.mkdtemp(prefix=f"pyfsm-gr{n}-"))
            group.members.append(
                Member(
                    n,
                    base,
                    mysql_ports[n],
                    xcom[n],
                    [
                        *mysqld,
                        *_fixed_options(root, base, mysql_ports[n]),
                        *_member_options(n, group.group_name, mysql_ports, xcom),
                    ],
                )
            )
        first = group.members[0]
        init = subprocess.run(
            [*mysqld, *_fixed_options(root, first.base, first.port), "--initialize-insecure"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if init.returncode != 0:
            raise RuntimeError(
                f"mysqld --initialize-insecure failed ({init.returncode}): {first.tail()}{init.stderr[-2000:]}"
            )
        for member in group.members[1:]:  # a copy, less the server UUID (each member makes its own)
            shutil.copytree(first.datadir, member.datadir, symlinks=True)
            (member.datadir / "auto.cnf").unlink(missing_ok=True)
        with ThreadPoolExecutor(MEMBERS) as pool:
            for started in [pool.submit(m.start) for m in group.members]:
                started.result()
        # before the bootstrap, so that it is in the group's history and every member has it
        first.sql(f"CREATE USER '{RECOVERY_USER}'@'%' IDENTIFIED BY '{RECOVERY_PASSWORD}'")
        first.sql(
            f"GRANT REPLICATION SLAVE, CONNECTION_ADMIN, BACKUP_ADMIN, GROUP_REPLICATION_STREAM ON *.* "
            f"TO '{RECOVERY_USER}'@'%'"
        )
        for member in group.members:  # kept in the member's replication metadata: a restart rejoins with it
            member.sql(
                f"CHANGE REPLICATION SOURCE TO SOURCE_USER = '{RECOVERY_USER}', "
                f"SOURCE_PASSWORD = '{RECOVERY_PASSWORD}' FOR CHANNEL 'group_replication_recovery'"
            )
        group.start_group_replication(first, bootstrap=True)
        for member in group.members[1:]:
            group.start_group_replication(member)
        group.wait_online()
        return group
    except BaseException:
        group.close()
        raise


_shared: list[Any] = [None, 0]  # the group and how many fixture instances use it


@pytest.fixture(scope="session", name="group_replication")
def group_replication_fixture() -> Iterator[GroupReplication]:
    """``group_replication``: the session's group, started once for the whole session. Each test
    module that uses it imports this function (pytest then makes one fixture per module): the
    first starts the group, each heals it (restarts a member a test before killed), the last
    to end stops it."""
    flavour = shared_server_flavour()
    if flavour != "mysql":
        pytest.skip(
            "Group Replication is MySQL's: these tests run where PYFSM_TEST_DSN is a MySQL server "
            f"(the MySQL pass of CI), not here ({flavour or 'no PYFSM_TEST_DSN'})"
        )
    if _shared[0] is None:
        _shared[0] = start_group()
    _shared[1] += 1
    try:
        _shared[0].heal()
        yield _shared[0]
    finally:
        _shared[1] -= 1
        if _shared[1] == 0:
            group, _shared[0] = _shared[0], None
            if os.environ.get("PYFSM_GR_LOGS"):  # to see what the members said: copy their logs there
                for member in group.members:
                    if member.log.exists():
                        Path(os.environ["PYFSM_GR_LOGS"], f"member{member.index}.log").write_bytes(
                            member.log.read_bytes()
                        )
            group.close()
