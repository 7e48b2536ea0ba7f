"""`pyfsm attach`, `pyfsm adopt`, `pyfsm detach`: machine types on the application's own tables
(Store.attach_plan, Store.attach, Store.adopt, Store.detach; docs/own-tables.md).

Exit status: 0 when done, and for `attach --dry-run`, which only answers (its table marks the
values that are no state of the machine). 1 when an adoption (`attach`'s, unless --no-adopt,
or `adopt`'s) left rows without an instance in their state: rows in a value that is no state
of the machine, or rows whose state changed while the type was detached in a way its rules
refuse; the summary says which and what to do (running it again carries on). 1 for an error
too, one line on stderr; 2 for a malformed argument.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

from .. import attach as attaching
from ..attach import DEFAULT_BATCH, ON_DELETE, AdoptionReport, Attachment, AttachPlan
from ..errors import NotAttached
from ..schema.attached import quote
from ..store import Store
from .common import Add, Progress, emit, plain, progress_flag, table, whole

#: Rows one adoption batch looks at (Store.adopt takes 1 to 10000).
_batch = whole(1, 10000)


def describe(a: Attachment) -> str:
    """``order on `orders` (key `id`, state `status`, ...)``: what an attachment holds, as the
    commands and `pyfsm check` print it."""
    parts = [f"key {quote(a.key)}", f"state {quote(a.state)}"]
    parts += [f"lookup {quote(a.lookup)}"] if a.lookup else []
    parts += [f"copied {', '.join(quote(c) for c in a.columns)}"] if a.columns else []
    parts.append(f"on delete {a.on_delete}")
    return f"{a.machine} on {quote(a.table)} ({', '.join(parts)})"


def attach_command(a: Attachment) -> str:
    """The `pyfsm attach` that attaches ``a`` as it is recorded (names quoted for a shell when needed)."""
    words = ["pyfsm attach", a.machine, "--table", a.table, "--key", a.key, "--state", a.state]
    words += ["--lookup", a.lookup] if a.lookup else []
    for column in a.columns:
        words += ["--column", column]
    words += ["--on-delete", a.on_delete] if a.on_delete != "refuse" else []
    return " ".join(words[:1] + [shlex.quote(w) for w in words[1:]])


def adopt_with_progress(store: Store, machine: str, batch: int, enabled: bool | None) -> AdoptionReport:
    """Store.adopt with a progress bar of the rows looked at; stopped (Ctrl-C, a lost
    connection), a line on stderr says what was done, which stays done."""
    bar = Progress(0, f"adopting {machine}", enabled=enabled)
    so_far: list[AdoptionReport] = []

    def progress(report: AdoptionReport) -> None:
        so_far[:] = [report]
        bar.update(report.seen)

    finished = False
    try:
        report = store.adopt(machine, batch=batch, progress=progress)
        finished = True
    finally:
        bar.close()
        if not finished and so_far:  # each batch committed on its own: those rows stay adopted
            done = so_far[0]
            print(
                f"pyfsm: adoption stopped after {done.adopted} adopted of {done.seen} rows looked at in "
                f"{done.batches} batch{'' if done.batches == 1 else 'es'}; `pyfsm adopt {machine}` carries on",
                file=sys.stderr,
            )
    return report


def left_behind(report: AdoptionReport) -> bool:
    """Whether an adoption left rows without an instance in their state (exit status 1)."""
    return bool(report.unknown or report.refused)


def adoption_lines(a: Attachment, report: AdoptionReport) -> list[str]:
    """The adoption's summary, then what to do about each kind of row it left."""
    batches = f"{report.batches} batch{'' if report.batches == 1 else 'es'}"
    lines = [
        f"adopted {report.adopted} of {report.seen} rows of {quote(a.table)} in {batches}; moved {report.moved}, "
        f"left {report.unknown} in no state of {a.machine}, refused {report.refused}"
    ]
    if report.unknown:
        lines.append(
            f"  {report.unknown} {'row is' if report.unknown == 1 else 'rows are'} in a value of {quote(a.state)} "
            f"that is no state of {a.machine} (the first: key {report.first_unknown}): no instance yet; an UPDATE "
            f"giving such a row a state of {a.machine} adopts it there (another value is refused: "
            f"UnknownStateValue, 31038), or add the state in a new definition version and run "
            f"`pyfsm adopt {a.machine}`"
        )
    if report.refused:
        lines.append(
            f"  {report.refused} {'row' if report.refused == 1 else 'rows'} changed state while {a.machine} was "
            f"detached in a way its rules refuse (the first: key {report.first_refused}): each instance stays in "
            f"the state it had (`pyfsm show {a.machine} KEY`); set the row's {quote(a.state)} to a state the rules "
            f"allow from there and run `pyfsm adopt {a.machine}` again"
        )
    return lines


def plan_lines(plan: AttachPlan) -> list[str]:
    """A dry run: the attachment, the table's rows per state value, and what adoption would do."""
    a = plan.attachment
    rows = [
        {
            "state": "NULL" if v.state is None else v.state,
            "rows": v.rows,
            f"state of {a.machine}": "yes" if v.known else "no: not adopted",
        }
        for v in plan.values
    ]
    head = f"{describe(a)} (dry run: nothing is written)"
    if not rows:
        return [head, f"{quote(a.table)} has no rows: nothing to adopt"]
    unknown = plan.unknown
    known = plan.rows - sum(v.rows for v in unknown)
    summary = f"{plan.rows} rows: {known} in states of {a.machine}"
    if unknown:
        values = ", ".join("NULL" if v.state is None else repr(v.state) for v in unknown)
        summary += (
            f", {sum(v.rows for v in unknown)} in values that are no state of {a.machine} ({values}): adoption "
            f"leaves them without an instance, and their state cannot change until {a.machine} has it"
        )
    return [head, *table(rows, ["state", "rows", f"state of {a.machine}"]), summary]


def cmd_attach(args: argparse.Namespace) -> None:
    options: dict[str, Any] = {
        "table": args.table,
        "key": args.key,
        "state": args.state,
        "lookup": args.lookup,
        "columns": tuple(args.column or ()),
        "on_delete": args.on_delete,
    }
    with Store(args.dsn) as store:
        if args.dry_run:
            plan = store.attach_plan(args.machine, **options)
            emit(
                args,
                {"dry_run": True, **plain(plan), "rows": plan.rows, "unknown": plain(plan.unknown)},
                plan_lines(plan),
            )
            return
        attachment = store.attach(args.machine, **options)
        report = None if args.no_adopt else adopt_with_progress(store, args.machine, args.batch, args.progress)
    lines = [
        f"{describe(attachment)}: attached; every write of {quote(attachment.state)} now follows "
        f"{attachment.machine}'s rules"
    ]
    if report is None:
        lines.append(f"existing rows not adopted (--no-adopt): `pyfsm adopt {attachment.machine}` adopts them")
    else:
        lines += adoption_lines(attachment, report)
    emit(args, {"dry_run": False, "attachment": plain(attachment), "adoption": plain(report)}, lines)
    if report is not None and left_behind(report):
        args.exit_code = 1


def _attached(store: Store, machine: str) -> Attachment:
    """The type's attachment, installed; else NotAttached (31040), which says how to attach it
    (after a detach, the very command that attaches it again as it was)."""
    store.definition(machine)  # UnknownMachine, naming the types there are
    found = store.attachment(machine)
    if found is not None and not found.installed:
        raise NotAttached(
            f"{machine}'s attachment to {quote(found.table)} is not installed, so there is nothing to adopt: "
            f"after a detach `{attach_command(found)}` installs it again (and adopts), after a DBA's "
            f"fsm_attach_v1 `pyfsm sync {machine}` installs it",
            machine=machine,
        )
    return attaching.installed(store.gateway, machine)


def cmd_adopt(args: argparse.Namespace) -> None:
    with Store(args.dsn) as store:
        attachment = _attached(store, args.machine)
        report = adopt_with_progress(store, args.machine, args.batch, args.progress)
    emit(args, {"machine": args.machine, **plain(report)}, adoption_lines(attachment, report))
    if left_behind(report):
        args.exit_code = 1


def cmd_detach(args: argparse.Namespace) -> None:
    with Store(args.dsn) as store:
        store.definition(args.machine)  # UnknownMachine, naming the types there are
        before = store.attachment(args.machine)
        after = store.detach(args.machine)
    if after is None:
        text = f"{args.machine} is not attached to a table: nothing to detach"
    elif before is not None and not before.installed:
        text = f"{describe(after)}: not installed; nothing to remove"
    else:
        text = (
            f"{describe(after)}: detached; the rows, {args.machine}'s instances and their history stay (attaching "
            "again continues the history)"
        )
    emit(args, {"machine": args.machine, "attachment": plain(after)}, text)


def register(add: Add) -> None:
    p = add(
        "attach",
        cmd_attach,
        "put the rows of a table of the application's under a machine type (defined, with no instances of its "
        "own): each write of the state column then follows the rules and is recorded, each new row is an "
        "instance; then adopt the existing rows, in their state (--dry-run says what the table holds first); "
        "exit status 1 if the adoption left rows in no state of the machine; run as the schema owner",
        "pyfsm attach order --table orders --key id --state status --dry-run\n"
        "  pyfsm attach order --table orders --key id --state status --lookup customer_id --column total",
    )
    p.add_argument("machine", help="machine type")
    p.add_argument("--table", required=True, help="the application's table (in pyfsm's database)")
    p.add_argument("--key", required=True, help="its primary key, or a NOT NULL unique key of one column")
    p.add_argument("--state", required=True, help="its column holding each row's state (CHAR, VARCHAR or ENUM)")
    p.add_argument("--lookup", metavar="COLUMN", help="a column whose value is each instance's lookup key (locks)")
    p.add_argument(
        "--column",
        action="append",
        metavar="COLUMN",
        help="a column copied into each instance's data at every write of the row (guards test it, outbox "
        "rows carry it); repeatable",
    )
    p.add_argument(
        "--on-delete",
        choices=ON_DELETE,
        default="refuse",
        help="refuse (default): a row under the machine cannot be deleted; allow: it goes, its history stays",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="check, and count the table's rows per state value; write nothing"
    )
    p.add_argument("--no-adopt", action="store_true", help="attach only; `pyfsm adopt` adopts the rows later")
    _adoption_options(p)
    p = add(
        "adopt",
        cmd_adopt,
        "give each row of an attached table without an instance yet its instance, in the state it is in, "
        "a batch per transaction while the application writes; exit status 1 if rows were left (in no state "
        "of the machine, or moved while detached in a way the rules refuse)",
        "pyfsm adopt order --progress",
    )
    p.add_argument("machine", help="machine type")
    _adoption_options(p)
    add(
        "detach",
        cmd_detach,
        "remove a machine type's triggers from its attached table; the rows, the instances and their history "
        "stay (attaching again continues the history); run as the schema owner",
        "pyfsm detach order",
    ).add_argument("machine", help="machine type")


def _adoption_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--batch",
        type=_batch,
        default=DEFAULT_BATCH,
        metavar="N",
        help=f"rows looked at per transaction (1-10000, default {DEFAULT_BATCH})",
    )
    progress_flag(p)
