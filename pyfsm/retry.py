"""A bounded retry helper for conflicts and deadlocks.

Only errors whose class says ``retryable`` (Conflict, Deadlock, DatabaseUnavailable,
LockNotAcquired) are retried, with exponential backoff and full jitter. The function is
called again from the start, so it must re-read what it depends on: a Conflict is only
worth retrying if the next attempt passes the version it has just read.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from .errors import DatabaseUnavailable, FsmError, InvalidArgument

T = TypeVar("T")


def retry(
    fn: Callable[[], T],
    *,
    attempts: int = 5,
    base_delay: float = 0.005,
    max_delay: float = 0.5,
    retry_unavailable: bool = False,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call ``fn`` until it succeeds or ``attempts`` calls have failed with a retryable error.

    A lost connection is not retried unless ``retry_unavailable`` is set: a write may have
    committed before the connection died, so only calls that are safe to repeat (reads,
    sends carrying a request id) should set it.
    """
    if attempts < 1:
        raise InvalidArgument("attempts must be at least 1")
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except FsmError as exc:
            transient = exc.retryable and (retry_unavailable or not isinstance(exc, DatabaseUnavailable))
            if not transient or attempt == attempts:
                raise
            sleep(random.uniform(0, min(max_delay, base_delay * 2 ** (attempt - 1))))
    raise AssertionError("unreachable")
