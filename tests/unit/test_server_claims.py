"""A server version the README or the docs claim is one CI tests (issue 47).

The servers CI runs are read from `.ci/run` and the scripts it starts them with: the
machine's own MariaDB (the pass that runs `make test` on the server at 127.0.0.1:3306), and
each `scripts/<name> start` whose DSN a pass gives to `make` (its PRODUCT and PACKAGES say
which server, its SERIES which version). The README must name exactly those as
tested, MySQL 8.4 only beside Docker and never as run by CI; docs/servers.md and
docs/development.md must list the same servers and passes; and no page may claim a version
CI does not run ("For MySQL 8.0/8.4 and MariaDB 10.6+", "works on MariaDB 10.6")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CI = (ROOT / ".ci" / "run").read_text()
README = (ROOT / "README.md").read_text()
PAGES = ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))]

Server = tuple[str, str]  # ("MariaDB", "11.8"): a product and its major.minor version
#: The one server the docs may name beyond CI's: what `docker compose` and testcontainers start.
DOCKER_ONLY: Server = ("MySQL", "8.4")
#: Which product a script's server package is.
PACKAGE_PRODUCT = {"mariadb-server-core": "MariaDB", "mysql-server-core": "MySQL"}

VERSION = r"\d+(?:\.\d+)*"
#: "MariaDB 10.11 and 11.8", "MySQL 8.0/8.4", "MariaDB 10.6+", "MariaDB 11.6 and later"
MENTION = re.compile(
    rf"\b(MariaDB|MySQL)\s+({VERSION}\+?(?:\s*(?:/|,|\band\b|\bor\b)\s*{VERSION}\+?)*)"
    r"((?:\s+(?:and|or)\s+(?:later|newer|above))?)"
)
#: words that make the mention right after them a claim that pyfsm works there
CLAIM = re.compile(
    r"(?:^|\b)(?:for|supports?|supported (?:on|by)|works? (?:on|with)|runs? (?:on|against)"
    r"|tested (?:on|against|with)|compatible with)\s+(?:(?:the|both|any|all)\s+)?$",
    re.I,
)
#: ...or that make the mention right before them one ("On MariaDB 10.6 it works")
CLAIM_AFTER = re.compile(
    r"^(?:,?\s*(?:it|pyfsm))?\s*(?:works|runs|is supported|are supported|is tested|are tested)\b", re.I
)
#: what may stand between two servers of one list
LISTED = re.compile(r"^\s*(?:,|/|\band\b|\bor\b)?\s*(?:\band\b|\bor\b)?\s*$")
NEGATION = re.compile(r"\bnot\b|n't\b|\bnever\b", re.I)
#: what a sentence naming MySQL 8.4 must say of CI
NOT_RUN = re.compile(r"\b(?:does not|doesn't|do not|never|is not) (?:run|test)", re.I)
#: the claims issue 47 removed, refused wherever they appear
RETIRED = re.compile(r"MariaDB 10\.6\+|MySQL 8\.0\s*/\s*8\.4|MySQL 8\.0\+|MySQL 8\.0 and 8\.4")
#: (the variable holding its DSN, the script) for each server of the project's own CI starts
CI_SCRIPTS: list[tuple[str, str]] = re.findall(r"^(\w+)=\$\((scripts/[\w-]+) start\)$", CI, re.M)


def flat(text: str) -> str:
    """Text without code (fences, inline code: DSNs and commands are no claims), on one line."""
    text = re.sub(r"^```.*?^```", " ", text, flags=re.M | re.S)
    text = re.sub(r"`[^`]*`", "CODE", text)
    return " ".join(text.split())


def sentences(text: str) -> list[str]:
    """A text's sentences (and table cells' clauses), code left out."""
    return [s for s in re.split(r"(?<=[.;!?])\s+(?=[A-Z*(\[<#])|\s*\|\s*", flat(text)) if s.strip()]


def mentions(text: str) -> list[tuple[Server, str, int, int]]:
    """(server, the version as written, start, end of the mention) for each server version a
    text names; "MariaDB 11.6 and later" is written "11.6+"."""
    found = []
    for m in MENTION.finditer(text):
        for v in re.finditer(rf"{VERSION}\+?", m.group(2)):
            written = v.group(0) + ("+" if m.group(3).strip() else "")
            server = (m.group(1), ".".join(written.rstrip("+").split(".")[:2]))
            found.append((server, written, m.start(), m.end()))
    return found


def named(text: str) -> set[Server]:
    return {server for server, *_ in mentions(flat(text))}


# -- what CI runs ------------------------------------------------------------------------


def script_server(script: str) -> Server:
    """The server a `scripts/<name>` runs: PRODUCT (checked against its packages) and SERIES,
    the version it refuses to fetch anything but (its first comment line names the same)."""
    text = (ROOT / script).read_text()
    product = re.search(r"\bPRODUCT=(\w+)", text)
    packages = re.search(r'^PACKAGES="([^"]+)"', text, re.M)
    assert product and packages, f"{script} sets PRODUCT and PACKAGES"
    assert [PACKAGE_PRODUCT.get(p) for p in packages.group(1).split() if p in PACKAGE_PRODUCT] == [product.group(1)], (
        f"{script}: its server package is {product.group(1)}'s"
    )
    # SERIES: the version the script refuses to fetch anything but (scripts/debian-server.sh)
    series = re.search(rf"^SERIES=({VERSION})$", text, re.M)
    assert series, f"{script} sets SERIES, the version it fetches"
    header = text.splitlines()[1]
    assert f"a private {product.group(1)} {series.group(1)} " in header, f"{script}'s first comment: {header!r}"
    return product.group(1), series.group(1)


def ci_passes() -> dict[Server, str]:
    """Each server CI runs tests on, and the `make` command it runs there."""
    passes: dict[Server, str] = {}
    system = re.search(r"start the local (MariaDB|MySQL) \((\d+\.\d+)\)", CI)
    assert system and re.search(r"--exec /usr/sbin/mariadbd\b", CI), ".ci/run starts the machine's MariaDB"
    assert re.search(r"^make test$", CI, re.M), "and runs the README's test command on it"
    passes[(system.group(1), system.group(2))] = "make test"
    for variable, script in CI_SCRIPTS:
        run = re.search(rf"^PYFSM_TEST_DSN=\${variable} (make(?: [\w-]+)+)$", CI, re.M)
        assert run, f".ci/run starts {script} and runs tests on it"
        passes[script_server(script)] = run.group(1)
    return passes


CI_PASSES = ci_passes()
TESTED = set(CI_PASSES)


def test_ci_runs_mariadb_10_11_and_11_8_and_mysql_9_7() -> None:
    """What the rest of this file holds the docs to, read from CI itself."""
    assert CI_PASSES == {
        ("MariaDB", "10.11"): "make test",
        ("MySQL", "9.7"): "make test-server test-clusters test-browser",
        ("MariaDB", "11.8"): "make test-server test-browser",
    }


# -- the README --------------------------------------------------------------------------


def readme_section(heading: str) -> str:
    found = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", README, re.M | re.S)
    assert found, f"README.md has a section {heading!r}"
    return found.group(1)


def test_the_readmes_intro_names_exactly_the_servers_ci_runs() -> None:
    [intro] = re.findall(r"\[start:intro\] -->\n(.*?)<!-- --8<-- \[end:intro\]", README, re.S)
    assert named(intro) == TESTED
    assert not [w for _, w, *_ in mentions(flat(intro)) if w.endswith("+")], "no open-ended range"


def test_where_it_is_tested_names_ci_s_servers_and_mysql_8_4_as_not_run() -> None:
    section = readme_section("Where it is tested")
    assert named(section) == TESTED | {DOCKER_ONLY}
    [docker] = [s for s in sentences(section) if DOCKER_ONLY in named(s)]
    assert "Docker" in docker and NOT_RUN.search(docker), docker


def test_the_readme_names_no_other_server_and_mysql_8_4_only_beside_docker() -> None:
    assert named(README) <= TESTED | {DOCKER_ONLY}
    lone = [s for s in sentences(README) if DOCKER_ONLY in named(s) and "Docker" not in s]
    assert lone == [], "MySQL 8.4 named without Docker"


def test_the_readme_shows_a_test_command_per_project_server() -> None:
    """The quick start's rows for the servers the scripts run: `make <target> && PYFSM_TEST_DSN=... make test`."""
    assert CI_SCRIPTS
    for _, script in CI_SCRIPTS:
        product, version = script_server(script)
        port = re.search(r"\bDEFAULT_PORT=(\d+)", (ROOT / script).read_text())
        assert port
        command = f"PYFSM_TEST_DSN=mysql://root@127.0.0.1:{port.group(1)}/test make test`"
        rows = [r for r in README.splitlines() if r.endswith(f"{command} |")]
        assert len(rows) == 1 and f"{product} {version}" in rows[0], f"a quick start row for {script}"


# -- the pages ---------------------------------------------------------------------------


def table_rows(text: str, heading: str) -> list[list[str]]:
    """The rows (cells, header left out) of the first table of a `## heading` section."""
    found = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert found, f"no section {heading!r}"
    table = re.search(r"(?:^\|.*\n)+", found.group(1), re.M)
    assert table, f"section {heading!r} has a table"
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in table.group(0).splitlines()[2:]]


def test_the_servers_page_lists_the_servers_ci_runs() -> None:
    rows = table_rows((ROOT / "docs" / "servers.md").read_text(), "Which servers are tested")
    assert sorted((r[0].split()[0], r[0].split()[1]) for r in rows) == sorted(TESTED)


def test_the_development_page_lists_each_pass_with_its_command() -> None:
    rows = table_rows((ROOT / "docs" / "development.md").read_text(), "Servers")
    passes = {}
    for _, server_cell, runs in rows:
        if servers := named(server_cell):  # the last pass has none
            [server] = servers
            [passes[server]] = re.findall(r"`(make[^`]*)`", runs)
    assert passes == CI_PASSES


def claims(text: str) -> list[str]:
    """The sentences of a text that claim pyfsm works on a server CI does not run."""
    found = []
    for sentence in sentences(text):
        if RETIRED.search(sentence):
            found.append(sentence)
            continue
        claimed, previous_end = False, None
        for server, written, start, end in mentions(sentence):
            # "for MariaDB 10.11 and MySQL 8.0": a mention listed after a claimed one is claimed too
            listed = previous_end is not None and LISTED.match(sentence[previous_end:start])
            claimed = bool((listed and claimed) or CLAIM.search(sentence[:start]) or CLAIM_AFTER.search(sentence[end:]))
            previous_end = end
            if not claimed or NEGATION.search(sentence):
                continue
            docker = server == DOCKER_ONLY and "Docker" in sentence
            if (server not in TESTED and not docker) or written.endswith("+"):
                found.append(sentence)
                break
    return found


@pytest.mark.parametrize("page", PAGES)
def test_no_page_claims_a_server_ci_does_not_run(page: str) -> None:
    assert claims((ROOT / page).read_text()) == []


@pytest.mark.parametrize(
    "text",
    [
        "For MySQL 8.0/8.4 and MariaDB 10.6+, from Python 3.11+.",
        "pyfsm works on MariaDB 10.6 and MySQL 9.7.",
        "It is tested against MySQL 8.4 as well.",
        "Supports MariaDB 10.11 and later.",
        "| server | For MySQL 8.0 |",
        "On MariaDB and MySQL 8.0 it works; a lock taken through it is released as before.",
        "MariaDB 10.6+ is supported.",
        "For MariaDB 10.11 and MySQL 8.0, from Python 3.11+.",
    ],
)
def test_the_check_refuses_a_claim_ci_does_not_back(text: str) -> None:
    assert claims(text) != []


@pytest.mark.parametrize(
    "text",
    [
        "For MariaDB 10.11 and 11.8 and MySQL 9.7, the servers its tests run on; from Python 3.11+.",
        "MariaDB 10.3+ and MySQL 8.0.29+ turn the other types' branches into impossible WHEREs.",
        "MySQL 8.0 and later start with it on, MariaDB with it off.",
        "Else MySQL 8.4 in Docker (testcontainers) where a Docker engine answers.",
        "MySQL 8.4 is not run by CI, and neither is MariaDB 10.6.",
        "Lock names are 64 characters at most, as MySQL 8 requires.",
        "Connect to `mysql://root@127.0.0.1:3307/test` for MySQL 9.7.",
    ],
)
def test_the_check_lets_facts_and_tested_servers_through(text: str) -> None:
    assert claims(text) == []
