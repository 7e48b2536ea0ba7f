"""`pyfsm graph`: a machine type as a Mermaid or Graphviz diagram, optionally with the counts
per state and per edge and one instance's path, printed or written to a file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pymysql

from .. import db
from ..db.driver import errors as pymysql_errors
from ..definition import Machine
from ..definition_file import load_machines
from ..errors import InvalidArgument, UnknownMachine
from ..gateway import unknown_type
from ..reporting import diagram
from ..reporting import reads as reporting
from .common import Add, add_read_dsn, emit, read_dsn

TEXT_SUFFIXES = {".mmd": "mermaid", ".md": "mermaid", ".dot": "dot", ".gv": "dot"}
IMAGE_SUFFIXES = (".svg", ".png")


def cmd_graph(args: argparse.Namespace) -> None:
    output = Path(args.output) if args.output else None
    fmt = args.format
    if output is not None and fmt is None:
        suffix = output.suffix.lower()
        if suffix not in TEXT_SUFFIXES and suffix not in IMAGE_SUFFIXES:
            raise InvalidArgument(f"--output must end in .svg, .png, .dot, .gv, .mmd or .md, got {output.name!r}")
        fmt = TEXT_SUFFIXES.get(suffix, "dot")
    fmt = fmt or "mermaid"
    if output is not None and output.suffix.lower() in IMAGE_SUFFIXES and fmt != "dot":
        raise InvalidArgument("images are drawn by Graphviz: use --format dot (the default for .svg/.png)")
    state_counts = edge_counts = path = None
    notes: list[str] = []  # what the diagram leaves out or which version it draws: said on stderr
    facts: dict[str, Any] = {}  # the same for --json
    if Path(args.machine).suffix.lower() in (".yaml", ".yml", ".json"):  # a definition file: no database needed
        if args.counts or args.instance:
            raise InvalidArgument("--counts and --instance read the database: give a machine name, not a file")
        machines = load_machines(args.machine)
        if len(machines) != 1:
            raise InvalidArgument(f"{args.machine} holds {len(machines)} machines: graph one at a time")
        machine = machines[0]
    else:
        conn = db.connect(db.parse_dsn(read_dsn(args) or args.dsn), timeouts=True)  # reads only: a replica will do
        try:
            machine = _current_machine(conn, args.machine)
            if args.instance:
                # the definition version the instance follows: an upgraded one's history names
                # states of older versions, which drawn_path turns into that version's terms
                followed = reporting.instance_path(conn, machine.name, args.instance)
                facts["definition_version"] = followed.definition_version
                if followed.definition_version != followed.current_version:
                    machine = reporting.current_machine(conn, machine.name, followed.definition_version)
                    notes.append(
                        f"{args.instance} follows definition version {followed.definition_version} of {machine.name} "
                        f"(the current is {followed.current_version}): drew version {followed.definition_version}"
                    )
                path = diagram.drawn_path(machine, followed.visits)
            if args.counts:
                state_counts, elsewhere = diagram.drawn_counts(machine, reporting.state_counts(conn, machine.name))
                if elsewhere:
                    facts["not_drawn"] = elsewhere
                    notes.append(_not_drawn(machine.name, elsewhere, args.instance is None))
                known = set(diagram.edges(machine))
                edge_counts = {e: n for e, n in reporting.edge_counts(conn, machine.name).items() if e in known}
        finally:
            conn.close()
    render = diagram.dot if fmt == "dot" else diagram.mermaid
    text = render(machine, state_counts=state_counts, edge_counts=edge_counts, path=path)
    if not args.json:
        for note in notes:
            print(f"pyfsm graph: {note}", file=sys.stderr)
    if output is None:
        emit(args, {"machine": machine.name, "format": fmt, **facts, "text": text}, text)
        return
    if output.suffix.lower() in IMAGE_SUFFIXES:
        diagram.render_file(text, output)
    else:
        try:
            output.write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            raise InvalidArgument(f"cannot write {output}: {exc.strerror}") from None
    emit(args, {"machine": machine.name, "format": fmt, **facts, "written": str(output)}, f"wrote {output}")


def _not_drawn(name: str, elsewhere: dict[str, int], current: bool) -> str:
    """The note on instances in states the drawn definition lacks (an older version's states)."""
    total = sum(elsewhere.values())
    states = ", ".join(f"{state} {n:,}" for state, n in elsewhere.items())
    which = "the current definition" if current else "this definition version"
    where = "a state" if len(elsewhere) == 1 else "states"
    note = (
        f"{total:,} {'instance is' if total == 1 else 'instances are'} in {where} {which} lacks ({states}): not drawn"
    )
    if current:
        some = next(iter(elsewhere))
        note += (
            f"; `pyfsm upgrade {name} --map {some}=STATE` moves {'it' if total == 1 else 'them'} (`--dry-run` first)"
        )
    return note


def _current_machine(conn: Any, name: str) -> Machine:
    """The type's current definition; UnknownMachine naming the installed types if there is none."""
    try:
        return reporting.current_machine(conn, name)
    except UnknownMachine as exc:
        try:
            with conn.cursor(pymysql.cursors.DictCursor) as cur:
                cur.execute(db.queries.sql("types_defined"))
                rows = cur.fetchall()
        except pymysql_errors.MySQLError:
            raise exc from None
        raise unknown_type(name, [str(r["machine"]) for r in rows if r["installed"]]) from None


def register(add: Add) -> None:
    g = add(
        "graph",
        cmd_graph,
        "draw a machine type as Mermaid (default) or Graphviz DOT; with --counts the "
        "instances per state and transitions per edge, with --instance one instance's path",
        "pyfsm graph order --counts > order.mmd\n"
        "  pyfsm graph order --format dot --instance o-1001\n"
        "  pyfsm graph order --counts --output order.svg   # needs Graphviz\n"
        "  pyfsm graph examples/order.yaml                 # a definition file, no database",
    )
    g.add_argument("machine", help="machine type, or a .yaml/.yml/.json definition file")
    add_read_dsn(g)
    g.add_argument("--format", choices=["mermaid", "dot"], default=None, help="default: mermaid (dot for images)")
    g.add_argument(
        "--counts",
        action="store_true",
        help="overlay instances per state and transitions per edge (reads the whole history of the type)",
    )
    g.add_argument("--instance", metavar="KEY", help="highlight the path of this instance")
    g.add_argument("--output", metavar="FILE", help="write to FILE: .svg/.png (Graphviz), .dot/.gv, .mmd/.md")
