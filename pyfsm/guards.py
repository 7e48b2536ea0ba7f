"""Guards: a condition on an instance's data that a transition needs, checked by the database.

A guard is written in a small declarative language, never SQL. Its JSON form (what
definitions, files and ``fsm_define_v8`` hold) is one of:

* a test of one value: ``{"path": "$.total", "op": ">=", "value": 100}``. ``path`` is a JSON
  path into the instance's data: ``$`` then one or more ``.key`` (a key of ``[A-Za-z_]
  [A-Za-z0-9_]*``) or ``[n]`` (an array index); ``op`` is ``==``, ``!=``, ``<``, ``<=``, ``>``,
  ``>=``, ``in`` (``value`` a list), ``exists``, ``missing`` or ``is_null`` (no ``value``);
* ``{"all": [condition, ...]}``, ``{"any": [condition, ...]}``, ``{"not": condition}``.

What a test compares as (the same on MySQL and MariaDB, and in :func:`holds`):

* values compare only with values of their JSON type: a number with a number (as 64-bit
  floats), a string with a string (code point by code point: case and trailing spaces
  count), true/false with a boolean, null with null. ``"5" == 5`` is false;
* a missing key, or a value of another type, makes ``==``, ``in`` and the orderings false
  and ``!=`` true (``!=`` is exactly ``not ==``);
* ``[0]`` of a value that is not a list is that value itself, as MySQL's and MariaDB's JSON
  paths read it (``{"tags": "x"}``: ``tags[0] == "x"`` holds); ``[1]`` of it is missing;
* ``exists`` is true for a key that is there, even holding null; ``missing`` is its
  opposite; ``is_null`` is true only for a key that holds null;
* orderings (``<`` ...) take a number or a string; ``in`` a list of literals.

Literals are numbers (within +/- 2**53, where every integer is exact), strings of at most
GUARD_STRING_CHARS characters, true, false and null. A guard has at most GUARD_NODES
conditions and GUARD_LITERALS literals, nested at most GUARD_DEPTH deep, and may carry a short name (``guard_name``),
used in errors, listings and diagrams; without one it is described by its text.

In Python, :func:`data` builds tests and ``&``, ``|``, ``~`` combine them:

>>> paid = (data("total") >= 100) & data("address.city").exists()
>>> describe(paid)
'total >= 100 and address.city exists'
>>> holds(paid, {"total": 120, "address": {"city": "Lyon"}})
True
>>> holds(paid, {"total": "120", "address": {"city": "Lyon"}})
False
>>> to_json(data("country").is_in(["FR", "DE"]))
{'path': '$.country', 'op': 'in', 'value': ['FR', 'DE']}
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import InvalidDefinition
from .limits import (
    GUARD_DEPTH,
    GUARD_LIST_ITEMS,
    GUARD_LITERALS,
    GUARD_NAME_CHARS,
    GUARD_NODES,
    GUARD_NUMBER_LIMIT,
    GUARD_PATH_SEGMENTS,
    GUARD_STRING_CHARS,
)

COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")
ORDERINGS = ("<", "<=", ">", ">=")
UNARY = ("exists", "missing", "is_null")
OPERATORS = (*COMPARISONS, "in", *UNARY)
#: a path as guards accept it: safe between single quotes in SQL as it is
PATH = re.compile(r"\$(?:\.[A-Za-z_][A-Za-z0-9_]{0,63}|\[[0-9]{1,6}\])+")
SEGMENT = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[([0-9]+)\]")
#: a guard's name: printable, no control characters, no spaces at its ends
CONTROL = r"\x00-\x1f\x7f-\x9f"
NAME = re.compile(rf"[^{CONTROL} ](?:[^{CONTROL}]{{0,{GUARD_NAME_CHARS - 2}}}[^{CONTROL} ])?")

Literal = None | bool | int | float | str


class _Combines:
    """``a & b``, ``a | b`` and ``~a`` of conditions: all_of, any_of and not_."""

    def __and__(self, other: Condition) -> Condition:
        return All((self, other))  # type: ignore[arg-type]

    def __or__(self, other: Condition) -> Condition:
        return AnyOf((self, other))  # type: ignore[arg-type]

    def __invert__(self) -> Condition:
        return Not(self)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Test(_Combines):
    """``path op value``: one value of the data tested."""

    path: str
    op: str
    value: Any = None


@dataclass(frozen=True)
class All(_Combines):
    items: tuple[Condition, ...]


@dataclass(frozen=True)
class AnyOf(_Combines):
    items: tuple[Condition, ...]


@dataclass(frozen=True)
class Not(_Combines):
    item: Condition


Condition = Test | All | AnyOf | Not


@dataclass(frozen=True)
class Guard:
    """A transition's guard: ``condition`` and the short ``name`` errors, listings and
    diagrams call it by (None: its text, :func:`describe`, stands for it).

    >>> Guard(data("address").exists(), "address set").label
    'address set'
    >>> Guard(data("total") > 0).label
    'total > 0'
    """

    condition: Condition
    name: str | None = None

    @property
    def label(self) -> str:
        return label(self.condition, self.name)

    def to_json(self) -> dict[str, Any]:
        return to_json(self.condition)


def first_holding(
    rules: Iterable[tuple[str, Guard | None]], doc: Mapping[str, Any]
) -> tuple[str | None, tuple[str, ...]]:
    """Rules (target, guard) tried in order, as the transition trigger tries them: the target
    of the first whose guard holds for ``doc`` (one without a guard holds), or None, and the
    labels of the guards that refused before it."""
    refused: list[str] = []
    for target, condition in rules:
        if condition is None or holds(condition.condition, doc):
            return target, tuple(refused)
        refused.append(condition.label)
    return None, tuple(refused)


def guard(value: Any, name: Any = None, where: str = "guard") -> Guard:
    """``value`` (a Guard, a condition, or the JSON form) and ``name`` as a checked Guard."""
    if isinstance(value, Guard):
        if name is not None and name != value.name:
            raise InvalidDefinition(
                f"{where}: the guard is named twice ({value.name!r:.40}, {name!r:.40})",
                field="transitions",
                part="guard_name",
            )
        name, value = value.name, value.condition
    return Guard(parse(value, where), None if name is None else check_name(name, where))


class Path:
    """A place in an instance's data, to test: ``data("total") >= 100``."""

    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path

    def __eq__(self, value: object) -> Test:  # type: ignore[override]
        return Test(self.path, "==", value)

    def __ne__(self, value: object) -> Test:  # type: ignore[override]
        return Test(self.path, "!=", value)

    def __lt__(self, value: object) -> Test:
        return Test(self.path, "<", value)

    def __le__(self, value: object) -> Test:
        return Test(self.path, "<=", value)

    def __gt__(self, value: object) -> Test:
        return Test(self.path, ">", value)

    def __ge__(self, value: object) -> Test:
        return Test(self.path, ">=", value)

    __hash__ = None  # type: ignore[assignment]

    def is_in(self, values: Sequence[Literal]) -> Test:
        return Test(self.path, "in", tuple(values))

    def exists(self) -> Test:
        return Test(self.path, "exists")

    def missing(self) -> Test:
        return Test(self.path, "missing")

    def is_null(self) -> Test:
        return Test(self.path, "is_null")


def data(path: str) -> Path:
    """The value at ``path`` in the instance's data: ``"address.city"``, ``"items[0].sku"`` or
    a JSON path ``"$.address.city"``."""
    if not isinstance(path, str):
        raise InvalidDefinition(f"a guard's path must be a string, got {path!r:.80}", field="transitions", part="guard")
    return Path(path if path.startswith("$") else "$" + ("" if path.startswith("[") else ".") + path)


#: a column name as an attached type copies it into data (pyfsm.schema.attached.PLAIN)
COLUMN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def column(name: str) -> Path:
    """A column of an attached type's table (docs/own-tables.md), as the write leaves the row:
    ``column("total") >= 100``. The type copies the columns it was attached with
    (``Store.attach(..., columns=["total"])``) into each instance's data at every write of the
    row, so this is the path ``$.total`` of that copy, tested as any other; a column it does
    not copy is missing there (``==`` and the orderings false). Dates and times are copied as
    text (``'2026-11-28 10:00:00'``), numbers as numbers."""
    if not isinstance(name, str) or not COLUMN.fullmatch(name):
        raise InvalidDefinition(
            f"a column's name must be letters, digits and _ (at most 64), got {name!r:.80}",
            field="transitions",
            part="guard",
        )
    return Path("$." + name)


def all_of(*conditions: Condition) -> Condition:
    return All(tuple(conditions))


def any_of(*conditions: Condition) -> Condition:
    return AnyOf(tuple(conditions))


def not_(condition: Condition) -> Condition:
    return Not(condition)


# -- the JSON form, checked ---------------------------------------------------------------------


class _Checker:
    def __init__(self, where: str) -> None:
        self.where = where
        self.nodes = 0
        self.literals = 0

    def fail(self, problem: str) -> InvalidDefinition:
        return InvalidDefinition(f"{self.where}: {problem}", field="transitions", part="guard")

    def condition(self, node: Any, depth: int) -> Condition:
        self.nodes += 1
        if self.nodes > GUARD_NODES:
            raise self.fail(f"a guard has at most {GUARD_NODES} conditions")
        if depth > GUARD_DEPTH:
            raise self.fail(f"conditions nest at most {GUARD_DEPTH} deep")
        if isinstance(node, Test | All | AnyOf | Not):
            node = to_json(node, checked=False)
        if not isinstance(node, Mapping):
            raise self.fail(f"a condition must be an object, got {_shown(node)}")
        keys = set(node)
        for group in ("all", "any"):
            if group in keys:
                if keys != {group}:
                    raise self.fail(f"{group!r} takes a list and nothing beside it, got keys {sorted(map(str, keys))}")
                items = node[group]
                if not isinstance(items, list | tuple) or not items:
                    raise self.fail(f"{group!r} takes a non-empty list of conditions, got {_shown(items)}")
                checked = tuple(self.condition(item, depth + 1) for item in items)
                return All(checked) if group == "all" else AnyOf(checked)
        if "not" in keys:
            if keys != {"not"}:
                raise self.fail(f"'not' takes one condition and nothing beside it, got keys {sorted(map(str, keys))}")
            return Not(self.condition(node["not"], depth + 1))
        return self.test(node, keys)

    def test(self, node: Mapping[str, Any], keys: set[Any]) -> Test:
        op = node.get("op")
        if "path" not in keys or "op" not in keys:
            raise self.fail(
                f"a test needs path and op (or a condition all, any or not), got keys {sorted(map(str, keys))}"
            )
        if op not in OPERATORS:
            raise self.fail(f"unknown op {_shown(op)}; ops: {', '.join(OPERATORS)}")
        expected = {"path", "op"} if op in UNARY else {"path", "op", "value"}
        if keys != expected:
            raise self.fail(f"op {op} takes {', '.join(sorted(expected))}, got {', '.join(sorted(map(str, keys)))}")
        path = check_path(node["path"], self.fail)
        value = node.get("value")
        if op == "in":
            if not isinstance(value, list | tuple) or not 1 <= len(value) <= GUARD_LIST_ITEMS:
                raise self.fail(f"op in takes a list of 1 to {GUARD_LIST_ITEMS} literals, got {_shown(value)}")
            value = tuple(self.literal(item) for item in value)
        elif op in COMPARISONS:
            value = self.literal(value)
            if op in ORDERINGS and (value is None or isinstance(value, bool)):
                raise self.fail(f"op {op} compares numbers or strings, got {_shown(value)}")
        return Test(path, op, value)

    def literal(self, value: Any) -> Literal:
        self.literals += 1
        if self.literals > GUARD_LITERALS:
            raise self.fail(f"a guard has at most {GUARD_LITERALS} literals (in lists included)")
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, int | float):
            # as a float, as both servers read it (2**53 + 1 is 2**53 there)
            if (isinstance(value, float) and not math.isfinite(value)) or abs(_double(value)) > GUARD_NUMBER_LIMIT:
                raise self.fail(f"a number must be within +/- 2**53, got {_shown(value)}")
            return value
        if isinstance(value, str):
            if not _encodable(value):
                raise self.fail(f"a string must be valid UTF-8 (no lone surrogate), got {_shown(value)}")
            if len(value) > GUARD_STRING_CHARS:
                raise self.fail(f"a string has at most {GUARD_STRING_CHARS} characters, got {len(value)}")
            return value
        raise self.fail(f"a literal is a number, a string, true, false or null, got {_shown(value)}")


def check_path(path: Any, fail: Any) -> str:
    if not isinstance(path, str) or not PATH.fullmatch(path):
        raise fail(f"path {_shown(path)} is not $ followed by .key or [n] parts (keys of [A-Za-z_][A-Za-z0-9_]*)")
    if len(SEGMENT.findall(path)) > GUARD_PATH_SEGMENTS:
        raise fail(f"a path has at most {GUARD_PATH_SEGMENTS} parts")
    return path


def parse(value: Any, where: str = "guard") -> Condition:
    """``value`` (the JSON form, or a Condition) checked whole: InvalidDefinition names the
    first problem, with field "transitions" and part "guard"."""
    return _Checker(where).condition(value, 1)


def check_name(name: Any, where: str = "guard") -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name) or not _encodable(name):
        raise InvalidDefinition(
            f"{where}: guard_name must be 1 to {GUARD_NAME_CHARS} printable characters, "
            f"without control characters or spaces at its ends, got {_shown(name)}",
            field="transitions",
            part="guard_name",
        )
    return name


def to_json(condition: Condition, *, checked: bool = True) -> dict[str, Any]:
    """The JSON form of ``condition`` (keys in a fixed order)."""
    if isinstance(condition, Test):
        out: dict[str, Any] = {"path": condition.path, "op": condition.op}
        if condition.op not in UNARY:
            out["value"] = list(condition.value) if condition.op == "in" else condition.value
        return out
    if isinstance(condition, All):
        return {"all": [to_json(item, checked=checked) for item in condition.items]}
    if isinstance(condition, AnyOf):
        return {"any": [to_json(item, checked=checked) for item in condition.items]}
    if isinstance(condition, Not):
        return {"not": to_json(condition.item, checked=checked)}
    raise InvalidDefinition(f"not a condition: {_shown(condition)}", field="transitions", part="guard")


# -- what a guard says --------------------------------------------------------------------------


def _text(value: Literal) -> str:
    return json.dumps(value, ensure_ascii=False)


def describe(condition: Condition, *, top: bool = True) -> str:
    """The condition as short text: ``total >= 100 and address exists``."""
    if isinstance(condition, Test):
        path = condition.path[2:] if condition.path.startswith("$.") else condition.path
        if condition.op in UNARY:
            return f"{path} {condition.op.replace('_', ' ')}"
        if condition.op == "in":
            return f"{path} in [{', '.join(_text(v) for v in condition.value)}]"
        return f"{path} {condition.op} {_text(condition.value)}"
    if isinstance(condition, Not):
        return f"not ({describe(condition.item, top=False)})"
    joined = (" and " if isinstance(condition, All) else " or ").join(
        describe(item, top=False) for item in condition.items
    )
    return joined if top else f"({joined})"


def label(condition: Condition, name: str | None) -> str:
    """What errors, listings and diagrams call a guard: its name, else its text (cut short)."""
    if name:
        return name
    text = describe(condition)
    return text if len(text) <= GUARD_NAME_CHARS else text[: GUARD_NAME_CHARS - 3] + "..."


# -- evaluated in Python, as the database does ---------------------------------------------------

_MISSING = object()


def _at(doc: Any, path: str) -> Any:
    for key, index in SEGMENT.findall(path):
        if key:
            if not isinstance(doc, Mapping) or key not in doc:
                return _MISSING
            doc = doc[key]
        elif isinstance(doc, list | tuple):
            if int(index) >= len(doc):
                return _MISSING
            doc = doc[int(index)]
        elif int(index) != 0:  # both servers read [0] of a value that is no list as the value itself
            return _MISSING
    return doc


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "other"


def _double(value: Any) -> float:
    """A JSON number as the servers compare it: a 64-bit float, one beyond its range (which
    MariaDB's text JSON can hold) the largest float of its sign, as MariaDB converts it."""
    try:
        number = float(value)
    except OverflowError:
        number = math.inf if value > 0 else -math.inf
    return math.copysign(sys.float_info.max, number) if math.isinf(number) else number


def _equal(found: Any, literal: Literal) -> bool:
    if found is _MISSING or _kind(found) != _kind(literal):
        return False
    if _kind(literal) == "number":
        return _double(found) == _double(literal)
    return bool(found == literal)


def holds(condition: Condition, doc: Mapping[str, Any]) -> bool:
    """Whether ``condition`` holds for the data ``doc``, as the transition trigger decides."""
    if isinstance(condition, All):
        return all(holds(item, doc) for item in condition.items)
    if isinstance(condition, AnyOf):
        return any(holds(item, doc) for item in condition.items)
    if isinstance(condition, Not):
        return not holds(condition.item, doc)
    found = _at(doc, condition.path)
    op, value = condition.op, condition.value
    if op == "exists":
        return found is not _MISSING
    if op == "missing":
        return found is _MISSING
    if op == "is_null":
        return found is None
    if op == "==":
        return _equal(found, value)
    if op == "!=":
        return not _equal(found, value)
    if op == "in":
        return any(_equal(found, item) for item in value)
    kind = _kind(value)
    if found is _MISSING or _kind(found) != kind:
        return False
    a, b = (_double(found), _double(value)) if kind == "number" else (found, value)
    return bool({"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op])


def _encodable(text: str) -> bool:
    """Whether ``text`` has a UTF-8 form (a lone surrogate has none: no server could store it)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + "..."
