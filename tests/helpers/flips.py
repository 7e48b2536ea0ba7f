"""The flip workload of the cluster tests: a two-state type, a few shared instances, a sender
process (spawned: a child imports ``sender`` from here), and waiting for a replica to apply."""

from __future__ import annotations

import random
import time
from typing import Any

from pyfsm import DatabaseUnavailable, Deadlock, FsmError, Machine, Store

INSTANCES = 8


FLIP = Machine(name="flip", states=["a", "b"], start=["a"], transitions=[("flip", "a", "b"), ("flip", "b", "a")])


def eventually(check: Any, timeout: float = 10.0) -> Any:
    """Galera applies a commit on the other nodes right after it, not with it: wait for it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def sender(dsn: str, seed: int, sends: int, out: Any) -> None:
    """One process: ``sends`` flips of random instances through one node, each with a request
    id; what happened to each. A lost reply (a node whose applier aborted the call sometimes
    sends one the driver cannot read) is repeated with its request id until acknowledged."""
    rng = random.Random(seed)
    counts: list[int] = [0, 0]
    other: list[str] = []
    try:
        _send_flips(dsn, seed, sends, rng, other, counts)
    except BaseException as exc:  # reported, never a silent death that leaves the test waiting
        other.append(f"{type(exc).__name__}: {exc}")
    out.put((counts[0], counts[1], other))


def _send_flips(dsn: str, seed: int, sends: int, rng: random.Random, other: list[str], counts: list[int]) -> None:
    """The sender's work; ``counts``: [acknowledged, refused as conflicts]."""
    with Store(dsn, pool_size=1) as store:
        # first, an instance of this process's own (created by the send): its connection loads
        # the procedure and triggers with no other node in its way (MariaDB answered a call a
        # conflicting write set aborted while it was loading a trigger with a syntax error)
        store.send("flip", f"w-{seed}", "flip", request_id=f"w-{seed}")
        for n in range(sends):
            request, key, uncertain = f"{seed}-{n}", f"k-{rng.randrange(INSTANCES)}", False
            while True:
                try:
                    store.send("flip", key, "flip", request_id=request)
                    counts[0] += 1
                    break
                except Deadlock:  # a certification conflict left after Store's retries: not applied ...
                    if not uncertain:
                        counts[1] += 1
                        break
                    time.sleep(0.01)  # ... unless an earlier attempt's reply was lost: ask again
                except DatabaseUnavailable:
                    uncertain = True
                    time.sleep(0.05)
                except FsmError as exc:
                    other.append(f"{type(exc).__name__} ({exc.errno}): {exc} {exc.fields}")
                    break
