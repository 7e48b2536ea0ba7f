"""Diagrams of a machine: Mermaid text for Markdown, Graphviz DOT text for images.

Both can show how many instances are in each state (``state_counts``), how often each edge
was taken (``edge_counts``, keyed by ``(from_state, event, to_state)``) and the path one
instance took (``path``, the states it visited in order; :func:`drawn_path` makes one from a
history that crossed definition versions). Output is deterministic: the same machine and
annotations give the same text, states and edges in definition order, with no trailing
newline.

>>> from pyfsm.definition import Machine
>>> door = Machine(name="door", states=["shut", "open"], start=["shut"],
...                transitions=[("push", "shut", "open"), ("pull", "open", "shut")])
>>> print(mermaid(door, state_counts={"open": 1234}))
stateDiagram-v2
    %% machine door
    state "shut" as s_shut
    state "open (1,234)" as s_open
    [*] --> s_shut
    s_shut --> s_open: push
    s_open --> s_shut: pull
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from ..definition import Machine
from ..errors import GraphvizUnavailable, InvalidArgument

Edge = tuple[str, str, str]
"""One arrow of a diagram: (from_state, event, to_state)."""

#: Seconds `dot` may take before render_file gives up; large machines take well under one.
RENDER_TIMEOUT = 60.0
RENDER_FORMATS = ("svg", "png")
PATH_COLOUR = "#1c7ed6"

_MERMAID_ID = re.compile(r"[a-z][a-z0-9_]*")


def edges(machine: Machine) -> list[Edge]:
    """Every (from_state, event, to_state) of ``machine``, one per source state, in definition order.

    >>> from pyfsm.definition import Machine
    >>> edges(Machine(name="m", states=["a", "b"], start=["a"], transitions=[("go", ["a", "b"], "b")]))
    [('a', 'go', 'b'), ('b', 'go', 'b')]
    """
    return [(source, t.event, t.target) for t in machine.edges for source in t.sources]


# --- annotations ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Marks:
    """The checked annotations, shared by both output formats."""

    state_counts: Mapping[str, int]
    edge_counts: Mapping[Edge, int]
    on_path: frozenset[str]
    steps: Mapping[Edge, tuple[int, ...]]
    #: the edges a state timeout takes, with how long it waits ("after 30m")
    timed: Mapping[Edge, str]
    #: the guards of the guarded edges, by name (or text): drawn as "ship [address set]"
    guarded: Mapping[Edge, str]

    def state_label(self, state: str) -> tuple[str, str | None]:
        count = self.state_counts.get(state)
        return state, None if count is None else f"({count:,})"

    def edge_label(self, edge: Edge) -> tuple[str, str | None]:
        """(event with its count, "step 1, 3" if the path took this edge)."""
        count = self.edge_counts.get(edge)
        text = edge[1] if edge not in self.guarded else f"{edge[1]} [{self.guarded[edge]}]"
        text = text if count is None else f"{text} ({count:,})"
        if edge in self.timed:
            text = f"{text} after {self.timed[edge]}"
        steps = self.steps.get(edge)
        return text, None if not steps else "step " + ", ".join(map(str, steps))


def _check_count(value: object, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgument(f"{what} must be a whole number of at least 0, got {value!r:.40}")


def _marks(
    machine: Machine,
    state_counts: Mapping[str, int] | None,
    edge_counts: Mapping[Edge, int] | None,
    path: Sequence[str | None] | None,
) -> _Marks:
    states = set(machine.states)
    all_edges = edges(machine)
    known_edges = set(all_edges)
    # Annotations naming states or edges the machine lacks usually mean counts or a history
    # from another definition version; drawing them silently without those would mislead.
    for state, count in (state_counts or {}).items():
        if state not in states:
            raise InvalidArgument(f"state_counts names {state!r:.80}, not a state of machine {machine.name!r}")
        _check_count(count, f"state_counts[{state!r}]")
    for edge, count in (edge_counts or {}).items():
        if edge not in known_edges:
            raise InvalidArgument(
                f"edge_counts names {edge!r:.120}, not a (from_state, event, to_state) of machine {machine.name!r}"
            )
        _check_count(count, f"edge_counts[{edge!r}]")
    if isinstance(path, str):
        raise InvalidArgument("path must be a list of states, not one string")
    visited = list(path or ())
    for visit in visited:
        if visit is not None and visit not in states:
            raise InvalidArgument(f"path names {visit!r:.80}, not a state of machine {machine.name!r}")
    steps: dict[Edge, list[int]] = {}
    for step, (before, after) in enumerate(pairwise(visited), start=1):
        # A path of states cannot tell apart two events between the same pair of states,
        # so each of them is marked. Consecutive states with no edge between them (a history
        # with gaps) mark no edge, and neither does a move into or out of a gap (None).
        if before is None or after is None:
            continue
        for edge in all_edges:
            if edge[0] == before and edge[2] == after:
                steps.setdefault(edge, []).append(step)
    timed = {}
    for edge in all_edges:
        timeout = machine.timeout(edge[0])
        if timeout is not None and timeout.event == edge[1]:
            timed[edge] = duration_text(timeout.seconds)
    guarded: dict[Edge, list[str]] = {}
    for t in machine.edges:
        if t.guard is not None:
            for source in t.sources:
                guarded.setdefault((source, t.event, t.target), []).append(t.guard.label)
    return _Marks(
        guarded={edge: " | ".join(labels) for edge, labels in guarded.items()},
        state_counts=dict(state_counts or {}),
        edge_counts=dict(edge_counts or {}),
        on_path=frozenset(state for state in visited if state is not None),
        steps={edge: tuple(numbers) for edge, numbers in steps.items()},
        timed=timed,
    )


def duration_text(seconds: int) -> str:
    """A timeout as the definitions write it: the largest unit that divides it (1800 -> 30m).

    >>> [duration_text(s) for s in (45, 1800, 7200, 172800, 90061)]
    ['45s', '30m', '2h', '2d', '90061s']
    """
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def drawn_path(machine: Machine, visits: Sequence[tuple[str, bool]]) -> list[str | None]:
    """One instance's history as a ``path`` through ``machine``, the definition version it follows.

    ``visits``: the states its history rows entered, oldest first, each with whether the row is
    a move to a newer definition version (source 'upgrade') rather than a transition. A move is
    no step: the state before it becomes the state it moved to, as the newer version names it
    (``packed`` renamed ``boxed``: the path reads paid -> boxed, the step ``pack`` took). A
    state ``machine`` does not have (an older version's, from before a move) becomes ``None``,
    a gap that no marked step crosses.

    >>> from pyfsm.definition import Machine
    >>> v2 = Machine(name="shop", states=["new", "paid", "boxed"], start=["new"],
    ...              transitions=[("pay", "new", "paid"), ("pack", "paid", "boxed")])
    >>> drawn_path(v2, [("new", False), ("review", False), ("paid", False), ("packed", False), ("boxed", True)])
    ['new', None, 'paid', 'boxed']
    """
    states = set(machine.states)
    path: list[str] = []
    for state, moved in visits:
        if moved and path:
            path[-1] = state
        else:
            path.append(state)
    return [state if state in states else None for state in path]


def drawn_counts(machine: Machine, state_counts: Mapping[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """``state_counts`` split into (the counts of ``machine``'s states, in its order; the
    counts of states it does not have that hold instances: an older definition version's).

    A type's counts (fsm_v_state_counts) list the states of its current definition and any
    state of an older version that still holds instances; a diagram draws one version's
    states, so the others are said apart.

    >>> from pyfsm.definition import Machine
    >>> v2 = Machine(name="shop", states=["new", "boxed"], start=["new"], transitions=[("pack", "new", "boxed")])
    >>> drawn_counts(v2, {"packed": 3, "boxed": 1, "new": 0, "gone": 0})
    ({'new': 0, 'boxed': 1}, {'packed': 3})
    """
    drawn = {state: state_counts[state] for state in machine.states if state in state_counts}
    others = {state: n for state, n in state_counts.items() if state not in drawn and n}
    return drawn, others


# --- Mermaid --------------------------------------------------------------------------------


def _mermaid_text(text: str) -> str:
    """``text`` safe inside a Mermaid label: anything unusual as an entity code (#35; for #)."""
    return "".join(ch if ch.isalnum() or ch in " _.,()-★" else f"#{ord(ch)};" for ch in text)


def mermaid(
    machine: Machine,
    *,
    state_counts: Mapping[str, int] | None = None,
    edge_counts: Mapping[Edge, int] | None = None,
    path: Sequence[str | None] | None = None,
) -> str:
    """A Mermaid ``stateDiagram-v2`` of ``machine``; GitHub renders it in a fenced ``mermaid`` code block.

    Each state is declared as ``state "label" as s_<name>``: the ``s_`` prefix keeps names
    such as ``note``, ``class`` or ``default`` from being read as Mermaid keywords, and the label
    carries the count, e.g. ``state "paid (1,234)" as s_paid``. ``[*] --> s`` marks each start
    state, ``s --> [*]`` each final one, and each source of a transition gets its own line
    ``s_from --> s_to: event``, with ``event (n)`` when ``edge_counts`` has that edge.

    ``path`` highlighting: states on the path get the ``onpath`` class (a classDef with a
    coloured fill and thick border). Mermaid state diagrams cannot style single transitions
    (there is no linkStyle), so each edge the path took has `` ★ step 1, 3`` appended to its
    label, numbering the moves along the path. When several events lead from one state to the
    next, all of them are marked: a list of states cannot tell which one was sent. A ``None``
    in ``path`` is a gap (a state of another definition version, see :func:`drawn_path`): no
    edge into or out of it is marked, and the steps keep their numbers.
    """
    marks = _marks(machine, state_counts, edge_counts, path)
    ids = {
        state: f"s_{state}" if _MERMAID_ID.fullmatch(state) else f"s{index}_"
        for index, state in enumerate(machine.states)
    }
    lines = ["stateDiagram-v2", f"    %% machine {_mermaid_text(machine.name)}"]
    for state in machine.states:
        name, count = marks.state_label(state)
        label = name if count is None else f"{name} {count}"
        lines.append(f'    state "{_mermaid_text(label)}" as {ids[state]}')
    lines += [f"    [*] --> {ids[state]}" for state in machine.start]
    for edge in edges(machine):
        text, steps = marks.edge_label(edge)
        label = text if steps is None else f"{text} ★ {steps}"
        lines.append(f"    {ids[edge[0]]} --> {ids[edge[2]]}: {_mermaid_text(label)}")
    lines += [f"    {ids[state]} --> [*]" for state in machine.final]
    on_path = [ids[state] for state in machine.states if state in marks.on_path]
    if on_path:
        lines.append(f"    classDef onpath fill:#d0ebff,stroke:{PATH_COLOUR},stroke-width:3px,font-weight:bold")
        lines.append(f"    class {','.join(on_path)} onpath")
    return "\n".join(lines)


# --- Graphviz DOT ---------------------------------------------------------------------------


def _dot_string(text: str) -> str:
    """``text`` as a quoted DOT string.

    Backslashes are doubled so that labels show them literally (DOT reads \\n, \\N, \\G ...
    as escapes in labels); a real newline becomes \\n, DOT's line break.
    """
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\r", "").replace("\n", "\\n")
    return f'"{escaped}"'


def _dot_attributes(attributes: Mapping[str, str | float]) -> str:
    parts = [f"{key}={_dot_string(value) if isinstance(value, str) else value}" for key, value in attributes.items()]
    return f" [{', '.join(parts)}]" if parts else ""


def dot(
    machine: Machine,
    *,
    state_counts: Mapping[str, int] | None = None,
    edge_counts: Mapping[Edge, int] | None = None,
    path: Sequence[str | None] | None = None,
) -> str:
    """A Graphviz DOT digraph of ``machine`` (left to right), for :func:`render_file` or ``dot -Tsvg``.

    States are circles, final states double circles. Each start state has an arrow from an
    invisible point node. Counts go on a second line of the label (``paid`` / ``(1,234)``;
    ``pay (12)``). States and edges on ``path`` are drawn bold in blue, and each edge the path
    took gets a ``step 1, 3`` line numbering the moves (all events between the same two
    consecutive states are marked, and a ``None`` in ``path`` is a gap, as in :func:`mermaid`).

    Node names are ``state_<name>`` and ``start_<name>``: every name and label is quoted and
    escaped, so no state or event name can break the syntax or collide with a keyword.
    """
    marks = _marks(machine, state_counts, edge_counts, path)
    final = set(machine.final)
    font = "Helvetica"
    lines = [
        f"digraph {_dot_string(machine.name)} {{",
        f"    graph{_dot_attributes({'rankdir': 'LR', 'label': machine.name, 'labelloc': 't', 'fontname': font})};",
        f"    node{_dot_attributes({'shape': 'circle', 'fontname': font})};",
        f"    edge{_dot_attributes({'fontname': font})};",
    ]
    for state in machine.states:
        name, count = marks.state_label(state)
        attributes: dict[str, str | float] = {"label": name if count is None else f"{name}\n{count}"}
        if state in final:
            attributes["shape"] = "doublecircle"
        if state in marks.on_path:
            attributes.update(color=PATH_COLOUR, fontcolor=PATH_COLOUR, penwidth=2.5, style="bold")
        lines.append(f"    {_dot_string('state_' + state)}{_dot_attributes(attributes)};")
    for state in machine.start:
        point = _dot_string("start_" + state)
        lines.append(f"    {point}{_dot_attributes({'shape': 'point', 'style': 'invis', 'label': ''})};")
        lines.append(f"    {point} -> {_dot_string('state_' + state)};")
    for edge in edges(machine):
        text, steps = marks.edge_label(edge)
        attributes = {"label": text if steps is None else f"{text}\n{steps}"}
        if steps is not None:
            attributes.update(color=PATH_COLOUR, fontcolor=PATH_COLOUR, penwidth=2.5, style="bold")
        lines.append(
            f"    {_dot_string('state_' + edge[0])} -> {_dot_string('state_' + edge[2])}{_dot_attributes(attributes)};"
        )
    lines.append("}")
    return "\n".join(lines)


# --- rendering ------------------------------------------------------------------------------


def graphviz_missing(dot_binary: str = "dot") -> str | None:
    """Why :func:`render` cannot run ``dot_binary`` here (the message its GraphvizUnavailable
    would carry), or None when the program is found: a page can say so before it links an
    image that would fail, and names no missing Graphviz when something else fails."""
    if shutil.which(dot_binary) is not None:
        return None
    return _not_installed(dot_binary)


def _not_installed(dot_binary: str) -> str:
    return (
        f"Graphviz is not installed (no {dot_binary!r} program found); install it (e.g. apt install graphviz, "
        "brew install graphviz) or print the diagram as DOT or Mermaid text instead"
    )


def render(dot_source: str, fmt: str, *, dot_binary: str = "dot", timeout: float = RENDER_TIMEOUT) -> bytes:
    """``dot_source`` drawn by Graphviz's ``dot`` as ``fmt`` (svg or png): the image's bytes.

    Other formats raise InvalidArgument; a missing ``dot`` program, a non-zero exit or a run
    longer than ``timeout`` seconds raise :class:`GraphvizUnavailable`.
    """
    kind = fmt.lower()
    if kind not in RENDER_FORMATS:
        raise InvalidArgument(f"diagram images are svg or png files, got format {fmt!r:.40}", field="fmt")
    try:
        # The argument list is fixed except for the program, which is the caller's choice;
        # no shell is involved.
        done = subprocess.run(  # noqa: S603
            [dot_binary, f"-T{kind}"],
            input=dot_source.encode("utf-8"),
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except (FileNotFoundError, NotADirectoryError):  # NotADirectoryError: a file where $PATH names a folder
        raise GraphvizUnavailable(_not_installed(dot_binary)) from None
    except PermissionError as exc:
        raise GraphvizUnavailable(
            f"cannot run {dot_binary!r}: {exc.strerror}; print the diagram as DOT or Mermaid text instead"
        ) from None
    except subprocess.TimeoutExpired:
        raise GraphvizUnavailable(f"{dot_binary!r} did not finish within {timeout:g} s") from None
    if done.returncode != 0:
        errors = done.stderr.decode("utf-8", "replace").strip().splitlines()
        detail = errors[-1] if errors else "no error message"
        raise GraphvizUnavailable(f"{dot_binary!r} failed with exit status {done.returncode}: {detail}")
    return bytes(done.stdout)


def render_file(
    dot_source: str,
    output: Path,
    *,
    fmt: str | None = None,
    dot_binary: str = "dot",
    timeout: float = RENDER_TIMEOUT,
) -> None:
    """Draw ``dot_source`` into ``output`` (SVG or PNG) with Graphviz's ``dot``.

    ``fmt`` defaults to the suffix of ``output`` (.svg or .png); other formats raise
    InvalidArgument. A missing ``dot`` program, a non-zero exit or a run longer than
    ``timeout`` seconds raise :class:`GraphvizUnavailable`. The file is written only when
    ``dot`` succeeds, so a failure leaves no half-written image behind.
    """
    output = Path(output)
    kind = (fmt if fmt is not None else output.suffix.removeprefix(".")).lower()
    if kind not in RENDER_FORMATS:
        given = f"format {fmt!r:.40}" if fmt is not None else f"file name {str(output)!r:.80}"
        raise InvalidArgument(f"diagram images are svg or png files, got {given}", field="fmt")
    image = render(dot_source, kind, dot_binary=dot_binary, timeout=timeout)
    try:
        output.write_bytes(image)
    except OSError as exc:
        raise InvalidArgument(f"cannot write {output}: {exc.strerror or exc}", field="output") from exc
