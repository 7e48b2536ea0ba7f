"""The command line as a user runs it (a subprocess, in tests/: ``helpers.engine_fixtures:...``
names a process there) and in this process (``in_process``: no interpreter start-up)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

from pyfsm.cli import main

TESTS = Path(__file__).resolve().parents[1]


def pyfsm(*args: str) -> subprocess.CompletedProcess[str]:
    """The command line in a subprocess; a replica set in the caller's environment must not
    move its reads (the tests name --read-dsn when they mean it)."""
    env = {k: v for k, v in os.environ.items() if k != "PYFSM_READ_DSN"}
    return subprocess.run(
        [sys.executable, "-m", "pyfsm", *args], capture_output=True, text=True, timeout=120, cwd=TESTS, env=env
    )


def in_process(*args: str) -> subprocess.CompletedProcess[str]:
    """`pyfsm ARGS` through pyfsm.cli.main in this process (no interpreter start-up): for --help."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse's --help and usage errors
            code = exc.code if isinstance(exc.code, int) else 1
    return subprocess.CompletedProcess(["pyfsm", *args], code, out.getvalue(), err.getvalue())
