"""The names the docs use, checked against what pyfsm has: objects, error numbers, commands.

`check(text, path, known)` returns one line per stale name, naming the file, the line and the
name. `Known` holds what exists: the objects of a freshly migrated database with one type
defined (tests/server/test_docs_names.py builds it), the deprecated procedures of
`pyfsm.schema.DEPRECATED`, pyfsm's error map and the command line's parser.

The rules:

* `fsm_...` names. The placeholder `{type}` stands for any type, and so do the example types
  the docs use (`EXAMPLE_TYPES`): `fsm_order_bu_v8` and `fsm_{type}_bu_v8` are the same name. `%`, `*` and `…` are wildcards (`fsm_v_%`) that must
  match an object. A fragment in backticks such as `_hbu_v4` must end an object's name.
  Session variables (`@fsm_event`) are not objects and are not checked.
* A deprecated procedure exists only in upgraded databases, so it may be named only on the
  procedure reference (`DEPRECATED_PAGE`), and there only where the text says so: in a
  paragraph, list item, table row or code block containing the word "deprecated", or in a
  section whose first paragraph contains it.
* Error numbers: every 31xxx number must be one pyfsm signals (ranges such as 31000-31999
  are not numbers). Where the docs pair a number with an error class, in a table row
  (a cell holding only the class, a cell holding only numbers) or in prose
  (`Conflict` (31007), **31016** (`TransactionOpen`)), the number must map to that class.
* `pyfsm <command>` in code (inline or a block) must be a command, and each `--option`
  after it, up to the end of the code span or line (or a pipe, `;`, `&&`, a `#` comment),
  one of that command's options.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyfsm import errors as pyfsm_errors

#: The type names the docs' examples use; `fsm_door_send_v2` is `fsm_{type}_send_v2`.
EXAMPLE_TYPES = ("order", "door", "ticket", "parcel", "legacy_ticket")
#: The only page that may name deprecated procedures (it documents them for their callers).
DEPRECATED_PAGE = "docs/sql-api.md"

NAME = re.compile(r"(?<![@\w])fsm_[a-z0-9_{}%*…]*")
FRAGMENT = re.compile(r"(?<=`)_[a-z][a-z0-9_]*_v\d+(?=`)")
PLACEHOLDER = re.compile(r"\{[^{}]*\}")
WILDCARD = re.compile(r"[%*…]")
RANGE = re.compile(r"\b\d{4,5}\s*(?:-|\u2013|to)\s*\d{4,5}\b")  # -, en dash, "to"
PYFSM_ERRNO = re.compile(r"\b31\d{3}\b")
ERRNO_CELL = re.compile(r"^(?:[a-z']+\s+)?\(?\d{3,5}(?:\s*,\s*(?:\d{3,5}|…|\.\.\.))*\)?$")
CLASS_CELL = re.compile(r"^`(\w+)`")
# prose pairs: `Conflict` (31007), (`InvalidEncoding`, 31024), **31016** (`TransactionOpen`)
CLASS_THEN_NUMBER = re.compile(r"`(\w+)`,?\s*\(?(\d{4,5})\b")
NUMBER_THEN_CLASS = re.compile(r"\b(\d{4,5})\**\s*\(`(\w+)`")
COMMAND = re.compile(r"(?<![\w./-])pyfsm[ \t]+([a-z][a-z0-9-]*)")
COMMAND_END = re.compile(r"\s\|\s|;|&&|\s#|(?<![\w./-])pyfsm[ \t]")
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
CODE_SPAN = re.compile(r"`([^`]+)`")
HEADING = re.compile(r"#{1,6}\s")
NO_COMMANDS_IN = frozenset({"json", "yaml", "mermaid"})  # fences that hold data, not shell lines


@dataclass(frozen=True)
class Known:
    """What exists, to check the docs against."""

    objects: frozenset[str]  # every object of a fresh install, a type's written with {type}
    deprecated: frozenset[str]  # schema.DEPRECATED, written with {type}
    commands: Mapping[str, frozenset[str]]  # command -> its long options
    classes: Mapping[str, type]  # error class name -> class
    errnos: Mapping[int, type]  # error number -> the class pyfsm maps it to


def known_errors() -> tuple[dict[str, type], dict[int, type]]:
    """pyfsm's error classes by name, and its map of error numbers to classes."""
    classes = {
        name: value
        for name, value in vars(pyfsm_errors).items()
        if isinstance(value, type) and issubclass(value, pyfsm_errors.FsmError)
    }
    return classes, {**pyfsm_errors.SERVER, **pyfsm_errors.SIGNALLED}


def known_commands(parser: argparse.ArgumentParser) -> dict[str, frozenset[str]]:
    """Each subcommand of the parser with its long options (--help included); a command group
    (pyfsm timers) has its subcommands' options too."""
    found: dict[str, frozenset[str]] = {}
    for action in parser._actions:  # argparse keeps its subparsers here only
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[name] = frozenset(o for o in sub._option_string_actions if o.startswith("--")).union(
                    *known_commands(sub).values()
                )
    return found


def generic(name: str, sample_type: str) -> str:
    """An installed object's name with the sample type written as {type}.

    >>> generic("fsm_v_sample_transitions", "sample"), generic("fsm_outbox", "sample")
    ('fsm_v_{type}_transitions', 'fsm_outbox')
    """
    return re.sub(rf"^fsm_(v_)?{sample_type}(?=_|$)", r"fsm_\1{type}", name)


def candidates(name: str) -> Iterator[str]:
    """The generic names a documented name may stand for.

    >>> sorted(candidates("fsm_door_send_v2"))
    ['fsm_door_send_v2', 'fsm_{type}_send_v2']
    >>> list(candidates("fsm_{type}_get_v1"))
    ['fsm_{type}_get_v1']
    """
    yield name
    for example in EXAMPLE_TYPES:
        for prefix in ("fsm_v_", "fsm_"):
            stem = prefix + example
            if name == stem or name.startswith(stem + "_"):
                yield prefix + "{type}" + name[len(stem) :]


def _wildcard(name: str) -> re.Pattern[str] | None:
    """The regex of a name with wildcards (a trailing `_` is a prefix: `fsm_`), else None."""
    if name.endswith("_"):
        name += "*"
    if not WILDCARD.search(name):
        return None
    return re.compile("".join(".*" if WILDCARD.fullmatch(c) else re.escape(c) for c in name) + "$")


def resolve(name: str, known: Known) -> str | None:
    """'current', 'deprecated', or None for a name that names nothing."""
    for candidate in candidates(name):
        pattern = _wildcard(candidate)
        if pattern:  # a pattern is current when it matches anything current (fsm_% does)
            order = (("current", known.objects), ("deprecated", known.deprecated))
        else:  # a deprecated name stays deprecated while a fresh install still holds it
            order = (("deprecated", known.deprecated), ("current", known.objects))
        for kind, names in order:
            if any(pattern.match(n) for n in names) if pattern else candidate in names:
                return kind
    return None


def resolve_fragment(fragment: str, known: Known) -> str | None:
    for kind, names in (("current", known.objects), ("deprecated", known.deprecated)):
        if any(n.endswith(fragment) for n in names):
            return kind
    return None


# --- the Markdown, cut into the units the rules speak of -----------------------------------


@dataclass
class Unit:
    """A paragraph, list item, table row or fenced block, with its first line's number."""

    line: int
    text: str
    fence: str | None  # the fence's language ("" for none), None outside fences
    section: int  # its section: an index into the first paragraphs units() returns


def units(text: str) -> tuple[list[Unit], list[str]]:
    """The units of a Markdown text, and for each section (a heading up to the next one, the
    text before the first heading being section 0) its first paragraph."""
    found: list[Unit] = []
    firsts = [""]
    current: list[str] = []
    start, fence = 0, None

    def close(end_fence: str | None = None) -> None:
        nonlocal current
        if current:
            found.append(Unit(start, "\n".join(current), end_fence, len(firsts) - 1))
            if end_fence is None and not firsts[-1] and not HEADING.match(current[0]):
                firsts[-1] = "\n".join(current)
        current = []

    for number, line in enumerate(text.splitlines(), 1):
        if fence is not None:
            current.append(line)
            if line.strip().startswith("```"):
                close(fence)
                fence = None
            continue
        if line.strip().startswith("```"):
            close()
            start, fence, current = number, line.strip()[3:].strip(), [line]
            continue
        if not line.strip():
            close()
            continue
        if HEADING.match(line):
            close()
            firsts.append("")
            start, current = number, [line]
            close()
            continue
        if line.lstrip().startswith("|") or re.match(r"\s*(?:[-*+]|\d+\.)\s", line):
            close()
        if not current:
            start = number
        current.append(line)
        if line.lstrip().startswith("|"):
            close()
    close(fence)
    return found, firsts


# --- the checks -------------------------------------------------------------------------------


def _line(unit: Unit, offset: int) -> int:
    return unit.line + unit.text.count("\n", 0, offset)


def _says_deprecated(text: str) -> bool:
    return "deprecated" in text.lower()


def check_objects(unit: Unit, path: str, known: Known, section_first: str) -> Iterator[str]:
    # a name set in bold without backticks carries the closing ** along
    names = [(m.start(), re.sub(r"\*\*+$", "", m.group(0)), False) for m in NAME.finditer(unit.text)]
    names += [(m.start(), m.group(0), True) for m in FRAGMENT.finditer(unit.text)]
    for offset, name, fragment in names:
        where = f"{path}:{_line(unit, offset)}: `{name}`"
        unknown = [p for p in PLACEHOLDER.findall(name) if p != "{type}"]
        if unknown:
            yield f"{where}: unknown placeholder {unknown[0]} (write {{type}})"
            continue
        kind = resolve_fragment(name, known) if fragment else resolve(name, known)
        if kind is None:
            yield f"{where}: no such object in a freshly migrated database"
        elif kind == "deprecated":
            if path != DEPRECATED_PAGE:
                yield (
                    f"{where}: deprecated (pyfsm.schema.DEPRECATED), a fresh install does not have it: "
                    f"name the current version; only {DEPRECATED_PAGE} documents deprecated procedures"
                )
            elif not (_says_deprecated(unit.text) or _says_deprecated(section_first)):
                yield (
                    f"{where}: deprecated (pyfsm.schema.DEPRECATED): say so in its paragraph, list item, "
                    "table row or code block, or in the first paragraph of its section"
                )


def check_errors(unit: Unit, path: str, known: Known) -> Iterator[str]:
    text = RANGE.sub(lambda m: " " * len(m.group(0)), unit.text)  # 31000-31999 is a range, not an error
    for m in PYFSM_ERRNO.finditer(text):
        if int(m.group(0)) not in known.errnos:
            yield f"{path}:{_line(unit, m.start())}: error {m.group(0)}: pyfsm has no such error number"
    pairs: list[tuple[int, str, int]] = []  # (offset, class name, number)
    if unit.fence is None and unit.text.lstrip().startswith("|"):
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", unit.text.strip().strip("|"))]
        named = [m.group(1) for c in cells if (m := CLASS_CELL.match(c)) and m.group(1) in known.classes]
        numbers = [int(n) for c in cells if ERRNO_CELL.match(c) for n in re.findall(r"\d{3,5}", c)]
        if named:
            pairs += [(0, named[0], n) for n in numbers]
    pairs += [(m.start(), m.group(1), int(m.group(2))) for m in CLASS_THEN_NUMBER.finditer(text)]
    pairs += [(m.start(), m.group(2), int(m.group(1))) for m in NUMBER_THEN_CLASS.finditer(text)]
    for offset, name, number in pairs:
        if name not in known.classes:
            continue
        mapped = known.errnos.get(number)
        if mapped is not known.classes[name]:
            got = mapped.__name__ if mapped else "nothing"
            yield f"{path}:{_line(unit, offset)}: error {number} is given as {name}, but pyfsm maps it to {got}"


def code_pieces(unit: Unit) -> Iterator[tuple[int, str]]:
    """(offset, text) of the code in a unit: each line of a fence, each inline code span."""
    if unit.fence is not None:
        if unit.fence.lower() in NO_COMMANDS_IN:
            return
        offset = 0
        for line in unit.text.split("\n"):
            yield offset, line
            offset += len(line) + 1
        return
    for m in CODE_SPAN.finditer(unit.text):
        yield m.start(1), m.group(1)


def check_commands(unit: Unit, path: str, known: Known) -> Iterator[str]:
    for offset, code in code_pieces(unit):
        for m in COMMAND.finditer(code):
            if re.search(r"\b(?:from|import)\s+$", code[: m.start()]):
                continue  # Python: `from pyfsm import ...`
            command, line = m.group(1), _line(unit, offset + m.start())
            if command not in known.commands:
                yield f"{path}:{line}: `pyfsm {command}`: no such command"
                continue
            rest = code[m.end() :]
            end = COMMAND_END.search(rest)
            for option in OPTION.findall(rest[: end.start()] if end else rest):
                if option not in known.commands[command]:
                    yield f"{path}:{line}: `pyfsm {command} {option}`: {command} has no option {option}"


def check(text: str, path: str, known: Known) -> list[str]:
    """Every stale name in a Markdown text, as 'path:line: name: why'; [] when all are current."""
    found, firsts = units(text)
    problems: list[str] = []
    for unit in found:
        problems += check_objects(unit, path, known, firsts[unit.section])
        problems += check_errors(unit, path, known)
        problems += check_commands(unit, path, known)
    return problems


def installed_objects(conn: Any, sample_type: str) -> frozenset[str]:
    """Tables, views, routines, triggers and indexes (what EXPLAIN names) of the connection's
    database, the sample type's written with {type}."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() "
            "UNION SELECT routine_name FROM information_schema.routines WHERE routine_schema = DATABASE() "
            "UNION SELECT trigger_name FROM information_schema.triggers WHERE trigger_schema = DATABASE() "
            "UNION SELECT index_name FROM information_schema.statistics WHERE table_schema = DATABASE()"
        )
        return frozenset(generic(row[0], sample_type) for row in cur.fetchall())
