"""Moved to :mod:`pyfsm.schema.resources` in 0.3.0; this path stays for code written against
0.3.0 (``pyfsm.resources.RESERVED_MACHINE_NAMES`` was documented) and goes in 0.4.0."""

from .schema.resources import *  # noqa: F403
from .schema.resources import RESERVED_FOR_NEW_TYPES, RESERVED_MACHINE_NAMES, check_machine_name

__all__ = ["RESERVED_FOR_NEW_TYPES", "RESERVED_MACHINE_NAMES", "check_machine_name"]
