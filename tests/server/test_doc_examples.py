"""The docs' examples run: the README's blocks and then every page's Python blocks, in the order
of the site's nav, as one program on a fresh database (the pages continue the README's
example); the SQL tour of docs/sql.md as one script; and the diagram is what `pyfsm graph` draws."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from pyfsm import Store, db

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BLOCK = re.compile(r"```(python|sql)\n(.*?)```|<!-- sync: (\w+) -->", re.S)
STATEMENT = re.compile(r"(?:'(?:[^'\\]|\\.)*'|--[^\n]*|[^;'-]|-)+")  # up to a ; outside strings and comments


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


def test_the_pages_are_the_nav() -> None:
    pages = nav_pages()
    assert sorted(pages) == sorted((ROOT / "docs").glob("*.md"))
    assert blocks(README, ("python",))  # the README keeps its example


def test_python_examples_run_in_reading_order(make_database, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    settings = make_database("pyfsm_readme")
    monkeypatch.setenv("PYFSM_DSN", settings.dsn())
    namespace: dict[str, object] = {}
    try:
        # the README's SQL continues its Python example, so it runs in between
        for path, kinds in [(README, ("python", "sql")), *((page, ("python",)) for page in nav_pages())]:
            for number, (kind, text) in enumerate(blocks(path, kinds), 1):
                if kind == "sql":
                    run_sql(settings, text)
                else:
                    exec(compile(text, f"{path.relative_to(ROOT)} block {number}", "exec"), namespace)  # noqa: S102
    finally:
        store = namespace.get("store")
        if store is not None:
            store.close()  # type: ignore[attr-defined]


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
