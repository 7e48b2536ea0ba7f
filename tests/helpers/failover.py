"""The processes the failover tests run beside the senders (spawned: a child imports them from
here): workers on a two-step process, lock holders recording when each hold began and ended."""

from __future__ import annotations

import random
import time
import traceback
from typing import Any

from pyfsm import Context, FsmError, LockNotAcquired, Outcome, Process, Store, Worker

JOBS = 300


def step(ctx: Context) -> Outcome:
    time.sleep(0.005)  # a handler that takes a little time, so that the kill lands mid-queue
    return ctx.next()


def jobs(name: str) -> Process:
    # a step whose commit was under way when the node died is retried once its claim ran out
    process = Process.linear(name, ["one", "two"], claim_seconds=5)
    process.register("one", step)
    process.register("two", step)
    return process


def worker(dsn: str, name: str, stop: Any, out: Any) -> None:
    error = None
    try:
        with Store(dsn, pool_size=2) as store:
            w = Worker(store, [jobs(name)], idle_min=0.01, idle_max=0.2)
            w.stop_event = stop  # the test's event stops it
            stats = w.run(handle_signals=False)
            out.put({"runs": stats.runs, "errors": stats.errors, "error": None})
            return
    except Exception:
        error = traceback.format_exc()
    out.put({"runs": 0, "errors": 0, "error": error})


def locker(dsn: str, targets: list[tuple[str, str, str]], seed: int, stop: Any, out: Any) -> None:
    """Take the global lock of a random instance, hold it a few ms, move the instance; record
    when each hold began and ended (CLOCK_MONOTONIC: one clock for every process)."""
    rng = random.Random(seed)
    report: dict[str, Any] = {"runs": [], "refused": 0, "failed": 0, "kinds": {}, "error": None}
    try:
        with Store(dsn, pool_size=2) as store:
            while not stop.is_set():
                machine, key, account = rng.choice(targets)
                try:
                    with store.lock(machine, key, attempts=3, backoff=0.005) as lease:
                        entered = time.monotonic_ns()
                        state = store.get(machine, key).state
                        time.sleep(rng.uniform(0.001, 0.004))
                        lease.send("pay" if state == "new" else "refund")
                        left = time.monotonic_ns()
                    report["runs"].append((account, entered, left))
                except LockNotAcquired:
                    report["refused"] += 1
                except FsmError as exc:  # the node died under the lease: the hold ended there
                    report["failed"] += 1
                    kind = type(exc).__name__
                    report["kinds"][kind] = report["kinds"].get(kind, 0) + 1
                    time.sleep(0.05)
    except Exception:
        report["error"] = traceback.format_exc()
    out.put(report)
