"""The built wheel works on its own: packaged SQL and migrations, console script, a real send.

Builds a wheel of this checkout, installs it into a fresh virtual environment (dependencies
from the package index; pip's cache keeps that quick), and from a directory outside the
repository migrates an empty database and drives a small machine through it. This catches
what the editable install hides: files missing from the wheel, resources found through the
source checkout instead of the package, a broken entry point.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: Files the wheel must carry: the force-included sql/ and migrations/ trees and the typing marker.
REQUIRED_IN_WHEEL = (
    "pyfsm/sql/procedures/fsm_send_v4.sql",
    "pyfsm/sql/machine/triggers/fsm_{type}_bu_v13.sql",
    "pyfsm/sql/machine/procedures/fsm_{type}_fire_v2.sql",
    "pyfsm/migrations/sql/0022/templates/trigger_bu_v9.sql",
    "pyfsm/migrations/sql/0024/templates/trigger_bu_v11.sql",
    "pyfsm/migrations/sql/0001-0010/templates/send_v1.sql",
    "pyfsm/migrations/sql/0011/procedures/fsm_define_v4.sql",
    "pyfsm/migrations/env.py",
    "pyfsm/migrations/versions/0001_initial.py",
    "pyfsm/py.typed",
)

BUILD_TIMEOUT = 60
VENV_TIMEOUT = 60
INSTALL_TIMEOUT = 180
RUN_TIMEOUT = 60

SNIPPET = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import pyfsm
    from pyfsm import Machine, Store
    from pyfsm.resources import migrations_dir, sql_dir

    venv = Path(sys.prefix).resolve()
    for what, path in (("pyfsm", pyfsm.__file__), ("sql", sql_dir()), ("migrations", migrations_dir())):
        resolved = Path(path).resolve()
        assert resolved.is_relative_to(venv), f"{what} comes from {resolved}, not from the fresh venv {venv}"

    machine = Machine(
        name="door",
        states=["open", "closed"],
        start=["open"],
        transitions=[("close", "open", "closed"), ("open", "closed", "open")],
    )
    with Store(sys.argv[1]) as store:
        store.define(machine)
        first = store.send("door", "d1", "close")
        second = store.send("door", "d1", "open")
        third = store.send("door", "d1", "close")
    print(f"STATES {first.to_state} {second.to_state} {third.to_state}")
    """
)


def _clean_env() -> dict[str, str]:
    """The environment minus anything that would let the checkout or the test venv leak in."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP", "PIP_REQUIRE_VIRTUALENV")
    }
    env["PYTHONNOUSERSITE"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_NO_INPUT"] = "1"
    return env


def _text(output: str | bytes | None) -> str:
    # TimeoutExpired may carry bytes even with text=True.
    if isinstance(output, bytes):
        return output.decode("utf-8", "replace")
    return output or ""


def _run(args: list[str | Path], *, cwd: Path, timeout: float, what: str) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(
            [str(a) for a in args],
            cwd=cwd,
            env=_clean_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        out, err = (_text(exc.stdout), _text(exc.stderr))
        pytest.fail(f"{what} did not finish within {timeout} s:\n--- stdout\n{out}\n--- stderr\n{err}")
    if proc.returncode != 0:
        pytest.fail(f"{what} failed (exit {proc.returncode}):\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")
    return proc


def _has_cli_main(source: str) -> bool:
    """Whether pyfsm/cli.py defines a top-level ``main`` (function or assignment)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return True  # let the console script run and report the error itself
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "main":
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "main" for t in node.targets):
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name) == "main" for a in node.names):
            return True
    return False


def test_wheel_installs_and_runs_in_a_fresh_venv(make_database, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    if importlib.util.find_spec("hatchling") is None:
        pytest.skip(
            "hatchling is not installed in this environment, so the wheel cannot be built without "
            "network build isolation; install it (pip install -e '.[dev]') to run this test"
        )

    # 1. Build the wheel from the checkout with the test venv's own hatchling.
    dist = tmp_path / "dist"
    _run(
        [sys.executable, "-m", "pip", "wheel", REPO, "--no-deps", "--no-build-isolation", "-w", dist],
        cwd=tmp_path,
        timeout=BUILD_TIMEOUT,
        what="building the wheel",
    )
    wheels = sorted(dist.glob("pyfsm_mysql-*.whl"))
    assert len(wheels) == 1, f"expected one pyfsm wheel in {dist}, found {[w.name for w in dist.iterdir()]}"
    wheel = wheels[0]

    # 2. Its contents.
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        cli_source = zf.read("pyfsm/cli.py").decode("utf-8") if "pyfsm/cli.py" in names else None
    missing = [name for name in REQUIRED_IN_WHEEL if name not in names]
    assert not missing, f"{wheel.name} lacks {missing}; it holds:\n" + "\n".join(sorted(names))

    # 3. A fresh venv with the wheel installed (dependencies resolved from the index).
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", venv], cwd=tmp_path, timeout=VENV_TIMEOUT, what="creating the venv")
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    python = bindir / ("python.exe" if os.name == "nt" else "python")
    _run(
        [python, "-m", "pip", "install", wheel],
        cwd=tmp_path,
        timeout=INSTALL_TIMEOUT,
        what="installing the wheel into the fresh venv",
    )

    # 4. From outside the repository, so that the checkout is not importable: migrate an
    #    empty database, with the console script when the wheel ships one.
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    dsn = make_database("pyfsm_whl").dsn()
    if cli_source is not None and _has_cli_main(cli_source):
        script = bindir / ("pyfsm.exe" if os.name == "nt" else "pyfsm")
        assert script.exists(), f"the wheel ships pyfsm/cli.py but installed no {script.name} console script"
        _run([script, "migrate", "--dsn", dsn], cwd=workdir, timeout=RUN_TIMEOUT, what="`pyfsm migrate --dsn ...`")
    else:
        _run(
            [python, "-c", "import sys, pyfsm; pyfsm.Store(sys.argv[1]).migrate()", dsn],
            cwd=workdir,
            timeout=RUN_TIMEOUT,
            what="Store(dsn).migrate() (no pyfsm/cli.py with main yet)",
        )

    # 5. Define a machine and send events with the installed package.
    snippet = workdir / "door.py"
    snippet.write_text(SNIPPET, encoding="utf-8")
    proc = _run([python, snippet, dsn], cwd=workdir, timeout=RUN_TIMEOUT, what="the door snippet")
    assert proc.stdout.strip().splitlines()[-1] == "STATES closed open closed", proc.stdout + proc.stderr
