"""`pyfsm metrics`: the database's Prometheus metrics, printed once or served over HTTP."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from typing import Any

from ..errors import InvalidArgument
from ..store import Store
from .common import Add, emit, port_number, seconds

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9464  # pyfsm.metrics.DEFAULT_PORT, without importing prometheus_client for --help


def import_metrics() -> Any:
    """pyfsm.metrics, or a clear error when prometheus_client is not installed."""
    try:
        from ..metrics import server as metrics
    except ImportError as exc:
        raise InvalidArgument(f"metrics need prometheus_client: pip install 'pyfsm-mysql[metrics]' ({exc})") from None
    return metrics


def wait_for_signal() -> None:
    """Block until SIGTERM or SIGINT (Ctrl-C)."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(1.0):
        pass


def families_as_json(registry: Any) -> list[dict[str, Any]]:
    """One scrape as JSON: each family with its type, help and samples."""
    return [
        {
            "name": f.name,
            "type": f.type,
            "help": f.documentation,
            "samples": [{"name": s.name, "labels": s.labels, "value": s.value} for s in f.samples],
        }
        for f in registry.collect()
    ]


def cmd_metrics(args: argparse.Namespace) -> None:
    metrics = import_metrics()
    if not args.serve and (args.port is not None or args.host is not None):
        raise InvalidArgument("--port and --host go with --serve")
    if args.serve and args.json:
        raise InvalidArgument("--json prints one scrape; --serve answers every scrape in Prometheus' text format")
    log = logging.getLogger("pyfsm.metrics")
    with Store(args.dsn, pool_size=2, read_dsn=args.read_dsn) as store:
        collector = metrics.DatabaseCollector(
            store, stuck_after=args.stuck_after, read_replica=args.read_dsn is not None
        )
        registry = metrics.registry_of(collector)
        if args.serve:
            logging.basicConfig(
                level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
            )
            server = metrics.MetricsServer(
                registry, port=DEFAULT_PORT if args.port is None else args.port, host=args.host or DEFAULT_HOST
            )
            print(
                f"pyfsm metrics: serving http://{server.host}:{server.port}/metrics (SIGTERM or Ctrl-C to stop)",
                file=sys.stderr,
                flush=True,
            )
            with server:
                wait_for_signal()
            return
        # one scrape: the reason a read failed is the command's one-line error, not a log line
        log.addHandler(logging.NullHandler())
        log.propagate = False
        if args.json:
            emit(args, families_as_json(registry))
        else:
            body, _content_type = metrics.exposition(registry)
            sys.stdout.write(body.decode("utf-8"))
        sys.stdout.flush()
    if collector.last_error is not None:  # printed all the same (pyfsm_up 0), for a textfile collector
        raise collector.last_error


def register(add: Add) -> None:
    p = add(
        "metrics",
        cmd_metrics,
        "Prometheus metrics of the database: print one scrape, or serve /metrics",
        "pyfsm metrics                      # one scrape, Prometheus text format\n"
        "  pyfsm metrics --serve --port 9464  # serve /metrics until SIGTERM/Ctrl-C\n"
        "  pyfsm metrics --stuck-after 600 --json",
    )
    p.add_argument("--serve", action="store_true", help="serve /metrics over HTTP until SIGTERM/Ctrl-C")
    p.add_argument("--port", type=port_number, default=None, help=f"with --serve: TCP port (default {DEFAULT_PORT})")
    p.add_argument(
        "--host",
        default=None,
        help=f"with --serve: address to listen on (default {DEFAULT_HOST}; 0.0.0.0 for every interface)",
    )
    p.add_argument(
        "--stuck-after",
        type=seconds,
        default=300.0,
        metavar="SECONDS",
        help="a run due for longer than this counts as stuck (default 300)",
    )
    # not $PYFSM_READ_DSN: scrapes move to a replica only when asked for here
    p.add_argument(
        "--read-dsn",
        default=None,
        help="scrape a read replica instead of the primary (numbers lag by the replica's delay)",
    )
