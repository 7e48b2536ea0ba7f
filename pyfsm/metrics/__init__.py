"""Prometheus metrics for operators: the database's gauges (``database``) and the HTTP
server and exposition (``server``). Importing it loads prometheus_client."""

from .server import DEFAULT_PORT, DatabaseCollector, MetricsServer, WorkerMetrics, database_registry, exposition

__all__ = ["DEFAULT_PORT", "DatabaseCollector", "MetricsServer", "WorkerMetrics", "database_registry", "exposition"]
