"""`pyfsm` commands on instances: create, send, show, events, history, list, counts, stats, the
cross-type reports in-state and account, and the engine's controls enqueue, pause, resume,
retry, failed. Each is one procedure call (docs/sql-api.md); an error, or the status of an
instance stored as running, may take a second read to say what it means.

Two numbers are both a "version", so the output never says the word alone of an instance:
its ``row version`` counts its changes (what --expected-version compares; history rows carry
it), its ``definition version`` is the version of its type's definition it follows (what
`pyfsm upgrade` moves). The --json keys stay the fields' names: ``version`` and
``definition_version``."""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any

from ..errors import AccessDenied, FsmError, InvalidArgument, InvalidStatus
from ..limits import MAX_DELAY_SECONDS
from ..models import HistoryEntry, Instance, RunInfo, TypeStats
from ..store import Store
from .common import (
    Add,
    add_read_dsn,
    after_id,
    emit,
    json_object,
    page_limit,
    plain,
    read_dsn,
    seconds_between,
    table,
    whole,
)


def cmd_create(args: argparse.Namespace) -> None:
    with Store(args.dsn) as store:
        result = store.create(
            args.machine,
            args.key,
            state=args.state,
            data=json_object("data", args.data),
            lookup_key=args.lookup_key,
            metadata=json_object("metadata", args.metadata),
            request_id=args.request_id,
        )
    emit(args, result, f"{args.machine} {result.key}: created in {result.to_state} (row version {result.version})")


def cmd_send(args: argparse.Namespace) -> None:
    with Store(args.dsn) as store:
        result = store.send(
            args.machine,
            args.key,
            args.event,
            data=json_object("data", args.data),
            data_patch=json_object("patch", args.patch),
            metadata=json_object("metadata", args.metadata),
            expected_version=args.expected_version,
            request_id=args.request_id,
            lookup_key=args.lookup_key,
        )
    created = " (created)" if result.created else ""
    replayed = " (replayed: already applied with this request id)" if result.replayed else ""
    emit(
        args,
        result,
        f"{args.machine} {result.key}: {result.event}: {result.from_state} -> {result.to_state}, "
        f"row version {result.version}{created}{replayed}",
    )


def cmd_show(args: argparse.Namespace) -> None:
    with Store(args.dsn) as store:
        instance = store.get(args.machine, args.key)
        status = _status(store, instance)
    emit(
        args,
        {**plain(instance), "idle": status.startswith("idle")},
        [
            f"{instance.machine} {instance.key}",
            f"  state               {instance.state}",
            f"  status              {status}",
            f"  row version         {instance.version} (counts its changes: what --expected-version compares)",
            f"  definition version  {instance.definition_version} (of its type's definition: the rules it follows)",
            f"  lookup_key          {instance.lookup_key or '-'}",
            f"  data                {table([{'d': instance.data}], ['d'])[1]}",
            f"  created             {instance.created_at:%Y-%m-%d %H:%M:%S.%f} UTC",
            f"  updated             {instance.updated_at:%Y-%m-%d %H:%M:%S.%f} UTC",
        ],
    )


def _statuses(store: Store, instances: list[Instance]) -> dict[tuple[str, str], str]:
    """The status of each listed instance in the words every reader uses (_status_word: one
    Store.run_info call for each of stored status running)."""
    return {(i.machine, i.key): _status_word(store, i)[0] for i in instances}


def _status_word(store: Store, instance: Instance) -> tuple[str, RunInfo | None]:
    """The instance's status in the words every reader uses (docs/reporting.md), and its run in
    the engine's queue when that was read: the stored status running is running only while a
    handler runs the instance or will (its run has a due time: due, later, or claimed); without
    one it is idle. The queue is read (Store.run_info, which an app account may make) for an
    instance of stored status running only; an account that may not read it gets the stored word."""
    if instance.status != "running":
        return instance.status, None
    try:
        run = store.run_info(instance.machine, instance.key)
    except AccessDenied:
        return instance.status, None
    return ("idle" if run is None or run.due_at is None else "running"), run


def _status(store: Store, instance: Instance) -> str:
    """The instance's status word (_status_word), with what running and idle mean for it."""
    word, run = _status_word(store, instance)
    if word == "idle":
        return (
            f"idle (no handler runs it: it moves when an event is sent; "
            f"`pyfsm enqueue {instance.machine} {instance.key}` hands it to its process's workers)"
        )
    if run is None:  # not running, or the queue could not be read: the stored word
        return word
    if run.claimed_by is not None:
        return f"running (claimed by {run.claimed_by})"
    return f"running (queued for a worker, due {run.due_at:%Y-%m-%d %H:%M:%S} UTC)"


def cmd_events(args: argparse.Namespace) -> None:
    with Store(args.dsn) as store:
        events = store.allowed_events(args.machine, args.key)
    rows = [
        {
            "event": e.event,
            "allowed": "yes" if e.allowed else "no",
            "to": e.target or "-",
            "refused by": ", ".join(e.refused_by) or "-",
        }
        for e in events
    ]
    emit(
        args,
        events,
        table(rows, ["event", "allowed", "to", "refused by"])
        if events
        else f"{args.machine} {args.key}: no event leaves its state",
    )


def cmd_history(args: argparse.Namespace) -> None:
    with Store(args.dsn, read_dsn=read_dsn(args)) as store:
        history = store.history(args.machine, args.key)
    rows = [
        {
            "#": n,
            "event": h.event,
            "from": h.from_state,
            "to": h.to_state,
            "row version": h.sort_key,
            "handler": h.handler,
            "source": h.source,
            "at (UTC)": h.created_at,
        }
        for n, h in enumerate(history, start=1)
    ]
    columns = ["#", "event", "from", "to", "row version", "handler", "source", "at (UTC)"]
    emit(args, history, table(rows, columns) + _gap_note(history))


def _gap_note(history: list[HistoryEntry]) -> list[str]:
    """A line under the history when its row versions skip numbers, which would read as rows lost."""
    if [h.sort_key for h in history] == list(range(1, len(history) + 1)):
        return []
    return [
        "(row version: the instance's, after that row; changes that are not transitions count too "
        "(data a handler saves, a pause, a resume, a wait), and leave no history row)"
    ]


def cmd_list(args: argparse.Namespace) -> None:
    with Store(args.dsn, read_dsn=read_dsn(args)) as store:
        try:
            instances = store.in_state(args.machine, args.state, after_id=args.after_id, limit=args.limit)
        except InvalidArgument as exc:
            raise _state_explained(store, args.machine, args.state, exc) from exc.__cause__
        words = _statuses(store, instances)
    rows = [
        {
            "id": i.id,
            "key": i.key,
            "status": words[i.machine, i.key],
            "row version": i.version,
            "lookup_key": i.lookup_key,
            "updated (UTC)": i.updated_at,
        }
        for i in instances
    ]
    more = [f"(more: --after-id {instances[-1].id})"] if len(instances) == args.limit else []
    emit(args, instances, table(rows, ["id", "key", "status", "row version", "lookup_key", "updated (UTC)"]) + more)


def _state_explained(store: Store, machine: str, state: str, err: InvalidArgument) -> InvalidArgument:
    """``err``, or, when the database refused ``state`` and it is no state of the type's current
    definition, the same error naming the type's states (as UnknownEvent names its events).
    The database refuses a name no version of the type has; the current definition's states
    are what a user means. Read only after the call failed; a failure to read keeps ``err``."""
    if err.__cause__ is None:  # refused in Python, before the database was asked: not the state
        return err
    states = _definition_states(store, machine)
    if not states or state in states:
        return err
    better = InvalidArgument(
        f"machine type {machine!r} has no state {state!r}; its states: {', '.join(states)}",
        machine=machine,
        state=state,
        states=states,
    )
    better.__cause__ = err.__cause__
    return better


def cmd_in_state(args: argparse.Namespace) -> None:
    after = _after(args, "--after-machine", "--after-id")
    with Store(args.dsn, read_dsn=read_dsn(args)) as store:
        instances = store.instances_in_state(args.state, after=after, limit=args.limit)
        words = _statuses(store, instances)
    rows = [
        {
            "machine": i.machine,
            "id": i.id,
            "key": i.key,
            "status": words[i.machine, i.key],
            "row version": i.version,
            "lookup_key": i.lookup_key,
            "updated (UTC)": i.updated_at,
        }
        for i in instances
    ]
    last = instances[-1] if instances else None
    more = (
        [f"(more: --after-machine {last.machine} --after-id {last.id})"]
        if last and len(instances) == args.limit
        else []
    )
    emit(
        args,
        instances,
        (table(rows, ["machine", "id", "key", "status", "row version", "lookup_key", "updated (UTC)"]) + more)
        if instances
        else f"no instances in {args.state}",
    )


def cmd_account(args: argparse.Namespace) -> None:
    after = _after(args, "--after-at", "--after-machine", "--after-id")
    if after is not None:
        try:
            after = (datetime.fromisoformat(after[0]), *after[1:])
        except ValueError:
            raise InvalidArgument(
                f"--after-at must be a time like 2026-11-22T10:00:00.123456, got {after[0]!r:.80}"
            ) from None
    with Store(args.dsn, read_dsn=read_dsn(args)) as store:
        history = store.account_history(
            args.lookup_key, newest_first=not args.oldest_first, after=after, limit=args.limit
        )
    rows = [
        {
            "at (UTC)": h.entered_at,
            "machine": h.machine,
            "key": h.key,
            "row version": h.sort_key,
            "event": h.event,
            "from": h.from_state,
            "to": h.to_state,
            "source": h.source,
        }
        for h in history
    ]
    last = history[-1] if history else None
    more = (
        [
            f"(more: --after-at {last.entered_at.replace(tzinfo=None).isoformat(timespec='microseconds')} "
            f"--after-machine {last.machine} --after-id {last.id})"
        ]
        if last and len(history) == args.limit
        else []
    )
    emit(
        args,
        history,
        (table(rows, ["at (UTC)", "machine", "key", "row version", "event", "from", "to", "source"]) + more)
        if history
        else f"no history for {args.lookup_key}",
    )


def _after(args: argparse.Namespace, *flags: str) -> tuple[Any, ...] | None:
    """A page cursor from its flags: all of them (the last row of the previous page) or none."""
    values = tuple(getattr(args, flag[2:].replace("-", "_")) for flag in flags)
    if all(v is None for v in values):
        return None
    if any(v is None for v in values):
        raise InvalidArgument(
            f"{', '.join(flags)} go together: the last row of the previous page (the output says what to pass)"
        )
    return values


def cmd_counts(args: argparse.Namespace) -> None:
    with Store(args.dsn, read_dsn=read_dsn(args)) as store:
        counts = store.counts(args.machine)
        states = _definition_states(store, args.machine) if counts else []
    # the definition's order, as the console and `pyfsm graph` draw them; then the states only
    # older definition versions have (instances not upgraded yet), as the counters list them
    older = [s for s in counts if s not in states]
    ordered = {s: counts[s] for s in [*(s for s in states if s in counts), *older]}
    note = (
        [
            f"({', '.join(older)}: no state of the current definition of {args.machine}; "
            f"`pyfsm upgrade {args.machine} --dry-run` says where they would go)"
        ]
        if older and states
        else []
    )
    emit(
        args,
        ordered,
        table([{"state": s, "instances": n} for s, n in ordered.items()], ["state", "instances"]) + note
        if counts
        else f"no {args.machine} instances",
    )


def _definition_states(store: Store, machine: str) -> list[str]:
    """The states of the type's current definition, in its order; none if it cannot be read
    (an account that may not call fsm_definition_v1: the counters' order stands)."""
    try:
        states = store.definition(machine).definition.get("states", [])
    except (FsmError, AttributeError):
        return []
    return [str(s) for s in states] if isinstance(states, list) else []


def cmd_stats(args: argparse.Namespace) -> None:
    with Store(args.dsn, read_dsn=read_dsn(args)) as store:
        stats = store.stats()
        versions = {s.machine: _version_counts(store, s) for s in stats}
    columns = [
        "machine",
        "instances",
        "running",
        "idle",
        "waiting",
        "paused",
        "failed",
        "completed",
        "due",
        "claimed",
        "unpublished",
    ]
    lines = table([s.to_dict() for s in stats], columns) + [
        line for s in stats for line in _versions_line(s.machine, versions[s.machine])
    ]
    emit(
        args,
        [{**plain(s), "versions": versions[s.machine]} for s in stats],
        lines if stats else "no machine types installed",
    )


def _version_counts(store: Store, stats: TypeStats) -> list[dict[str, Any]] | None:
    """Instances per definition version: the versions that hold some, and the current one.
    A type defined once, or without instances (its tables may not even be there yet), needs
    no reading; the others' instance tables are read whole (fsm_instances_per_version_v1). None: the
    account may not call it (granted before revision 0021; the rest of the stats stands)."""
    if stats.current_version is None:
        return None
    if stats.current_version == 1 or not stats.instances:
        return [{"version": stats.current_version, "instances": stats.instances, "is_current": True}]
    try:
        counts = store.version_counts(stats.machine)
    except AccessDenied:
        return None
    return [
        {"version": c.version, "instances": c.instances, "is_current": c.is_current}
        for c in counts
        if c.instances or c.is_current
    ]


def _versions_line(machine: str, versions: list[dict[str, Any]] | None) -> list[str]:
    """A line under the table for a type with instances of an older version (the table stays
    as it was for the others): how many each version holds, and what moves them."""
    if not versions or all(v["is_current"] for v in versions if v["instances"]):
        return []
    counts = ", ".join(f"{v['version']}{' (current)' if v['is_current'] else ''}: {v['instances']}" for v in versions)
    return [f"{machine} versions: {counts} (`pyfsm upgrade {machine} --dry-run` says what would move)"]


def _control(args: argparse.Namespace, action: str) -> None:
    with Store(args.dsn) as store:
        try:
            result = getattr(store, action)(args.machine, args.key)
        except InvalidStatus as exc:
            raise _idle_explained(store, args.machine, args.key, action, exc) from exc.__cause__
    pending = " (at the end of the step in progress)" if getattr(result, "pending", False) else ""
    emit(args, result, f"{args.machine} {args.key}: {result.status} in {result.state}{pending}")


def _idle_explained(store: Store, machine: str, key: str, action: str, err: InvalidStatus) -> InvalidStatus:
    """``err``, or, for an idle instance (stored status running, and no run with a due time
    in the engine's queue: no handler runs it), the same error saying so and naming what
    hands it to the workers. The database says "running" for both; which one it is, is read
    from the queue (Store.run_info), only after the call failed."""
    try:
        instance = store.get(machine, key)
        word, _ = _status_word(store, instance)
    except FsmError:
        return err
    if word != "idle":
        return err
    wanted = "paused" if action == "resume" else "failed"
    better = InvalidStatus(
        f"{machine} {key} is idle in {instance.state}, not {wanted}: no handler runs it (it moves when an "
        f"event is sent); `pyfsm enqueue {machine} {key}` hands it to the workers of its process",
        machine=machine,
        key=key,
        state=instance.state,
        status="idle",
    )
    better.__cause__ = err.__cause__
    return better


def cmd_pause(args: argparse.Namespace) -> None:
    _control(args, "pause")


def cmd_resume(args: argparse.Namespace) -> None:
    _control(args, "resume")


def cmd_retry(args: argparse.Namespace) -> None:
    _control(args, "retry")


def cmd_enqueue(args: argparse.Namespace) -> None:
    with Store(args.dsn) as store:
        run = store.enqueue(args.machine, args.key, run_immediately=args.run_immediately, delay_seconds=args.delay)
        # a waiting or paused instance keeps a run that is not due: say which, and what makes it due
        status = store.get(args.machine, args.key).status if run.due_at is None else "running"
    if run.due_at is None:
        when = "when it is resumed (`pyfsm resume`)" if status == "paused" else "when an event wakes it"
        text = f"{args.machine} {args.key}: {status}; its run is kept in the engine's queue and is due {when}"
    elif run.claimed_by is not None:
        text = f"{args.machine} {args.key}: running: a worker runs it now (claimed by {run.claimed_by})"
    else:
        text = (
            f"{args.machine} {args.key}: running: queued, due {run.due_at:%Y-%m-%d %H:%M:%S} UTC for a worker "
            f"of its process (`pyfsm worker module:process`)"
        )
    emit(args, {"machine": args.machine, **plain(run), "status": status}, text)


def cmd_failed(args: argparse.Namespace) -> None:
    with Store(args.dsn) as store:
        rows = store.failed(args.machine, limit=args.limit)
    columns = ["instance_key", "current_state", "handler", "attempt", "error_type", "message", "failed_at"]
    emit(args, rows, table([r.to_dict() for r in rows], columns) if rows else f"no failed {args.machine} instances")


def register(add: Add) -> None:
    def keyed(name: str, func: object, text: str, example: str) -> argparse.ArgumentParser:
        p = add(name, func, text, example)  # type: ignore[arg-type]
        p.add_argument("machine", help="machine type")
        p.add_argument("key", help="instance key")
        return p

    create = keyed(
        "create",
        cmd_create,
        "create an instance in a start state (default: the first)",
        "pyfsm create order o-1001 --data '{\"total\": 42}' --lookup-key customer-7",
    )
    create.add_argument("--state", help="the start state (default: the first start state)")
    send = keyed(
        "send",
        cmd_send,
        "apply an event to an instance (a key with no instance is created when a start state allows the event)",
        'pyfsm send order o-1001 pay --metadata \'{"by": "ops"}\'',
    )
    send.add_argument("event", help="the event")
    send.add_argument(
        "--expected-version", type=whole(0), help="refuse (Conflict) unless the instance is at this version"
    )
    send.add_argument(
        "--patch",
        help="change part of the data: a JSON merge patch (RFC 7396: null removes a key, objects merge, "
        "anything else replaces), merged inside the transition before the guards judge the data; not with --data",
    )
    for p in (create, send):
        p.add_argument("--data", help="the instance's data: a JSON object (send: replaces it)")
        p.add_argument("--metadata", help="recorded with the transition in history: a JSON object")
        p.add_argument("--lookup-key", help="the account the instance belongs to (used by locks)")
        p.add_argument("--request-id", help="makes the call safe to repeat: a repeat returns the first result")
    keyed(
        "show",
        cmd_show,
        "show an instance: state, status (idle: no handler runs it), row version, definition version, data",
        "pyfsm show order o-1001 --json",
    )
    keyed(
        "events",
        cmd_events,
        "the events of an instance's state: which its guards allow now, where each "
        "leads, and which guard refuses the others",
        "pyfsm events order o-1001",
    )
    add_read_dsn(keyed("history", cmd_history, "an instance's history, oldest first", "pyfsm history order o-1001"))
    listing = add(
        "list",
        cmd_list,
        "list the instances in a state, a page at a time, in id order",
        "pyfsm list order paid --limit 50 --after-id 1200",
    )
    listing.add_argument("machine", help="machine type")
    listing.add_argument("state", help="the state")
    listing.add_argument("--after-id", type=after_id, default=0, help="the last id of the previous page (default 0)")
    listing.add_argument("--limit", type=page_limit, default=100, help="at most this many (1-10000, default 100)")
    add_read_dsn(listing)
    in_state = add(
        "in-state",
        cmd_in_state,
        "list the instances in a state across all machine types, a page at "
        "a time, by machine and id (each type's state index: fast at any size)",
        "pyfsm in-state paid --limit 50 --after-machine order --after-id 1200",
    )
    in_state.add_argument("state", help="the state")
    in_state.add_argument("--after-machine", help="the machine of the last row of the previous page")
    in_state.add_argument("--after-id", type=after_id, help="the id of the last row of the previous page")
    in_state.add_argument("--limit", type=page_limit, default=100, help="at most this many (1-10000, default 100)")
    add_read_dsn(in_state)
    account = add(
        "account",
        cmd_account,
        "the history of one account (lookup key) across all machine types, newest first, a page at a time",
        "pyfsm account customer-7 --limit 20",
    )
    account.add_argument("lookup_key", help="the account: the instances' lookup key")
    account.add_argument("--oldest-first", action="store_true", help="oldest first (default: newest first)")
    account.add_argument("--after-at", help="the time (UTC, ISO 8601) of the last row of the previous page")
    account.add_argument("--after-machine", help="the machine of the last row of the previous page")
    account.add_argument("--after-id", type=after_id, help="the id of the last row of the previous page")
    account.add_argument("--limit", type=page_limit, default=100, help="at most this many (1-10000, default 100)")
    add_read_dsn(account)
    counts = add(
        "counts",
        cmd_counts,
        "how many instances are in each state (from the state counters)",
        "pyfsm counts order --json",
    )
    counts.add_argument("machine", help="machine type")
    add_read_dsn(counts)
    add_read_dsn(
        add(
            "stats",
            cmd_stats,
            "per machine type: instances, running/idle/waiting/paused/failed/completed, "
            "queue, outbox; instances per definition version where older versions hold some",
            "pyfsm stats",
        )
    )
    enqueue = keyed(
        "enqueue",
        cmd_enqueue,
        "hand an instance to the workers of its process: its run in the engine's queue is due now "
        "(or after --delay); what an idle instance (no handler runs it) needs to be run",
        "pyfsm enqueue order o-1001",
    )
    enqueue.add_argument(
        "--delay",
        type=seconds_between(0, MAX_DELAY_SECONDS),
        metavar="SECONDS",
        help=f"due after this many seconds (0-{MAX_DELAY_SECONDS}; default: now)",
    )
    enqueue.add_argument(
        "--run-immediately",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="for this instance from now on: run its next step at once after one (or, with --no-run-immediately, "
        "queue it for any worker); default: as its process says",
    )
    for name, func, text in (
        ("pause", cmd_pause, "pause an instance (at the next step boundary if it is running)"),
        ("resume", cmd_resume, "resume a paused instance where it paused"),
        ("retry", cmd_retry, "run a failed instance again from the step that failed (an idle one: pyfsm enqueue)"),
    ):
        keyed(name, func, text, f"pyfsm {name} order o-1001")
    failed = add("failed", cmd_failed, "list failed instances with their last error", "pyfsm failed order --json")
    failed.add_argument("machine", help="machine type")
    failed.add_argument("--limit", type=page_limit, default=100, help="at most this many (1-10000, default 100)")
