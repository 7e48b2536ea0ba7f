"""When the pool makes a failed call again: its retry decisions, apart from its loops.

:meth:`pyfsm.db.pool.Database.run` and :meth:`~pyfsm.db.pool.Database.on_connection` ask
:meth:`Retries.next` after every failure and either wait and try again or raise. The rules:

* A socket timeout (``read_timeout`` / ``write_timeout``) is never retried: it already
  waited its bound, and a write's outcome is unknown.
* A deadlock (1213, or MariaDB 11.8's 1020 "record has changed since last read"; a lock wait
  timeout is not one): the server has rolled the whole transaction back, so the call is made
  again, up to 3 times in all, after a short random pause (so that the two transactions do
  not meet in step again).
* An outage (:func:`pyfsm.db.translation.transient`) is retried a few times within about a
  second when repeating cannot apply a change twice: nothing was sent (no connection could
  be had; errno 0, PyMySQL finding its socket closed before sending), or the caller says a
  repeat is safe (a read, a write carrying a request id). Never on a lock holder's own
  connection, which another connection could not stand in for.
* Anything else would come again: raised at once.

No sleeping and no server here: tests/unit/test_retrying.py holds the rules.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Literal

from ..errors import Deadlock
from .translation import DEADLOCKS, timed_out, transient

#: Pauses between attempts after a connection failure: about a second in all (each is
#: jittered to 0.5-1.5 times itself by :func:`pyfsm.db.connecting.pause`).
CONNECTION_RETRY_DELAYS = (0.05, 0.15, 0.4, 0.6)
#: Pauses (each times a random fraction) before the second and third attempt of a call the
#: server ended with a deadlock: it has rolled this transaction back already, so the new one
#: waits only for the other's locks; random, so that the two do not meet in step again.
DEADLOCK_RETRY_DELAYS = (0.002, 0.008)


@dataclass(frozen=True)
class Retry:
    """Make the call again after about ``delay`` seconds: ``why`` says which rule allowed it."""

    why: Literal["outage", "deadlock"]
    delay: float

    def seconds(self, rand: random.Random | None = None) -> float:
        """The pause to take: an outage's delay jittered to 0.5-1.5 times itself, a deadlock's
        times a random fraction of itself."""
        draw = (rand or random).uniform
        return self.delay * (draw(0.5, 1.5) if self.why == "outage" else draw(0, 1))


@dataclass
class Retries:
    """The attempts one call has left; :meth:`next` uses them up."""

    outage: list[float] = field(default_factory=lambda: list(CONNECTION_RETRY_DELAYS))
    deadlock: list[float] = field(default_factory=lambda: list(DEADLOCK_RETRY_DELAYS))

    def next(
        self,
        err: BaseException,
        *,
        sent: bool,
        repeatable: bool,
        dedicated: bool = False,
        deadlocks: bool = True,
    ) -> Retry | None:
        """Whether the call that failed with ``err`` (a pyfsm error, or what it was made of)
        is made again, and after which pause; None: raise it.

        ``sent``: the call may have reached the server (False: no connection could be had).
        ``repeatable``: running it twice cannot apply a change twice (a read, a write with a
        request id). ``dedicated``: it ran on a lock holder's own connection. ``deadlocks``:
        a deadlock may be retried (the raw-connection reads leave it to their caller).
        """
        if timed_out(err):
            return None
        if transient(err) and self.outage and not dedicated:
            # errno 0: PyMySQL found the socket closed before sending, so the call never ran
            if not sent or repeatable or getattr(err, "errno", None) == 0:
                return Retry("outage", self.outage.pop(0))
        if deadlocks and isinstance(err, Deadlock) and err.errno in DEADLOCKS and self.deadlock:
            return Retry("deadlock", self.deadlock.pop(0))
        return None
