"""The flip workload on a Group Replication group: a sender that repeats each request until
acknowledged (spawned: a child imports ``sender`` from here), the check that every
acknowledged request is applied once on every member, a DSN listing the members from one."""

from __future__ import annotations

import random
import time
import traceback
from typing import Any

from helpers.flips import FLIP, INSTANCES
from helpers.group_replication import GroupReplication
from helpers.histories import check_chains
from helpers.relay import query
from pyfsm import FsmError, Store
from pyfsm.db import Settings


def sender(dsn: str, seed: int, stop: Any, out: Any) -> None:
    """Flip random instances with request ids until told to stop, each request repeated until
    acknowledged; report the requests acknowledged, when (CLOCK_MONOTONIC: one clock for every
    process), the errors met by kind, and anything else that went wrong."""
    rng = random.Random(seed)
    report: dict[str, Any] = {"acked": [], "times": [], "kinds": {}, "error": None}
    try:
        with Store(dsn, pool_size=1) as store:
            n = 0
            while not stop.is_set():
                request, key = f"s{seed}-{n}", f"k-{rng.randrange(INSTANCES)}"
                given_up = time.monotonic() + 120
                while True:  # the same request until acknowledged: a repeat applies nothing twice
                    try:
                        store.send("flip", key, "flip", request_id=request)
                        break
                    except FsmError as exc:
                        kind = f"{type(exc).__name__} {exc.errno}"
                        report["kinds"][kind] = report["kinds"].get(kind, 0) + 1
                        assert time.monotonic() < given_up, f"{request} not acknowledged within 120 s: {exc}"
                        time.sleep(0.02)
                report["acked"].append(request)
                report["times"].append(time.monotonic())
                n += 1
                time.sleep(0.005)
    except BaseException:  # reported, never a silent death that leaves the test waiting
        report["error"] = traceback.format_exc()
    out.put(report)


def assert_acknowledged_once(databases: list[Settings], reports: list[dict[str, Any]]) -> int:
    """Every acknowledged request is in the history exactly once, on every member, and every
    history is a valid chain (the same on every member); the number of moves."""
    moves = [check_chains(settings, FLIP) for settings in databases]
    assert all(m == moves[0] for m in moves[1:]), "every member holds the same histories"
    acked = sorted(request for r in reports for request in r["acked"])
    for settings in databases:
        rows = query(settings, "SELECT request_id FROM fsm_flip_transitions WHERE request_id IS NOT NULL")
        assert sorted(r["request_id"] for r in rows) == acked, "acknowledged = applied, once each"
    return sum(moves[0].values())


def rotated(group: GroupReplication, databases: list[Settings], start: int) -> Settings:
    """A DSN naming every member, beginning at member ``start``."""
    n = len(databases)
    return group.listing(databases, [(start + k) % n for k in range(n)])
