"""Mermaid and Graphviz diagrams of a machine, with counts and an instance's path.

Pure tests: no database. The outputs are parsed line by line, so a state or edge counts as
drawn only when a statement declares it, not when its name merely occurs somewhere.
"""

from __future__ import annotations

import re
import shutil
import stat
import sys
from itertools import pairwise
from pathlib import Path

import pytest

from pyfsm import FsmError, InvalidArgument, Machine
from pyfsm.definition_file import load_machines
from pyfsm.reporting.diagram import GraphvizUnavailable, _dot_string, dot, edges, mermaid, render_file

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "order.yaml"

#: new -> paid -> new (the backward unpay) -> paid -> shipped.
PATH = ["new", "paid", "new", "paid", "shipped"]


@pytest.fixture
def order() -> Machine:
    [machine] = load_machines(EXAMPLE)
    return machine


# --- parsing the outputs --------------------------------------------------------------------

MERMAID_STATE = re.compile(r'    state "(?P<label>[^"]*)" as (?P<id>\w+)')
MERMAID_EDGE = re.compile(r"    (?P<source>\w+|\[\*\]) --> (?P<target>\w+|\[\*\])(?:: (?P<label>.+))?")
MERMAID_CLASS = re.compile(r"    class (?P<ids>[\w,]+) (?P<cls>\w+)")


class ParsedMermaid:
    def __init__(self, text: str) -> None:
        lines = text.split("\n")
        assert lines[0] == "stateDiagram-v2"
        self.labels: dict[str, str] = {}  # state name -> its label
        self.state_order: list[str] = []
        ids: dict[str, str] = {}
        self.start: list[str] = []
        self.final: list[str] = []
        self.edges: dict[tuple[str, str, str], str] = {}  # (from, event, to) -> label
        self.classes: dict[str, set[str]] = {}
        self.class_defs: set[str] = set()
        for line in lines[1:]:
            if m := MERMAID_STATE.fullmatch(line):
                name = m["label"].split(" ")[0]
                ids[m["id"]] = name
                self.labels[name] = m["label"]
                self.state_order.append(name)
            elif m := MERMAID_EDGE.fullmatch(line):
                if m["source"] == "[*]":
                    self.start.append(ids[m["target"]])
                elif m["target"] == "[*]":
                    self.final.append(ids[m["source"]])
                else:
                    event = m["label"].split(" ")[0]
                    key = (ids[m["source"]], event, ids[m["target"]])
                    assert key not in self.edges, f"edge drawn twice: {line}"
                    self.edges[key] = m["label"]
            elif m := MERMAID_CLASS.fullmatch(line):
                self.classes[m["cls"]] = {ids[i] for i in m["ids"].split(",")}
            elif line.startswith("    classDef "):
                self.class_defs.add(line.split()[1])
            else:
                assert line.startswith("    %% "), f"unexpected Mermaid line: {line!r}"


DOT_STRING = r'"(?:[^"\\]|\\.)*"'
DOT_ATTRS = re.compile(rf"(\w+)=({DOT_STRING}|[^,\]]+)")
DOT_NODE = re.compile(rf"    (?P<id>{DOT_STRING})(?: \[(?P<attrs>.*)\])?;")
DOT_EDGE = re.compile(rf"    (?P<source>{DOT_STRING}) -> (?P<target>{DOT_STRING})(?: \[(?P<attrs>.*)\])?;")


def unquote(text: str) -> str:
    assert text.startswith('"') and text.endswith('"')
    return re.sub(r"\\(.)", lambda m: "\n" if m[1] == "n" else m[1], text[1:-1])


def attributes(text: str | None) -> dict[str, str]:
    return {key: unquote(value) if value.startswith('"') else value for key, value in DOT_ATTRS.findall(text or "")}


class ParsedDot:
    def __init__(self, text: str) -> None:
        lines = text.rstrip("\n").split("\n")
        assert lines[0].startswith("digraph ") and lines[0].endswith(" {") and lines[-1] == "}"
        self.nodes: dict[str, dict[str, str]] = {}  # node id -> attributes
        self.state_order: list[str] = []
        self.edges: dict[tuple[str, str, str], dict[str, str]] = {}  # (from, event, to) -> attributes
        self.start_arrows: list[tuple[str, str]] = []
        for line in lines[1:-1]:
            if m := DOT_EDGE.fullmatch(line):
                source, target, attrs = unquote(m["source"]), unquote(m["target"]), attributes(m["attrs"])
                if source.startswith("start_"):
                    self.start_arrows.append((source, target))
                    continue
                key = (
                    source.removeprefix("state_"),
                    attrs["label"].split("\n")[0].split(" ")[0],
                    target.removeprefix("state_"),
                )
                assert key not in self.edges, f"edge drawn twice: {line}"
                self.edges[key] = attrs
            elif m := DOT_NODE.fullmatch(line):
                node = unquote(m["id"])
                self.nodes[node] = attributes(m["attrs"])
                if node.startswith("state_"):
                    self.state_order.append(node.removeprefix("state_"))
            else:
                assert re.fullmatch(r"    (graph|node|edge) \[.*\];", line), f"unexpected DOT line: {line!r}"

    def state(self, name: str) -> dict[str, str]:
        return self.nodes[f"state_{name}"]


# --- every state and edge is drawn ------------------------------------------------------------


def test_edges_lists_each_source_of_a_transition(order: Machine) -> None:
    assert edges(order) == [
        ("new", "pay", "paid"),
        ("paid", "unpay", "new"),
        ("paid", "ship", "shipped"),
        ("shipped", "deliver", "delivered"),
        ("new", "cancel", "cancelled"),
        ("paid", "cancel", "cancelled"),
        ("shipped", "refund", "refunded"),
    ]


def test_mermaid_draws_every_state_and_edge(order: Machine) -> None:
    parsed = ParsedMermaid(mermaid(order))
    assert parsed.state_order == list(order.states)
    assert parsed.labels == {state: state for state in order.states}
    assert parsed.start == ["new"]
    assert parsed.final == ["delivered", "cancelled", "refunded"]
    assert list(parsed.edges) == edges(order)  # both sources of cancel, in definition order
    assert all(label == event for (_, event, _), label in parsed.edges.items())
    assert parsed.classes == {} and parsed.class_defs == set()


def test_dot_draws_every_state_and_edge(order: Machine) -> None:
    parsed = ParsedDot(dot(order))
    assert parsed.state_order == list(order.states)
    assert {s: parsed.state(s)["label"] for s in order.states} == {s: s for s in order.states}
    assert {s for s in order.states if parsed.state(s).get("shape") == "doublecircle"} == set(order.final)
    assert parsed.start_arrows == [("start_new", "state_new")]
    assert parsed.nodes["start_new"] == {"shape": "point", "style": "invis", "label": ""}
    assert list(parsed.edges) == edges(order)
    assert all("color" not in attrs and "penwidth" not in attrs for attrs in parsed.edges.values())
    assert dot(order).splitlines()[1] == '    graph [rankdir="LR", label="order", labelloc="t", fontname="Helvetica"];'


def test_several_start_states_and_no_final_state() -> None:
    machine = Machine(
        name="light",
        states=["off", "on", "blinking"],
        start=["off", "blinking"],
        transitions=[("toggle", ["off", "blinking"], "on"), ("toggle", "on", "off")],
    )
    assert ParsedMermaid(mermaid(machine)).start == ["off", "blinking"]
    assert ParsedMermaid(mermaid(machine)).final == []
    assert ParsedDot(dot(machine)).start_arrows == [("start_off", "state_off"), ("start_blinking", "state_blinking")]


# --- counts ---------------------------------------------------------------------------------------


def test_counts_appear_where_given(order: Machine) -> None:
    state_counts = {"paid": 1234, "new": 0, "delivered": 7}
    edge_counts = {("new", "cancel", "cancelled"): 5, ("new", "pay", "paid"): 1_000_000}
    parsed = ParsedMermaid(mermaid(order, state_counts=state_counts, edge_counts=edge_counts))
    assert parsed.labels == {
        "new": "new (0)",
        "paid": "paid (1,234)",
        "shipped": "shipped",
        "delivered": "delivered (7)",
        "cancelled": "cancelled",
        "refunded": "refunded",
    }
    assert {edge: label for edge, label in parsed.edges.items() if label != edge[1]} == {
        ("new", "pay", "paid"): "pay (1,000,000)",
        ("new", "cancel", "cancelled"): "cancel (5)",  # the other source of cancel has no count
    }

    parsed_dot = ParsedDot(dot(order, state_counts=state_counts, edge_counts=edge_counts))
    assert parsed_dot.state("paid")["label"] == "paid\n(1,234)"
    assert parsed_dot.state("new")["label"] == "new\n(0)"
    assert parsed_dot.state("shipped")["label"] == "shipped"
    assert parsed_dot.edges[("new", "cancel", "cancelled")]["label"] == "cancel (5)"
    assert parsed_dot.edges[("paid", "cancel", "cancelled")]["label"] == "cancel"


# --- path highlighting ------------------------------------------------------------------------


def test_mermaid_path_marks_exactly_its_states_and_edges(order: Machine) -> None:
    parsed = ParsedMermaid(mermaid(order, path=PATH, edge_counts={("paid", "ship", "shipped"): 3}))
    assert parsed.classes == {"onpath": {"new", "paid", "shipped"}}
    assert parsed.class_defs == {"onpath"}
    marked = {edge: label for edge, label in parsed.edges.items() if "★" in label}
    assert marked == {
        ("new", "pay", "paid"): "pay ★ step 1, 3",
        ("paid", "unpay", "new"): "unpay ★ step 2",  # the backward move
        ("paid", "ship", "shipped"): "ship (3) ★ step 4",
    }


def test_dot_path_colours_exactly_its_states_and_edges(order: Machine) -> None:
    parsed = ParsedDot(dot(order, path=PATH))
    bold_states = {s for s in order.states if parsed.state(s).get("style") == "bold"}
    assert bold_states == {"new", "paid", "shipped"}
    assert all("color" in parsed.state(s) and "penwidth" in parsed.state(s) for s in bold_states)
    bold_edges = {edge: attrs["label"] for edge, attrs in parsed.edges.items() if attrs.get("style") == "bold"}
    assert bold_edges == {
        ("new", "pay", "paid"): "pay\nstep 1, 3",
        ("paid", "unpay", "new"): "unpay\nstep 2",
        ("paid", "ship", "shipped"): "ship\nstep 4",
    }
    assert all("color" in parsed.edges[edge] for edge in bold_edges)


def test_path_marks_every_event_between_two_consecutive_states() -> None:
    machine = Machine(
        name="pay",
        states=["due", "settled"],
        start=["due"],
        final=["settled"],
        transitions=[("pay_card", "due", "settled"), ("pay_cash", "due", "settled")],
    )
    parsed = ParsedMermaid(mermaid(machine, path=["due", "settled"]))
    assert parsed.edges == {
        ("due", "pay_card", "settled"): "pay_card ★ step 1",
        ("due", "pay_cash", "settled"): "pay_cash ★ step 1",
    }


def test_path_with_a_gap_marks_states_but_no_edge(order: Machine) -> None:
    parsed = ParsedMermaid(mermaid(order, path=["new", "shipped"]))  # no edge new -> shipped
    assert parsed.classes == {"onpath": {"new", "shipped"}}
    assert not any("★" in label for label in parsed.edges.values())


def test_empty_path_highlights_nothing(order: Machine) -> None:
    assert mermaid(order, path=[]) == mermaid(order)
    assert dot(order, path=[]) == dot(order)


# --- determinism, names, bad annotations ----------------------------------------------------------


def test_same_input_gives_the_same_text(order: Machine) -> None:
    options = {"state_counts": {"paid": 3, "new": 1}, "edge_counts": {("new", "pay", "paid"): 2}, "path": PATH}
    assert mermaid(order, **options) == mermaid(order, **options)  # type: ignore[arg-type]
    assert dot(order, **options) == dot(order, **options)  # type: ignore[arg-type]
    [again] = load_machines(EXAMPLE)
    assert mermaid(again, **options) == mermaid(order, **options)  # type: ignore[arg-type]
    # The order of a counts mapping does not leak into the output either.
    reordered = {"state_counts": {"new": 1, "paid": 3}, "edge_counts": {("new", "pay", "paid"): 2}, "path": PATH}
    assert dot(order, **reordered) == dot(order, **options)  # type: ignore[arg-type]


def test_keyword_like_names_are_safe() -> None:
    # note, class and default break Mermaid when used as bare ids; node, edge, graph and digraph are DOT keywords.
    names = ["state", "note", "end", "class", "default", "node", "edge", "graph", "digraph"]
    machine = Machine(
        name="keywords",
        states=names,
        start=["state"],
        final=["digraph"],
        transitions=[(f"to_{b}", a, b) for a, b in pairwise(names)],
    )
    parsed = ParsedMermaid(mermaid(machine))
    assert parsed.state_order == names and list(parsed.edges) == edges(machine)
    assert all(f"as s_{name}" in line for name, line in zip(names, mermaid(machine).splitlines()[2:], strict=False))
    parsed_dot = ParsedDot(dot(machine))
    assert parsed_dot.state_order == names and list(parsed_dot.edges) == edges(machine)


@pytest.mark.parametrize("text", ['a"b', "back\\slash", "new\nline", "\\N", 'x" -> "y', "<b>html</b>", ""])
def test_dot_strings_are_quoted_and_escaped(text: str) -> None:
    quoted = _dot_string(text)
    assert re.fullmatch(DOT_STRING, quoted), quoted  # one string token, however odd the text
    assert unquote(quoted) == text


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"state_counts": {"shiped": 1}}, "state_counts names 'shiped', not a state of machine 'order'"),
        ({"state_counts": {"paid": -1}}, "state_counts['paid'] must be a whole number of at least 0, got -1"),
        ({"state_counts": {"paid": 1.5}}, "must be a whole number of at least 0, got 1.5"),
        ({"state_counts": {"paid": True}}, "must be a whole number of at least 0, got True"),
        ({"edge_counts": {("paid", "pay", "new"): 1}}, "edge_counts names ('paid', 'pay', 'new'), not a"),
        ({"path": ["new", "lost"]}, "path names 'lost', not a state of machine 'order'"),
        ({"path": "new"}, "path must be a list of states, not one string"),
    ],
)
def test_bad_annotations_are_refused(order: Machine, options: dict[str, object], message: str) -> None:
    for draw in (mermaid, dot):
        with pytest.raises(InvalidArgument) as caught:
            draw(order, **options)  # type: ignore[arg-type]
        assert message in str(caught.value)


# --- rendering with Graphviz ------------------------------------------------------------------------

FAKE_DOT = """\
import sys
with open(sys.argv[0] + ".log", "a") as log:
    log.write(" ".join(sys.argv[1:]) + "\\n")
if sys.argv[1:] not in (["-Tsvg"], ["-Tpng"]):
    sys.stderr.write("Format: not recognized\\nUse one of: svg png\\n")
    sys.exit(1)
source = sys.stdin.buffer.read()
if b"sleep" in source:
    import time
    time.sleep(30)
if not source.startswith(b"digraph "):
    sys.stderr.write("Warning: something odd\\nError: <stdin>: syntax error in line 1 near 'graph'\\n")
    sys.exit(1)
header = b"<svg>" if sys.argv[1] == "-Tsvg" else b"\\x89PNG\\r\\n\\x1a\\n"
sys.stdout.buffer.write(header + source)
"""


@pytest.fixture
def fake_dot(tmp_path: Path) -> Path:
    """A stand-in for Graphviz's dot: checks -Tsvg/-Tpng and writes stdin back behind a header."""
    script = tmp_path / "bin" / "dot"
    script.parent.mkdir()
    script.write_text(f"#!{sys.executable}\n{FAKE_DOT}")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def calls(fake: Path) -> list[str]:
    log = Path(f"{fake}.log")
    return log.read_text().splitlines() if log.exists() else []


def test_render_svg_and_png_by_suffix(order: Machine, tmp_path: Path, fake_dot: Path) -> None:
    source = dot(order, path=PATH)
    render_file(source, tmp_path / "order.svg", dot_binary=str(fake_dot))
    render_file(source, tmp_path / "order.PNG", dot_binary=str(fake_dot))
    render_file(source, tmp_path / "order.out", fmt="svg", dot_binary=str(fake_dot))
    assert calls(fake_dot) == ["-Tsvg", "-Tpng", "-Tsvg"]
    assert (tmp_path / "order.svg").read_bytes() == b"<svg>" + source.encode()
    assert (tmp_path / "order.PNG").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert (tmp_path / "order.out").read_bytes() == (tmp_path / "order.svg").read_bytes()


@pytest.mark.parametrize(
    ("name", "fmt", "message"),
    [
        ("order.pdf", None, "diagram images are svg or png files, got file name "),
        ("order", None, "diagram images are svg or png files, got file name "),
        ("order.svg", "-Tps -o/tmp/x", "diagram images are svg or png files, got format '-Tps -o/tmp/x'"),
    ],
)
def test_render_refuses_other_formats(tmp_path: Path, fake_dot: Path, name: str, fmt: str | None, message: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        render_file("digraph {}", tmp_path / name, fmt=fmt, dot_binary=str(fake_dot))
    assert calls(fake_dot) == []  # refused before running anything


def test_render_reports_dot_failing(tmp_path: Path, fake_dot: Path) -> None:
    with pytest.raises(GraphvizUnavailable) as caught:
        render_file("graph {", tmp_path / "broken.svg", dot_binary=str(fake_dot))
    assert str(caught.value) == (
        f"{str(fake_dot)!r} failed with exit status 1: Error: <stdin>: syntax error in line 1 near 'graph'"
    )
    assert not (tmp_path / "broken.svg").exists()  # nothing half-written


def test_render_times_out(tmp_path: Path, fake_dot: Path) -> None:
    with pytest.raises(GraphvizUnavailable, match=r"did not finish within 0\.5 s"):
        render_file("digraph { sleep }", tmp_path / "slow.svg", dot_binary=str(fake_dot), timeout=0.5)


def test_render_without_graphviz_says_what_to_do_instead(tmp_path: Path) -> None:
    with pytest.raises(GraphvizUnavailable) as caught:
        render_file("digraph {}", tmp_path / "x.svg", dot_binary=str(tmp_path / "no-such-dot"))
    message = str(caught.value)
    assert message.startswith("Graphviz is not installed")
    assert "print the diagram as DOT or Mermaid text instead" in message
    assert caught.value.errno == 31023 and isinstance(caught.value, FsmError)
    assert GraphvizUnavailable.__doc__


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz (dot) is not installed")
def test_render_with_real_graphviz(order: Machine, tmp_path: Path) -> None:
    source = dot(order, state_counts={"paid": 1234}, edge_counts={("new", "cancel", "cancelled"): 5}, path=PATH)
    render_file(source, tmp_path / "order.svg")
    render_file(source, tmp_path / "order.png")
    svg = (tmp_path / "order.svg").read_text()
    assert "<svg" in svg and "1,234" in svg
    assert all(f">{state}<" in svg or f">{state}\n" in svg for state in order.states)
    assert (tmp_path / "order.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_a_state_timeout_is_drawn_on_its_edge() -> None:
    from pyfsm.reporting.diagram import dot

    timed = Machine(
        name="o",
        states=["new", "paid", "gone"],
        start=["new"],
        final=["gone"],
        transitions=[("pay", "new", "paid"), ("cancel", ["new", "paid"], "gone")],
        timeouts={"new": ("30m", "cancel")},
    )
    text = mermaid(timed)
    assert "s_new --> s_gone: cancel after 30m" in text and "s_paid --> s_gone: cancel\n" in text
    assert "cancel after 30m" in dot(timed)
    assert "after" not in mermaid(
        Machine(
            name="o", states=["new", "gone"], start=["new"], final=["gone"], transitions=[("cancel", "new", "gone")]
        )
    )
