"""Each type's transition trigger rendered for that type: its rules inline, the server's own checks left to it.

The template (sql/machine/triggers/fsm_{type}_bu_v13.sql) is a complete, correct trigger as it
stands: rendered with the type's name alone (:func:`pyfsm.schema.resources.render`) it looks
every rule up in fsm_rules, as the triggers before it did. Spans of it are marked with
comments, ``/*[name*/ ... /*name]*/``, and this module replaces them for one type:

* ``rules_by_event`` and ``rules_by_target``: the lookup of the rule becomes a CASE over the
  definition versions that still hold instances (and the current one), then over the old
  state and then over the event (or the new state), each version's rules as literals. The
  lookup stays as the ELSE, so an instance of a version defined after the rendering (a
  DBA's ``fsm_define_v8`` before ``pyfsm sync``), or a state spelt with trailing spaces by
  a writer before revision 0005, is still checked against fsm_rules: the inline rules are a
  copy of rows that never change (a definition version is immutable), never a second source
  of truth. (Within a rendered version and state, an event none of its rules has is refused
  without the read: those rules are all there.)
  A (state, event) whose rules have guards (pyfsm.guards) becomes an IF over the guards,
  rendered by pyfsm.schema.guard_sql, in the rules' order: the first that holds sets the
  target; when none holds and no unguarded rule comes last, ``v_refused`` names the guards
  (the trigger refuses with 31032). A raw UPDATE naming a new state that one guarded event
  reaches tries that event's rules the same way (the trigger then checks the target).
* ``event_data``: the definition's event_data option, per version, for the outbox row.
* ``utf8``: the checks for encoded surrogates. MariaDB's utf8mb4 stores them, so they stay;
  MySQL's refuses them itself before a trigger sees the text (1366, 3144: tests/server/
  test_invalid_utf8.py), so a trigger rendered on MySQL leaves them out.

Nothing but validated names (``[a-z][a-z0-9_]*``, which never need quoting inside ``'...'``),
integers and guards checked again (guard_sql: paths of ``guards.PATH``, float literals,
strings as hexadecimal bytes) is ever spliced into the SQL: a rule that reads back otherwise
is refused.
fsm_machines records what the trigger was rendered from (``rendered_version``: the current
definition version then; ``rendered_digest``: a digest of the text), which is how
`pyfsm sync`, Store.define and fsm_define_v8's ``tables_ready`` know when to render again.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..db import queries
from ..errors import InvalidDefinition
from ..guards import Guard, guard
from .ddl import execute_ddl, machine_triggers, object_name
from .guard_sql import condition_sql, text_literal
from .resources import check_machine_name, fill_type, read_sql
from .upgrades import replace_machine_triggers

#: a state or event name as fsm_define_v8 accepts it: safe between single quotes as it is
NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
SPAN = re.compile(r"/\*\[(\w+)\*/(.*?)/\*\1\]\*/", re.S)


@dataclass(frozen=True)
class Rule:
    version: int
    from_state: str
    event: str
    to_state: str
    to_final: bool
    #: the rule's order among those of (version, from_state, event), 1 first
    position: int = 1
    guard: Guard | None = None


@dataclass(frozen=True)
class TypeRules:
    """What a type's transition trigger is rendered from."""

    machine: str
    mariadb: bool
    current_version: int
    rules: tuple[Rule, ...]
    event_data: Mapping[int, bool]

    @property
    def versions(self) -> list[int]:
        """The rendered versions, newest first (most instances are there: tried first)."""
        return sorted({r.version for r in self.rules}, reverse=True)


def valid_name(value: Any) -> str:
    text = value.decode() if isinstance(value, bytes) else str(value)
    if not NAME.fullmatch(text):
        raise ValueError(f"a stored rule names {text!r:.80}, not a valid name: refused before it reaches SQL")
    return text


def valid_guard(stored: Any, name: Any) -> Guard | None:
    """A stored guard and its name checked again as Machine checks them (ValueError if not)."""
    if stored is None:
        return None
    try:
        text = stored.decode() if isinstance(stored, bytes) else str(stored)
        return guard(json.loads(text), name.decode() if isinstance(name, bytes) else name)
    except (InvalidDefinition, ValueError) as exc:
        raise ValueError(f"a stored guard is refused before it reaches SQL: {exc}") from None


def read_rules(conn: Any, machine: str) -> TypeRules:
    """The rules of every definition version of ``machine`` that holds instances, and of its
    current version (new instances get it), read from fsm_rules and fsm_definitions."""
    name = check_machine_name(machine)
    with conn.cursor() as cur:
        cur.execute(queries.sql("schema_server_version"))
        mariadb = "mariadb" in str(cur.fetchone()[0]).lower()
        cur.execute(queries.sql("schema_current_version"), (name,))
        found = cur.fetchone()
        current = int(found[0]) if found else 0
        # guards came with revision 0024: the landed migrations 0022 and 0023 render before it
        cur.execute(queries.sql("schema_rules_have_guards"))
        guards = "schema_rule_guards" if cur.fetchone()[0] else "schema_rule_no_guards"
        # a scan of the instance table (no index on definition_version): sync is rare, reads take no locks
        cur.execute(queries.sql("schema_instance_versions", type=name))
        versions = tuple(sorted({int(row[0]) for row in cur.fetchall()} | {current}))
        cur.execute(queries.sql("schema_rules", guards=guards), (name, versions))
        rules = tuple(
            Rule(
                int(v),
                valid_name(f),
                valid_name(e),
                valid_name(t),
                bool(final),
                int(pos),
                valid_guard(guard, guard_name),
            )
            for v, f, e, t, final, pos, guard, guard_name in cur.fetchall()
        )
        cur.execute(queries.sql("schema_event_data"), (name, versions))
        event_data = {int(v): bool(on) for v, on in cur.fetchall()}
    return TypeRules(name, mariadb, current, rules, event_data)


#: what every rendered ELSE does: no rule matched, so the lookup after the CASE runs
MISS = "SET v_final = NULL;"


def _by_version(
    facts: TypeRules,
    fallback: str,
    branch: Callable[[int], list[tuple[str, str, str]]],
    outer_key: str,
    inner_key: str,
    inner_else: str = MISS,
) -> str:
    """A CASE over the definition version, then over ``outer_key`` (the old state), then over
    ``inner_key`` (the event or the new state), both compared as bytes; then ``fallback`` (the
    template's lookup), once, wherever no literal matched (each ELSE leaves v_final NULL, which
    a matched rule never does), or ``inner_else`` where the version and the state matched but
    the inner key did not. Two levels keep each CASE short: each WHEN passed costs a
    comparison (about 3 k instructions on MariaDB)."""
    outer = []
    for version in facts.versions:
        by_state: dict[str, list[tuple[str, str]]] = {}
        for state, key, stmt in branch(version):
            by_state.setdefault(state, []).append((key, stmt))
        if not by_state:
            continue
        states = []
        for state, inner in by_state.items():
            whens = "\n".join(f"                WHEN '{k}' THEN {stmt}" for k, stmt in inner)
            states.append(
                f"            WHEN '{state}' THEN\n              CASE CAST({inner_key} AS BINARY)\n{whens}\n"
                f"                ELSE {inner_else}\n              END CASE;"
            )
        outer.append(
            f"        WHEN {version} THEN\n          CASE CAST({outer_key} AS BINARY)\n"
            + "\n".join(states)
            + f"\n            ELSE {MISS}\n          END CASE;"
        )
    if not outer:
        return fallback
    return (
        "CASE OLD.definition_version\n" + "\n".join(outer) + f"\n        ELSE {MISS}\n      END CASE;\n"
        f"      IF v_final IS NULL THEN\n        {fallback.strip()}\n      END IF;"
    )


def _take(rule: Rule) -> str:
    return f"SET v_to = '{rule.to_state}', v_final = {int(rule.to_final)};"


def _tried(rules: list[Rule]) -> str:
    """The rules of one (version, state, event), in their order: the first whose guard holds
    sets the target; when none does, v_to is NULL and v_refused names the guards."""
    if len(rules) == 1 and rules[0].guard is None:
        return _take(rules[0])
    parts = []
    for i, rule in enumerate(rules):
        if rule.guard is None:  # the default: Machine and fsm_define_v8 keep it last
            parts.append(f"ELSE {_take(rule)}")
            break
        parts.append(f"{'ELSEIF' if i else 'IF'} {condition_sql(rule.guard.condition)} THEN {_take(rule)}")
    else:
        names = ", ".join(r.guard.label for r in rules if r.guard is not None)
        parts.append(f"ELSE SET v_to = NULL, v_final = 0, v_refused = {text_literal(names[:255])};")
    return " ".join(parts) + " END IF;"


def _grouped(facts: TypeRules, version: int) -> dict[tuple[str, str], list[Rule]]:
    """The rules of ``version`` by (state, event), each list in the rules' order."""
    groups: dict[tuple[str, str], list[Rule]] = {}
    for rule in sorted((r for r in facts.rules if r.version == version), key=lambda r: r.position):
        groups.setdefault((rule.from_state, rule.event), []).append(rule)
    return dict(sorted(groups.items()))


def _rules_by_event(facts: TypeRules, fallback: str) -> str:
    def branch(version: int) -> list[tuple[str, str, str]]:
        return [(state, event, _tried(rules)) for (state, event), rules in _grouped(facts, version).items()]

    # a rendered version's rules from a state are all there: an event none of them has (its
    # bytes compared, as fsm_rules' lookup compares them) is not allowed, with no read
    return _by_version(facts, fallback, branch, "OLD.current_state", "v_event", "SET v_to = NULL, v_final = 0;")


def _rules_by_target(facts: TypeRules, fallback: str) -> str:
    def branch(version: int) -> list[tuple[str, str, str]]:
        groups = _grouped(facts, version)
        moves: dict[tuple[str, str], list[Rule]] = {}
        for (state, _event), rules in groups.items():
            for rule in rules:
                moves.setdefault((state, rule.to_state), []).append(rule)
        out = []
        for (a, b), rs in sorted(moves.items()):
            events = sorted({r.event for r in rs})
            tried = groups[(a, events[0])]
            if len(events) == 1 and (len(tried) > 1 or tried[0].guard is not None):
                # the one event's rules tried in order: the trigger checks the one taken leads to b
                out.append((a, b, f"SET v_n = 1, v_event = '{events[0]}'; {_tried(tried)}"))
            else:
                out.append(
                    (
                        a,
                        b,
                        f"SET v_n = {len(events)}, v_event = '{events[0]}', v_to = '{b}', "
                        f"v_final = {int(max(r.to_final for r in rs))};",
                    )
                )
        return out

    # not certain without a read: a new state spelt with trailing spaces matches its rule there
    return _by_version(facts, fallback, branch, "OLD.current_state", "NEW.current_state")


def _event_data(facts: TypeRules, fallback: str) -> str:
    whens = " ".join(f"WHEN {v} THEN {int(on)}" for v, on in sorted(facts.event_data.items()))
    return f"CASE OLD.definition_version {whens} ELSE {fallback} END" if whens else fallback


def render_transition_trigger(template: str, facts: TypeRules) -> str:
    """``template`` (the text of the bu template, current or frozen) rendered for ``facts``."""
    text = fill_type(template, facts.machine)

    def replace(found: re.Match[str]) -> str:
        span, body = found.group(1), found.group(2)
        if span == "utf8":
            return body if facts.mariadb else ""
        if span == "rules_by_event":
            return _rules_by_event(facts, body)
        if span == "rules_by_target":
            return _rules_by_target(facts, body)
        if span == "event_data":
            return _event_data(facts, body)
        raise ValueError(f"the template marks a span {span!r} this pyfsm does not render")

    return SPAN.sub(replace, text)


def digest(text: str) -> str:
    # not for security: a fingerprint that tells two renderings apart (the column is CHAR(40))
    return hashlib.sha1(text.encode("utf-8"), usedforsecurity=False).hexdigest()


def spans(template: str) -> Iterable[str]:
    """The names of the marked spans of a template (for the tests)."""
    return [found.group(1) for found in SPAN.finditer(template)]


def record_rendered(conn: Any, facts: TypeRules, text: str) -> None:
    """Note in fsm_machines what ``facts.machine``'s transition trigger now is (``text``)."""
    with conn.cursor() as cur:
        cur.execute(queries.sql("schema_record_rendered"), (facts.current_version, digest(text), facts.machine))


def install_transition_trigger(conn: Any, machine: str, template: str) -> None:
    """Give ``machine`` its transition trigger rendered from ``template`` (a path under sql/),
    and record what it was rendered for in fsm_machines.

    Missing: created. Present with other text (rules of a new version, a trigger an upgrade
    created as the template stands): swapped under LOCK TABLES, with no moment unchecked
    (replace_machine_triggers). Present with this text: left alone.
    """
    name = check_machine_name(machine)
    facts = read_rules(conn, name)
    rendered = render_transition_trigger(read_sql(template), facts)
    with conn.cursor() as cur:
        cur.execute(queries.sql("schema_rendered_digest"), (name,))
        found = cur.fetchone()
    if object_name(template, name) not in machine_triggers(conn, name):
        execute_ddl(conn, [rendered])
    elif found is None or found[0] != digest(rendered):
        replace_machine_triggers(
            conn, name, [(template, template)], None, also_lock=(f"fsm_{name}_transitions",), texts={template: rendered}
        )
    record_rendered(conn, facts, rendered)
