"""Every object, error number and command the README and docs/*.md name exists (tests/helpers/docs_names.py
has the rules); and the checker fails a page that names something retired or unknown."""

from __future__ import annotations

import re
from pathlib import Path

import pymysql
import pytest
from helpers.docs_names import DEPRECATED_PAGE, Known, check, installed_objects, known_commands, known_errors

from pyfsm import Machine, Store
from pyfsm.cli import build_parser
from pyfsm.schema import install as schema

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))]
SAMPLE = "docsample"  # a type name that occurs in no other object's name


@pytest.fixture(scope="module")
def known(make_database) -> Known:  # type: ignore[no-untyped-def]
    """What a fresh install with one type defined holds, and pyfsm's errors and commands. The
    type has a timeout, so that its objects include the timer triggers, which only types
    with timeouts get, and is attached to a table with a copied column, so that they include
    the triggers and the adoption procedure only attached types get (docs/own-tables.md)."""
    settings = make_database("pyfsm_docnames")
    with Store(settings.dsn()) as store:
        store.migrate()
        store.define(
            Machine(
                name=SAMPLE,
                states=["a", "b"],
                start=["a"],
                final=["b"],
                transitions=[("go", "a", "b")],
                timeouts={"a": ("1d", "go")},
            )
        )
        table = pymysql.connect(**settings.connect_kwargs())
        try:
            with table.cursor() as cur:
                cur.execute(
                    f"CREATE TABLE {SAMPLE}_rows (id INT NOT NULL PRIMARY KEY, st VARCHAR(8) NULL, n INT NOT NULL DEFAULT 0) ENGINE=InnoDB"
                )
        finally:
            table.close()
        store.attach(SAMPLE, table=f"{SAMPLE}_rows", key="id", state="st", columns=["n"])
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        objects = installed_objects(conn, SAMPLE)
    finally:
        conn.close()
    classes, errnos = known_errors()
    deprecated = frozenset(d.name for d in schema.DEPRECATED)
    return Known(objects, deprecated, known_commands(build_parser()), classes, errnos)


@pytest.mark.parametrize("page", PAGES)
def test_every_name_a_page_uses_exists(page: str, known: Known) -> None:
    problems = check((ROOT / page).read_text(), page, known)
    assert not problems, "stale names:\n" + "\n".join(problems)


def test_every_command_is_on_the_command_line_page() -> None:
    page = (ROOT / "docs" / "cli.md").read_text()
    assert [c for c in known_commands(build_parser()) if f"pyfsm {c} " not in page] == []


def test_every_store_method_is_on_the_python_page() -> None:
    page = (ROOT / "docs" / "python.md").read_text()
    methods = [m for m in vars(Store) if not m.startswith("_") and callable(getattr(Store, m))]
    assert methods and [m for m in methods if not re.search(rf"^\|[^|]*`{m}\(", page, re.M)] == []


def test_every_error_class_is_on_the_errors_page() -> None:
    """The other direction: a new error class is documented (its number is checked above)."""
    page = (ROOT / "docs" / "errors.md").read_text()
    classes, _ = known_errors()
    assert [n for n in classes if n != "FsmError" and not re.search(rf"^\| `{n}` \|", page, re.M)] == []


def added(known: Known, text: str, page: str = "README.md") -> list[str]:
    """The problems a text adds to a page that had none of its own."""
    before = check((ROOT / page).read_text(), page, known)
    return [p for p in check((ROOT / page).read_text() + "\n\n" + text, page, known) if p not in before]


def test_a_readme_naming_a_retired_trigger_fails(known: Known) -> None:
    [problem] = added(known, "Transitions are applied by the trigger `fsm_order_bu_v3`.")
    assert problem.startswith("README.md:") and "`fsm_order_bu_v3`" in problem
    [problem] = added(known, "The history trigger (`_hbu_v2`) lets the flip through.")
    assert "`_hbu_v2`" in problem


def test_placeholders_and_example_types_stand_for_the_defined_type(known: Known) -> None:
    assert (
        added(
            known,
            "`fsm_{type}_bu_v13`, `fsm_{type}_send_v5`, `fsm_v_{type}`, `fsm_door_send_many_v3`, "
            "`fsm_v_ticket_transitions`, `fsm_ticket_*_v1`, `fsm_v_%`, `_hbu_v5`",
        )
        == []
    )
    problems = added(known, "`fsm_{type}_bu_v3` and `fsm_{name}_send_v3` and `fsm_invoice_send_v3`")
    assert [p.split(": ")[1] for p in problems] == [
        "`fsm_{type}_bu_v3`",
        "`fsm_{name}_send_v3`",
        "`fsm_invoice_send_v3`",
    ]


def test_an_unknown_command_or_option_fails(known: Known) -> None:
    problems = added(
        known,
        "Run `pyfsm frobnicate order` or `pyfsm send order o-1 pay --bogus`.\n\n"
        "```text\npyfsm relay --lag --nope   # --not-an-option-of-relay\n```",
    )
    assert [p.split(": ")[1] for p in problems] == [
        "`pyfsm frobnicate`",
        "`pyfsm send --bogus`",
        "`pyfsm relay --nope`",
    ]
    assert added(known, "`pyfsm history order o-1 --json | jq --raw-output .` and `from pyfsm import Store`") == []


def test_error_numbers_must_be_pyfsms_and_map_to_the_class_named(known: Known) -> None:
    problems = added(
        known,
        "| class | errno |\n| --- | --- |\n| `Deadlock` | 1213, 1142 |\n\n"
        "A refusal (31999); `Conflict` (31008); **31016** (`TransactionOpen`); 31000-31999.",
    )
    assert [p.split(": ", 1)[1] for p in problems] == [
        "error 1142 is given as Deadlock, but pyfsm maps it to AccessDenied",
        "error 31999: pyfsm has no such error number",
        "error 31008 is given as Conflict, but pyfsm maps it to InvalidData",
    ]


def test_deprecated_names_only_where_the_reference_says_so(known: Known) -> None:
    [name] = sorted(n for n in known.deprecated if "{type}" not in n)[:1]
    [problem] = added(known, f"Call `{name}`.")
    assert problem.startswith("README.md:") and f"`{name}`" in problem and "deprecated" in problem
    assert [
        p
        for p in added(known, f"It stays for its callers: `{name}`.", DEPRECATED_PAGE)
        if f"`{name}`" in p and "say so" in p
    ]
    assert added(known, f"`{name}` is deprecated: call its successor.", DEPRECATED_PAGE) == []
    assert (
        added(known, f"### `{name}`\n\nDeprecated since 0.3.0.\n\n```sql\nCALL {name}();\n```", DEPRECATED_PAGE) == []
    )
