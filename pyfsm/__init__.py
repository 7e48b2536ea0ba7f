"""pyfsm: persistent finite state machines whose rules MySQL itself enforces."""

from .definition import Machine, Transition, UnreachableStateWarning, transition
from .errors import (
    AmbiguousTransition,
    Conflict,
    DatabaseUnavailable,
    Deadlock,
    DeleteRefused,
    FsmError,
    HistoryImmutable,
    ImmutableColumn,
    InstanceExists,
    InstancePaused,
    InvalidArgument,
    InvalidData,
    InvalidDefinition,
    LockHeld,
    LockLost,
    LockNotAcquired,
    RequestIdReused,
    SchemaVersionMismatch,
    TransactionOpen,
    TransitionNotAllowed,
    UnknownInstance,
    UnknownMachine,
)
from .locks import HeldLock, Lease
from .models import DefineResult, HistoryEntry, Instance, TransitionResult
from .retry import retry
from .store import Store

__version__ = "0.2.0"

__all__ = [
    "AmbiguousTransition", "Conflict", "DatabaseUnavailable", "Deadlock", "DefineResult", "DeleteRefused",
    "FsmError", "HeldLock", "HistoryEntry", "HistoryImmutable", "ImmutableColumn", "Instance",
    "InstanceExists", "InstancePaused", "InvalidArgument", "InvalidData", "InvalidDefinition", "Lease",
    "LockHeld", "LockLost", "LockNotAcquired", "Machine", "RequestIdReused", "SchemaVersionMismatch", "Store",
    "TransactionOpen", "Transition", "TransitionNotAllowed", "TransitionResult", "UnknownInstance",
    "UnknownMachine", "UnreachableStateWarning", "retry", "transition",
]
