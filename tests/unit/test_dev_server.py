"""scripts/dev_server.py: which server the README's commands (`make demo`, `make test`) use.

The order is fixed: the DSN given, a server at 127.0.0.1:3306, the project's own MySQL, Docker,
else one line saying what to set. The probes are replaced here only to walk the order on a
machine that has all of them; the greeting check runs against real sockets, and the CI run
proves the whole path in a network namespace where nothing listens (.ci/run).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import dev_server
import pytest

SCRIPT = Path(dev_server.__file__)


def _never(*_args: object) -> bool:
    raise AssertionError("this probe must not run when a DSN is given")


def _walk(
    monkeypatch: pytest.MonkeyPatch, *, given: str | None, at_default: bool, own: bool, docker: bool
) -> tuple[str | None, list[str]]:
    calls: list[str] = []
    if given is None:
        monkeypatch.delenv("PYFSM_TEST_DSN", raising=False)
    else:
        monkeypatch.setenv("PYFSM_TEST_DSN", given)

    def start_own() -> str:
        calls.append("start_own")
        return "mysql://root@127.0.0.1:3307/test"

    try:
        with dev_server.server_dsn(
            "PYFSM_TEST_DSN",
            "pyfsm_demo",
            probe=lambda h, p: at_default,
            own_can_run=lambda: own,
            start_own=start_own,
            docker=lambda: docker,
        ) as dsn:
            return dsn, calls
    except dev_server.NoServer as exc:
        return str(exc), ["NoServer"]


def test_a_given_dsn_is_used_as_it_is_and_nothing_is_probed_or_started(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYFSM_TEST_DSN", "mysql://app:secret@db:3306/shop")
    with dev_server.server_dsn(
        "PYFSM_TEST_DSN", "test", probe=_never, own_can_run=_never, start_own=_never, docker=_never
    ) as dsn:
        assert dsn == "mysql://app:secret@db:3306/shop"


def test_the_default_address_comes_before_starting_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _walk(monkeypatch, given=None, at_default=True, own=True, docker=True) == (
        "mysql://root@127.0.0.1:3306/pyfsm_demo",
        [],
    )


def test_nothing_at_the_default_address_starts_the_projects_mysql(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _walk(monkeypatch, given=None, at_default=False, own=True, docker=True) == (
        "mysql://root@127.0.0.1:3307/pyfsm_demo",
        ["start_own"],
    )
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1 and "using the project's own MySQL, mysql://root@127.0.0.1:3307/pyfsm_demo" in said[0]


def test_with_neither_a_server_nor_the_script_nor_docker_one_line_says_what_to_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    message, calls = _walk(monkeypatch, given=None, at_default=False, own=False, docker=False)
    assert calls == ["NoServer"]
    assert message is not None and "\n" not in message
    assert message.endswith("set PYFSM_TEST_DSN=mysql://USER:PASSWORD@HOST:PORT/pyfsm_demo")


def test_the_command_line_runs_the_command_with_the_dsn_and_passes_its_exit_status(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "PYFSM_X_DSN": "mysql://u@h:1/d"}
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--env",
            "PYFSM_X_DSN",
            "--database",
            "db",
            "--",
            sys.executable,
            "-c",
            "import os, sys; print(os.environ['PYFSM_X_DSN']); sys.exit(3)",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert (proc.returncode, proc.stdout.strip(), proc.stderr) == (3, "mysql://u@h:1/d", "")


def test_the_command_line_without_a_command_is_refused() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--env", "X", "--database", "d"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2 and "no command to run" in proc.stderr


@pytest.fixture
def listener() -> Iterator[tuple[socket.socket, int]]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    yield sock, sock.getsockname()[1]
    sock.close()


def _serve_once(sock: socket.socket, greeting: bytes) -> threading.Thread:
    def serve() -> None:
        conn, _ = sock.accept()
        with conn, contextlib.suppress(OSError):  # the client closes as soon as it has read enough
            conn.sendall(greeting)
            conn.recv(1)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def test_a_mysql_greeting_is_a_server(listener: tuple[socket.socket, int]) -> None:
    sock, port = listener
    # payload length 74, sequence 0, protocol version 10, then a server version string
    thread = _serve_once(sock, b"\x4a\x00\x00\x00\x0a" + b"8.4.0\x00" + b"\x00" * 68)
    assert dev_server.answers_mysql("127.0.0.1", port) is True
    thread.join(5)


def test_something_else_on_the_port_is_not_a_server(listener: tuple[socket.socket, int]) -> None:
    sock, port = listener
    thread = _serve_once(sock, b"HTTP/1.1 400 Bad Request\r\n\r\n")
    assert dev_server.answers_mysql("127.0.0.1", port) is False
    thread.join(5)


def test_a_closed_port_is_not_a_server(listener: tuple[socket.socket, int]) -> None:
    sock, port = listener
    sock.close()
    assert dev_server.answers_mysql("127.0.0.1", port, timeout=1) is False


def test_the_database_part_is_replaced() -> None:
    assert (
        dev_server.with_database("mysql://root@127.0.0.1:3307/test", "pyfsm_demo")
        == "mysql://root@127.0.0.1:3307/pyfsm_demo"
    )
    assert dev_server.with_database("mysql://root:pw@h:3306/test/", "x") == "mysql://root:pw@h:3306/x"


def test_when_the_projects_mysql_cannot_start_the_line_says_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline with nothing cached, say: the script's failure, then the variable and the DSN's form."""
    monkeypatch.delenv("PYFSM_TEST_DSN", raising=False)

    def start_own() -> str:
        raise dev_server.NoServer(
            "scripts/mysql-server could not start the project's MySQL (exit 1, its messages above)"
        )

    with pytest.raises(dev_server.NoServer) as failed:
        with dev_server.server_dsn(
            "PYFSM_TEST_DSN",
            "test",
            probe=lambda h, p: False,
            own_can_run=lambda: True,
            start_own=start_own,
            docker=lambda: True,
        ):
            pass
    message = str(failed.value)
    assert "\n" not in message and message.startswith("scripts/mysql-server could not start")
    assert message.endswith("fix that, or set PYFSM_TEST_DSN=mysql://USER:PASSWORD@HOST:PORT/test")
