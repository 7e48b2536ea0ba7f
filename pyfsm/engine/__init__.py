"""The handler engine: processes (ordered steps run by handlers), the workers that claim and
run them, batched steps, and the workers' metrics.

``runner`` runs one claimed instance, ``process`` defines steps and handlers, ``worker``
loops over claims, ``batch`` commits a round of steps together, ``metrics`` counts runs.
"""

from .context import RunResult
from .process import Context, Outcome, Process
from .worker import Worker, WorkerStats

__all__ = ["Context", "Outcome", "Process", "RunResult", "Worker", "WorkerStats"]
