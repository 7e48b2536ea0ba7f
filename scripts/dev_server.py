#!/usr/bin/env python3
"""Find a MySQL server for the README's commands (`make demo`, `make test`) and run one with it.

    scripts/dev_server.py --env PYFSM_TEST_DSN --database test -- COMMAND [ARG...]

The server, in this order:

1. the DSN already in ``$<env>`` (``--env``): used as it is, nothing is started;
2. a server answering at the default address, 127.0.0.1:3306 (user root, no password);
3. the project's own MySQL 9.7 (``scripts/mysql-server start``: Debian's package, fetched into
   ``~/.cache/pyfsm-mysql`` on first use, then started on 127.0.0.1:3307 and left running for
   the next command; ``make mysql-stop`` stops it), where that script can run (Debian's
   apt-get and dpkg-deb, or a cache already fetched);
4. MySQL 8.4 in Docker through testcontainers, for the command's lifetime, where a Docker
   engine answers;
5. otherwise one line on stderr saying what to set, and exit status 2.

Each choice but the first is announced in one line on stderr. COMMAND runs with ``$<env>`` set
to a DSN whose database is ``--database``; its exit status is this script's.

The tests' conftest imports :func:`server_dsn` to make the same choice when pytest runs alone.
Plain python3 (no dependencies) except the Docker step, which needs testcontainers.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MYSQL_SERVER = REPO / "scripts" / "mysql-server"
DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 3306
DOCKER_IMAGE = "mysql:8.4"


class NoServer(Exception):
    """No server could be found or started; the message says what to set."""


def say(message: str) -> None:
    print(f"dev-server: {message}", file=sys.stderr, flush=True)


def answers_mysql(host: str, port: int, timeout: float = 2.0) -> bool:
    """Whether a MySQL-protocol server answers at host:port: it greets a new connection with a
    handshake packet, whose payload starts with protocol version 10 (MySQL and MariaDB alike).
    Something else on the port (or nothing) is not a server for us."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            head = b""
            while len(head) < 5:
                chunk = sock.recv(5 - len(head))
                if not chunk:
                    return False
                head += chunk
    except OSError:
        return False
    # 3-byte payload length, sequence id 0, then the protocol version (10) or an error packet
    # (0xff: e.g. "Host is not allowed to connect", still a MySQL server)
    return head[3] == 0 and head[4] in (10, 0xFF)


def with_database(dsn: str, database: str) -> str:
    """``dsn`` with its database part replaced (the servers' scripts print .../test)."""
    base, _, _ = dsn.rstrip("/").rpartition("/")
    return f"{base}/{database}"


def own_cache() -> Path:
    """Where scripts/mysql-server keeps what it fetched (its PYFSM_MYSQL_CACHE)."""
    return Path(os.environ.get("PYFSM_MYSQL_CACHE") or Path.home() / ".cache" / "pyfsm-mysql")


def own_mysql_can_run() -> bool:
    """scripts/mysql-server fetches Debian's package with apt-get and unpacks it with dpkg-deb;
    a cache fetched before needs neither (a machine without network, once warmed)."""
    if (own_cache() / "root" / ".complete").is_file():
        return True
    return bool(shutil.which("apt-get") and shutil.which("dpkg-deb") and shutil.which("dpkg"))


def start_own_mysql() -> str:
    """Start (fetching on first use) the project's own MySQL; its DSN. The script's own messages
    are shown only when it fails: the caller announces the outcome in one line."""
    if not (own_cache() / "root" / ".complete").is_file():
        say("fetching the project's own MySQL 9.7 from Debian's archive (first use only, about 55 MB)")
    proc = subprocess.run([str(MYSQL_SERVER), "start"], capture_output=True, text=True, check=False)
    dsn = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    if proc.returncode != 0 or not dsn.startswith("mysql://"):
        sys.stderr.write(proc.stderr)
        raise NoServer(
            f"scripts/mysql-server could not start the project's MySQL (exit {proc.returncode}, its messages above)"
        )
    return dsn


def docker_answers() -> bool:
    if not shutil.which("docker"):
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=10, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@contextlib.contextmanager
def docker_mysql() -> Iterator[str]:
    """MySQL 8.4 in a container for the block's lifetime (testcontainers); its DSN."""
    from testcontainers.mysql import MySqlContainer

    with MySqlContainer(DOCKER_IMAGE, username="root", password="test", dbname="test") as container:
        host, port = container.get_container_host_ip(), int(container.get_exposed_port(3306))
        yield f"mysql://root:test@{host}:{port}/test"


@contextlib.contextmanager
def server_dsn(
    env: str,
    database: str,
    *,
    probe: Callable[[str, int], bool] = answers_mysql,
    own_can_run: Callable[[], bool] = own_mysql_can_run,
    start_own: Callable[[], str] = start_own_mysql,
    docker: Callable[[], bool] = docker_answers,
) -> Iterator[str]:
    """The DSN to use, in the order of the module's docstring (NoServer when there is none).
    A container started here lives until the block ends; the project's MySQL stays up."""
    given = os.environ.get(env, "").strip()
    if given:
        yield given
        return
    if probe(DEFAULT_HOST, DEFAULT_PORT):
        say(f"${env} is not set: using the server at {DEFAULT_HOST}:{DEFAULT_PORT} (database {database})")
        yield f"mysql://root@{DEFAULT_HOST}:{DEFAULT_PORT}/{database}"
        return
    if own_can_run():
        try:
            own = start_own()
        except NoServer as exc:  # its last line names the variable to set and the DSN's form
            raise NoServer(f"{exc}: fix that, or set {env}=mysql://USER:PASSWORD@HOST:PORT/{database}") from exc
        dsn = with_database(own, database)
        say(
            f"${env} is not set and nothing answers at {DEFAULT_HOST}:{DEFAULT_PORT}: using the project's own "
            f"MySQL, {dsn} (scripts/mysql-server; `make mysql-stop` stops it)"
        )
        yield dsn
        return
    if docker():
        say(
            f"${env} is not set and nothing answers at {DEFAULT_HOST}:{DEFAULT_PORT}: starting {DOCKER_IMAGE} "
            "in Docker (testcontainers) for this command"
        )
        with docker_mysql() as dsn:
            yield with_database(dsn, database)
        return
    raise NoServer(
        f"no MySQL server: ${env} is not set, nothing answers at {DEFAULT_HOST}:{DEFAULT_PORT}, "
        "scripts/mysql-server needs Debian (apt-get, dpkg-deb) and no Docker engine answers; "
        f"set {env}=mysql://USER:PASSWORD@HOST:PORT/{database}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--env", required=True, help="the variable the command reads its DSN from")
    parser.add_argument("--database", required=True, help="the database part of a DSN chosen here")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARG...]")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to run (scripts/dev_server.py --env VAR --database DB -- COMMAND ...)")
    try:
        with server_dsn(args.env, args.database) as dsn:
            return subprocess.run(command, env={**os.environ, args.env: dsn}, check=False).returncode
    except NoServer as exc:
        say(str(exc))
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
