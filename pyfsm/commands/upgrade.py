"""`pyfsm upgrade`: move a type's instances to a newer definition version (Store.upgrade_instances).

Exit status 0 when no selected instance was left behind (or for a dry run, which only
answers), 1 when some wait (claimed, locked: run it again later) or cannot move (a state the
target version lacks: give --map), as for an error; 2 for a malformed argument.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from ..errors import FsmError
from ..store import Store
from ..versions import DEFAULT_BATCH, MAX_BATCH, UpgradeReport
from .common import Add, Progress, emit, progress_flag, table, whole

#: A definition version on the command line (Store.upgrade_instances takes up to 2**32 - 1).
_version = whole(1, 2**32 - 1)


class _StateMap(argparse.Action):
    """``--map OLD=NEW``, repeatable, into one dict. A malformed or contradictory entry is a
    usage error (exit 2) before anything is read: the database checks the names themselves."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        text = str(values)
        old, sep, new = text.partition("=")
        if not sep or not old or not new:
            parser.error(
                f"{option_string} takes OLD=NEW (a state of an older version = a state of the target "
                f"version), got {text!r:.80}"
            )
        states = dict(getattr(namespace, self.dest) or {})  # a copy: never the parser's default
        if states.get(old, new) != new:
            parser.error(f"{option_string} maps {old} twice: to {states[old]} and to {new}")
        states[old] = new
        setattr(namespace, self.dest, states)


def cmd_upgrade(args: argparse.Namespace) -> None:
    only: dict[str, list[Any]] = {}
    if args.only_state:
        only["states"] = args.only_state
    if args.only_version:
        only["versions"] = args.only_version
    bar = Progress(0, f"upgrade {args.machine}", enabled=args.progress)
    so_far: list[UpgradeReport] = []

    def progress(report: UpgradeReport) -> None:
        so_far[:] = [report]
        bar.update(report.count())

    with Store(args.dsn) as store:
        finished = False
        try:
            report = store.upgrade_instances(
                args.machine,
                to_version=args.to,
                states=args.map,
                only=only or None,
                dry_run=args.dry_run,
                batch=args.batch,
                progress=progress,
            )
            finished = True
        finally:
            bar.close()
            if not finished and so_far:  # each instance moved in a transaction of its own: those stay moved
                done = so_far[0]
                print(
                    f"pyfsm: upgrade stopped after {done.moved} moved in {done.batches} "
                    f"batch{'' if done.batches == 1 else 'es'}; running it again carries on",
                    file=sys.stderr,
                )
        choices = _target_states(store, report) if report.unmapped and not args.json else []
    emit(args, report.as_dict(), report_lines(report, choices))
    if not args.dry_run and (report.waiting or report.unmapped):
        args.exit_code = 1


def _target_states(store: Store, report: UpgradeReport) -> list[str]:
    """The target version's states, to name in the --map advice (none if they cannot be read:
    the advice stands without them)."""
    try:
        states = store.definition(report.machine, report.to_version).definition.get("states", [])
    except FsmError:
        return []
    return [str(s) for s in states] if isinstance(states, list) else []


def report_lines(report: UpgradeReport, target_states: Sequence[str] = ()) -> list[str]:
    """The text form: a header, a row per (from version, state) and outcome, and a summary
    that says what to do about what is left."""
    dry = " (dry run: nothing is written)" if report.dry_run else ""
    header = f"{report.machine} -> version {report.to_version}{dry}"
    if not report.groups:
        return [
            header,
            f"nothing to move: no selected {report.machine} instance is of a version older than {report.to_version}",
        ]
    rows = [
        {
            "from version": g.from_version,
            "state": g.from_state,
            "to state": g.to_state,
            "outcome": g.outcome,
            "instances": g.instances,
        }
        for g in report.groups
    ]
    return [
        header,
        *table(rows, ["from version", "state", "to state", "outcome", "instances"]),
        _summary(report, target_states),
    ]


def _summary(report: UpgradeReport, target_states: Sequence[str]) -> str:
    waiting = f"would wait {report.waiting}" if report.dry_run else f"waiting {report.waiting}"
    if report.waiting:  # a dry run's waiting ones may be free by the time the real run comes
        waiting += " (a worker runs them or their lock is held" + (
            " now: a run leaves them for the next)" if report.dry_run else ": run it again later)"
        )
    cannot = f"cannot move {report.unmapped}"
    if report.unmapped:
        unmapped = sorted({g.from_state for g in report.groups if g.outcome == "unmapped"})
        maps = " ".join(f"--map {s}=NEW" for s in unmapped)
        of = f"one of {', '.join(target_states)}" if target_states else f"a state of version {report.to_version}"
        cannot += f" (version {report.to_version} has no state {', '.join(unmapped)}: give {maps}, NEW {of})"
    return f"{'would move' if report.dry_run else 'moved'} {report.moved}, {waiting}, {cannot}"


def register(add: Add) -> None:
    p = add(
        "upgrade",
        cmd_upgrade,
        "move a type's instances to a newer definition version (default: the current one), each recorded in "
        "its history; --dry-run says what would move where; exit status 1 if some were left behind",
        "pyfsm upgrade order --dry-run\n  pyfsm upgrade order --map shipped=sent --progress",
    )
    p.add_argument("machine", help="machine type")
    p.add_argument("--to", type=_version, metavar="N", help="the target definition version (default: the current)")
    p.add_argument(
        "--map",
        action=_StateMap,
        metavar="OLD=NEW",
        default=None,
        help="move instances in state OLD (which the target version lacks or renamed) to state NEW; repeatable",
    )
    p.add_argument("--only-state", action="append", metavar="S", help="move only instances in state S; repeatable")
    p.add_argument(
        "--only-version",
        action="append",
        type=_version,
        metavar="N",
        help="move only instances of definition version N; repeatable",
    )
    p.add_argument("--dry-run", action="store_true", help="say what would move where, and what cannot; write nothing")
    p.add_argument(
        "--batch",
        type=whole(1, MAX_BATCH),
        default=DEFAULT_BATCH,
        metavar="N",
        help=f"instances looked at per call (1-{MAX_BATCH}, default {DEFAULT_BATCH}); each moves in "
        "a transaction of its own",
    )
    progress_flag(p)
