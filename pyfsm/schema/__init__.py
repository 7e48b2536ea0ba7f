"""pyfsm's schema: installing and upgrading it, rendering the per-type DDL, grants, and
the one registry of routines the Python calls.

``install`` holds migrate/check and the object lists; the names below are the ones
documented as ``pyfsm.schema.*``.
"""

from .install import (
    DEPRECATED,
    HEAD_REVISION,
    MACHINE_OBJECTS_VERSION,
    Deprecated,
    check,
    current_revision,
    migrate,
)

__all__ = [
    "DEPRECATED",
    "HEAD_REVISION",
    "MACHINE_OBJECTS_VERSION",
    "Deprecated",
    "check",
    "current_revision",
    "migrate",
]
