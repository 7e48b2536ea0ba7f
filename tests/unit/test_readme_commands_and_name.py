"""What a newcomer reads and runs first stays true: the distribution name that is ours on PyPI in
every install line, and the README's two commands wired to the server choice and run by CI."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DIST = "pyfsm-mysql"  # "pyfsm" on PyPI is an unrelated 2015 library, with a higher version than ours
INSTALL = re.compile(r"pip install\s+(?:-[-\w]+\s+)*['\"]?([A-Za-z0-9_.\-]+)(\[[\w,]+\])?")


def _texts() -> list[tuple[str, str]]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "pyfsm").rglob("*.py"))]
    return [(f.relative_to(ROOT).as_posix(), f.read_text(encoding="utf-8")) for f in files]


def test_the_distribution_is_pyfsm_mysql_and_the_import_name_pyfsm() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == DIST
    assert project["scripts"] == {"pyfsm": "pyfsm.cli:main"}
    # the dev extra names its own distribution for the web extra
    assert f"{DIST}[web]" in project["optional-dependencies"]["dev"]
    extras = set(project["optional-dependencies"])
    readme = (ROOT / "README.md").read_text()
    for extra in extras:
        assert f"| `{extra}` |" in readme, f"the README's Install section lists the {extra} extra"


def test_every_install_line_names_our_distribution() -> None:
    wrong = []
    for name, text in _texts():
        for match in INSTALL.finditer(text):
            package = match.group(1)
            if package.startswith(".") or package in {"-e", "-U"}:
                continue  # the checkout itself
            if package.split("[")[0].lower() in {"pyfsm", "pyfsm_mysql"} or (match.group(2) and package != DIST):
                wrong.append(f"{name}: {match.group(0)}")
    assert not wrong, "install lines that do not install pyfsm-mysql:\n" + "\n".join(wrong)
    assert any(f"pip install {DIST}" in text for name, text in _texts() if name == "README.md")


def test_the_readmes_commands_choose_their_server_and_ci_runs_them() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "| `make demo` |" in readme and "| `make test` |" in readme
    makefile = (ROOT / "Makefile").read_text()
    recipes = {m.group(1): m.group(2) for m in re.finditer(r"^([a-z-]+):[^\n]*\n((?:\t[^\n]*\n)+)", makefile, re.M)}
    assert "$(WITH_DEMO_SERVER)" in recipes["demo"] and "$(WITH_TEST_SERVER)" in recipes["test"]
    assert "WITH_TEST_SERVER := $(PY) scripts/dev_server.py --env PYFSM_TEST_DSN" in makefile
    assert "WITH_DEMO_SERVER := $(PY) scripts/dev_server.py --env PYFSM_DSN" in makefile
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make test$", ci, re.M), "CI runs the README's test command as written"
    # the no-server pass: a network namespace, the README's two commands inside it
    namespace = ci[ci.index("unshare -n") :]
    assert "make demo" in namespace and "make test" in namespace
