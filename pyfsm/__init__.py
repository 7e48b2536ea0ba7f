"""pyfsm: persistent finite state machines whose rules MySQL itself enforces."""

from .definition import Machine, Transition, UnreachableStateWarning, transition
from .engine import RunResult
from .errors import (
    AccessDenied,
    AmbiguousTransition,
    ClaimLost,
    Conflict,
    DatabaseUnavailable,
    Deadlock,
    DeleteRefused,
    FsmError,
    GraphvizUnavailable,
    HistoryImmutable,
    ImmutableColumn,
    InstanceExists,
    InstancePaused,
    InvalidArgument,
    InvalidData,
    InvalidDefinition,
    InvalidEncoding,
    InvalidStatus,
    LockHeld,
    LockLost,
    LockNotAcquired,
    LoginFailed,
    NotParked,
    NotWriterNode,
    ParkedBehind,
    RequestIdReused,
    RunClaimed,
    SchemaVersionMismatch,
    TransactionOpen,
    TransitionNotAllowed,
    UnknownDatabase,
    UnknownEvent,
    UnknownInstance,
    UnknownMachine,
)
from .locks import HeldLock, Lease
from .models import AccountHistoryEntry, DefineResult, HistoryEntry, Instance, TransitionResult
from .process import Context, Outcome, Process
from .relay import Lag, Relay
from .retry import retry
from .store import Store
from .worker import Worker, WorkerStats

__version__ = "0.3.0"

__all__ = [
    "AccessDenied", "AccountHistoryEntry", "AmbiguousTransition", "ClaimLost", "Conflict", "Context",
    "DatabaseUnavailable", "Deadlock",
    "DefineResult", "DeleteRefused", "FsmError", "GraphvizUnavailable", "HeldLock", "HistoryEntry", "HistoryImmutable",
    "ImmutableColumn", "Instance", "InstanceExists", "InstancePaused", "InvalidArgument", "InvalidData",
    "InvalidDefinition", "InvalidEncoding", "InvalidStatus", "Lag", "Lease", "LockHeld", "LockLost", "LockNotAcquired",
    "LoginFailed",
    "Machine", "NotParked", "NotWriterNode", "Outcome", "ParkedBehind", "Process", "Relay", "RequestIdReused",
    "RunClaimed", "RunResult",
    "SchemaVersionMismatch", "Store", "TransactionOpen", "Transition", "TransitionNotAllowed",
    "TransitionResult", "UnknownDatabase",
    "UnknownEvent", "UnknownInstance", "UnknownMachine", "UnreachableStateWarning", "Worker",
    "WorkerStats", "retry", "transition",
]
