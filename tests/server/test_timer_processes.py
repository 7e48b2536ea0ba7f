"""Timers fired by several processes at once (docs/timers.md, "Firing"): each fires once,
whoever dies meanwhile, and a timer whose instance has moved on is never fired.

Processes, not threads: the firers are spawned Python processes, SIGKILLed at random. A
test trigger makes every firing transaction last a while (SLEEP in a BEFORE UPDATE trigger
of the test's own type), so that a firer spends most of its life inside one and a kill
lands mid-fire. Timers are global to a database: this module has a database of its own
(module_db).
"""

from __future__ import annotations

import os
import random
import signal
import time
from typing import Any

from helpers.common import fetch, unique
from helpers.timer_firers import SPAWN, firer_main, mover_main, start, worker_main

from pyfsm import Machine, Store
from pyfsm.db import Settings


def order(after: int) -> Machine:
    return Machine(
        name=unique("tp"),
        states=["new", "paid", "cancelled"],
        start=["new"],
        final=["cancelled"],
        transitions=[("pay", "new", "paid"), ("cancel", ["new", "paid"], "cancelled")],
        timeouts={"new": {"after": after, "event": "cancel"}},
    )


def wait_until(check: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def stop_all(procs: list[Any]) -> None:
    for p in procs:
        if p.is_alive():
            os.kill(p.pid, signal.SIGKILL)
        p.join(10)


def test_firers_killed_mid_fire_fire_each_timer_exactly_once(
    module_db: tuple[Settings, Store], module_dba: Any
) -> None:
    settings, pstore, dba = *module_db, module_dba
    n = 400
    m = order(after=1)
    pstore.define(m)
    with dba.cursor() as cur:
        cur.execute(f"CREATE TRIGGER `{m.name}_slow` BEFORE UPDATE ON `fsm_{m.name}` FOR EACH ROW SET @x = SLEEP(0.03)")
        cur.execute(f"INSERT INTO `fsm_{m.name}` (instance_key) VALUES " + ", ".join(f"('k{i}')" for i in range(n)))
    assert fetch(dba, "SELECT COUNT(*) AS n FROM fsm_timers WHERE machine = %s", (m.name,))[0]["n"] == n
    time.sleep(1.1)  # all due
    engine = unique("tpe")
    pstore.define(
        Machine(
            name=engine,
            states=["one", "two", "done"],
            start=["one"],
            final=["done"],
            transitions=[("next", "one", "two"), ("next", "two", "done")],
        )
    )
    spawn = [lambda: start(firer_main, settings.dsn(), 5, 1.0), lambda: start(worker_main, settings.dsn(), engine)]
    procs = [spawn[i % 2]() for i in range(4)]
    kills, rng = 0, random.Random(28)

    def left() -> int:
        return int(fetch(dba, "SELECT COUNT(*) AS n FROM fsm_timers WHERE machine = %s", (m.name,))[0]["n"])

    try:
        deadline = time.monotonic() + 90
        while left() > 0 and time.monotonic() < deadline:  # kill one at random while timers are left
            time.sleep(rng.uniform(0.2, 0.5))
            i = rng.randrange(len(procs))
            os.kill(procs[i].pid, signal.SIGKILL)
            procs[i].join(10)
            kills += 1
            procs[i] = spawn[i % 2]()
        wait_until(lambda: left() == 0, 60)
    finally:
        stop_all(procs)
    assert kills >= 5
    log = fetch(
        dba,
        "SELECT outcome, COUNT(*) AS n, COUNT(DISTINCT instance_id) AS i FROM fsm_timer_log "
        "WHERE machine = %s GROUP BY outcome",
        (m.name,),
    )
    assert [(r["outcome"], r["n"], r["i"]) for r in log] == [("fired", n, n)]
    fired = fetch(
        dba,
        f"SELECT COUNT(*) AS n, COUNT(DISTINCT instance_id) AS i, COUNT(DISTINCT request_id) AS r "
        f"FROM `fsm_{m.name}_transitions` WHERE event = 'cancel'",
    )[0]
    assert (fired["n"], fired["i"], fired["r"]) == (n, n, n)
    states = fetch(dba, f"SELECT current_state AS s, COUNT(*) AS n FROM `fsm_{m.name}` GROUP BY current_state")
    assert [(r["s"], r["n"]) for r in states] == [("cancelled", n)]
    counts = {
        r["state"]: int(r["instances"])
        for r in fetch(dba, "SELECT state, instances FROM fsm_v_state_counts WHERE machine = %s", (m.name,))
    }
    assert counts.get("cancelled") == n and counts.get("new", 0) == 0


def test_an_instance_moved_out_just_before_its_timeout_is_never_fired(
    module_db: tuple[Settings, Store], module_dba: Any
) -> None:
    settings, pstore, dba = *module_db, module_dba
    n = 200
    m = order(after=2)
    pstore.define(m)
    with dba.cursor() as cur:
        cur.execute(f"INSERT INTO `fsm_{m.name}` (instance_key) VALUES " + ", ".join(f"('k{i}')" for i in range(n)))
    armed_at = time.monotonic()
    firers = [start(firer_main, settings.dsn(), 10, 5.0) for _ in range(3)]
    out = SPAWN.Queue()
    keys = [f"k{i}" for i in range(n)]
    try:
        time.sleep(max(0.0, 1.8 - (time.monotonic() - armed_at)))  # the movers race the due time
        movers = [start(mover_main, settings.dsn(), m.name, keys[i::2], out) for i in range(2)]
        results = [out.get(timeout=120) for _ in movers]
        for p in movers:
            p.join(30)
        wait_until(
            lambda: (
                fetch(
                    dba,
                    "SELECT COUNT(*) AS n FROM fsm_timers WHERE machine = %s AND due_at <= UTC_TIMESTAMP(6)",
                    (m.name,),
                )[0]["n"]
                == 0
            ),
            60,
        )
    finally:
        stop_all(firers)
    paid = {k for r in results for k in r["paid"]}
    refused = {k for r in results for k in r["refused"]}
    assert paid | refused == set(keys) and not paid & refused
    history = fetch(
        dba,
        f"SELECT i.instance_key AS k, h.event AS e, h.request_id AS r FROM `fsm_{m.name}_transitions` h "
        f"JOIN `fsm_{m.name}` i ON i.id = h.instance_id WHERE h.event IS NOT NULL ORDER BY h.id",
    )
    by_key: dict[str, list[tuple[str, str | None]]] = {}
    for row in history:
        by_key.setdefault(row["k"], []).append((row["e"], row["r"]))
    for key in keys:
        events = by_key.get(key, [])
        if key in paid:  # moved out first: its timeout was disarmed, never fired
            assert events == [("pay", None)], (key, events)
        else:  # the timeout fired first: once, and the move was refused
            assert len(events) == 1 and events[0][0] == "cancel" and events[0][1].startswith("fsm:timer:"), (
                key,
                events,
            )
    fired = fetch(dba, "SELECT COUNT(*) AS n FROM fsm_timer_log WHERE machine = %s AND outcome = 'fired'", (m.name,))
    assert fired[0]["n"] == len(refused)
    assert (
        fetch(dba, "SELECT COUNT(*) AS n FROM fsm_timer_log WHERE machine = %s AND outcome <> 'fired'", (m.name,))[0][
            "n"
        ]
        == 0
    )
