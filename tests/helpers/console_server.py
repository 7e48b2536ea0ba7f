"""`pyfsm web` as a real subprocess for the browser tests: started on a free port, waited
for until it answers, and stopped (its own process only) when the test is done.

``consoles(...)`` starts several at once (each takes most of a second to import and bind)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Console:
    """One `pyfsm web` process."""

    dsn: str
    actions_dsn: str | None = None
    token: str | None = None
    host: str = "127.0.0.1"
    port: int = 0
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    folder: Path | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """http://HOST:PORT, no trailing slash."""
        return f"http://{self.host}:{self.port}"

    def start(self) -> Console:
        self.port = free_port()
        args = [*command(), "web", "--dsn", self.dsn, "--host", self.host, "--port", str(self.port)]
        if self.actions_dsn is not None:
            args += ["--allow-actions", "--actions-dsn", self.actions_dsn]
        if self.token is not None:
            args += ["--token", self.token]
        env = {k: v for k, v in os.environ.items() if k not in ("PYFSM_WEB_TOKEN", "PYFSM_ACTIONS_DSN")}
        self.folder = Path(tempfile.mkdtemp(prefix="pyfsm_web_"))
        # stderr to a file: a pipe nobody reads could fill up and stop the console
        with (self.folder / "stderr.txt").open("wb") as err:
            self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err, env=env)
        return self

    def output(self) -> str:
        """The end of what the console wrote to stderr (for a failing test's message)."""
        try:
            return (self.folder / "stderr.txt").read_text(errors="replace")[-4000:] if self.folder else ""
        except OSError:
            return ""

    def wait(self, timeout: float = 30.0) -> None:
        """Until it answers HTTP (any status: a console with a token answers /login)."""
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"pyfsm web exited with {self.process.returncode}: {self.output()}")
            try:
                http(f"{self.url}/login", timeout=2)
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"pyfsm web did not answer within {timeout} s: {self.output()}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


def http(
    url: str,
    *,
    method: str = "GET",
    headers: Mapping[str, str] | None = None,
    form: Mapping[str, str] | None = None,
    timeout: float = 10.0,
) -> tuple[int, str]:
    """One plain request to a console (no cookies; redirects followed): (status, body)."""
    data = None if form is None else urllib.parse.urlencode(form).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:  # noqa: S310 (a local http URL)
            return int(reply.status), reply.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode(errors="replace")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def command() -> list[str]:
    """The `pyfsm` script of the running interpreter's environment (else ``python -m pyfsm``)."""
    script = Path(sys.executable).parent / "pyfsm"
    return [str(script)] if script.exists() else [sys.executable, "-m", "pyfsm"]


@contextlib.contextmanager
def consoles(specs: Mapping[str, Mapping[str, Any]]) -> Iterator[dict[str, Console]]:
    """Start one console per spec (Console's fields: dsn, actions_dsn, token, host) at once,
    wait until each answers, and stop them all when the block ends."""
    running: dict[str, Console] = {}
    try:
        for name, spec in specs.items():
            running[name] = Console(**spec).start()
        for one in running.values():
            one.wait()
        yield running
    finally:
        for one in running.values():
            one.stop()


@contextlib.contextmanager
def console(
    dsn: str, *, actions_dsn: str | None = None, token: str | None = None, host: str = "127.0.0.1"
) -> Iterator[Console]:
    """Run `pyfsm web --dsn DSN [--allow-actions --actions-dsn A] [--token T]` until the block ends."""
    with consoles({"one": {"dsn": dsn, "actions_dsn": actions_dsn, "token": token, "host": host}}) as running:
        yield running["one"]
