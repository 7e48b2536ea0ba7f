"""Prometheus metrics: what the database holds, and what a worker does.

* :class:`DatabaseCollector` (pyfsm.metrics.database) reads the database on every scrape: instances
  per state and status, transitions, the engine's queue, the relay's backlog, locks held.
  `pyfsm metrics` and the web console's /metrics serve it; a reporting account is enough.
* :class:`WorkerMetrics` (pyfsm.engine.metrics) lives in a worker's process: steps, runs,
  errors, handler and commit times; `pyfsm worker --metrics-port` serves it.

Each has a registry of its own, never prometheus_client's global one: two stores, or a
worker and a console in one process, never mix their samples. docs/metrics.md lists every
metric. Needs prometheus_client: ``pip install 'pyfsm-mysql[metrics]'``.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from ..engine.metrics import WorkerMetrics
from ..errors import InvalidArgument
from .database import DatabaseCollector

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from prometheus_client.registry import Collector

    from ..store import Store

DEFAULT_PORT = 9464


def database_registry(
    store: Store, *, stuck_after: float = 300.0, settle_seconds: float = 5.0, read_replica: bool = False
) -> CollectorRegistry:
    """A registry holding one :class:`DatabaseCollector` of ``store`` (what /metrics serves)."""
    return registry_of(
        DatabaseCollector(store, stuck_after=stuck_after, settle_seconds=settle_seconds, read_replica=read_replica)
    )


def registry_of(collector: Collector) -> CollectorRegistry:
    """A registry of pyfsm's own holding ``collector`` (never prometheus_client's global one)."""
    registry = CollectorRegistry(auto_describe=True)
    registry.register(collector)
    return registry


def exposition(registry: CollectorRegistry) -> tuple[bytes, str]:
    """One scrape of ``registry``: the body in Prometheus' text format, and its content type."""
    return generate_latest(registry), CONTENT_TYPE_LATEST


class MetricsServer:
    """prometheus_client's own HTTP server (wsgiref, a thread per request) answering
    ``GET /metrics`` (any path, in fact) with one scrape of ``registry``; :meth:`close` stops it."""

    def __init__(self, registry: CollectorRegistry, *, port: int = DEFAULT_PORT, host: str = "127.0.0.1") -> None:
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise InvalidArgument(f"port must be an integer from 0 to 65535, got {port!r:.80}")
        try:
            self._server, self._thread = start_http_server(port, addr=host, registry=registry)
        except OSError as exc:  # the address is in use, or not this host's
            raise InvalidArgument(
                f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}", os_errno=exc.errno
            ) from None
        self.host, self.port = host, int(self._server.server_port)  # port 0: the one the system chose

    @property
    def server(self) -> WSGIServer:
        return self._server

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not threading.current_thread():
            self._thread.join(5)


__all__ = [
    "DEFAULT_PORT",
    "DatabaseCollector",
    "MetricsServer",
    "WorkerMetrics",
    "database_registry",
    "exposition",
    "registry_of",
]
