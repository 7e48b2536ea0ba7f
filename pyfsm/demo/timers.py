"""The demo's third part: baskets that cancel themselves (docs/timers.md).

A basket left open for two seconds is abandoned by its state timeout; a third of them are
ordered first, which disarms their timeouts in the same transaction; one gets a scheduled
event instead. The due timers are fired here as `pyfsm timers run --until-idle` fires them
(the worker processes of the second part would fire them too).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from ..definition import Machine, Timeout
from ..store import Store
from ..timers import TimerLoop

BASKET = Machine(
    name="basket",
    states=["open", "ordered", "abandoned"],
    start=["open"],
    final=["ordered", "abandoned"],
    transitions=[("order", "open", "ordered"), ("abandon", "open", "abandoned")],
    timeouts={"open": Timeout("2s", "abandon")},  # minutes or days in a real shop
)


def run(store: Store, run_id: str, *, baskets: int = 30) -> None:
    store.define(BASKET)
    keys = [f"basket-{run_id}-{n:03d}" for n in range(baskets)]
    print(f"\ntimers: {baskets} baskets, each abandoned 2 s after it was opened unless ordered before")
    for key in keys:
        store.create("basket", key)  # entering "open" arms its timeout, in the same transaction
    for key in keys[::3]:
        store.send("basket", key, "order")  # leaving "open" disarms it, in the same transaction
    store.send_at("basket", keys[1], "order", after=1.0, metadata={"by": "demo"})
    mine = [t for t in store.timers("basket", limit=10_000) if t.instance_key in set(keys)]
    print(
        f"  armed: {sum(t.kind == 'timeout' for t in mine)} timeouts and "
        f"{sum(t.kind == 'scheduled' for t in mine)} scheduled event ({keys[1]}: order in 1 s)"
    )
    loop = TimerLoop(lambda: store.fire_timers(owner="pyfsm-demo", limit=100), limit=100)
    time.sleep(1.05)
    loop.run(until_idle=True)  # the scheduled order is due, the timeouts not yet
    last_due = max(t.due_at for t in mine)
    time.sleep(max(0.0, (last_due - datetime.now(UTC)).total_seconds()) + 0.05)
    loop.run(until_idle=True)  # every timeout of a basket still open
    states = [store.get("basket", key).state for key in keys]
    print(
        f"  fired {loop.fired}, dropped {loop.dropped}: {states.count('ordered')} ordered, "
        f"{states.count('abandoned')} abandoned by their timeout, {states.count('open')} open"
    )
    last = store.history("basket", keys[1])[-1]
    timer = last.metadata["timer"]
    print(
        f"  {keys[1]}: {last.from_state} --{last.event}--> {last.to_state} by timer {timer['id']} "
        f"({timer['kind']}, request id {last.request_id})"
    )
