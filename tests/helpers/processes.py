"""Running spawned processes that report through a queue (the targets are module-level
functions of the test modules: a child imports its target's module by name)."""

from __future__ import annotations

import multiprocessing
import queue
import time
from typing import Any

import pytest

SPAWN = multiprocessing.get_context("spawn")
PROCESSES = 8
RUN_TIMEOUT = 120  # seconds; a hang (a lock never released) fails the test instead of blocking forever
COLLECT_TIMEOUT = 60


def run_processes(target: Any, args_for: Any, n: int = PROCESSES) -> list[dict[str, Any]]:
    """Start ``n`` spawned workers sharing a start barrier; return their reports."""
    barrier = SPAWN.Barrier(n)
    out = SPAWN.Queue()
    procs = [SPAWN.Process(target=target, args=(*args_for(w), barrier, out), daemon=True) for w in range(n)]
    for p in procs:
        p.start()
    reports: list[dict[str, Any]] = []
    try:
        for _ in range(n):  # drain before join: a full pipe would block a worker's exit
            reports.append(out.get(timeout=RUN_TIMEOUT))
    except queue.Empty:
        pytest.fail(f"only {len(reports)} of {n} workers reported within {RUN_TIMEOUT}s")
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    errors = [r["error"] for r in reports if r["error"]]
    assert not errors, "a worker failed with an unexpected exception:\n" + "\n".join(errors)
    assert [p.exitcode for p in procs] == [0] * n
    return reports


def collect(out: Any, n: int) -> list[Any]:
    got = []
    deadline = time.monotonic() + COLLECT_TIMEOUT
    while len(got) < n:
        try:
            got.append(out.get(timeout=max(0.1, deadline - time.monotonic())))
        except queue.Empty:
            pytest.fail(f"only {len(got)} of {n} worker reports arrived within {COLLECT_TIMEOUT} s")
    return got
