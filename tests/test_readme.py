"""The README's Python examples run, in order, against a fresh database."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_readme_has_examples() -> None:
    assert len(python_blocks()) >= 2


def test_readme_examples_run(make_database, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PYFSM_DSN", make_database("pyfsm_readme").dsn())
    namespace: dict[str, object] = {}
    try:
        for number, block in enumerate(python_blocks(), 1):
            exec(compile(block, f"README.md python block {number}", "exec"), namespace)  # noqa: S102
    finally:
        store = namespace.get("store")
        if store is not None:
            store.close()  # type: ignore[attr-defined]


def test_readme_diagram_is_what_pyfsm_graph_draws() -> None:
    from pyfsm.definition_file import load_machines
    from pyfsm.diagram import mermaid

    [block] = re.findall(r"```mermaid\n(.*?)```", README.read_text(), re.S)
    [machine] = load_machines(README.parent / "examples" / "order.yaml")
    assert block.strip() == mermaid(machine)
