"""Database servers of the benchmark's own, run under callgrind, and the counter that reads them.

bench_instructions.py counts the instructions a server runs per transition, because CPU time
moves by ±20% between runs on a shared machine while instruction counts agree within a few
percent. Counting needs the server itself under ``valgrind --tool=callgrind``, so it cannot
be the shared server of the tests (3306, 3307, 3308): each context manager here starts a fresh
one on a free port, with its datadir, socket, pid file and logs in a temporary directory
that goes when it ends, and durable commits off (fsync is waiting, not instructions), and
stops only the process it started. MariaDB 10.11 is the system's mariadbd; MariaDB 11.8 and
MySQL 9.7 are the private trees of ``scripts/mariadb-server`` and ``scripts/mysql-server``,
which must run through their tree's own dynamic loader (its glibc is newer than the
system's), so valgrind runs the loader as the program and mariadbd or mysqld is a library the
loader maps into the same process: callgrind counts it all the same. The two MariaDBs differ
only in how their data directory is made and the command that runs them (mariadb-install-db
and the system's mariadbd; ``scripts/mariadb-server init`` and ``command``, which know the
tree): _callgrind_mariadb is the rest.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pymysql

from pyfsm import db
from pyfsm.db import Settings

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


class ServerUnavailable(RuntimeError):
    """The server cannot be had on this machine (not installed, not fetchable): say why and skip it."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _under_callgrind(
    server: list[str], work: Path, port: int, *, start_timeout: float
) -> Iterator[tuple[Settings, int, Path]]:
    """Run ``server`` under callgrind until it answers on ``port``; at the end stop it and delete ``work``."""
    log = (work / "server.log").open("w")
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={work}/cg.%p", "--dump-instr=no", *server],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    settings = db.parse_dsn(f"mysql://root@127.0.0.1:{port}/bench")
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            try:
                pymysql.connect(**settings.connect_kwargs(database=False)).close()
                break
            except pymysql.err.OperationalError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    tail = (work / "server.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"the server under callgrind did not start:\n{tail}") from None
                time.sleep(2)
        # valgrind runs the server in its own process: this pid is the one callgrind_control talks to
        yield settings, proc.pid, work
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        shutil.rmtree(work, ignore_errors=True)


def check_mariadb(mariadbd: str) -> None:
    """Raise ServerUnavailable unless ``mariadbd`` and mariadb-install-db are there."""
    for tool in (mariadbd, "mariadb-install-db"):
        if shutil.which(tool) is None:
            raise ServerUnavailable(f"{tool} is not installed (Debian: apt-get install mariadb-server)")


def _install_db(datadir: Path) -> None:
    """The system's MariaDB: mariadb-install-db makes the data directory (root without a password)."""
    subprocess.run(
        [
            "mariadb-install-db",
            "--no-defaults",
            f"--datadir={datadir}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
        ],
        check=True,
        capture_output=True,
    )


@contextmanager
def _callgrind_mariadb(
    command_for: Callable[[Path], list[str]], initialize: Callable[[Path], None], *, start_timeout: float
) -> Iterator[tuple[Settings, int, Path]]:
    """What both MariaDBs share: a new data directory made by ``initialize``, then the server
    (``command_for(datadir)``: its command and options, the loader's words first for an
    unpacked root) under callgrind on a free port with durable commits off."""
    work = Path(tempfile.mkdtemp(prefix="pyfsm_callgrind_"))
    try:
        port = _free_port()
        # without valgrind: seconds, where under valgrind it would take minutes that count nothing
        initialize(work / "data")
        # --tmpdir not /tmp: at start the server deletes the #sql* files of its tmpdir, another server's too
        command = [*command_for(work / "data"), f"--tmpdir={work}"]
        help_text = subprocess.run([*command, "--verbose", "--help"], capture_output=True, text=True).stdout
        if "innodb-buffer-pool-size-max" in help_text:  # its default reserves more address space than valgrind gives
            command.append("--innodb-buffer-pool-size-max=256M")
        server = [
            *command,
            f"--port={port}",
            f"--socket={work / 'sock'}",
            f"--pid-file={work / 'pid'}",
            "--innodb-flush-log-at-trx-commit=2",
            "--innodb-use-native-aio=0",
            "--innodb-buffer-pool-size=128M",
            "--skip-log-bin",
        ]
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    with _under_callgrind(server, work, port, start_timeout=start_timeout) as started:
        yield started


def callgrind_mariadb(mariadbd: str) -> AbstractContextManager[tuple[Settings, int, Path]]:
    """A fresh MariaDB (the system's) under callgrind on a free port; (settings, valgrind's pid, its directory)."""
    check_mariadb(mariadbd)
    # mariadbd refuses to run as root without --user
    user = ["--user=root"] if os.geteuid() == 0 else []
    return _callgrind_mariadb(
        lambda datadir: [mariadbd, "--no-defaults", f"--datadir={datadir}", *user], _install_db, start_timeout=300
    )


def debian_runner(script: str) -> tuple[Path, list[str]]:
    """The unpacked root of ``scripts/<script>`` (mysql-server, mariadb-server: fetched on first
    use, cached after) and the command prefix that runs one of its binaries (the root's loader,
    --library-path ...)."""

    def ask(command: str) -> str:
        try:
            # a first fetch downloads and unpacks a few hundred MB of packages
            done = subprocess.run([str(SCRIPTS / script), command], capture_output=True, text=True, timeout=900)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ServerUnavailable(f"scripts/{script} {command}: {e}") from None
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise ServerUnavailable(f"scripts/{script} {command} failed: {last}")
        return done.stdout

    root = Path(ask("root").strip())
    return root, ask("runner").splitlines()


def callgrind_mariadb_root() -> AbstractContextManager[tuple[Settings, int, Path]]:
    """A fresh MariaDB 11.8 (scripts/mariadb-server's tree) under callgrind on a free port;
    (settings, valgrind's pid, its directory). Its defaults are 11.8's (innodb_snapshot_isolation
    on): one client meets no conflict, so they change nothing counted here. The script makes the
    data directory and names the command (the tree's loader, mariadbd, the root's paths), as
    it does for its own server."""
    debian_runner("mariadb-server")  # fetched on first use; ServerUnavailable when it cannot be

    def script(command: str, datadir: Path) -> str:
        done = subprocess.run(
            [str(SCRIPTS / "mariadb-server"), command, str(datadir)], capture_output=True, text=True, timeout=600
        )
        if done.returncode != 0:
            raise RuntimeError(f"scripts/mariadb-server {command} failed ({done.returncode}):\n{done.stderr[-2000:]}")
        return done.stdout

    def init(datadir: Path) -> None:
        script("init", datadir)

    # through the loader under valgrind the start is slower: as MySQL's, up to minutes on a loaded machine
    return _callgrind_mariadb(lambda datadir: script("command", datadir).splitlines(), init, start_timeout=600)


@contextmanager
def callgrind_mysql() -> Iterator[tuple[Settings, int, Path]]:
    """A fresh MySQL 9.7 (scripts/mysql-server's tree) under callgrind on a free port; (settings,
    valgrind's pid, its directory)."""
    root, runner = debian_runner("mysql-server")
    mysqld = [*runner, str(root / "usr/sbin/mysqld")]
    work = Path(tempfile.mkdtemp(prefix="pyfsm_callgrind_mysql_"))
    try:
        port = _free_port()
        # the tree is not installed where mysqld looks by default: every path of its own is named
        options = [
            "--no-defaults",
            f"--basedir={root / 'usr'}",
            f"--datadir={work / 'data'}",
            f"--lc-messages-dir={root / 'usr/share/mysql'}",
            f"--character-sets-dir={root / 'usr/share/mysql/charsets'}",
            f"--plugin-dir={root / 'usr/lib/mysql/plugin'}",
            f"--tmpdir={work}",  # not /tmp: at start mysqld deletes the #sql* files of its tmpdir, another server's too
            "--secure-file-priv=",  # its default, /var/lib/mysql-files, does not exist here and mysqld refuses to start
        ]
        if os.geteuid() == 0:
            options.append("--user=root")  # mysqld refuses to run as root otherwise
        # without valgrind: it takes seconds, and under valgrind minutes that count nothing
        init = subprocess.run([*mysqld, *options, "--initialize-insecure"], capture_output=True, text=True, timeout=300)
        if init.returncode != 0:
            raise RuntimeError(f"mysqld --initialize-insecure failed ({init.returncode}):\n{init.stderr[-2000:]}")
        server = [
            *mysqld,
            *options,
            f"--port={port}",
            "--bind-address=127.0.0.1",
            f"--socket={work / 'sock'}",
            f"--pid-file={work / 'pid'}",
            "--mysqlx=OFF",  # else it listens on 33060 too, which another MySQL may hold
            # no binlog: its writes are not what is measured, and MySQL's default (on) would also demand
            # log_bin_trust_function_creators for pyfsm's routines
            "--disable-log-bin",
            "--innodb-flush-log-at-trx-commit=2",
            # valgrind 3.19 does not know io_pgetevents (syscall 333), with which the tree's libaio reaps
            # InnoDB's native AIO: synchronous I/O threads instead
            "--innodb-use-native-aio=0",
            "--innodb-buffer-pool-size=128M",  # as MariaDB's: small, and the same on both servers
        ]
        # no --log-error: the error log goes to stderr, into server.log, whose tail a failed start shows
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    # it answered after about 20 s here; valgrind's start on a loaded machine can take minutes
    with _under_callgrind(server, work, port, start_timeout=600) as started:
        yield started


def instructions(pid: int, work: Path, run: Callable[[], None]) -> int:
    """Instructions the server ran during ``run()``: counters zeroed before, dumped after."""
    subprocess.run(["callgrind_control", "-z", str(pid)], check=True, capture_output=True)
    run()
    before = set(work.glob("cg.*"))
    subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True)
    total = 0
    for dump in set(work.glob("cg.*")) - before:  # one file per dump (one per thread with --separate-threads=yes)
        found = re.search(r"^(?:totals|summary): (\d+)", dump.read_text(errors="replace"), re.M)
        total += int(found.group(1)) if found else 0
        dump.unlink()
    return total
