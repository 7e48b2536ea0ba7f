"""Workers as processes (multiprocessing "spawn": a child imports ``worker_main`` from here)
and the side effects their handlers record (helpers/engine_fixtures.py)."""

from __future__ import annotations

import multiprocessing
import os
import traceback
from typing import Any

from helpers.engine_fixtures import build
from pyfsm import Store, Worker

SPAWN = multiprocessing.get_context("spawn")


def worker_main(
    dsn: str,
    kind: str,
    name: str,
    settings: dict[str, Any],
    env: dict[str, str],
    until_idle: float,
    start: Any,
    out: Any,
) -> None:
    """One worker process: build the process, wait for the start signal, work until idle."""
    os.environ.update(env)
    store = Store(dsn, pool_size=2)
    try:
        worker = Worker(store, [build(kind, name, **settings)], idle_min=0.01, idle_max=0.2)
        store.counts(name)  # schema check and a first connection before the start
        start.wait(60)
        stats = worker.run(until_idle=until_idle)
        out.put(
            {
                "pid": os.getpid(),
                "runs": stats.runs,
                "steps": stats.steps,
                "handed_back": stats.handed_back,
                "errors": stats.errors,
                "error": None,
            }
        )
    except Exception:
        out.put({"pid": os.getpid(), "error": traceback.format_exc()})
    finally:
        store.close()


def effects(conn: Any, machine: str) -> list[tuple[str, str, int]]:
    with conn.cursor() as cur:
        cur.execute("SELECT instance_key, what, pid FROM side_effects WHERE machine = %s ORDER BY id", (machine,))
        return [tuple(r) for r in cur.fetchall()]


def spawn_worker(
    dsn: str,
    kind: str,
    name: str,
    settings: dict[str, Any],
    env: dict[str, str],
    until_idle: float,
    start: Any,
    out: Any,
) -> Any:
    proc = SPAWN.Process(target=worker_main, args=(dsn, kind, name, settings, env, until_idle, start, out))
    proc.start()
    return proc
