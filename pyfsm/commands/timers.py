"""`pyfsm timers`: list, schedule and cancel timers, and `run`, which fires the due ones
(for deployments without worker processes: workers fire timers themselves).

Each subcommand is one Store call (Store.timers, send_at, cancel_timer, fire_timers in a
pyfsm.timers.TimerLoop). What a user types is parsed before anything connects: a malformed
--at or --after, or a number out of its range, is a usage error, and nothing is armed.
`run` reports each timer it dropped or held in one line, as send-many reports a refusal.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import re
import signal
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from .. import timers
from ..definition import UNIT_SECONDS as DEFINITION_UNITS
from ..errors import SIGNALLED, FsmError, InvalidArgument
from ..limits import MAX_DELAY_SECONDS
from ..locks import check_owner
from ..models import Timer, TimerOutcome
from ..store import Store
from .common import Add, after_id, emit, json_object, page_limit, plain, row_id, seconds, seconds_between, table, whole

#: A duration: seconds, or a number with a unit (90, 1.5, 30s, 30m, 2h, 1d).
DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([smhd]?)")
UNIT_SECONDS = {"": 1, **DEFINITION_UNITS}


def duration(text: str) -> float:
    """An argparse type: --after's delay in seconds."""
    m = DURATION.fullmatch(text.strip())
    if m is None:
        raise argparse.ArgumentTypeError(
            f"not a duration: {text!r:.40} (seconds, or a number with s, m, h or d: 90, 1.5, 30m, 2h)"
        )
    value = float(m.group(1)) * UNIT_SECONDS[m.group(2)]
    if value > MAX_DELAY_SECONDS:
        raise argparse.ArgumentTypeError(f"a duration is at most {MAX_DELAY_SECONDS} seconds, got {text!r:.40}")
    return value


def utc_time(text: str) -> datetime:
    """An argparse type: --at as the naive UTC time the procedures take (naive input is UTC)."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not an ISO 8601 time: {text!r:.60} (such as 2026-11-22T10:00:00 in UTC, or 2026-11-22T11:00:00+01:00)"
        ) from None
    if value.tzinfo is None:
        return value
    try:
        return value.astimezone(UTC).replace(tzinfo=None)
    except (OverflowError, ValueError) as exc:  # the edge of the calendar
        raise argparse.ArgumentTypeError(f"{text!r:.60} has no UTC time: {exc}") from None


def _time(value: datetime) -> str:
    return f"{value:%Y-%m-%d %H:%M:%S.%f}"


def _last_error(timer: Timer) -> str | None:
    """Why a due timer waits (31011: its instance is paused), or None."""
    if timer.last_errno is None:
        return timer.last_error
    return f"{timer.last_errno} {timer.last_error}" if timer.last_error else str(timer.last_errno)


def cmd_list(args: argparse.Namespace) -> None:
    with Store(args.dsn) as store:
        armed = store.timers(args.machine, args.key, overdue=args.overdue, after_id=args.after_id, limit=args.limit)
    rows = [
        {
            "id": t.timer_id,
            "machine": t.machine,
            "key": t.instance_key,
            "kind": t.kind,
            "state": t.state,
            "event": t.event,
            "due (UTC)": t.due_at,
            "overdue s": f"{t.overdue_seconds:.1f}" if t.overdue_seconds > 0 else None,
            "holds": t.holds,
            "last error": _last_error(t),
        }
        for t in armed
    ]
    more = [f"(more: --after-id {armed[-1].timer_id})"] if len(armed) == args.limit else []
    emit(args, armed, table(rows, list(rows[0])) + more if rows else "no armed timers")


def cmd_schedule(args: argparse.Namespace) -> None:
    metadata = json_object("metadata", args.metadata)  # refused before anything connects
    with Store(args.dsn) as store:
        timer = store.send_at(
            args.machine,
            args.key,
            args.event,
            at=args.at,
            after=args.after,
            metadata=metadata,
            request_id=args.request_id,
        )
    replayed = " (replayed: armed before with this request id)" if timer.replayed else ""
    emit(
        args,
        timer,
        f"timer {timer.timer_id}: {timer.event} for {timer.machine} {timer.instance_key}, "
        f"due {_time(timer.due_at)} UTC{replayed}",
    )


def cmd_cancel(args: argparse.Namespace) -> None:
    with Store(args.dsn) as store:
        timer = store.cancel_timer(args.timer_id, reason=args.reason)
    emit(
        args,
        timer,
        f"cancelled timer {timer.timer_id}: {timer.kind} {timer.event} for {timer.machine} "
        f"{timer.instance_key}, due {_time(timer.due_at)} UTC",
    )


class _Batches:
    """store.fire_timers for the loop, remembering whether the last batch failed: with
    --until-idle the loop then returns, and the command must not exit 0 as if all were fired."""

    def __init__(self, store: Store, owner: str, limit: int, claim_seconds: float) -> None:
        self.store, self.owner, self.limit, self.claim_seconds = store, owner, limit, claim_seconds
        self.error: FsmError | None = None

    def __call__(self) -> list[TimerOutcome]:
        try:
            outcomes = self.store.fire_timers(owner=self.owner, limit=self.limit, claim_seconds=self.claim_seconds)
        except FsmError as exc:
            self.error = exc
            raise
        self.error = None
        return outcomes


class _NotFired:
    """The timers a run dropped or held, each reported as it happens: one line on stdout (as
    send-many reports a refusal), or kept for --json's summary."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.kept: list[dict[str, Any]] = []

    def __call__(self, outcomes: list[TimerOutcome]) -> None:
        for outcome in outcomes:
            if outcome.outcome == "fired":
                continue
            if self.as_json:
                error = SIGNALLED.get(outcome.errno or 0)
                self.kept.append({**plain(outcome), "error": None if error is None else error.__name__})
            else:
                print(outcome_line(outcome), flush=True)  # a service's output is read as it comes


def outcome_line(outcome: TimerOutcome) -> str:
    """``dropped timer 38: pay for order o-1 (scheduled, due ... UTC): TransitionNotAllowed (31005); nothing
    was sent`` (its event was not allowed then), or ``held timer ...; it stays armed`` (the
    instance is paused or locked: tried again later)."""
    error = SIGNALLED.get(outcome.errno or 0)
    why = f"errno {outcome.errno}" if error is None else f"{error.__name__} ({outcome.errno})"
    then = "nothing was sent" if outcome.outcome == "dropped" else "it stays armed and is tried again later"
    return (
        f"{outcome.outcome} timer {outcome.timer_id}: {outcome.event} for {outcome.machine} {outcome.instance_key} "
        f"({outcome.kind}, due {_time(outcome.due_at)} UTC): {why}; {then}"
    )


@contextlib.contextmanager
def _warnings_as_lines() -> Iterator[None]:
    """The loop's own log (a failed batch: it tries again) as `pyfsm: warning: ...` lines on
    stderr, as every command's warnings are; its per-timer info lines stay off (reported above)."""
    log = logging.getLogger("pyfsm.timers")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("pyfsm: warning: %(message)s"))
    handler.setLevel(logging.WARNING)
    log.addHandler(handler)
    try:
        yield
    finally:
        log.removeHandler(handler)


def cmd_run(args: argparse.Namespace) -> None:
    # a bad owner fails here, not in each batch of the loop (which logs a failed batch and tries again)
    owner = check_owner(args.owner or timers.default_owner())
    not_fired = _NotFired(args.json)
    with Store(args.dsn) as store, _warnings_as_lines():
        store.timers(limit=1)  # a wrong DSN or a database without pyfsm fails now, not in every batch
        batches = _Batches(store, owner, args.limit, args.claim_seconds)
        loop = timers.TimerLoop(batches, limit=args.limit, poll_seconds=args.poll, on_outcomes=not_fired)
        if not args.until_idle:  # a cron job's output is mailed: say nothing there but the summary
            print(
                f"pyfsm timers run {owner}: firing due timers, {args.limit} at a time, every {args.poll:g} s "
                "when idle (SIGTERM or Ctrl-C to stop)",
                file=sys.stderr,
                flush=True,
            )
        previous: dict[signal.Signals, Any] = {}
        for sig in (signal.SIGTERM, signal.SIGINT):  # stop after the batch in hand: its timers commit whole
            previous[sig] = signal.signal(sig, lambda _signum, _frame: loop.stop())
        try:
            loop.run(until_idle=args.until_idle)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    if args.until_idle and batches.error is not None:
        raise batches.error  # the last batch failed: its timers are still due
    summary = {"fired": loop.fired, "dropped": loop.dropped, "held": loop.held, "not_fired": not_fired.kept}
    emit(args, summary, f"timers: fired {loop.fired}, dropped {loop.dropped}, held {loop.held}")


def _no_subcommand(args: argparse.Namespace) -> None:
    raise InvalidArgument("pyfsm timers needs a subcommand: list, schedule, cancel or run")


def _common(parser: argparse.ArgumentParser) -> None:
    """--dsn and --json after the subcommand too; SUPPRESS keeps one given before it
    (`pyfsm timers --dsn X list`) from being reset by the subcommand's default."""
    parser.add_argument(
        "--dsn", default=argparse.SUPPRESS, help="mysql://user:password@host:port/db (default: $PYFSM_DSN)"
    )
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON (for scripts)")


def register(add: Add) -> None:
    group = add(
        "timers",
        _no_subcommand,
        "list, schedule and cancel timers; fire the due ones (run)",
        "pyfsm timers list order --overdue\n"
        "  pyfsm timers schedule order o-1001 cancel --after 30m\n"
        '  pyfsm timers cancel 42 --reason "paid by phone"\n'
        "  pyfsm timers run --until-idle      # from cron, where no worker process runs",
    )
    sub = group.add_subparsers(dest="timers_command", required=True, metavar="SUBCOMMAND")

    def subcommand(name: str, func: Any, help_text: str, example: str) -> argparse.ArgumentParser:
        p = sub.add_parser(
            name,
            help=help_text,
            description=help_text,
            epilog=f"example:\n  {example}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        _common(p)
        p.set_defaults(func=func)
        return p

    listing = subcommand(
        "list",
        cmd_list,
        "armed timers (state timeouts and scheduled events) in id order",
        "pyfsm timers list order o-1001\n  pyfsm timers list --overdue --json",
    )
    listing.add_argument("machine", nargs="?", default=None, help="only this machine type's timers")
    listing.add_argument("key", nargs="?", default=None, help="only this instance's timers")
    listing.add_argument("--overdue", action="store_true", help="only timers past their due time")
    listing.add_argument("--after-id", type=after_id, default=0, help="the last id of the previous page (default 0)")
    listing.add_argument(
        "--limit", type=page_limit, default=100, help="at most this many timers (1-10000, default 100)"
    )

    schedule = subcommand(
        "schedule",
        cmd_schedule,
        "schedule an event for an instance: it fires once, at --at or after --after; "
        "dropped (and logged) if not allowed from the instance's state then",
        "pyfsm timers schedule order o-1001 cancel --after 30m\n"
        "  pyfsm timers schedule order o-1001 remind --at 2026-11-22T10:00:00+01:00 --json",
    )
    schedule.add_argument("machine", help="the machine type")
    schedule.add_argument("key", help="the instance's key (it must exist)")
    schedule.add_argument("event", help="the event to send (one of the type's events)")
    when = schedule.add_mutually_exclusive_group(required=True)
    when.add_argument(
        "--at",
        type=utc_time,
        metavar="ISO-DATETIME",
        help="when: an ISO 8601 time, UTC unless it has an offset (a past time fires at once)",
    )
    when.add_argument(
        "--after",
        type=duration,
        metavar="DURATION",
        help="when: after this long, in seconds (90, 1.5) or with a unit (30s, 30m, 2h, 1d)",
    )
    schedule.add_argument("--metadata", default=None, help="a JSON object, recorded in the firing's history row")
    schedule.add_argument(
        "--request-id", default=None, help="makes the call idempotent: a repeat returns the timer the first call armed"
    )

    cancel = subcommand(
        "cancel",
        cmd_cancel,
        "cancel an armed timer before it fires (recorded in fsm_timer_log)",
        'pyfsm timers cancel 42 --reason "paid by phone"',
    )
    cancel.add_argument("timer_id", type=row_id, help="the timer's id (pyfsm timers list, or schedule's output)")
    cancel.add_argument("--reason", default=None, help="why (recorded)")

    run = subcommand(
        "run",
        cmd_run,
        "fire due timers until SIGTERM/Ctrl-C, or until none is due (--until-idle); "
        "for deployments without worker processes",
        "pyfsm timers run\n  pyfsm timers run --until-idle   # from cron",
    )
    run.add_argument(
        "--limit",
        type=whole(1, timers.MAX_BATCH),
        default=100,
        help=f"timers per batch, 1 to {timers.MAX_BATCH} (default 100)",
    )
    run.add_argument(
        "--poll",
        type=seconds,
        default=1.0,
        help="seconds to wait when no timer is due before looking again (default 1)",
    )
    run.add_argument(
        "--claim-seconds",
        type=seconds_between(*timers.CLAIM_SECONDS),
        default=30.0,
        help="how long a batch's claim lasts: if this process dies, another fires its timers after that "
        "(0.1 to 86400, default 30)",
    )
    run.add_argument("--owner", default=None, help="this firer's name in fsm_timer_log.done_by (default host:pid)")
    run.add_argument(
        "--until-idle",
        action="store_true",
        help="return once every timer due now was handled (for cron) instead of running until stopped",
    )
