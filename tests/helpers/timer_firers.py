"""Processes that fire timers, and processes that race them (multiprocessing "spawn": a child
imports its target from here). Used by tests/server/test_timer_processes.py."""

from __future__ import annotations

import multiprocessing
import os
from typing import Any

from helpers.engine_fixtures import build
from pyfsm import Store, TransitionNotAllowed, Worker
from pyfsm.timers import TimerLoop

SPAWN = multiprocessing.get_context("spawn")


def firer_main(dsn: str, limit: int, claim_seconds: float) -> None:
    """Fire timers until killed (what `pyfsm timers run` does)."""
    store = Store(dsn, pool_size=1)
    TimerLoop(
        lambda: store.fire_timers(owner=f"firer:{os.getpid()}", limit=limit, claim_seconds=claim_seconds),
        limit=limit,
        poll_seconds=0.05,
    ).run()


def worker_main(dsn: str, engine_machine: str) -> None:
    """A handler-engine worker (of another machine type) that fires timers in its thread."""
    store = Store(dsn, pool_size=2)
    Worker(store, [build("drain", engine_machine)], idle_min=0.01, idle_max=0.1, timer_batch=5, timer_poll=0.05).run()


def mover_main(dsn: str, machine: str, keys: list[str], out: Any) -> None:
    """Send pay to each key as fast as it can; report which were paid and which refused."""
    store = Store(dsn, pool_size=1)
    paid, refused = [], []
    for key in keys:
        try:
            store.send(machine, key, "pay")
            paid.append(key)
        except TransitionNotAllowed:
            refused.append(key)
    out.put({"paid": paid, "refused": refused})
    store.close()


def start(target: Any, *args: Any) -> Any:
    proc = SPAWN.Process(target=target, args=args, daemon=True)
    proc.start()
    return proc
