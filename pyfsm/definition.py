"""Machine definitions: plain declarative objects, validated without a database.

A :class:`Machine` is pure data. :meth:`Machine.to_json` gives the canonical JSON that
``fsm_define_v5`` stores; the database validates it again, so definitions written by DBAs
in SQL get the same checks.
"""

from __future__ import annotations

import json
import re
import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, cast

from .errors import InvalidArgument, InvalidDefinition
from .limits import NAME_CHARS
from .schema.resources import check_machine_name

NAME = re.compile(rf"[a-z][a-z0-9_]{{0,{NAME_CHARS - 1}}}")
TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")


class UnreachableStateWarning(UserWarning):
    """A state cannot be reached from any start state.

    Its message is one self-contained line (the machine, the states, where the definition
    came from when it is a file), and it is reported at the first caller outside pyfsm.
    `pyfsm install` prints it as ``pyfsm: warning: ...``.
    """


#: Where the definition being built comes from (definition_file sets it while it builds one):
#: a warning about the definition names it.
_SOURCE: ContextVar[str | None] = ContextVar("pyfsm_definition_source", default=None)


@dataclass(frozen=True)
class Transition:
    """An edge: ``event`` moves an instance from any of ``sources`` to ``target``."""

    event: str
    sources: tuple[str, ...]
    target: str


def transition(event: str, source: str | Sequence[str], target: str) -> Transition:
    """Build a :class:`Transition`; ``source`` is one state or a list of states."""
    sources = (source,) if isinstance(source, str) else tuple(source)
    return Transition(event, sources, target)


@dataclass(frozen=True)
class Machine:
    """A machine type: states, start and final states, and transitions.

    >>> order = Machine(
    ...     name="order",
    ...     states=["new", "paid", "shipped", "cancelled"],
    ...     start=["new"],
    ...     final=["shipped", "cancelled"],
    ...     transitions=[
    ...         ("pay", "new", "paid"),
    ...         ("ship", "paid", "shipped"),
    ...         ("cancel", ["new", "paid"], "cancelled"),
    ...     ],
    ... )
    >>> order.target("paid", "ship")
    'shipped'
    >>> order.target("new", "ship") is None
    True
    """

    name: str
    states: Sequence[str]
    start: Sequence[str]
    transitions: Iterable[Transition | tuple[str, str | Sequence[str], str]]
    final: Sequence[str] = ()
    topic: str | None = None
    save_after_step: bool = True
    uses_global_lock: bool = False
    uses_local_lock: bool = False
    lock_lease_seconds: int = 60
    event_data: bool = True
    _rules: dict[tuple[str, str], str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        edges = self._normalize()
        object.__setattr__(self, "transitions", edges)
        object.__setattr__(self, "_rules", self._validate(edges))

    # -- validation -----------------------------------------------------------------------

    def _fail(self, problem: str, **fields: Any) -> InvalidDefinition:
        return InvalidDefinition(f"invalid definition of {self.name!r}: {problem}", machine=self.name, **fields)

    def _normalize(self) -> tuple[Transition, ...]:
        """Check the arguments' types (before anything iterates or hashes them); the lists
        become tuples and each transition a :class:`Transition` with a tuple of sources."""
        try:
            check_machine_name(self.name)
        except InvalidArgument as exc:
            raise InvalidDefinition(str(exc), machine=str(self.name)[:80], field="name") from None
        for group in ("states", "start", "final"):
            names = _listed(getattr(self, group))
            if names is None:
                raise self._fail(f"{group} must be a list of state names, got {type(getattr(self, group)).__name__}",
                                 field=group)
            for state in names:
                if not isinstance(state, str):
                    raise self._fail(f"{group} holds {state!r:.80}, which is not a state name (a string)",
                                     field=group, state=str(state)[:80])
            object.__setattr__(self, group, tuple(names))
        edges = _listed(self.transitions)
        if edges is None:
            raise self._fail("transitions must be a list of (event, source(s), target) tuples or Transitions, "
                             f"got {type(self.transitions).__name__}", field="transitions")
        return tuple(self._edge(t) for t in edges)

    def _edge(self, item: object) -> Transition:
        if isinstance(item, Transition):
            event, source, target = item.event, item.sources, item.target
        elif isinstance(item, list | tuple) and len(item) == 3:
            event, source, target = item
        else:
            raise self._fail(f"a transition must be (event, source(s), target) or a Transition, got {item!r:.80}",
                             field="transitions")
        for what, value in (("event", event), ("target", target)):
            if not isinstance(value, str):
                raise self._fail(f"transition {what} {value!r:.80} is not a name (a string)", field="transitions",
                                 event=event if isinstance(event, str) else None, state=str(value)[:80])
        sources = source if isinstance(source, str) else _listed(source)
        if sources is None or not (isinstance(sources, str) or all(isinstance(s, str) for s in sources)):
            raise self._fail(f"event {event!r}: source must be a state name or a list of them, got {source!r:.80}",
                             field="transitions", event=event)
        return transition(event, sources, target)

    def _validate(self, edges: tuple[Transition, ...]) -> dict[tuple[str, str], str]:
        if not self.states:
            raise self._fail("states must not be empty", field="states")
        seen: set[str] = set()
        for state in self.states:
            if not isinstance(state, str) or not NAME.fullmatch(state):
                raise self._fail(f"bad state name {state!r:.80}", field="states", state=str(state)[:80])
            if state in seen:
                raise self._fail(f"state {state!r} listed twice", field="states", state=state)
            seen.add(state)
        if not self.start:
            raise self._fail("at least one start state is needed", field="start")
        for group, names in (("start", self.start), ("final", self.final)):
            for state in names:
                if state not in seen:
                    raise self._fail(f"{group} names unknown state {state!r:.80}", field=group, state=str(state)[:80])
        if self.topic is not None and (not isinstance(self.topic, str) or not TOPIC.fullmatch(self.topic)):
            raise self._fail("topic must be 1-249 characters of [a-zA-Z0-9._-]", field="topic")
        lease = self.lock_lease_seconds
        if isinstance(lease, bool) or not isinstance(lease, int) or not 1 <= lease <= 86400:
            raise self._fail("lock_lease_seconds must be a whole number from 1 to 86400", field="lock_lease_seconds")
        for option in ("save_after_step", "uses_global_lock", "uses_local_lock", "event_data"):
            if not isinstance(getattr(self, option), bool):
                raise self._fail(f"{option} must be True or False", field=option)
        rules: dict[tuple[str, str], str] = {}
        for edge in edges:
            if not isinstance(edge.event, str) or not NAME.fullmatch(edge.event):
                raise self._fail(f"bad event name {edge.event!r:.80}", field="transitions", event=str(edge.event)[:80])
            if edge.target not in seen:
                raise self._fail(f"event {edge.event!r} goes to unknown state {edge.target!r:.80}",
                                 field="transitions", event=edge.event, state=str(edge.target)[:80])
            if not edge.sources:
                raise self._fail(f"event {edge.event!r} has no source state", field="transitions", event=edge.event)
            for source in edge.sources:
                if source not in seen:
                    raise self._fail(f"event {edge.event!r} comes from unknown state {source!r:.80}",
                                     field="transitions", event=edge.event, state=str(source)[:80])
                if source in self.final:
                    raise self._fail(f"final state {source!r} has outgoing event {edge.event!r}",
                                     field="transitions", event=edge.event, state=source)
                if (source, edge.event) in rules:
                    raise self._fail(f"event {edge.event!r} from {source!r} is defined twice",
                                     field="transitions", event=edge.event, state=source)
                rules[(source, edge.event)] = edge.target
        reached = self._reachable(rules)
        unreachable = [state for state in self.states if state not in reached]
        if unreachable:
            origin = _SOURCE.get()
            one = len(unreachable) == 1
            warnings.warn(
                f"{origin + ': ' if origin else ''}machine {self.name!r}: {'state' if one else 'states'} "
                f"{', '.join(repr(s) for s in unreachable)} cannot be reached from "
                f"{'its start state' if len(self.start) == 1 else 'any of its start states'} "
                f"{', '.join(repr(s) for s in self.start)}: no instance will ever enter {'it' if one else 'them'}",
                UnreachableStateWarning, stacklevel=_caller_level())
        return rules

    def _reachable(self, rules: dict[tuple[str, str], str]) -> set[str]:
        following: dict[str, set[str]] = {}
        for (source, _event), target in rules.items():  # linear in the edges, not states x edges
            following.setdefault(source, set()).add(target)
        reached, todo = set(self.start), list(self.start)
        while todo:
            for target in following.get(todo.pop(), ()):
                if target not in reached:
                    reached.add(target)
                    todo.append(target)
        return reached

    # -- queries --------------------------------------------------------------------------

    @property
    def edges(self) -> tuple[Transition, ...]:
        """The transitions, normalised to :class:`Transition` objects."""
        return cast(tuple[Transition, ...], self.transitions)

    def target(self, state: str, event: str) -> str | None:
        """The state ``event`` leads to from ``state``, or None if it is not allowed."""
        if not isinstance(state, str) or not isinstance(event, str):  # unhashable ones too: never a TypeError
            return None
        return self._rules.get((state, event))

    def events_from(self, state: str) -> list[str]:
        """The events allowed in ``state``, in definition order."""
        return [event for (source, event) in self._rules if source == state]

    def to_dict(self) -> dict[str, Any]:
        """The definition as the JSON object ``fsm_define_v5`` takes."""
        return {
            "states": list(self.states),
            "start": list(self.start),
            "final": list(self.final),
            "transitions": [{"event": t.event, "from": list(t.sources), "to": t.target} for t in self.edges],
            "topic": self.topic,
            "options": {
                "save_after_step": self.save_after_step,
                "uses_global_lock": self.uses_global_lock,
                "uses_local_lock": self.uses_local_lock,
                "lock_lease_seconds": self.lock_lease_seconds,
                "event_data": self.event_data,
            },
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))


def _caller_level() -> int:
    """The stacklevel that makes the warnings.warn of the function calling this report the
    warning at the first frame outside pyfsm: the user's code, not pyfsm's file and line."""
    frame: FrameType | None = sys._getframe(1)  # the function that calls warnings.warn: level 1
    level = 1
    while frame is not None and str(frame.f_globals.get("__name__", "")).split(".")[0] == "pyfsm":
        frame, level = frame.f_back, level + 1
    return level


def _listed(value: object) -> tuple[Any, ...] | None:
    """``value`` as a tuple if it is an ordered collection of items (a list, tuple,
    generator, dict keys...); None for a string, bytes, a mapping, a set (no order: the order
    of states is part of a definition) or anything that does not iterate."""
    if isinstance(value, str | bytes | bytearray | Mapping | set | frozenset) or not isinstance(value, Iterable):
        return None
    try:
        return tuple(value)
    except TypeError:  # claims to iterate but does not
        return None
