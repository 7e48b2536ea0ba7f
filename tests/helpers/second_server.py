"""A second MariaDB server of the tests' own, to stop, crash and start again.

The shared server (``$PYFSM_TEST_DSN``) is never stopped: the restart tests use this one,
with its own data directory (``mariadb-install-db``) in a temporary directory, its own
free port on 127.0.0.1 and its own socket, and small buffers so that it starts in a second
or two. Root logs in over TCP without a password (``--auth-root-authentication-method=
normal``); the grant tables stay on. The ``second_server`` fixture always kills the server
and deletes the data directory, also when a test failed.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest

from helpers.kafka_broker import free_port
from pyfsm import Store
from pyfsm.db import Settings, parse_dsn

INSTALL_DB = shutil.which("mariadb-install-db") or shutil.which("mysql_install_db")
MARIADBD = next((p for p in ("/usr/sbin/mariadbd", shutil.which("mariadbd") or "") if p and os.path.isfile(p)), None)

#: Small and fast, but durable: every commit is flushed (innodb_flush_log_at_trx_commit=1,
#: the default, said explicitly because the crash test depends on it).
SERVER_OPTIONS = (
    "--innodb-buffer-pool-size=32M",
    "--innodb-log-file-size=16M",
    "--innodb-flush-log-at-trx-commit=1",
    "--skip-name-resolve",
    "--max-connections=200",
    "--skip-log-bin",
)


class SecondServer:
    """A mariadbd on a data directory and port of its own: :meth:`start`, :meth:`stop`, :meth:`kill`."""

    def __init__(self, base: Path, options: tuple[str, ...] = ()) -> None:
        """``options``: more mariadbd options, after the usual ones (``--log-bin`` replaces ``--skip-log-bin``)."""
        self.base = base
        skipped = {"--skip-log-bin"} if any(o.startswith("--log-bin") for o in options) else set()
        self.options = tuple(o for o in SERVER_OPTIONS if o not in skipped) + options
        self.datadir = base / "data"
        self.socket = base / "sock"
        # a tmpdir of its own: at start a server deletes every #sql* file of its tmpdir, and in
        # /tmp those are the shared test server's temporary tables in use (MariaDB: errno 6)
        self.tmpdir = base / "tmp"
        self.log = base / "error.log"
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self._user = ["--user=root"] if os.geteuid() == 0 else []  # mariadbd refuses to run as root otherwise

    @property
    def settings(self) -> Settings:
        return Settings(host="127.0.0.1", port=self.port, user="root", password="", connect_timeout=2.0)

    def install(self) -> None:
        assert INSTALL_DB is not None
        done = subprocess.run(
            [
                INSTALL_DB,
                "--no-defaults",
                f"--datadir={self.datadir}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                *self._user,
                *SERVER_OPTIONS,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"mariadb-install-db failed ({done.returncode}): {done.stdout[-2000:]}{done.stderr[-2000:]}"
            )

    def start(self, timeout: float = 60.0) -> float:
        """Start mariadbd and wait until it answers; the seconds it took."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        assert MARIADBD is not None
        began = time.monotonic()
        self.tmpdir.mkdir(exist_ok=True)
        with open(self.base / "stdout.log", "ab") as out:
            self.proc = subprocess.Popen(
                [
                    MARIADBD,
                    "--no-defaults",
                    f"--datadir={self.datadir}",
                    f"--tmpdir={self.tmpdir}",
                    f"--port={self.port}",
                    f"--socket={self.socket}",
                    "--bind-address=127.0.0.1",
                    f"--pid-file={self.base / 'mariadbd.pid'}",
                    f"--log-error={self.log}",
                    *self._user,
                    *self.options,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.starts += 1
        deadline = began + timeout
        while True:
            try:
                pymysql.connect(**self.settings.connect_kwargs(database=False)).close()
                return time.monotonic() - began
            except pymysql.err.MySQLError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"mariadbd exited with {self.proc.returncode}: {self.tail()}") from None
                if time.monotonic() > deadline:
                    raise RuntimeError(f"mariadbd did not answer within {timeout} s: {self.tail()}") from None
                time.sleep(0.05)

    def stop(self, timeout: float = 60.0) -> float:
        """A clean shutdown (SIGTERM) and wait for the process to exit; the seconds it took."""
        return self._signal(signal.SIGTERM, timeout)

    def kill(self) -> float:
        """A crash: SIGKILL, no shutdown at all (InnoDB recovers from its redo log at the next start)."""
        return self._signal(signal.SIGKILL, 30)

    def _signal(self, sig: int, timeout: float) -> float:
        began = time.monotonic()
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(30)
        return time.monotonic() - began

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else "(no error log)"

    def create_database(self, prefix: str) -> Settings:
        """A new, empty database on this server."""
        name = f"{prefix}_{uuid.uuid4().hex[:8]}"
        conn = pymysql.connect(**{**self.settings.connect_kwargs(database=False), "autocommit": True})
        try:
            conn.cursor().execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
        finally:
            conn.close()
        return self.settings.with_database(name)

    def database(self, prefix: str = "pyfsm_restart") -> Settings:
        """A new, migrated database on this server."""
        settings = self.create_database(prefix)
        with Store(settings.dsn()) as store:
            store.migrate()
        return settings

    def close(self) -> None:
        self.kill()
        self.proc = None
        shutil.rmtree(self.base, ignore_errors=True)


@functools.cache
def shared_server_flavour() -> str | None:
    """ "mariadb" or "mysql": the server $PYFSM_TEST_DSN names (the suite's pass); None without
    that variable or when the server does not answer."""
    dsn = os.environ.get("PYFSM_TEST_DSN")
    if not dsn:
        return None
    try:
        conn = pymysql.connect(**parse_dsn(dsn).connect_kwargs(database=False))
    except pymysql.err.MySQLError:
        return None
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT VERSION()")
            return "mariadb" if "mariadb" in str(cur.fetchone()[0]).lower() else "mysql"
    finally:
        conn.close()


def skip_in_the_mysql_pass(what: str) -> None:
    """Skip ``what`` where $PYFSM_TEST_DSN is MySQL: tests that run only on MariaDB servers of
    their own (never the shared server) are the same in every pass, so they run in the MariaDB
    pass (or where no pass is named) and not again in the MySQL one, as the Galera tests do."""
    if shared_server_flavour() == "mysql":
        pytest.skip(
            f"{what} run on MariaDB servers of their own, the same in every pass: they run in the "
            "MariaDB pass, not again where PYFSM_TEST_DSN is MySQL"
        )


@pytest.fixture(scope="session")
def second_server() -> Iterator[SecondServer]:
    """A fresh MariaDB server of the tests' own (not the shared one), always killed and deleted at the end."""
    skip_in_the_mysql_pass("the server restart tests")
    if INSTALL_DB is None or MARIADBD is None:
        pytest.skip("the server restart tests need mariadb-install-db and mariadbd on this machine")
    server = SecondServer(Path(tempfile.mkdtemp(prefix="pyfsm-mariadb-")))
    try:
        server.install()
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture
def restarted(second_server: SecondServer) -> Iterator[SecondServer]:
    """The second server, running at the start of the test and again after it (whatever the test did)."""
    if not second_server.running:
        second_server.start()
    yield second_server
    if not second_server.running:
        second_server.start()
