"""The demo's second half: the same orders fulfilled by handlers and worker processes.

A ``fulfilment`` process (reserve -> charge -> pack -> ship -> done) whose charge step
fails on its first attempt for every fifth order (a flaky payment provider) and recovers
by retry; one order is paused and resumed; the rest is queued and drained by a few worker
processes while a progress bar counts completed orders.
"""

from __future__ import annotations

import logging
import multiprocessing
import sys
import time
from typing import Any

from ..engine.process import Context, Outcome, Process
from ..engine.worker import Worker
from ..store import Store

FULFILMENT = Process.linear(
    "fulfilment",
    ["reserve", "charge", "pack", "ship"],
    run_immediately=False,
    backoff=0.2,
    max_attempts=4,
    claim_seconds=30,
)


@FULFILMENT.handler("reserve")
def reserve(ctx: Context) -> Outcome:
    ctx.data["reserved"] = ctx.data.get("items", 1)
    return ctx.next()


@FULFILMENT.handler("charge")
def charge(ctx: Context) -> Outcome:
    if ctx.data.get("flaky") and ctx.attempt == 1:
        raise TimeoutError("payment provider timed out")  # recorded, retried with backoff
    ctx.data["charged"] = ctx.data["reserved"] * ctx.data.get("price", 10)  # what reserve wrote
    return ctx.next()


@FULFILMENT.handler("pack")
def pack(ctx: Context) -> Outcome:
    ctx.data["parcel"] = f"P-{ctx.key}"
    return ctx.next()


@FULFILMENT.handler("ship")
def ship(ctx: Context) -> Outcome:
    ctx.data["tracking"] = f"T-{ctx.key}"
    return ctx.next()


def _work(dsn: str, seconds_idle: float) -> None:
    logging.getLogger("pyfsm").setLevel(logging.ERROR)  # the demo reports the retries itself
    with Store(dsn, pool_size=2) as store:
        Worker(store, [FULFILMENT]).run(until_idle=seconds_idle)


def _bar(done: int, total: int, width: int = 40) -> str:
    filled = width * done // max(total, 1)
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total}"


def run(store: Store, dsn: str, run_id: str, *, orders: int, workers: int) -> None:
    store.define(FULFILMENT.machine)
    keys = [f"ful-{run_id}-{n:04d}" for n in range(orders)]
    print(
        f"\nfulfilment with handlers: {orders} orders, the first step here, the rest for {workers} worker process(es)"
    )
    done_before = store.counts("fulfilment").get("done", 0)  # earlier runs of the demo
    for n, key in enumerate(keys):  # each start runs reserve here, then queues the order
        FULFILMENT.start(store, key, data={"items": 1 + n % 3, "price": 10, "flaky": n % 5 == 0})
    paused = keys[-1]
    print(f"paused {paused}: {store.pause('fulfilment', paused).status}")

    context = multiprocessing.get_context("spawn")
    procs = [context.Process(target=_work, args=(dsn, 1.5)) for _ in range(max(1, workers))]
    for proc in procs:
        proc.start()
    total, shown = len(keys), -1
    while any(p.is_alive() for p in procs):
        done = store.counts("fulfilment").get("done", 0) - done_before
        if done != shown:
            print(f"\r  {_bar(done, total)}", end="", file=sys.stdout, flush=True)
            shown = done
        if done == total - 1 and store.get("fulfilment", paused).status == "paused":
            print(f"\nresuming {paused}")
            store.resume("fulfilment", paused)
        time.sleep(0.1)
    for proc in procs:
        proc.join()
    done = store.counts("fulfilment").get("done", 0) - done_before
    print(f"\r  {_bar(done, total)}")
    flaky = keys[0]  # every fifth order is flaky, the first one too
    errors = store.errors("fulfilment", flaky)
    if errors:
        first = errors[0]
        print(
            f"{flaky}: {first.handler} failed on attempt {first.attempt} "
            f"({(first.error_type or '').rsplit('.', 1)[-1]}: {first.message}) and recovered by retry"
        )
    print(f"history of {flaky}:")
    for h in store.history("fulfilment", flaky):
        move = f"{h.from_state} --{h.event}--> {h.to_state}" if h.event else f"created in {h.to_state}"
        print(f"  #{h.sort_key} {move:<28} handler={h.handler or '-':<8} data={_short(h.data_after)}")


def _short(data: dict[str, Any]) -> str:
    text = ", ".join(f"{k}={v}" for k, v in data.items() if k != "flaky")
    return text if len(text) <= 60 else text[:57] + "..."
