"""A newcomer's first contact: the README's commands choose their server (scripts/dev_server.py).

The whole path on a machine where nothing listens (the project's MySQL started and used by
`make demo` and `make test`) runs in .ci/run, in a network namespace after the suite's passes;
here: the greeting probe against the real server, and the one line a machine with no server,
no project MySQL and no Docker gets, in a network namespace of its own where one can be made.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import dev_server
import pytest

from pyfsm.db import Settings

SCRIPT = Path(dev_server.__file__)


def test_the_test_server_answers_the_probe(server: Settings) -> None:
    assert dev_server.answers_mysql(server.host, server.port) is True


def _can_unshare() -> bool:
    if not shutil.which("unshare") or os.geteuid() != 0:
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=30, check=False).returncode == 0


def test_no_server_anywhere_gives_one_line_saying_what_to_set(tmp_path: Path) -> None:
    if not _can_unshare():
        pytest.skip("needs `unshare -n` (root): a network namespace where nothing listens")
    # nothing listens in the namespace; an empty cache and a PATH without apt-get, dpkg-deb and
    # docker stand for a machine that is not Debian and has no Docker engine
    unshare = shutil.which("unshare")
    assert unshare
    env = {"PATH": str(tmp_path / "bin"), "HOME": str(tmp_path), "PYFSM_MYSQL_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run(
        [
            unshare,
            "-n",
            sys.executable,
            str(SCRIPT),
            "--env",
            "PYFSM_TEST_DSN",
            "--database",
            "test",
            "--",
            sys.executable,
            "-c",
            "print('the command ran')",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2, proc
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert "nothing answers at 127.0.0.1:3306" in lines[0]
    assert lines[0].endswith("set PYFSM_TEST_DSN=mysql://USER:PASSWORD@HOST:PORT/test")
