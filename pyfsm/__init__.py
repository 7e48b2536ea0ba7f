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
    LockNotAcquired,
    RequestIdReused,
    SchemaVersionMismatch,
    TransactionOpen,
    TransitionNotAllowed,
    UnknownInstance,
    UnknownMachine,
)
from .models import DefineResult, HistoryEntry, Instance, TransitionResult
from .relay import Lag, Relay
from .retry import retry
from .store import Store

__version__ = "0.1.0"

__all__ = [
    "AmbiguousTransition", "Conflict", "DatabaseUnavailable", "Deadlock", "DefineResult", "DeleteRefused", "FsmError",
    "HistoryEntry", "HistoryImmutable", "ImmutableColumn", "Instance", "InstanceExists",
    "InstancePaused", "InvalidArgument", "InvalidData", "InvalidDefinition", "Lag", "LockNotAcquired",
    "Machine", "Relay", "RequestIdReused", "SchemaVersionMismatch", "Store", "TransactionOpen", "Transition",
    "TransitionNotAllowed", "TransitionResult", "UnknownInstance", "UnknownMachine",
    "UnreachableStateWarning", "retry", "transition",
]
