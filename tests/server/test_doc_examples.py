"""The docs' examples run: the README's example and each page's code blocks, every page on its
own, as a reader who opened only that page would run it; the SQL tour of docs/sql.md as one
script; and the diagram is what `pyfsm graph` draws.

A page runs in a database of its own, with $PYFSM_DSN naming it. Its blocks set up what they
use, or the page says before its first block that it continues the README's example
(`continue the [example](index.md#example)`): then the example runs first, as the reader
would have run it. A page whose blocks do neither gets a database `pyfsm migrate` set up, as
docs/index.md says every page may assume."""

from __future__ import annotations

import multiprocessing
import os
import re
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pymysql
import pytest

from pyfsm import Store, db

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BLOCK = re.compile(r"```(python|sql)\n(.*?)```|<!-- sync: (\w+) -->", re.S)
STATEMENT = re.compile(r"(?:'(?:[^'\\]|\\.)*'|--[^\n]*|[^;'-]|-)+")  # up to a ; outside strings and comments
#: how a page says that its examples continue the README's
CONTINUES = re.compile(r"[Cc]ontinu\w*\s+the\s+\[example\]\(index\.md#example\)")
#: pages whose SQL a test of its own runs as one script (their own database, their own order)
SQL_ELSEWHERE = {
    "sql.md": "test_the_sql_tour_runs_as_one_script below",
    "sql-api.md": "tests/server/test_sql_api.py",
    "reporting.md": "tests/server/test_reporting_docs.py",
}


def nav_pages() -> list[Path]:
    """The site's pages in the order of its nav."""
    from mkdocs.config import load_config

    def walk(items: Any) -> Iterator[str]:
        for item in items if isinstance(items, list) else [items]:
            if isinstance(item, dict):
                for value in item.values():
                    yield from walk(value)
            else:
                yield item

    config = load_config(str(ROOT / "mkdocs.yml"))
    return [ROOT / config["docs_dir"] / page for page in walk(config["nav"])]


def blocks(path: Path, kinds: tuple[str, ...]) -> list[tuple[str, str]]:
    """(kind, text) of a page's code blocks of those kinds, and ("sync", type) for its sync markers."""
    return [
        (kind or "sync", text or machine)
        for kind, text, machine in BLOCK.findall(path.read_text())
        if (kind or "sync") in kinds
    ]


def page_blocks(path: Path) -> list[tuple[str, str]]:
    """What a reader of the page alone runs: its Python blocks, and its SQL where no other test runs it."""
    return blocks(path, ("python",) if path.name in SQL_ELSEWHERE else ("python", "sql"))


def continues_the_example(path: Path) -> bool:
    """Whether the page says, before its first code block, that it continues the README's example."""
    text = path.read_text()
    first = re.search(r"```(?:python|sql)\n", text)
    return bool(CONTINUES.search(text[: first.start() if first else len(text)]))


def checksum(conn: Any) -> tuple[Any, ...]:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() "
            "AND table_type = 'BASE TABLE' ORDER BY 1"
        )
        names = [row[0] for row in cur.fetchall()]
        cur.execute("CHECKSUM TABLE " + ", ".join(f"`{n}`" for n in names))
        return tuple(cur.fetchall())


def run_sql(settings: db.Settings, block: str) -> None:
    """Each statement of a block must succeed; a block starting `-- error: N` must fail with N
    and change nothing."""
    statements = [
        s for s in (re.sub(r"^\s*--.*$", "", part, flags=re.M).strip() for part in STATEMENT.findall(block)) if s
    ]
    expected = re.match(r"-- error: (\d+)\n", block)
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        conn.autocommit(True)
        before = checksum(conn) if expected else None
        for statement in statements:
            try:
                with conn.cursor() as cur:
                    cur.execute(statement)
                    while cur.nextset():
                        pass
            except pymysql.err.MySQLError as exc:
                assert expected and exc.args[0] == int(expected.group(1)), f"{statement}: {exc}"
                assert checksum(conn) == before, f"{statement} changed the database"
                return
        assert not expected, f"{block} did not fail"
    finally:
        conn.close()


def run_blocks(settings: db.Settings, path: Path, found: list[tuple[str, str]], namespace: dict[str, Any]) -> None:
    name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    for number, (kind, text) in enumerate(found, 1):
        if kind == "sql":
            run_sql(settings, text)
        else:
            exec(compile(text, f"{name} block {number}", "exec"), namespace)  # noqa: S102


def close_stores(namespace: dict[str, Any]) -> None:
    """Close what the blocks opened and left open (a `with Store()` block closes its own)."""
    for value in namespace.values():
        if isinstance(value, Store):
            value.close()


def pages_with_examples() -> list[Path]:
    return [page for page in nav_pages() if page_blocks(page)]


def test_the_pages_are_the_nav() -> None:
    pages = nav_pages()
    assert sorted(pages) == sorted((ROOT / "docs").glob("*.md"))
    assert blocks(README, ("python",))  # the README keeps its example
    assert not [p for p in SQL_ELSEWHERE if ROOT / "docs" / p not in pages]


def test_the_readme_example_runs_with_its_sql(make_database, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """The README's Python, then its SQL, which continues it, in a database the example migrates."""
    settings = make_database("pyfsm_readme")
    monkeypatch.setenv("PYFSM_DSN", settings.dsn())
    namespace: dict[str, Any] = {}
    try:
        run_blocks(settings, README, blocks(README, ("python", "sql")), namespace)
    finally:
        close_stores(namespace)


def configures_django(page: Path) -> bool:
    """Whether the page's examples configure Django, which a process can do only once."""
    return "settings.configure(" in page.read_text()


def run_page(page: Path, settings: db.Settings) -> None:
    """The page's blocks, in a database `pyfsm migrate` set up unless the page says otherwise."""
    os.environ["PYFSM_DSN"] = settings.dsn()
    found = page_blocks(page)
    namespace: dict[str, Any] = {}
    try:
        if continues_the_example(page):
            run_blocks(settings, README, blocks(README, ("python", "sql")), namespace)
        elif ".migrate()" not in next((text for kind, text in found if kind == "python"), ""):
            with Store(settings.dsn()) as store:  # `pyfsm migrate`, which the page may assume
                store.migrate()
        run_blocks(settings, page, found, namespace)
    finally:
        close_stores(namespace)


@pytest.mark.parametrize("page", pages_with_examples(), ids=lambda p: p.name)
def test_each_page_runs_on_its_own(page: Path, make_database, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """A page that configures Django runs in a process of its own, as a reader's would: Django's
    settings are the process's, and another test of this process (test_attach_orms) may have
    configured them for its own database."""
    settings = make_database("pyfsm_page")
    monkeypatch.setenv("PYFSM_DSN", settings.dsn())
    if not configures_django(page):
        run_page(page, settings)
        return
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        pool.submit(run_page, page, settings).result()


def test_a_page_that_leans_on_another_fails_alone(
    make_database, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """The harness gives a page only what it says it needs: a page that uses the README's
    `store` without saying so fails, and saying so is enough."""
    code = '```python\nassert store.get("order", "o-1001").state == "paid"\n```\n'
    silent, saying = tmp_path / "silent.md", tmp_path / "saying.md"
    silent.write_text("# A page\n\n" + code)
    saying.write_text("# A page\n\nThe examples on this page continue the [example](index.md#example).\n\n" + code)
    assert not continues_the_example(silent) and continues_the_example(saying)
    settings = make_database("pyfsm_page")
    monkeypatch.setenv("PYFSM_DSN", settings.dsn())
    namespace: dict[str, Any] = {}
    with pytest.raises(NameError):
        run_blocks(settings, silent, page_blocks(silent), namespace)
    try:
        run_blocks(settings, README, blocks(README, ("python", "sql")), namespace)
        run_blocks(settings, saying, page_blocks(saying), namespace)
    finally:
        close_stores(namespace)


def test_the_sql_tour_runs_as_one_script(make_database) -> None:  # type: ignore[no-untyped-def]
    settings = make_database("pyfsm_sqltour")
    tour = blocks(ROOT / "docs" / "sql.md", ("sql", "sync"))
    assert [k for k, _ in tour].count("sync") == 1
    with Store(settings.dsn()) as store:
        store.migrate()
        for kind, text in tour:
            if kind == "sync":
                store.sync(text)  # what `pyfsm sync <type>` does
            else:
                run_sql(settings, text)


def test_the_diagram_is_what_pyfsm_graph_draws() -> None:
    from pyfsm.definition_file import load_machines
    from pyfsm.reporting.diagram import mermaid

    [diagram] = [d for page in nav_pages() for d in re.findall(r"```mermaid\n(.*?)```", page.read_text(), re.S)]
    [machine] = load_machines(ROOT / "examples" / "order.yaml")
    assert diagram.strip() == mermaid(machine)


def test_the_readme_example_prints_what_it_shows_and_is_the_example_file(
    make_database,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The README's example prints what the block after it says, and its machine is
    examples/order.yaml's (one definition of `order`: following the README in a database that
    has the YAML's machine makes no new version)."""
    import contextlib
    import io

    from pyfsm.definition_file import load_machines

    text = README.read_text()
    shown = re.search(r"```python\n(.*?)```\s*It prints:\s*```text\n(.*?)```", text, re.S)
    assert shown, "the README's example is followed by `It prints:` and its output"
    code, output = shown.groups()
    monkeypatch.setenv("PYFSM_DSN", make_database("pyfsm_readme").dsn())
    namespace: dict[str, object] = {}
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(code, "README.md example", "exec"), namespace)  # noqa: S102
    finally:
        namespace["store"].close()  # type: ignore[attr-defined]
    assert printed.getvalue() == output
    [from_file] = load_machines(ROOT / "examples" / "order.yaml")
    assert namespace["order"] == from_file
