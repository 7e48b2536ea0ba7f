"""Processes that change parts of one instance's data at once (multiprocessing "spawn": a child
imports its target from here). Used by tests/server/test_second_hour.py."""

from __future__ import annotations

from pyfsm import Store


def patcher_main(dsn: str, machine: str, key: str, writer: int, rounds: int) -> None:
    """Send `note` ``rounds`` times, each merging a key of this writer's own into the data."""
    store = Store(dsn, pool_size=1)
    try:
        for n in range(rounds):
            store.send(machine, key, "note", data_patch={f"w{writer}": n, "last": writer})
    finally:
        store.close()
