"""What the README and the pages say of themselves and of pyfsm's names stays true: every page
is listed where a reader looks for it, each page can be read alone, the definition file's
fields are all in the command line page's table, and the commands named for a task are the
ones that do it."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

import dev_server  # scripts/dev_server.py, which the README's two commands run through
import pytest

from pyfsm import definition_file
from pyfsm.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text()
FLAT_README = " ".join(README.split())  # the README with its line breaks as spaces, for phrases
PAGES = sorted(DOCS.glob("*.md"))
#: a page that is only an include of a file outside docs/ (`--8<-- "CHANGELOG.md"`)
INCLUDE = re.compile(r'^--8<-- "([^"]+)"\s*$', re.M)
#: sentences that tie a page to the order the docs tests once ran the pages in
ORDER_TALK = re.compile(
    r"runs? after (?:them|it|the|page)|pages? before|this page's code|in (?:the )?reading order", re.I
)


def section(text: str, heading: str) -> str:
    """A `## heading` section's text, up to the next heading of that level."""
    found = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert found, f"no section {heading!r}"
    return found.group(1)


def included_file(page: Path) -> str | None:
    """The outside file a page only includes (benchmarks.md is BENCHMARKS.md), else None."""
    lines = [line for line in page.read_text().splitlines() if line.strip()]
    found = INCLUDE.match(lines[0]) if len(lines) == 1 else None
    return found.group(1) if found else None


def test_every_page_is_in_the_readmes_list_and_on_the_home_page() -> None:
    listed = section(README, "Documentation")
    home = (DOCS / "index.md").read_text()
    missing_readme = [
        p.name
        for p in PAGES
        if p.name != "index.md" and f"(docs/{p.name})" not in listed and f"({included_file(p)})" not in listed
    ]
    missing_home = [p.name for p in PAGES if p.name != "index.md" and f"]({p.name})" not in home]
    assert (missing_readme, missing_home) == ([], [])


def test_no_page_speaks_of_the_order_its_code_runs_in() -> None:
    found = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
        for p in [ROOT / "README.md", *PAGES]
        if p.name != "development.md"  # it describes the docs tests themselves
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if ORDER_TALK.search(line)
    ]
    assert found == []


def test_the_order_talk_pattern_catches_what_it_is_for() -> None:
    assert ORDER_TALK.search("the pages before defined `order` already, and this page's code")
    assert ORDER_TALK.search("defined `order` already, and this page's code runs after it)")
    assert not ORDER_TALK.search("The examples on this page continue the [example](index.md#example)")


def test_the_definition_file_fields_are_in_the_command_line_pages_table() -> None:
    cli = (DOCS / "cli.md").read_text()
    table = re.search(r"^\| field \| required \|.*?\n\n", cli, re.M | re.S)
    assert table, "docs/cli.md has the definition file's table"
    rows = re.findall(r"^\| `([^`]+)` \|", table.group(0), re.M)
    fields = {
        *definition_file.MACHINE_FIELDS,
        *(f"transitions[].{f}" for f in definition_file.GUARD_FIELDS),
    }
    assert sorted(fields - set(rows)) == []
    assert sorted(set(rows) - fields) == []
    options = next(r for r in table.group(0).splitlines() if r.startswith("| `options`"))
    timeouts = next(r for r in table.group(0).splitlines() if r.startswith("| `timeouts`"))
    assert [o for o in definition_file.OPTION_FIELDS if f"`{o}`" not in options] == []
    assert [f for f in definition_file.TIMEOUT_FIELDS if f not in timeouts] == []


def test_a_changed_machine_is_defined_by_a_command_that_stores_definitions() -> None:
    """changing-machines.md's ways of defining a new version name `pyfsm install`, whose help
    says it stores definitions, and no command that does not (`pyfsm sync` renders)."""
    page = (DOCS / "changing-machines.md").read_text()
    first = re.search(r"Defining a changed machine \((.*?)\)", page, re.S)
    assert first, "changing-machines.md says how a changed machine is defined"
    named = re.findall(r"`pyfsm ([a-z-]+)", first.group(1))
    helps = {name: sub.description or "" for name, sub in subcommands().items()}
    assert named == ["install"]
    assert [n for n in named if not helps[n].startswith("store machine definitions")] == []
    assert not helps["sync"].startswith("store machine definitions")


def test_pyfsm_define_is_named_only_beside_install() -> None:
    """`pyfsm define` is install's name from pyfsm 0.1: a page may mention it as that alias,
    on a line that names install too, never as the command to run."""
    assert "define" in subcommands() and "install" in subcommands()
    found = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
        for p in [ROOT / "README.md", *PAGES]
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"(?<![\w./-])pyfsm define\b", line) and "install" not in line
    ]
    assert found == []


def test_the_readmes_intro_leaves_ci_and_clusters_for_later() -> None:
    [intro] = re.findall(r"\[start:intro\] -->\n(.*?)<!-- --8<-- \[end:intro\]", README, re.S)
    assert [w for w in ("CI", "Galera", "Group Replication", "testcontainers") if w in intro] == []
    ci = FLAT_README.index("CI runs the whole test suite")
    assert ci > FLAT_README.index("## Example")
    assert "Galera" in FLAT_README[ci:] and "Group Replication" in FLAT_README[ci:]


def test_the_readme_says_what_the_first_run_needs_and_how_long_the_tests_take() -> None:
    quickstart = README[README.index("[start:quickstart]") : README.index("[end:quickstart]")]
    [row] = [r for r in quickstart.splitlines() if r.endswith("| `make test` |")]
    quickstart = " ".join(quickstart.split())
    assert re.search(r"about \d+ minutes", row), row
    assert "the package index" in quickstart and "No matching distribution found for hatchling" in quickstart
    assert "`make venv`" in quickstart and "online" in quickstart


@pytest.mark.parametrize(("env", "database"), [("PYFSM_DSN", "pyfsm_demo"), ("PYFSM_TEST_DSN", "test")])
def test_the_readme_shows_the_dsn_the_no_server_line_asks_for(
    env: str, database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no server anywhere, the one line `make demo` / `make test` ends with names the
    variable and its form, and the README's quick start shows the same."""
    monkeypatch.delenv(env, raising=False)
    makefile = (ROOT / "Makefile").read_text()
    assert f"scripts/dev_server.py --env {env} --database {database} --" in makefile
    with pytest.raises(dev_server.NoServer) as refused:
        with dev_server.server_dsn(
            env, database, probe=lambda *_: False, own_can_run=lambda: False, docker=lambda: False
        ):
            pass
    [asked] = re.findall(rf"set ({env}=\S+)$", str(refused.value))
    quickstart = README[README.index("[start:quickstart]") : README.index("[end:quickstart]")]
    assert f"`{asked}`" in quickstart
    assert os.environ.get(env) is None


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    [action] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)
