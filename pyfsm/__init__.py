"""pyfsm: persistent finite state machines whose rules MySQL itself enforces."""

from .attach import AdoptionReport, Attachment, AttachPlan, StateValue
from .definition import Machine, Timeout, Transition, UnreachableStateWarning, transition
from .engine.context import RunResult
from .engine.process import Context, Outcome, Process
from .engine.worker import Worker, WorkerStats
from .errors import (
    AccessDenied,
    AmbiguousTransition,
    AttachedRowMissing,
    AttachmentConflict,
    ClaimLost,
    ColumnMissing,
    Conflict,
    DatabaseUnavailable,
    Deadlock,
    DeleteRefused,
    FsmError,
    GraphvizUnavailable,
    GuardRefused,
    HistoryImmutable,
    ImmutableColumn,
    InstanceExists,
    InstancePaused,
    InvalidArgument,
    InvalidData,
    InvalidDefinition,
    InvalidEncoding,
    InvalidStatus,
    KeyUnsupported,
    LockHeld,
    LockLost,
    LockNotAcquired,
    LoginFailed,
    NotAttached,
    NotParked,
    NotWriterNode,
    ParkedBehind,
    RequestIdReused,
    RunClaimed,
    SchemaVersionMismatch,
    StateColumnUnsupported,
    SyncNeeded,
    TableUnsupported,
    TransactionOpen,
    TransitionNotAllowed,
    TriggerNameTaken,
    UnknownDatabase,
    UnknownEvent,
    UnknownInstance,
    UnknownMachine,
    UnknownStateValue,
    UnknownTimer,
    UpgradeRefused,
    from_database_error,
)
from .guards import Guard, all_of, any_of, column, data, not_
from .locks import HeldLock, Lease
from .models import (
    AccountHistoryEntry,
    CancelledTimer,
    DefineResult,
    HistoryEntry,
    Instance,
    ScheduledTimer,
    Timer,
    TimerOutcome,
    TransitionResult,
)
from .retry import retry
from .store import Store
from .versions import UpgradeGroup, UpgradeReport, VersionCount

__version__ = "0.3.0"

#: Names whose modules load an optional dependency (confluent_kafka): imported on first use,
#: so ``import pyfsm`` needs only PyMySQL and DBUtils.
_LAZY = {"Relay": "pyfsm.relay", "Lag": "pyfsm.relay"}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'pyfsm' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "AccessDenied",
    "AccountHistoryEntry",
    "AdoptionReport",
    "AmbiguousTransition",
    "AttachPlan",
    "AttachedRowMissing",
    "Attachment",
    "AttachmentConflict",
    "CancelledTimer",
    "ClaimLost",
    "ColumnMissing",
    "Conflict",
    "Context",
    "DatabaseUnavailable",
    "Deadlock",
    "DefineResult",
    "DeleteRefused",
    "FsmError",
    "GraphvizUnavailable",
    "Guard",
    "GuardRefused",
    "HeldLock",
    "HistoryEntry",
    "HistoryImmutable",
    "ImmutableColumn",
    "Instance",
    "InstanceExists",
    "InstancePaused",
    "InvalidArgument",
    "InvalidData",
    "InvalidDefinition",
    "InvalidEncoding",
    "InvalidStatus",
    "KeyUnsupported",
    "Lag",
    "Lease",
    "LockHeld",
    "LockLost",
    "LockNotAcquired",
    "LoginFailed",
    "Machine",
    "NotAttached",
    "NotParked",
    "NotWriterNode",
    "Outcome",
    "ParkedBehind",
    "Process",
    "Relay",
    "RequestIdReused",
    "RunClaimed",
    "RunResult",
    "ScheduledTimer",
    "SchemaVersionMismatch",
    "StateColumnUnsupported",
    "StateValue",
    "Store",
    "SyncNeeded",
    "TableUnsupported",
    "Timeout",
    "Timer",
    "TimerOutcome",
    "TransactionOpen",
    "Transition",
    "TransitionNotAllowed",
    "TransitionResult",
    "TriggerNameTaken",
    "UnknownDatabase",
    "UnknownEvent",
    "UnknownInstance",
    "UnknownMachine",
    "UnknownStateValue",
    "UnknownTimer",
    "UnreachableStateWarning",
    "UpgradeGroup",
    "UpgradeRefused",
    "UpgradeReport",
    "VersionCount",
    "Worker",
    "WorkerStats",
    "all_of",
    "any_of",
    "column",
    "data",
    "from_database_error",
    "not_",
    "retry",
    "transition",
]
