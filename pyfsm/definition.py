"""Machine definitions: plain declarative objects, validated without a database.

A :class:`Machine` is pure data. :meth:`Machine.to_json` gives the canonical JSON that
``fsm_define_v8`` stores; the database
validates it again, so definitions written by DBAs in SQL get the same checks.
"""

from __future__ import annotations

import json
import re
import sys
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import timedelta
from types import FrameType
from typing import Any, cast

from .errors import InvalidArgument, InvalidDefinition
from .guards import Guard, first_holding
from .guards import guard as checked_guard
from .limits import MAX_TIMEOUT_SECONDS, NAME_CHARS
from .schema.resources import check_machine_name

NAME = re.compile(rf"[a-z][a-z0-9_]{{0,{NAME_CHARS - 1}}}")
TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")
#: A duration written as text: a whole number and one unit, no spaces ("45s", "30m", "2d").
DURATION = re.compile(r"([0-9]+)([smhd])")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
TIMEOUT_KEYS = ("after", "event")


class UnreachableStateWarning(UserWarning):
    """A state cannot be reached from any start state.

    Its message is one self-contained line (the machine, the states, where the definition
    came from when it is a file), and it is reported at the first caller outside pyfsm.
    `pyfsm install` prints it as ``pyfsm: warning: ...``.
    """


#: Where the definition being built comes from (definition_file sets it while it builds one):
#: a warning about the definition names it.
DEFINITION_SOURCE: ContextVar[str | None] = ContextVar("pyfsm_definition_source", default=None)


@dataclass(frozen=True)
class Transition:
    """An edge: ``event`` moves an instance from any of ``sources`` to ``target`` (when its
    ``guard``, if any, holds for the instance's data: pyfsm.guards)."""

    event: str
    sources: tuple[str, ...]
    target: str
    guard: Guard | None = None


def transition(
    event: str, source: str | Sequence[str], target: str, *, guard: Any = None, guard_name: str | None = None
) -> Transition:
    """Build a :class:`Transition`; ``source`` is one state or a list of states; ``guard`` a
    condition (``data("total") >= 100``), a :class:`~pyfsm.guards.Guard` or the JSON form,
    ``guard_name`` the short name errors and diagrams use."""
    sources = (source,) if isinstance(source, str) else tuple(source)
    if guard is None and guard_name is not None:
        raise InvalidDefinition(
            f"event {event!r:.80}: guard_name without a guard",
            field="transitions",
            event=event if isinstance(event, str) else None,
            part="guard_name",
        )
    return Transition(
        event, sources, target, None if guard is None else checked_guard(guard, guard_name, f"event {event!r:.80}")
    )


@dataclass(frozen=True)
class Timeout:
    """A state's timeout: ``event`` is sent when an instance has stayed ``after`` in the state.

    ``after`` is whole seconds: an int, a string of a number and a unit s, m, h or d (no
    spaces), or a timedelta without a fraction of a second; from 1 second to
    MAX_TIMEOUT_SECONDS (about 31 years). It is kept as int seconds (also ``seconds``).

    >>> Timeout("30m", "cancel")
    Timeout(after=1800, event='cancel')
    >>> Timeout(timedelta(days=2), "escalate").seconds
    172800

    A bad value raises InvalidDefinition here; :class:`Machine` checks that ``event`` is
    allowed from the state the timeout is for.
    """

    after: int | str | timedelta
    event: str

    def __post_init__(self) -> None:
        try:
            seconds = _duration_seconds(self.after)
        except ValueError as exc:
            raise InvalidDefinition(f"after {exc}, got {_shown(self.after)}", field="timeouts", part="after") from None
        if not isinstance(self.event, str):
            raise InvalidDefinition(
                f"event must be an event name (a string), got {_shown(self.event)}", field="timeouts", part="event"
            )
        object.__setattr__(self, "after", seconds)

    @property
    def seconds(self) -> int:
        """``after`` in whole seconds (what ``after`` holds once built)."""
        return cast(int, self.after)


#: How a timeout may be given to Machine: a Timeout, {"after": ..., "event": ...} or (after, event).
TimeoutSpec = Timeout | Mapping[str, Any] | tuple[int | str | timedelta, str]


class _Timeouts(Mapping[str, Timeout]):
    """A machine's timeouts by state, in the order of its states: read-only because the
    Machine is frozen; hashable and picklable like the rest of a Machine."""

    def __init__(self, items: Mapping[str, Timeout]) -> None:
        self._items = dict(items)

    def __getitem__(self, state: str) -> Timeout:
        return self._items[state]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(tuple(self._items.items()))

    def __repr__(self) -> str:
        return repr(self._items)


_NO_TIMEOUTS = _Timeouts({})


@dataclass(frozen=True)
class Machine:
    """A machine type: states, start and final states, transitions, and state timeouts.

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

    A transition may have a guard, a condition on the instance's data that the database
    checks (pyfsm.guards, docs/guards.md); several may share (state, event), tried in order,
    the first whose guard holds taken, and only the last may be without a guard:

    >>> from pyfsm.guards import data
    >>> review = Machine(name="claim", states=["new", "paid", "review"], start=["new"],
    ...                  final=["paid", "review"],
    ...                  transitions=[transition("settle", "new", "paid", guard=data("amount") < 1000),
    ...                               ("settle", "new", "review")])
    >>> review.target("new", "settle", {"amount": 50}), review.target("new", "settle", {"amount": 5000})
    ('paid', 'review')

    ``timeouts`` maps a state to a :class:`Timeout`, a dict ``{"after": ..., "event": ...}``
    or a tuple ``(after, event)``; ``after`` is whole seconds (an int, ``"45s"``, ``"30m"``,
    ``"12h"``, ``"2d"`` or a timedelta), from 1 to MAX_TIMEOUT_SECONDS. Entering the state arms a
    timer, leaving it disarms it; when it runs out, ``event`` is sent (see docs/timers.md). The
    state must be one of ``states``, not a final one, and ``event`` must be allowed from it;
    a state has at most one timeout. ``machine.timeouts`` is then a read-only mapping of state
    to Timeout (``after`` in int seconds), in the order of ``states``.

    >>> Machine(name="ticket", states=["open", "closed"], start=["open"], final=["closed"],
    ...         transitions=[("close", "open", "closed")],
    ...         timeouts={"open": ("2d", "close")}).timeout("open")
    Timeout(after=172800, event='close')
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
    timeouts: Mapping[str, TimeoutSpec] = _NO_TIMEOUTS
    _rules: dict[tuple[str, str], tuple[Transition, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        edges = self._normalize()
        object.__setattr__(self, "transitions", edges)
        object.__setattr__(self, "_rules", self._validate(edges))
        object.__setattr__(self, "timeouts", self._checked_timeouts())

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
                raise self._fail(
                    f"{group} must be a list of state names, got {type(getattr(self, group)).__name__}", field=group
                )
            for state in names:
                if not isinstance(state, str):
                    raise self._fail(
                        f"{group} holds {state!r:.80}, which is not a state name (a string)",
                        field=group,
                        state=str(state)[:80],
                    )
            object.__setattr__(self, group, tuple(names))
        edges = _listed(self.transitions)
        if edges is None:
            raise self._fail(
                "transitions must be a list of (event, source(s), target) tuples or Transitions, "
                f"got {type(self.transitions).__name__}",
                field="transitions",
            )
        return tuple(self._edge(t) for t in edges)

    def _edge(self, item: object) -> Transition:
        guard: Any = None
        if isinstance(item, Transition):
            event, source, target, guard = item.event, item.sources, item.target, item.guard
        elif isinstance(item, list | tuple) and len(item) in (3, 4):
            event, source, target = item[:3]
            guard = item[3] if len(item) == 4 else None
        else:
            raise self._fail(
                f"a transition must be (event, source(s), target[, guard]) or a Transition, got {item!r:.80}",
                field="transitions",
            )
        for what, value in (("event", event), ("target", target)):
            if not isinstance(value, str):
                raise self._fail(
                    f"transition {what} {value!r:.80} is not a name (a string)",
                    field="transitions",
                    event=event if isinstance(event, str) else None,
                    state=str(value)[:80],
                )
        sources = source if isinstance(source, str) else _listed(source)
        if sources is None or not (isinstance(sources, str) or all(isinstance(s, str) for s in sources)):
            raise self._fail(
                f"event {event!r}: source must be a state name or a list of them, got {source!r:.80}",
                field="transitions",
                event=event,
            )
        try:
            return transition(event, sources, target, guard=guard)
        except InvalidDefinition as exc:
            raise self._fail(exc.message, field="transitions", event=event, part=exc.fields.get("part")) from None

    def _validate(self, edges: tuple[Transition, ...]) -> dict[tuple[str, str], tuple[Transition, ...]]:
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
        rules: dict[tuple[str, str], tuple[Transition, ...]] = {}
        for edge in edges:
            if not isinstance(edge.event, str) or not NAME.fullmatch(edge.event):
                raise self._fail(f"bad event name {edge.event!r:.80}", field="transitions", event=str(edge.event)[:80])
            if edge.target not in seen:
                raise self._fail(
                    f"event {edge.event!r} goes to unknown state {edge.target!r:.80}",
                    field="transitions",
                    event=edge.event,
                    state=str(edge.target)[:80],
                )
            if not edge.sources:
                raise self._fail(f"event {edge.event!r} has no source state", field="transitions", event=edge.event)
            for source in edge.sources:
                if source not in seen:
                    raise self._fail(
                        f"event {edge.event!r} comes from unknown state {source!r:.80}",
                        field="transitions",
                        event=edge.event,
                        state=str(source)[:80],
                    )
                if source in self.final:
                    raise self._fail(
                        f"final state {source!r} has outgoing event {edge.event!r}",
                        field="transitions",
                        event=edge.event,
                        state=source,
                    )
                earlier = rules.get((source, edge.event), ())
                if earlier and earlier[-1].guard is None:
                    # branching: the rules are tried in order, so one without a guard must come last
                    raise self._fail(
                        f"event {edge.event!r} from {source!r} is defined twice"
                        if edge.guard is None
                        else f"event {edge.event!r} from {source!r} has a rule after its rule without "
                        "a guard (the default comes last)",
                        field="transitions",
                        event=edge.event,
                        state=source,
                    )
                rules[(source, edge.event)] = (*earlier, edge)
        unreachable = self._unreachable(rules)
        if unreachable:
            origin = DEFINITION_SOURCE.get()
            one = len(unreachable) == 1
            warnings.warn(
                f"{origin + ': ' if origin else ''}machine {self.name!r}: {'state' if one else 'states'} "
                f"{', '.join(repr(s) for s in unreachable)} cannot be reached from "
                f"{'its start state' if len(self.start) == 1 else 'any of its start states'} "
                f"{', '.join(repr(s) for s in self.start)}: no instance will ever enter {'it' if one else 'them'}",
                UnreachableStateWarning,
                stacklevel=_caller_level(),
            )
        return rules

    def _checked_timeouts(self) -> _Timeouts:
        """``timeouts`` as state -> Timeout in the order of ``states``, each checked.

        Errors carry field "timeouts", the state, and ``part`` ("after", "event", another
        key) when they are about one key of the timeout: definition files point there."""
        given = self.timeouts
        if isinstance(given, _Timeouts):
            if not given:
                return given
        elif not isinstance(given, Mapping):
            raise self._fail(
                f"timeouts must be a mapping of state name to timeout, got {type(given).__name__}", field="timeouts"
            )
        known = set(self.states)
        checked: dict[str, Timeout] = {}
        for state, spec in given.items():
            if not isinstance(state, str):
                raise self._fail(
                    f"timeouts names {state!r:.80}, which is not a state name (a string)",
                    field="timeouts",
                    state=str(state)[:80],
                )
            if state not in known:
                raise self._fail(f"timeouts names unknown state {state!r:.80}", field="timeouts", state=state[:80])
            if state in self.final:
                raise self._fail(
                    f"final state {state!r} cannot have a timeout: no event leaves a final state",
                    field="timeouts",
                    state=state,
                )
            checked[state] = timeout = self._timeout(state, spec)
            if (state, timeout.event) not in self._rules:
                allowed = ", ".join(self.events_from(state))
                raise self._fail(
                    f"timeout of state {state!r}: event {timeout.event!r:.80} is not allowed from "
                    f"{state!r} ({'its events: ' + allowed if allowed else 'no event leaves it'})",
                    field="timeouts",
                    state=state,
                    event=timeout.event[:80],
                    part="event",
                )
        return _Timeouts({state: checked[state] for state in self.states if state in checked})

    def _timeout(self, state: str, spec: object) -> Timeout:
        """One state's timeout, given in any of the accepted forms, as a Timeout."""

        def fail(problem: str, part: str | None = None) -> InvalidDefinition:
            return self._fail(f"timeout of state {state!r}: {problem}", field="timeouts", state=state, part=part)

        if isinstance(spec, Timeout):
            return spec
        if isinstance(spec, Mapping):
            for key in spec:
                if key not in TIMEOUT_KEYS:
                    raise fail(f"unknown key {key!r:.80}; expected after, event", str(key)[:80])
            for key in TIMEOUT_KEYS:
                if key not in spec:
                    raise fail(f"{key} is missing", key)
            after, event = spec["after"], spec["event"]
        elif isinstance(spec, tuple | list) and len(spec) == 2:
            after, event = spec
        else:
            raise self._fail(
                f"timeout of state {state!r} must be a Timeout, {{'after': ..., 'event': ...}} or "
                f"(after, event), got {_shown(spec)}",
                field="timeouts",
                state=state,
            )
        try:
            return Timeout(after, event)
        except InvalidDefinition as exc:
            raise fail(exc.message, exc.fields.get("part")) from None

    def _unreachable(self, rules: dict[tuple[str, str], tuple[Transition, ...]]) -> list[str]:
        reached = self._reachable(rules)
        return [state for state in self.states if state not in reached]

    def _reachable(self, rules: dict[tuple[str, str], tuple[Transition, ...]]) -> set[str]:
        following: dict[str, set[str]] = {}
        for (source, _event), edges in rules.items():  # linear in the edges, not states x edges
            following.setdefault(source, set()).update(edge.target for edge in edges)
        reached, todo = set(self.start), list(self.start)
        while todo:
            for target in following.get(todo.pop(), ()):
                if target not in reached:
                    reached.add(target)
                    todo.append(target)
        return reached

    # -- queries --------------------------------------------------------------------------

    def unreachable_states(self) -> list[str]:
        """The states no start state reaches, in definition order: those an
        :class:`UnreachableStateWarning` names when the machine is defined.

        >>> import warnings
        >>> with warnings.catch_warnings(action="ignore", category=UnreachableStateWarning):
        ...     door = Machine("door", states=["closed", "open", "broken"], start=["closed"],
        ...                    transitions=[("open", "closed", "open"), ("close", "open", "closed")])
        >>> door.unreachable_states()
        ['broken']
        """
        return self._unreachable(self._rules)

    @property
    def edges(self) -> tuple[Transition, ...]:
        """The transitions, normalised to :class:`Transition` objects."""
        return cast(tuple[Transition, ...], self.transitions)

    def target(self, state: str, event: str, data: Mapping[str, Any] | None = None) -> str | None:
        """The state ``event`` leads to from ``state``, or None if it is not allowed.

        With guards, the target of the first rule whose guard holds for ``data`` (the
        instance's data after the transition), as the database decides; None if none holds,
        or if ``data`` is not given and the first rule has a guard."""
        if not isinstance(state, str) or not isinstance(event, str):  # unhashable ones too: never a TypeError
            return None
        edges = self._rules.get((state, event), ())
        if data is None:
            return edges[0].target if edges and edges[0].guard is None else None
        return first_holding(((edge.target, edge.guard) for edge in edges), data)[0]

    def allows(self, state: str, event: str) -> bool:
        """Whether ``state`` has a rule for ``event`` (guards aside)."""
        return isinstance(state, str) and isinstance(event, str) and (state, event) in self._rules

    def rules(self, state: str, event: str) -> tuple[Transition, ...]:
        """The rules for ``event`` in ``state``, in the order they are tried (each Transition
        as defined: its sources may name other states too)."""
        if not isinstance(state, str) or not isinstance(event, str):
            return ()
        return self._rules.get((state, event), ())

    @property
    def has_guards(self) -> bool:
        return any(edge.guard is not None for edge in self.edges)

    def events_from(self, state: str) -> list[str]:
        """The events allowed in ``state``, in definition order."""
        return [event for (source, event) in self._rules if source == state]

    def timeout(self, state: str) -> Timeout | None:
        """The timeout of ``state``, or None if it has none."""
        if not isinstance(state, str):  # unhashable ones too: never a TypeError
            return None
        return cast(_Timeouts, self.timeouts).get(state)

    def to_dict(self) -> dict[str, Any]:
        """The definition as the JSON object ``fsm_define_v8`` takes.

        "timeouts" is there only when the machine has some (``fsm_define_v8`` reads it), so
        a machine without any gives the same body as before timeouts existed: defining it
        again finds it unchanged instead of making a new version.
        """
        body: dict[str, Any] = {
            "states": list(self.states),
            "start": list(self.start),
            "final": list(self.final),
            "transitions": [_edge_json(t) for t in self.edges],
            "topic": self.topic,
            "options": {
                "save_after_step": self.save_after_step,
                "uses_global_lock": self.uses_global_lock,
                "uses_local_lock": self.uses_local_lock,
                "lock_lease_seconds": self.lock_lease_seconds,
                "event_data": self.event_data,
            },
        }
        timeouts = cast(_Timeouts, self.timeouts)
        if timeouts:
            body["timeouts"] = {state: {"after": t.seconds, "event": t.event} for state, t in timeouts.items()}
        return body

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))


def _edge_json(edge: Transition) -> dict[str, Any]:
    """A transition as fsm_define_v8 takes it: guard and guard_name only when it has them, so a
    definition without guards gives the same body as before guards existed."""
    out: dict[str, Any] = {"event": edge.event, "from": list(edge.sources), "to": edge.target}
    if edge.guard is not None:
        out["guard"] = edge.guard.to_json()
        if edge.guard.name is not None:
            out["guard_name"] = edge.guard.name
    return out


def _caller_level() -> int:
    """The stacklevel that makes the warnings.warn of the function calling this report the
    warning at the first frame outside pyfsm: the user's code, not pyfsm's file and line."""
    frame: FrameType | None = sys._getframe(1)  # the function that calls warnings.warn: level 1
    level = 1
    while frame is not None and str(frame.f_globals.get("__name__", "")).split(".")[0] == "pyfsm":
        frame, level = frame.f_back, level + 1
    return level


def _duration_seconds(value: object) -> int:
    """``value`` (int seconds, "<n><unit>" or a timedelta) as whole seconds within the limits;
    ValueError says what is wrong, to follow "after"."""
    if isinstance(value, timedelta):
        if value.microseconds:
            raise ValueError("must be whole seconds, without a fraction of a second")
        seconds = value.days * 86400 + value.seconds
    elif isinstance(value, str):
        match = DURATION.fullmatch(value)
        if match is None:
            raise ValueError(
                "must be a whole number and a unit s, m, h or d, without spaces (e.g. '45s', '30m', '12h', '2d')"
            )
        digits = match[1].lstrip("0") or "0"
        # int() of a huge digit string is slow (and refused past 4300 digits): it is too large anyway
        seconds = int(digits) * UNIT_SECONDS[match[2]] if len(digits) <= 12 else MAX_TIMEOUT_SECONDS + 1
    elif isinstance(value, int) and not isinstance(value, bool):
        seconds = value
    else:
        raise ValueError("must be whole seconds: an integer, a string such as '30m' (units s, m, h, d) or a timedelta")
    if not 1 <= seconds <= MAX_TIMEOUT_SECONDS:
        raise ValueError(f"must be from 1 second to {MAX_TIMEOUT_SECONDS} seconds (about 31 years)")
    return seconds


def _shown(value: object) -> str:
    """``value`` for an error message: its repr, cut short (it may come from anywhere)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + "..."


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
