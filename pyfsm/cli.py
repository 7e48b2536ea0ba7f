"""The `pyfsm` command line.

Every command takes --dsn (default: $PYFSM_DSN), exits 0 on success and non-zero with a
one-line error on stderr otherwise.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict
from typing import TypeVar

from . import db, schema
from .db import translate
from .definition import Machine
from .errors import FsmError, InvalidArgument
from .locks import HeldLock
from .process import Process
from .store import Store
from .worker import Worker

T = TypeVar("T")

EPILOG = """examples:
  pyfsm migrate --dsn mysql://root@127.0.0.1:3306/app
  pyfsm define myapp.machines:order
  pyfsm sync order
  pyfsm check
  pyfsm demo --orders 300
  pyfsm locks --json
  pyfsm unlock account-7 --reason "worker host lost"
  pyfsm worker myapp.processes:checkout
  pyfsm pause order o-1001 && pyfsm resume order o-1001
  pyfsm relay --kafka localhost:9092
  pyfsm relay --lag --json
"""


def _load(path: str, kind: type[T]) -> T:
    """The object at ``module.path:attribute``, which must be a ``kind``."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise InvalidArgument(f"expected module.path:attribute, got {path!r}")
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise InvalidArgument(f"cannot load {path}: {exc}") from None
    if not isinstance(obj, kind):
        raise InvalidArgument(f"{path} is a {type(obj).__name__}, not a pyfsm.{kind.__name__}")
    return obj


def _machine_from_path(path: str) -> Machine:
    return _load(path, Machine)


def cmd_migrate(args: argparse.Namespace) -> None:
    settings = db.parse_dsn(args.dsn)
    schema.migrate(settings)
    print(f"pyfsm schema is at {schema.HEAD_REVISION}")


def cmd_check(args: argparse.Namespace) -> None:
    conn = db.connect(db.parse_dsn(args.dsn))
    try:
        schema.check(conn)
    finally:
        conn.close()
    print(f"pyfsm schema is at {schema.HEAD_REVISION}, as this pyfsm needs")


def cmd_define(args: argparse.Namespace) -> None:
    with Store(args.dsn) as store:
        result = store.define(_machine_from_path(args.machine))
    print(json.dumps({"machine": result.machine, "version": result.version, "changed": result.changed}))


def cmd_sync(args: argparse.Namespace) -> None:
    with Store(args.dsn) as store:
        store.sync(args.machine)
    print(f"tables, triggers and procedures of {args.machine} are installed")


def _print_locks(locks: Sequence[HeldLock], as_json: bool) -> None:
    if as_json:
        print(json.dumps([{**asdict(h), "since": h.since.isoformat(), "expires_at": h.expires_at.isoformat()}
                          for h in locks]))
        return
    if not locks:
        print("no locks held")
        return
    print(f"{'kind':6}  {'lookup_key':24}  {'machine/instance':32}  {'owner':36}  {'since (UTC)':26}  "
          f"{'expires (UTC)':26}  advisory conn")
    for h in locks:
        conn = "gone" if h.advisory_connection is None else str(h.advisory_connection)
        print(f"{h.kind:6}  {h.lookup_key:24}  {h.machine + ' ' + h.instance_key:32}  {h.owner:36}  "
              f"{h.since:%Y-%m-%d %H:%M:%S.%f}  {h.expires_at:%Y-%m-%d %H:%M:%S.%f}  {conn}")


def cmd_locks(args: argparse.Namespace) -> None:
    with Store(args.dsn) as store:
        _print_locks(store.locks(lookup_key=args.lookup_key), args.json)


def cmd_unlock(args: argparse.Namespace) -> None:
    with Store(args.dsn) as store:
        released = store.force_unlock(args.lookup_key, reason=args.reason, scope=args.scope)
    if args.json:
        _print_locks(released, True)
    elif not released:
        print(f"no lock of {args.lookup_key} was held")
    else:
        for h in released:
            alive = "" if h.advisory_connection is None else (
                f"; its connection {h.advisory_connection} still holds the advisory lock (KILL it to free that too)")
            print(f"released the {h.kind} lock of {h.lookup_key} held by {h.owner} "
                  f"({h.machine} {h.instance_key}){alive}")


def cmd_worker(args: argparse.Namespace) -> None:
    processes = [_load(path, Process) for path in args.process]
    with Store(args.dsn) as store:
        worker = Worker(store, processes, batch=args.batch)
        print(f"pyfsm worker {worker.owner}: running {', '.join(p.name for p in processes)} "
              "(SIGTERM or Ctrl-C to stop)", file=sys.stderr)
        stats = worker.run(until_idle=args.until_idle)
    print(json.dumps(asdict(stats)))


def _control(args: argparse.Namespace, action: str) -> None:
    with Store(args.dsn) as store:
        result = getattr(store, action)(args.machine, args.key)
    if args.json:
        print(json.dumps(result))
    else:
        pending = " (at the end of the step in progress)" if result.get("pending") else ""
        print(f"{args.machine} {args.key}: {result['status']} in {result['state']}{pending}")


def cmd_pause(args: argparse.Namespace) -> None:
    _control(args, "pause")


def cmd_resume(args: argparse.Namespace) -> None:
    _control(args, "resume")


def cmd_retry(args: argparse.Namespace) -> None:
    _control(args, "retry")


def cmd_failed(args: argparse.Namespace) -> None:
    with Store(args.dsn) as store:
        rows = store.failed(args.machine, limit=args.limit)
    if args.json:
        print(json.dumps(rows, default=str))
        return
    if not rows:
        print(f"no failed {args.machine} instances")
    for r in rows:
        print(f"{r['instance_key']}  in {r['current_state']}  {r['handler']} attempt {r['attempt']}: "
              f"{r['error_type']}: {r['message']}  ({r['failed_at']})")


def cmd_demo(args: argparse.Namespace) -> None:
    from .demo import run

    run(args.dsn, orders=args.orders, workers=args.workers, kafka=args.kafka)


def cmd_relay(args: argparse.Namespace) -> None:
    import logging
    import signal

    from .relay import Relay

    relay = Relay(args.dsn, kafka=args.kafka if args.run_relay else None, batch_size=args.batch_size,
                  retention=args.retention, delivery_timeout=args.delivery_timeout, name=args.name)
    try:
        if args.lag:
            lag = relay.lag()
            print(json.dumps(lag.as_dict()) if args.json else str(lag))
        elif args.parked:
            rows = relay.parked()
            if args.json:
                print(json.dumps(rows, default=str))
            for r in [] if args.json else rows:
                print(f"{r['id']}\t{r['event_id']}\t{r['machine']} {r['instance_key']} #{r['sort_key']}\t"
                      f"{r['last_error']}")
        elif args.unpark is not None:
            released = relay.unpark(args.unpark, skip=args.skip)
            print(f"released {released} events of the instance of outbox id {args.unpark}")
        else:
            logging.basicConfig(level=getattr(logging, args.log_level), stream=sys.stderr,
                                format="%(asctime)s %(levelname)s %(name)s: %(message)s")
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: relay.stop())
            relay.run()
    finally:
        relay.close()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pyfsm", description="Persistent state machines enforced by MySQL.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, func: object, help_text: str, example: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text, epilog=f"example:\n  {example}",
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("--dsn", default=None, help="mysql://user:password@host:port/db (default: $PYFSM_DSN)")
        p.set_defaults(func=func)
        return p

    add("migrate", cmd_migrate, "install or upgrade pyfsm's schema", "pyfsm migrate --dsn mysql://root@127.0.0.1/app")
    add("check", cmd_check, "check that the schema matches this pyfsm", "pyfsm check")
    add("define", cmd_define, "store a Machine from a Python module and create its tables",
        "pyfsm define myapp.machines:order").add_argument("machine", help="module.path:attribute")
    add("sync", cmd_sync, "create the tables and triggers of a machine defined in SQL",
        "pyfsm sync order").add_argument("machine", help="machine name")
    demo = add("demo", cmd_demo, "run the order demo end to end (creates the database if needed)",
               "pyfsm demo --dsn mysql://root@127.0.0.1:3306/pyfsm_demo")
    demo.add_argument("--orders", type=int, default=300, help="how many orders to create (default 300)")
    demo.add_argument("--workers", type=int, default=3, help="worker processes for the queued orders (default 3)")
    worker = add("worker", cmd_worker, "run handlers: claim due instances of the given processes and run them",
                 "pyfsm worker myapp.processes:checkout myapp.processes:refunds")
    worker.add_argument("process", nargs="+", help="module.path:attribute of a pyfsm.Process")
    worker.add_argument("--batch", type=int, default=1, help="instances claimed per query (default 1)")
    worker.add_argument("--until-idle", type=float, default=None,
                        help="stop after this many seconds without work (default: run until SIGTERM/Ctrl-C)")
    for name, func, text in (("pause", cmd_pause, "pause an instance (at the next step boundary if it is running)"),
                             ("resume", cmd_resume, "resume a paused instance where it paused"),
                             ("retry", cmd_retry, "run a failed instance again from the step that failed")):
        control = add(name, func, text, f"pyfsm {name} order o-1001")
        control.add_argument("machine", help="machine name")
        control.add_argument("key", help="instance key")
        control.add_argument("--json", action="store_true", help="print JSON")
    failed = add("failed", cmd_failed, "list failed instances with their last error", "pyfsm failed order --json")
    failed.add_argument("machine", help="machine name")
    failed.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")
    failed.add_argument("--json", action="store_true", help="print JSON")
    locks = add("locks", cmd_locks, "list the locks held now: owner, since, expiry, advisory connection",
                "pyfsm locks --lookup-key account-7")
    locks.add_argument("--lookup-key", default=None, help="only this lookup key's locks")
    locks.add_argument("--json", action="store_true", help="print JSON")
    unlock = add("unlock", cmd_unlock, "force-release a held lock whatever its owner (recorded in fsm_lock_log)",
                 'pyfsm unlock account-7 --reason "worker host lost, OPS-12"')
    unlock.add_argument("lookup_key", help="the lookup key whose locks to release")
    unlock.add_argument("--reason", required=True, help="why (recorded)")
    unlock.add_argument("--scope", default=None, help="* for the global lock, a machine type for its local lock "
                                                      "(default: both)")
    unlock.add_argument("--json", action="store_true", help="print JSON")
    demo.add_argument("--kafka", default=None,
                      help="Kafka brokers to publish the demo's events to (default $PYFSM_KAFKA, else localhost:9092)")
    relay = add("relay", cmd_relay, "publish outbox rows to Kafka (one active relay per database), or show its lag",
                "pyfsm relay --kafka localhost:9092      # runs until SIGTERM/Ctrl-C\n"
                "  pyfsm relay --lag --json\n  pyfsm relay --parked\n  pyfsm relay --unpark 1234 [--skip]")
    relay.add_argument("--kafka", default=None, help="bootstrap servers host:port[,...] (default $PYFSM_KAFKA)")
    relay.add_argument("--batch-size", type=int, default=1000, help="outbox rows per batch (default 1000)")
    relay.add_argument("--retention", type=float, default=86400.0,
                       help="seconds to keep published rows before deleting them (default 86400)")
    relay.add_argument("--delivery-timeout", type=float, default=30.0,
                       help="seconds to wait for the broker's acknowledgement before retrying (default 30)")
    relay.add_argument("--name", default=None, help="this relay's name in logs and headers (default host:pid)")
    relay.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    what = relay.add_mutually_exclusive_group()
    what.add_argument("--lag", action="store_true", help="print the count and age of unpublished events and exit")
    what.add_argument("--parked", action="store_true", help="list parked events and exit")
    what.add_argument("--unpark", type=int, metavar="OUTBOX_ID",
                      help="release a parked event and the events held behind it, and exit")
    relay.add_argument("--skip", action="store_true", help="with --unpark: give the event up instead of retrying it")
    relay.add_argument("--json", action="store_true", help="with --lag or --parked: print JSON")
    relay.set_defaults(run_relay=None)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "relay":
        args.run_relay = not (args.lag or args.parked or args.unpark is not None)
    try:
        args.func(args)
    except FsmError as exc:
        print(f"pyfsm: {type(exc).__name__} ({exc.errno}): {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("pyfsm: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # one line for users; PYFSM_DEBUG=1 shows the traceback
        if os.environ.get("PYFSM_DEBUG"):
            raise
        err = translate(exc)
        name = type(err).__name__
        errno = getattr(err, "errno", None) or (exc.args[0] if exc.args and isinstance(exc.args[0], int) else "")
        print(f"pyfsm: {name} ({errno}): {err}" if errno != "" else f"pyfsm: {name}: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
