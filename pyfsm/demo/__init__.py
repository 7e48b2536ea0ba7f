"""`pyfsm demo`: orders run by worker processes and published to Kafka (``run``), with the
processes' handlers in ``processes`` and baskets that cancel themselves in ``timers``.
``pyfsm.demo:ORDER`` is the demo's machine (the CLI's ``pyfsm define pyfsm.demo:ORDER``
loads it)."""

from .run import ORDER, run

__all__ = ["ORDER", "run"]
