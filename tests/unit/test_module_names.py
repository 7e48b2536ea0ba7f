"""Every ``pyfsm.<dotted>`` name the prose mentions exists: in the docstrings and comments of
pyfsm/ and tests/, and in docs/*.md. A module that was moved or renamed (``pyfsm.batch``
became ``pyfsm.engine.batch``) leaves no pointer behind to a module that is gone.

A name resolves when each part after ``pyfsm`` is a submodule or an attribute of what comes
before it (a dataclass field without a default counts as an attribute of its class)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import io
import re
import sys
import tokenize
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: ``pyfsm.a.b``, not when it is part of a path, a URL or another word (``/pyfsm.x``, ``x.pyfsm.y``).
DOTTED = re.compile(r"(?<![\w./-])pyfsm(?:\.[A-Za-z_]\w*)+")


def recorded_error_types() -> set[str]:
    """The exception types fsm_errors records as ``pyfsm.<Name>`` (``pyfsm.HandlerFailed``,
    ``pyfsm.StepAbandoned``): classes of pyfsm that name themselves so, never raised to a caller,
    so not importable from pyfsm. The docs name them as a failed instance's error shows them."""
    importlib.import_module("pyfsm")
    return {
        f"pyfsm.{value.__qualname__}"
        for name, module in list(sys.modules.items())
        if name.startswith("pyfsm.")
        for value in vars(module).values()
        if isinstance(value, type) and value.__module__ == "pyfsm"
    }


#: Dotted names that are not Python paths.
NOT_PATHS = recorded_error_types()


def prose(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every docstring, other string statement and comment of a Python file."""
    source = path.read_text()
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            yield node.lineno, node.value.value
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


def mentions() -> dict[str, list[str]]:
    """Each dotted name, with where it is written (``file:line``)."""
    found: dict[str, list[str]] = {}

    def add(where: str, text: str) -> None:
        for name in DOTTED.findall(text):
            found.setdefault(name, []).append(where)

    for folder in ("pyfsm", "tests"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == Path(__file__).resolve():
                continue  # names modules that are gone, on purpose
            for line, text in prose(path):
                add(f"{path.relative_to(ROOT)}:{line}", text)
    for path in sorted((ROOT / "docs").glob("*.md")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            add(f"{path.relative_to(ROOT)}:{number}", line)
    return found


def resolve(name: str) -> Any:
    """The object ``name`` names; AttributeError or ImportError if there is none."""
    parts = name.split(".")
    obj: Any = importlib.import_module(parts[0])
    for at, part in enumerate(parts[1:], 2):
        prefix = ".".join(parts[:at])
        if hasattr(obj, "__path__") and importlib.util.find_spec(prefix) is not None:
            obj = importlib.import_module(prefix)
        elif hasattr(obj, part):
            obj = getattr(obj, part)
        elif (
            isinstance(obj, type)
            and at == len(parts)
            and any(part in getattr(klass, "__annotations__", {}) for klass in obj.__mro__)
        ):
            return None  # a field without a default: declared, but no class attribute
        else:
            raise AttributeError(f"{prefix}: {'.'.join(parts[: at - 1])} has no attribute or submodule {part!r}")
    return obj


MENTIONS = mentions()


def test_the_scan_finds_the_names() -> None:
    assert {"pyfsm.HandlerFailed", "pyfsm.StepAbandoned"} <= NOT_PATHS
    assert {"pyfsm.engine.batch", "pyfsm.relay.leadership", "pyfsm.Store", "pyfsm.db.pool"} <= set(MENTIONS)
    assert "pyfsm.x" in DOTTED.findall("see pyfsm.x.") and DOTTED.findall("a/pyfsm.x b.pyfsm.y pyfsm-mysql") == []


@pytest.mark.parametrize("name", sorted(set(MENTIONS) - set(NOT_PATHS)))
def test_a_named_module_or_attribute_exists(name: str) -> None:
    try:
        resolve(name)
    except (AttributeError, ImportError) as exc:
        pytest.fail(f"{name} does not exist ({exc}); named at {', '.join(MENTIONS[name])}")


def test_a_missing_name_is_caught() -> None:
    for gone in ("pyfsm.batch", "pyfsm.metrics_db", "pyfsm.engine.batch.nope", "pyfsm.Store.nope"):
        with pytest.raises((AttributeError, ImportError)):
            resolve(gone)
