"""Argument checks shared by the Store, the engine and the CLI: bad input fails here, before any
SQL runs, with InvalidArgument (or InvalidEncoding) naming the argument.

The limits are pyfsm.limits' (the SQL declares the same; a test compares them).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from .db.jsondata import dump_object
from .definition import NAME, Machine
from .errors import InvalidArgument, InvalidEncoding
from .limits import KEY_CHARS, MAX_BIGINT, NAME_CHARS
from .schema.resources import check_machine_name


def machine_name(machine: str | Machine) -> str:
    if isinstance(machine, Machine):
        return machine.name  # checked when the Machine was made, and a Machine is frozen
    return check_machine_name(machine)


@lru_cache(maxsize=4096)
def _is_name(value: str) -> bool:
    # an event's name is checked on every send: the few names an application uses, remembered
    return NAME.fullmatch(value) is not None


def check_name(what: str, value: object) -> str:
    if not isinstance(value, str) or not _is_name(value):
        raise InvalidArgument(
            f"{what} must match [a-z][a-z0-9_]* and have at most {NAME_CHARS} characters, got {value!r:.80}"
        )
    return value


def check_key(what: str, value: object) -> str:
    return check_text(what, value, KEY_CHARS, required=True)  # type: ignore[return-value]


def check_text(what: str, value: object, maximum: int, *, required: bool = False) -> str | None:
    """Keys, request ids and the like: 1..maximum characters of valid Unicode, no trailing space.

    A trailing space is refused because utf8mb4_bin pads: 'k ' and 'k' are the same key.
    """
    if value is None and not required:
        return None
    if not isinstance(value, str) or not 1 <= len(value) <= maximum or value.endswith(" "):
        raise InvalidArgument(
            f"{what} must be a string of 1 to {maximum} characters not ending in a space, got {value!r:.80}"
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidEncoding(f"{what} is not valid Unicode (lone surrogate): {value!r:.80}") from None
    return value


def check_int(what: str, value: object, *, minimum: int, maximum: int = MAX_BIGINT) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise InvalidArgument(f"{what} must be an integer from {minimum} to {maximum}, got {value!r:.80}")
    return value


def naive_utc(what: str, value: object) -> datetime:
    """A datetime as the naive UTC time the procedures take (a naive one is UTC already)."""
    if not isinstance(value, datetime):
        raise InvalidArgument(f"{what} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None:
        return value
    try:
        return value.astimezone(UTC).replace(tzinfo=None)
    except (OverflowError, ValueError, TypeError) as exc:  # the calendar's edge, or a broken tzinfo
        raise InvalidArgument(f"{what} {value!r:.80} has no UTC time a datetime can hold: {exc}") from None


def check_after(what: str, value: object, kinds: tuple[type, ...]) -> tuple[Any, ...]:
    """A page cursor: None (the first page), or a tuple (or list) of those kinds: the last row's."""
    if value is None:
        return (None,) * len(kinds)
    if (
        not isinstance(value, (tuple, list))
        or len(value) != len(kinds)
        or any(isinstance(v, bool) or not isinstance(v, k) for v, k in zip(value, kinds, strict=False))
    ):
        names = ", ".join(k.__name__ for k in kinds)
        raise InvalidArgument(f"{what} must be None or the last row's cursor ({names}), got {value!r:.80}")
    return tuple(value)


def dump(what: str, value: Mapping[str, Any] | None, limit: int) -> str | None:
    """Serialize a JSON object before any SQL runs; refuse what JSON cannot hold."""
    return None if value is None else dump_object(what, value, limit)
