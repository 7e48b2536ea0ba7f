"""Machine definitions in YAML or JSON files, for DBAs and anyone not writing Python.

A file holds one machine, written as the JSON object :meth:`Machine.to_dict` gives plus its
``name``, or ``{"machines": [...]}`` with several (their names unique within the file)::

    name: order
    states: [new, paid, shipped]
    start: [new]
    final: [shipped]                      # optional, default []
    transitions:
      - {event: pay, from: new, to: paid}
      - {event: ship, from: [paid], to: shipped}   # from: one state or a list
    topic: null                           # optional
    options:                              # optional, and so is each option
      save_after_step: true
      uses_global_lock: false
      uses_local_lock: false
      lock_lease_seconds: 60
      event_data: true
    timeouts:                             # optional: at most one per state, never a final one
      new: {after: 30m, event: cancel}    # after: whole seconds, or a number and s, m, h or d
      paid: {after: 172800, event: ship}  # event: one allowed from that state
    attach:                               # optional: the machine runs on a table of the application's
      table: orders                       # (Store.attach after the install; docs/own-tables.md)
      key: id
      state: status
      lookup: customer_id                 # optional, and so are columns, on_delete and adopt
      columns: [total]
      on_delete: refuse                   # or allow
      adopt: true                         # give the table's existing rows their instances (Store.adopt)

Every problem raises :class:`~pyfsm.errors.InvalidDefinition` whose message starts with the
file and the path of the offending field, e.g. ``order.yaml: transitions[2].to: event 'ship'
goes to unknown state 'shiped' (line 14)``, and whose ``fields["field"]`` is that path ("" for
the document as a whole). YAML messages end with the line when it is known.

>>> [m.name for m in parse_machines('{"name": "door", "states": ["shut", "open"], "start": ["shut"],'
...                                 ' "transitions": [{"event": "push", "from": "shut", "to": "open"}]}', fmt="json")]
['door']
>>> parse_machines('{"name": "door", "states": "shut", "start": ["shut"], "transitions": []}',
...                fmt="json", source="door.json")
Traceback (most recent call last):
...
pyfsm.errors.InvalidDefinition: door.json: states: must be a list, got string 'shut'

:func:`load_definitions` and :func:`parse_definitions` give each machine with its ``attach``
section (:class:`AttachSection`, or None); :func:`load_machines` and :func:`parse_machines`
the machines alone.

Why over 500 lines: one parser whose every field check names the file, the machine and the
field in its error (a DBA's only feedback); the checks are small and read top to bottom in the
file format's order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .definition import DEFINITION_SOURCE, NAME, Machine, Transition
from .errors import InvalidArgument, InvalidDefinition
from .guards import Guard
from .guards import guard as checked_guard

#: The largest definition file read, in bytes: far above any real machine, small enough that
#: a wrong or hostile file cannot make the parser use much memory or time.
MAX_FILE_BYTES = 1024 * 1024

#: The most YAML nodes a document may expand to once aliases are followed. Aliases share one
#: object, so a few lines can stand for billions of values ("billion laughs"); the checks here
#: and Machine's walk every value, so the expanded size is what costs time.
MAX_YAML_NODES = 1_000_000

SUFFIXES = {".json": "json", ".yaml": "yaml", ".yml": "yaml"}
MACHINE_FIELDS = ("name", "states", "start", "final", "transitions", "topic", "options", "timeouts", "attach")
REQUIRED_FIELDS = ("name", "states", "start", "transitions")
TRANSITION_FIELDS = ("event", "from", "to")
#: a transition's optional fields: its guard (pyfsm.guards' JSON form) and the guard's name
GUARD_FIELDS = ("guard", "guard_name")
TIMEOUT_FIELDS = ("after", "event")
BOOL_OPTIONS = ("save_after_step", "uses_global_lock", "uses_local_lock", "event_data")
OPTION_FIELDS = ("save_after_step", "uses_global_lock", "uses_local_lock", "lock_lease_seconds", "event_data")
#: the attach section's fields: table, key and state are required (Store.attach's arguments, and adopt)
ATTACH_FIELDS = ("table", "key", "state", "lookup", "columns", "on_delete", "adopt")
ATTACH_REQUIRED = ("table", "key", "state")
ON_DELETE = ("refuse", "allow")
#: the most columns an attached type copies into its instances' data (fsm_attach_v1's limit)
MAX_ATTACH_COLUMNS = 32

_SIMPLE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_YAML_HINT = " (YAML reads unquoted yes/no/on/off/null and numbers as non-strings: put it in quotes)"


# --- public API ----------------------------------------------------------------------------


@dataclass(frozen=True)
class AttachSection:
    """A machine's ``attach`` section: the table of the application's it runs on, as
    :meth:`pyfsm.Store.attach` takes it, and whether to adopt the table's existing rows after
    attaching (``adopt``, default true: :meth:`pyfsm.Store.adopt`)."""

    table: str
    key: str
    state: str
    lookup: str | None = None
    columns: tuple[str, ...] = ()
    on_delete: str = "refuse"
    adopt: bool = True


@dataclass(frozen=True)
class Definition:
    """One machine of a definition file and its ``attach`` section (None: it owns its table)."""

    machine: Machine
    attach: AttachSection | None = None


def load_machines(path: str | Path) -> list[Machine]:
    """The machines in a ``.json``, ``.yaml`` or ``.yml`` file, in file order (their ``attach``
    sections checked, and left out: :func:`load_definitions` gives them).

    Raises InvalidArgument for another suffix or a file that cannot be read, and
    InvalidDefinition for anything wrong with its content.
    """
    return [d.machine for d in load_definitions(path)]


def load_definitions(path: str | Path) -> list[Definition]:
    """The machines in a definition file with their ``attach`` sections, in file order (the
    errors of :func:`load_machines`)."""
    path = Path(path)
    source = str(path)
    fmt = SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        raise InvalidArgument(f"{source}: definition files must end in .json, .yaml or .yml", field="path")
    try:
        with path.open("rb") as file:
            # Read one byte past the limit rather than trusting stat(): pipes and /proc files lie.
            data = file.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise InvalidArgument(f"{source}: cannot read definition file: {exc.strerror or exc}", field="path") from exc
    if len(data) > MAX_FILE_BYTES:
        raise _too_large(source)
    try:
        text = data.decode("utf-8-sig")  # -sig: editors on Windows like to start files with a BOM
    except UnicodeDecodeError as exc:
        raise _document_error(source, f"not UTF-8 text (bad byte at offset {exc.start})") from None
    return parse_definitions(text, fmt=fmt, source=source)


def parse_machines(text: str, *, fmt: str, source: str = "<string>") -> list[Machine]:
    """The machines in ``text``, a definition document in ``fmt`` ("json" or "yaml").

    ``source`` names the document in error messages (load_machines passes the file name).
    """
    return [d.machine for d in parse_definitions(text, fmt=fmt, source=source)]


def parse_definitions(text: str, *, fmt: str, source: str = "<string>") -> list[Definition]:
    """The machines in ``text`` with their ``attach`` sections (see :func:`parse_machines`)."""
    if fmt not in ("json", "yaml"):
        raise InvalidArgument(f"definition format must be 'json' or 'yaml', got {fmt!r:.40}", field="fmt")
    if len(text) > MAX_FILE_BYTES or len(text.encode("utf-8", "replace")) > MAX_FILE_BYTES:
        raise _too_large(source)
    text = text.removeprefix("\ufeff")
    if not text.strip():
        raise _document_error(source, "the file is empty")
    if fmt == "json":
        doc, lines = _parse_json(text, source), dict[str, int]()
    else:
        doc, lines = _parse_yaml(text, source)
    return _Reader(source, fmt, lines).document(doc)


def machine_document(machine: Machine) -> dict[str, Any]:
    """``machine`` as a definition-file object: :meth:`Machine.to_dict` with its name first."""
    return {"name": machine.name, **machine.to_dict()}


def dump_machines(machines: Iterable[Machine], fmt: str) -> str:
    """A definition document ("json" or "yaml") that :func:`parse_machines` reads back as ``machines``.

    One machine is written as a single object, several as ``{"machines": [...]}``.
    """
    items = list(machines)
    if fmt not in ("json", "yaml"):
        raise InvalidArgument(f"definition format must be 'json' or 'yaml', got {fmt!r:.40}", field="fmt")
    if not items:
        raise InvalidArgument("no machines to write", field="machines")
    seen: set[str] = set()
    for machine in items:
        if machine.name in seen:
            raise InvalidArgument(
                f"machine {machine.name!r} is given twice; a file holds each name once",
                field="machines",
                machine=machine.name,
            )
        seen.add(machine.name)
    doc: dict[str, Any] = (
        machine_document(items[0]) if len(items) == 1 else {"machines": [machine_document(m) for m in items]}
    )
    if fmt == "json":
        return json.dumps(doc, indent=2) + "\n"
    yaml = _import_yaml("<output>")

    safe_dumper: Any = yaml.SafeDumper

    # PyYAML is optional and loaded here, so its SafeDumper is Any to mypy (no stubs are required)
    class Dumper(safe_dumper):  # type: ignore[misc]
        """Lists of names and transitions on one line each, the rest in block style."""

    def flat(value: Any) -> bool:
        return isinstance(value, str) or (isinstance(value, list) and all(isinstance(item, str) for item in value))

    def represent_list(dumper: Any, data: list[Any]) -> Any:
        return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flat(data))

    def represent_dict(dumper: Any, data: dict[str, Any]) -> Any:
        # A transition holds only names: {event: pay, from: [new], to: paid}; a timeout is as
        # short: {after: 1800, event: cancel}.
        flow = all(flat(value) for value in data.values()) or tuple(data) == TIMEOUT_FIELDS
        return dumper.represent_mapping("tag:yaml.org,2002:map", data, flow_style=flow)

    Dumper.add_representer(list, represent_list)
    Dumper.add_representer(dict, represent_dict)
    return str(yaml.dump(doc, Dumper=Dumper, sort_keys=False, default_flow_style=False, width=100))


# --- parsing --------------------------------------------------------------------------------


def _too_large(source: str) -> InvalidDefinition:
    return _document_error(
        source, f"the file is larger than {MAX_FILE_BYTES:,} bytes (1 MiB), the limit for definition files"
    )


def _document_error(source: str, problem: str, line: int | None = None, column: int | None = None) -> InvalidDefinition:
    """An error about the document as a whole (field path ""), where the parser gives one."""
    where = f"line {line}, column {column}: " if line and column else f"line {line}: " if line else ""
    return InvalidDefinition(f"{source}: {where}{problem}", field="", source=source, line=line)


class _JsonObject(dict[str, Any]):
    """A JSON object that remembers keys given more than once (json.loads keeps only the last)."""

    duplicates: tuple[str, ...] = ()


def _json_object(pairs: list[tuple[str, Any]]) -> _JsonObject:
    obj = _JsonObject(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        duplicates: list[str] = []
        for key, _ in pairs:
            if key in seen:
                duplicates.append(key)
            seen.add(key)
        obj.duplicates = tuple(duplicates)
    return obj


def _parse_json(text: str, source: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_json_object)
    except json.JSONDecodeError as exc:
        raise _document_error(source, f"invalid JSON: {exc.msg}", exc.lineno, exc.colno) from None
    except RecursionError:
        raise _document_error(source, "invalid JSON: nested too deeply") from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise _document_error(source, f"invalid JSON: {exc}") from None


def _import_yaml(source: str) -> Any:
    # Imported here so that JSON files, and pyfsm as a whole, work without PyYAML.
    try:
        import yaml
    except ImportError:
        raise _document_error(source, "YAML definition files need PyYAML: pip install 'pyfsm-mysql[yaml]'") from None
    return yaml


def _parse_yaml(text: str, source: str) -> tuple[Any, dict[str, int]]:
    """The document's data (from yaml.safe_load) and the line of each field path."""
    yaml = _import_yaml(source)
    try:
        # compose() builds the node tree only (no Python objects), which gives the line of
        # every field and lets duplicate keys and alias bombs be caught before safe_load.
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        if root is None:  # only comments, or "---"
            raise _document_error(source, "the file is empty")
        lines = _yaml_lines(yaml, root, source)
        _check_yaml_size(root, source)
        return yaml.safe_load(text), lines
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, source) from None
    except RecursionError:
        raise _document_error(source, "invalid YAML: nested too deeply") from None
    except ValueError as exc:  # a scalar safe_load cannot convert, e.g. a date 2024-13-45
        raise _document_error(source, f"invalid YAML: {exc}") from None


def _yaml_error(exc: Any, source: str) -> InvalidDefinition:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    if "constructor for the tag" in problem:
        # safe_load refuses !!python/object and friends; say why in words a DBA understands.
        problem = f"the tag {problem.split(' for the tag ')[-1]} is not allowed: definition files hold plain data only"
    elif context:
        problem = f"{context}, {problem}"
    if mark is None:
        return _document_error(source, f"invalid YAML: {problem}")
    return _document_error(source, f"invalid YAML: {problem}", mark.line + 1, mark.column + 1)


def _children(node: Any) -> list[Any]:
    value = node.value
    if isinstance(value, list):
        return [item for pair in value for item in pair] if value and isinstance(value[0], tuple) else list(value)
    return []


def _yaml_lines(yaml: Any, root: Any, source: str) -> dict[str, int]:
    """Map each field path to its line; refuse a mapping that gives one key twice.

    Each node is visited once, in document order, so aliases (which share nodes) cost
    nothing extra; below an alias, paths get no line and fall back to their parent's.
    """
    lines: dict[str, int] = {}
    seen: set[int] = set()
    todo: list[tuple[Any, str]] = [(root, "")]
    while todo:
        node, path = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        children: list[tuple[Any, str]] = []
        if isinstance(node, yaml.MappingNode):
            keys: dict[str, int] = {}
            for key, value in node.value:
                if not isinstance(key, yaml.ScalarNode) or key.tag != "tag:yaml.org,2002:str":
                    continue  # merge keys (<<) and non-string keys; the latter are refused later
                child = _key_path(path, key.value)
                line = key.start_mark.line + 1
                if key.value in keys:
                    raise InvalidDefinition(
                        f"{source}: {child}: field is given twice, first on line {keys[key.value]} (line {line})",
                        field=child,
                        source=source,
                        line=line,
                    )
                keys[key.value] = line
                lines.setdefault(child, line)
                children.append((value, child))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                child = f"{path}[{index}]"
                lines.setdefault(child, item.start_mark.line + 1)
                children.append((item, child))
        todo.extend(reversed(children))  # a stack: reversed, so the first child is visited first
    return lines


def _check_yaml_size(root: Any, source: str) -> None:
    """Refuse documents whose aliases expand past MAX_YAML_NODES, or that contain themselves."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    todo: list[tuple[Any, bool]] = [(root, False)]
    while todo:
        node, finished = todo.pop()
        if finished:
            size = 1 + sum(sizes[id(child)] for child in _children(node))
            if size > MAX_YAML_NODES:
                raise _document_error(
                    source, f"aliases expand to more than {MAX_YAML_NODES:,} values; write the definition out instead"
                )
            sizes[id(node)] = size
            open_nodes.discard(id(node))
            continue
        if id(node) in sizes:
            continue
        open_nodes.add(id(node))
        todo.append((node, True))
        for child in _children(node):
            if id(child) in open_nodes:
                raise _document_error(
                    source,
                    "an alias refers to a node that contains it (a recursive document)",
                    child.start_mark.line + 1,
                )
            if id(child) not in sizes:
                todo.append((child, False))


def _key_path(prefix: str, key: str) -> str:
    if not _SIMPLE_KEY.fullmatch(key):
        key = repr(key[:60])
        return f"{prefix}[{key}]"
    return f"{prefix}.{key}" if prefix else key


def _describe(value: Any) -> str:
    """A value as JSON/YAML users would name it, short and safe for any input."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        text = repr(value)
        return text if len(text) <= 40 else text[:40] + "..."
    if isinstance(value, str):
        return f"string {value[:60]!r}" + ("..." if len(value) > 60 else "")
    # Never repr() containers: an aliased YAML structure can be enormous when printed.
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"  # YAML dates, sets, binary


# --- checking the document ------------------------------------------------------------------


class _Reader:
    """Checks one parsed document field by field and builds its machines."""

    def __init__(self, source: str, fmt: str, lines: Mapping[str, int]) -> None:
        self.source = source
        self.fmt = fmt
        self.lines = lines

    def line(self, path: str) -> int | None:
        """The line of ``path``, or of its nearest parent that has one."""
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[: max(path.rfind("."), path.rfind("["), 0)]
        return None

    def fail(self, path: str, problem: str, *, machine: str | None = None) -> InvalidDefinition:
        line = self.line(path)
        where = f"{path}: " if path else ""
        suffix = f" (line {line})" if line else ""
        return InvalidDefinition(
            f"{self.source}: {where}{problem}{suffix}", machine=machine, field=path, source=self.source, line=line
        )

    # -- typed fields --

    def mapping(self, value: Any, path: str, allowed: tuple[str, ...], what: str) -> dict[str, Any]:
        """``value`` as an object whose keys are all strings, given once, and in ``allowed``."""
        if not isinstance(value, dict):
            raise self.fail(path, f"must be {what}, got {_describe(value)}")
        for key in value:
            if not isinstance(key, str):
                hint = _YAML_HINT if self.fmt == "yaml" else ""
                raise self.fail(path, f"field names must be strings, got {_describe(key)}{hint}")
        for key in getattr(value, "duplicates", ()):
            raise self.fail(_key_path(path, key), "field is given twice")
        for key in value:
            if key not in allowed:
                raise self.fail(_key_path(path, key), f"unknown field; expected {', '.join(allowed)}")
        return value

    def string(self, value: Any, path: str) -> str:
        if not isinstance(value, str):
            hint = _YAML_HINT if self.fmt == "yaml" and (value is None or isinstance(value, int | float)) else ""
            raise self.fail(path, f"must be a string, got {_describe(value)}{hint}")
        return value

    def items(self, value: Any, path: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(path, f"must be a list, got {_describe(value)}")
        return value

    def strings(self, value: Any, path: str) -> list[str]:
        return [self.string(item, f"{path}[{i}]") for i, item in enumerate(self.items(value, path))]

    # -- structure --

    def document(self, doc: Any) -> list[Definition]:
        if not isinstance(doc, dict):
            raise self.fail(
                "", f'the top level must be an object: one machine, or {{"machines": [...]}}, got {_describe(doc)}'
            )
        if "machines" not in doc:
            return [self.definition(doc, "")]
        self.mapping(doc, "", tuple(key for key in doc if isinstance(key, str)), "an object")  # odd/duplicate keys
        for key in doc:
            if key != "machines":
                raise self.fail(_key_path("", key), "unknown field; a file with 'machines' holds nothing else")
        entries = self.items(doc["machines"], "machines")
        if not entries:
            raise self.fail("machines", "must list at least one machine")
        definitions: list[Definition] = []
        first: dict[str, int] = {}
        columns: dict[tuple[str, str], int] = {}  # (table, state column) -> the machine that holds it
        for index, entry in enumerate(entries):
            found = self.definition(entry, f"machines[{index}]")
            machine, attach = found.machine, found.attach
            if machine.name in first:
                raise self.fail(
                    f"machines[{index}].name",
                    f"machine {machine.name!r} is already defined at machines[{first[machine.name]}]",
                    machine=machine.name,
                )
            if attach is not None and (attach.table, attach.state) in columns:
                raise self.fail(
                    f"machines[{index}].attach.state",
                    f"column {attach.state!r} of table {attach.table!r} holds the state of "
                    f"machines[{columns[(attach.table, attach.state)]}] already: one column holds one machine's state",
                    machine=machine.name,
                )
            first[machine.name] = index
            if attach is not None:
                columns[(attach.table, attach.state)] = index
            definitions.append(found)
        return definitions

    def definition(self, value: Any, prefix: str) -> Definition:
        """One machine and its attach section (checked after the machine)."""
        machine = self.machine(value, prefix)
        spec = value.get("attach")
        at = f"{prefix}.attach" if prefix else "attach"
        return Definition(machine, None if spec is None else self.attach_section(spec, at, machine.name))

    def attach_section(self, value: Any, path: str, machine: str) -> AttachSection:
        """The ``attach`` section: each field's type and size checked here, the table and its
        columns by the database when the section is applied (fsm_attach_v1)."""
        spec = self.mapping(
            value, path, ATTACH_FIELDS, "an object (table, key, state, lookup, columns, on_delete, adopt)"
        )
        for field in ATTACH_REQUIRED:
            if field not in spec:
                raise self.fail(f"{path}.{field}", "required field is missing", machine=machine)
        names = {f: self.column_name(spec[f], f"{path}.{f}", machine) for f in ATTACH_REQUIRED}
        lookup = None if spec.get("lookup") is None else self.column_name(spec["lookup"], f"{path}.lookup", machine)
        columns = [] if spec.get("columns") is None else self.strings(spec["columns"], f"{path}.columns")
        if len(columns) > MAX_ATTACH_COLUMNS:
            raise self.fail(
                f"{path}.columns", f"lists {len(columns)} columns, at most {MAX_ATTACH_COLUMNS}", machine=machine
            )
        for i, column in enumerate(columns):
            self.column_name(column, f"{path}.columns[{i}]", machine)
            if column in columns[:i]:
                raise self.fail(
                    f"{path}.columns[{i}]",
                    f"{column!r} is listed twice (first at columns[{columns.index(column)}])",
                    machine=machine,
                )
        on_delete = spec.get("on_delete", "refuse")
        if on_delete not in ON_DELETE:
            raise self.fail(
                f"{path}.on_delete", f"must be 'refuse' or 'allow', got {_describe(on_delete)}", machine=machine
            )
        adopt = spec.get("adopt", True)
        if not isinstance(adopt, bool):
            raise self.fail(f"{path}.adopt", f"must be true or false, got {_describe(adopt)}", machine=machine)
        return AttachSection(
            table=names["table"],
            key=names["key"],
            state=names["state"],
            lookup=lookup,
            columns=tuple(columns),
            on_delete=str(on_delete),
            adopt=adopt,
        )

    def column_name(self, value: Any, path: str, machine: str) -> str:
        """A table's or column's name: a string of 1 to 64 characters (MySQL's limit)."""
        name = self.string(value, path)
        if not 1 <= len(name) <= 64:
            raise self.fail(path, f"must be a name of 1 to 64 characters, got {_describe(name)}", machine=machine)
        return name

    def machine(self, value: Any, prefix: str) -> Machine:
        def at(field: str) -> str:
            return f"{prefix}.{field}" if prefix else field

        spec = self.mapping(value, prefix, MACHINE_FIELDS, "an object (a machine)")
        for field in REQUIRED_FIELDS:
            if field not in spec:
                raise self.fail(at(field), "required field is missing")
        name = self.string(spec["name"], at("name"))
        states = self.strings(spec["states"], at("states"))
        start = self.strings(spec["start"], at("start"))
        final = [] if spec.get("final") is None else self.strings(spec["final"], at("final"))
        topic = None if spec.get("topic") is None else self.string(spec["topic"], at("topic"))
        edges = [
            self.transition(item, f"{at('transitions')}[{i}]")
            for i, item in enumerate(self.items(spec["transitions"], at("transitions")))
        ]
        options: dict[str, Any] = {}
        if spec.get("options") is not None:
            options = dict(self.mapping(spec["options"], at("options"), OPTION_FIELDS, "an object of options"))
            for option in BOOL_OPTIONS:
                if option in options and not isinstance(options[option], bool):
                    raise self.fail(
                        f"{at('options')}.{option}", f"must be true or false, got {_describe(options[option])}"
                    )
        timeouts = {} if spec.get("timeouts") is None else self.timeouts(spec["timeouts"], at("timeouts"))
        named = DEFINITION_SOURCE.set(self.source)  # a warning (an unreachable state) names the file
        try:
            return Machine(
                name=name,
                states=states,
                start=start,
                final=final,
                topic=topic,
                transitions=[Transition(event, sources, target, guard) for event, sources, target, _, guard in edges],
                timeouts=timeouts,
                **options,
            )
        except InvalidDefinition as exc:
            raise self.relocate(exc, prefix, spec, states, start, final, edges, options) from exc
        finally:
            DEFINITION_SOURCE.reset(named)

    def transition(self, value: Any, path: str) -> tuple[str, tuple[str, ...], str, bool, Guard | None]:
        """(event, sources, target, whether ``from`` was written as a list, guard)."""
        spec = self.mapping(value, path, TRANSITION_FIELDS + GUARD_FIELDS, "an object (a transition)")
        for field in TRANSITION_FIELDS:
            if field not in spec:
                raise self.fail(f"{path}.{field}", "required field is missing")
        event = self.string(spec["event"], f"{path}.event")
        listed = isinstance(spec["from"], list)
        sources = self.strings(spec["from"], f"{path}.from") if listed else [self.string(spec["from"], f"{path}.from")]
        if not sources:
            raise self.fail(f"{path}.from", "must name at least one state")
        target = self.string(spec["to"], f"{path}.to")
        if "guard_name" in spec and "guard" not in spec:
            raise self.fail(f"{path}.guard_name", "names a guard, and the transition has none")
        checked = None
        if "guard" in spec:
            try:
                checked = checked_guard(spec["guard"], spec.get("guard_name"), "guard")
            except InvalidDefinition as exc:
                part = exc.fields.get("part") or "guard"
                raise self.fail(f"{path}.{part}", exc.message.removeprefix("guard: ")) from None
        return event, tuple(sources), target, listed, checked

    def timeouts(self, value: Any, path: str) -> dict[str, tuple[int | str, str]]:
        """{state: (after, event)}, each field's type checked; Machine checks the rest."""
        if not isinstance(value, dict):
            raise self.fail(
                path,
                "must be an object of timeouts by state, e.g. {new: {after: 30m, event: cancel}}, "
                f"got {_describe(value)}",
            )
        self.mapping(value, path, tuple(value), "an object")  # state names are strings, each given once
        timeouts: dict[str, tuple[int | str, str]] = {}
        for state, entry in value.items():
            at = _key_path(path, state)
            spec = self.mapping(entry, at, TIMEOUT_FIELDS, "an object (a timeout: after, event)")
            for field in TIMEOUT_FIELDS:
                if field not in spec:
                    raise self.fail(f"{at}.{field}", "required field is missing")
            after = spec["after"]
            if isinstance(after, bool) or not isinstance(after, int | str):
                raise self.fail(
                    f"{at}.after",
                    "must be whole seconds (an integer) or a number and a unit s, m, h "
                    f"or d (e.g. 30m), got {_describe(after)}",
                )
            timeouts[state] = (after, self.string(spec["event"], f"{at}.event"))
        return timeouts

    # -- Machine's own errors --

    def relocate(
        self,
        exc: InvalidDefinition,
        prefix: str,
        spec: Mapping[str, Any],
        states: list[str],
        start: list[str],
        final: list[str],
        edges: list[tuple[str, tuple[str, ...], str, bool, Guard | None]],
        options: Mapping[str, Any],
    ) -> InvalidDefinition:
        """Machine's error again, with the path of the field it is about.

        Machine says which field (and state or event) is wrong, not where in the document;
        this walks the values in the order Machine checks them to find the first culprit.
        """
        field = str(exc.fields.get("field") or "")
        problem = exc.message.removeprefix(f"invalid definition of {exc.machine!r}: ")
        if problem.startswith(f"{field} must "):
            problem = problem[len(field) + 1 :]
        note = ""
        path = field
        if field == "states":
            seen: set[str] = set()
            for i, state in enumerate(states):
                if (state in seen or not NAME.fullmatch(state)) and state[:80] == exc.state:
                    path = f"states[{i}]"
                    break
                seen.add(state)
        elif field in ("start", "final"):
            values = start if field == "start" else final
            path = next(
                (f"{field}[{i}]" for i, state in enumerate(values) if state not in states and state[:80] == exc.state),
                field,
            )
        elif field == "transitions":
            path, note = _locate_edge(edges, states, final, exc.event)
        elif field in OPTION_FIELDS:
            path = f"options.{field}"
            problem += f", got {_describe(options.get(field))}"
        elif field == "topic":
            problem += f", got {_describe(spec.get('topic'))}"
        elif field == "timeouts":
            path, problem = _locate_timeout(exc, problem, spec.get("timeouts"))
        path = f"{prefix}.{path}" if prefix and path else path or prefix
        return self.fail(path, problem + note, machine=exc.machine)


def _locate_timeout(exc: InvalidDefinition, problem: str, timeouts: Any) -> tuple[str, str]:
    """The path of a timeout problem (the state, or its after or event) and the problem
    without the state Machine names, which the path now gives."""
    states = timeouts if isinstance(timeouts, dict) else {}
    state = next((s for s in states if isinstance(s, str) and s[:80] == exc.state), None)
    if state is None:
        return "timeouts", problem
    path = _key_path("timeouts", state)
    problem = problem.removeprefix(f"timeout of state {state!r}: ")
    part = exc.fields.get("part")
    if part in TIMEOUT_FIELDS:
        path = _key_path(path, part)
        problem = problem.removeprefix(f"{part} ") if problem.startswith(f"{part} must ") else problem
        if part == "after":  # the value as the file wrote it, not Python's repr
            problem = f"{problem.rsplit(', got ', 1)[0]}, got {_describe(states[state]['after'])}"
    return path, problem


def _locate_edge(
    edges: list[tuple[str, tuple[str, ...], str, bool, Guard | None]],
    states: list[str],
    final: list[str],
    event: str | None,
) -> tuple[str, str]:
    """The path of the first transition problem, in Machine's order of checks, and a note."""
    known, finals = set(states), set(final)
    first: dict[tuple[str, str], int] = {}  # the rule without a guard of (state, event), where it is
    for i, (name, sources, target, listed, guard) in enumerate(edges):
        base = f"transitions[{i}]"
        if name[:80] == event and not NAME.fullmatch(name):
            return f"{base}.event", ""
        if name == event and target not in known:
            return f"{base}.to", ""
        for j, source in enumerate(sources):
            at = f"{base}.from[{j}]" if listed else f"{base}.from"
            if name == event and (source not in known or source in finals):
                return at, ""
            if name == event and (source, name) in first:
                return at, f" (first at transitions[{first[(source, name)]}])"
            if guard is None:
                first.setdefault((source, name), i)
    return "transitions", ""
