"""`pyfsm` commands that run or repair things: worker, relay, locks, unlock, demo."""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from ..db.queries import DATABASE_NAME
from ..demo.run import DEMO_DATABASE
from ..engine.process import Process
from ..engine.worker import Worker, WorkerStats
from ..errors import InvalidArgument
from ..locks import HeldLock
from ..store import Store
from .common import (
    Add,
    Progress,
    emit,
    load,
    port_number,
    progress_flag,
    row_id,
    seconds,
    seconds_between,
    table,
    whole,
)
from .metrics import DEFAULT_HOST, import_metrics


def _lock_rows(locks: Sequence[HeldLock]) -> list[dict[str, object]]:
    return [{**asdict(h), "advisory_connection": h.advisory_connection} for h in locks]


def cmd_locks(args: argparse.Namespace) -> None:
    with Store(args.dsn) as store:
        held = store.locks(lookup_key=args.lookup_key)
    rows = [
        {
            "kind": h.kind,
            "lookup_key": h.lookup_key,
            "instance": f"{h.machine} {h.instance_key}",
            "owner": h.owner,
            "since (UTC)": h.since,
            "expires (UTC)": h.expires_at,
            "advisory conn": "gone" if h.advisory_connection is None else h.advisory_connection,
        }
        for h in held
    ]
    emit(args, _lock_rows(held), table(rows, list(rows[0])) if rows else "no locks held")


def cmd_unlock(args: argparse.Namespace) -> None:
    with Store(args.dsn) as store:
        released = store.force_unlock(args.lookup_key, reason=args.reason, scope=args.scope)
    lines = [
        f"released the {h.kind} lock of {h.lookup_key} held by {h.owner} ({h.machine} {h.instance_key})"
        + (
            ""
            if h.advisory_connection is None
            else f"; its connection {h.advisory_connection} still holds the advisory lock (KILL it to free that too)"
        )
        for h in released
    ]
    emit(args, _lock_rows(released), lines or f"no lock of {args.lookup_key} was held")


def _queued(store: Store, machines: set[str]) -> int:
    """Runs of these types due or claimed now."""
    return sum(s.due + s.claimed for s in store.stats() if s.machine in machines)


def _watch_queue(store: Store, machines: set[str], bar: Progress, stop: threading.Event) -> None:
    """Keep the bar at (runs due or claimed when the worker started) - (those left now)."""
    while not stop.wait(0.5):
        try:
            left = _queued(store, machines)
        except Exception as exc:  # the bar is a courtesy: never let it stop the worker
            logging.getLogger("pyfsm.cli").debug("queue progress unavailable: %s", exc)
            continue
        bar.update(bar.total - min(left, bar.total))


def _worker_metrics(args: argparse.Namespace) -> tuple[Any, Any]:
    """With --metrics-port: the worker's WorkerMetrics and the server answering /metrics."""
    if args.metrics_port is None:
        if args.metrics_host is not None:
            raise InvalidArgument("--metrics-host goes with --metrics-port")
        return None, None
    metrics = import_metrics()
    kept = metrics.WorkerMetrics()
    return kept, metrics.MetricsServer(kept.registry, port=args.metrics_port, host=args.metrics_host or DEFAULT_HOST)


def cmd_worker(args: argparse.Namespace) -> None:
    processes = [load(path, Process) for path in args.process]
    kept, server = _worker_metrics(args)
    with server or contextlib.nullcontext():
        _work(args, processes, kept, server)


def _work(args: argparse.Namespace, processes: list[Process], kept: Any, server: Any) -> None:
    with Store(args.dsn) as store:
        worker = Worker(store, processes, batch=args.batch, metrics=kept)
        # a type not installed: one line naming the `pyfsm install` to run, exit 1, before the loop
        worker.check_installed({p.name: path for p, path in zip(processes, args.process, strict=True)})
        print(
            f"pyfsm worker {worker.owner}: running {', '.join(p.name for p in processes)} "
            + ("" if server is None else f"(metrics: http://{server.host}:{server.port}/metrics) ")
            + "(SIGTERM or Ctrl-C to stop)",
            file=sys.stderr,
            flush=True,
        )
        machines = {p.name for p in processes}
        bar, stop = Progress(0, "queue", enabled=args.progress), threading.Event()
        watcher = None
        if bar.enabled:  # the queue is polled only for someone watching
            bar.total = _queued(store, machines)
            watcher = threading.Thread(target=_watch_queue, args=(store, machines, bar, stop), daemon=True)
            watcher.start()
        try:
            stats = worker.run(until_idle=args.until_idle)
        finally:
            stop.set()
            if watcher is not None:
                watcher.join()
                bar.update(bar.total - min(_queued(store, machines), bar.total))  # where the queue really is
            bar.close()
    emit(args, stats, worker_summary(stats))


def worker_summary(stats: WorkerStats) -> str:
    """``ran 3 runs, 12 steps; timers: fired 2, dropped 0, held 0``: the worker's timer thread
    fires due timers too (`pyfsm timers run`'s summary in the same words)."""
    return (
        f"ran {stats.runs} runs, {stats.steps} steps; "
        f"timers: fired {stats.timers_fired}, dropped {stats.timers_dropped}, held {stats.timers_held}"
    )


def cmd_demo(args: argparse.Namespace) -> None:
    from ..demo.run import run

    run(args.dsn, orders=args.orders, workers=args.workers, kafka=args.kafka, database=args.database, here=args.here)


def database_name(text: str) -> str:
    """An argparse type: a database name the demo may create (pyfsm.db's rule for creating one)."""
    if not DATABASE_NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"not a database name pyfsm creates (1 to 64 of A-Z a-z 0-9 _ $ -): {text!r:.80}"
        )
    return text


def cmd_relay(args: argparse.Namespace) -> None:
    from ..relay.publisher import Relay

    run_relay = not (args.lag or args.parked or args.unpark is not None)
    relay = Relay(
        args.dsn,
        kafka=args.kafka if run_relay else None,
        batch_size=args.batch_size,
        retention=args.retention,
        delivery_timeout=args.delivery_timeout,
        name=args.name,
        lease=args.lease,
    )
    try:
        if args.lag:
            lag = relay.lag()
            emit(args, lag.as_dict(), str(lag))
        elif args.parked:
            rows = relay.parked()
            emit(
                args,
                rows,
                table(rows, ["id", "event_id", "machine", "instance_key", "sort_key", "last_error"])
                if rows
                else "no parked events",
            )
        elif args.unpark is not None:
            released = relay.unpark(args.unpark, skip=args.skip)
            emit(args, {"released": released}, f"released {released} events of the instance of outbox id {args.unpark}")
        else:
            logging.basicConfig(
                level=getattr(logging, args.log_level),
                stream=sys.stderr,
                format="%(asctime)s %(levelname)s %(name)s: %(message)s",
            )
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: relay.stop())
            relay.run()
    finally:
        relay.close()


def register(add: Add) -> None:
    locks = add(
        "locks",
        cmd_locks,
        "list the locks held now: owner, since, expiry, advisory connection",
        "pyfsm locks --lookup-key account-7",
    )
    locks.add_argument("--lookup-key", default=None, help="only this lookup key's locks")
    unlock = add(
        "unlock",
        cmd_unlock,
        "force-release a held lock whatever its owner (recorded in fsm_lock_log)",
        'pyfsm unlock account-7 --reason "worker host lost, OPS-12"',
    )
    unlock.add_argument("lookup_key", help="the lookup key whose locks to release")
    unlock.add_argument("--reason", required=True, help="why (recorded)")
    unlock.add_argument(
        "--scope", default=None, help="* for the global lock, a machine type for its local lock (default: both)"
    )
    worker = add(
        "worker",
        cmd_worker,
        "run handlers: claim due instances of the given processes and run them",
        "pyfsm worker myapp.processes:checkout myapp.processes:refunds\n"
        "  pyfsm worker myapp.processes:checkout --until-idle 5 --progress   # drain the queue, then stop",
    )
    worker.add_argument("process", nargs="+", help="module.path:attribute of a pyfsm.Process")
    worker.add_argument(
        "--batch",
        type=whole(1, 1000),
        default=10,
        help="instances claimed per query and run side by side, their steps committed together "
        "(1 to 1000, default 10; 1: one at a time, each step committed alone)",
    )
    worker.add_argument(
        "--until-idle",
        type=seconds,
        default=None,
        help="stop after this many seconds without work, 0 to 100000000 (default: run until SIGTERM/Ctrl-C)",
    )
    progress_flag(worker)
    worker.add_argument(
        "--metrics-port",
        type=port_number,
        default=None,
        metavar="PORT",
        help="serve this worker's Prometheus metrics (steps, runs, errors, handler times) on this "
        "port, at /metrics (default: none)",
    )
    worker.add_argument(
        "--metrics-host", default=None, help=f"with --metrics-port: address to listen on (default {DEFAULT_HOST})"
    )
    demo = add(
        "demo",
        cmd_demo,
        "run the order demo end to end in a database of its own: pyfsm_demo on the server of --dsn "
        "($PYFSM_DSN; default mysql://root@127.0.0.1:3306), created if missing, never in the database "
        "the DSN names unless --here says so; its first line says where it works",
        "pyfsm demo --dsn mysql://root@127.0.0.1:3306            # in pyfsm_demo\n"
        "  pyfsm demo --dsn mysql://root@127.0.0.1:3306/shop --here   # in shop itself",
    )
    demo.add_argument(
        "--orders", type=whole(1, 1_000_000), default=300, help="how many orders to create (1 to 1000000, default 300)"
    )
    demo.add_argument(
        "--workers",
        type=whole(1, 32),
        default=3,
        help="worker processes for the queued orders (1 to 32, default 3)",
    )
    place = demo.add_mutually_exclusive_group()
    place.add_argument(
        "--database",
        type=database_name,
        default=None,
        metavar="NAME",
        help=f"work in database NAME on the DSN's server, created if missing (default {DEMO_DATABASE})",
    )
    place.add_argument(
        "--here",
        action="store_true",
        help="work in the database the DSN names: it gets the demo's types and their instances, "
        "which cannot be removed (an instance is never deleted: 31017)",
    )
    demo.add_argument(
        "--kafka",
        default=None,
        help="Kafka brokers to publish the demo's events to (default $PYFSM_KAFKA, else localhost:9092)",
    )
    relay = add(
        "relay",
        cmd_relay,
        "publish outbox rows to Kafka (one active relay per database), or show its lag",
        "pyfsm relay --kafka localhost:9092      # runs until SIGTERM/Ctrl-C\n"
        "  pyfsm relay --lag --json\n  pyfsm relay --parked\n  pyfsm relay --unpark 1234 [--skip]",
    )
    relay.add_argument("--kafka", default=None, help="bootstrap servers host:port[,...] (default $PYFSM_KAFKA)")
    relay.add_argument(
        "--batch-size", type=whole(1, 100_000), default=1000, help="outbox rows per batch (1 to 100000, default 1000)"
    )
    relay.add_argument(
        "--retention",
        type=seconds,
        default=86400.0,
        help="seconds to keep published rows before deleting them (0 to 100000000, default 86400)",
    )
    relay.add_argument(
        "--delivery-timeout",
        type=seconds_between(0.1, 3600),
        default=30.0,
        help="seconds to wait for the broker's acknowledgement before retrying (0.1 to 3600, default 30)",
    )
    relay.add_argument(
        "--lease",
        type=seconds_between(1, 3600),
        default=10.0,
        help="seconds the leadership lasts without a renewal: how soon a relay on another server "
        "takes over from one that died (1 to 3600, default 10)",
    )
    relay.add_argument("--name", default=None, help="this relay's name in logs and headers (default host:pid)")
    relay.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    what = relay.add_mutually_exclusive_group()
    what.add_argument("--lag", action="store_true", help="print the count and age of unpublished events and exit")
    what.add_argument("--parked", action="store_true", help="list parked events and exit")
    what.add_argument(
        "--unpark",
        type=row_id,
        metavar="OUTBOX_ID",
        help="release a parked event and the events held behind it, and exit",
    )
    relay.add_argument("--skip", action="store_true", help="with --unpark: give the event up instead of retrying it")
