"""Timers (issue 28): what a state timeout costs a transition, how fast due timers drain, and
how late they fire under load, each beside the INSERT+COMMIT ceiling of the same run.

Runs in a fresh database ``pyfsm_bench_<random>`` (bench_transitions.migrated_database,
dropped at the end), one server, one driver (PyMySQL). Three parts:

1. **Per-transition cost.** Two types of the same definition (a -go-> b -back-> a), one with
   a timeout of an hour on both states (so every transition makes its type's AFTER UPDATE
   timer trigger delete one timer and arm another), one without (no timer trigger at all).
   ``Store.send()`` and a direct ``CALL fsm_{type}_send_v2`` over a plain PyMySQL connection
   (bench_transitions' measure: client processes, 8 instances each, a warm-up, server CPU
   from /proc), at 1 and 4 client processes, the two types alternating (their order flipped
   every round), ``--rounds`` rounds, the ceiling measured at the start of each round.
2. **Drain.** ``--timers`` instances of a type whose start state has a 1 s timeout, created
   with raw multi-row INSERTs into ``fsm_{type}`` (the AFTER INSERT timer trigger arms each),
   all due before the drain starts; then K firing processes (K = 1, 4), each running
   ``TimerLoop(Store.fire_timers(limit=--limit)).run(until_idle=True)``, drain them. Timers
   fired per second (first call to last return), the ceiling with K clients just before,
   and a check that every timer fired exactly once (fsm_timer_log, history rows with
   request id ``fsm:timer:%``, nothing left armed, every instance moved). A short sweep of
   ``limit`` (one firer, the same number of timers per limit) shows why the default is 100.
3. **Lag under load.** N client processes send transitions on the timed type without pause
   while ``--lag-timers`` timers are scheduled with ``Store.send_at(after=uniform(1,
   --spread))`` on instances of a third type (one timer per instance) and 2 processes run a
   ``TimerLoop`` polling every 0.2 s; lag is ``done_at - due_at`` from fsm_timer_log.

The machine is shared and noisy: compare the ratios within one run, and the runs with each
other, before believing one number.

    .venv/bin/python bench/bench_timers.py --dsn mysql://root@127.0.0.1:3306/test
    .venv/bin/python bench/bench_timers.py --quick      # about 1.5 minutes, smaller sizes
"""

from __future__ import annotations

import argparse
import datetime
import functools
import multiprocessing as mp
import os
import random
import statistics
import sys
import threading
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_transitions as bt

from pyfsm import Machine, Store
from pyfsm.db import Settings
from pyfsm.timers import REQUEST_ID_PREFIX, TimerLoop

STATES, EDGES = ["a", "b"], [("go", "a", "b"), ("back", "b", "a")]  # bench_transitions' NEXT
TIMED = Machine(
    name="bench_timed", states=STATES, start=["a"], transitions=EDGES, timeouts={"a": ("1h", "go"), "b": ("1h", "back")}
)  # never due during the run
UNTIMED = Machine(name="bench_untimed", states=STATES, start=["a"], transitions=EDGES)
#: instances of LAG get timers from Store.send_at only (no timeouts)
LAG = Machine(name="bench_lag", states=STATES, start=["a"], transitions=EDGES)
KINDS = {"timed": TIMED.name, "untimed": UNTIMED.name}
VIAS = ("Store.send", "direct CALL")
INSERT_ROWS = 2000  # instances per multi-row INSERT when arming
LAG_FIRERS, LAG_POLL_SECONDS = 2, 0.2
MARKS = {
    "mariadb": ("<!-- bench-timers-mariadb:start -->", "<!-- bench-timers-mariadb:end -->"),
    "mysql": ("<!-- bench-timers-mysql:start -->", "<!-- bench-timers-mysql:end -->"),
}


def drain_machine(name: str) -> Machine:
    """A type whose start state times out after 1 s into b, which has no timeout: one firing each."""
    return Machine(name=name, states=STATES, start=["a"], transitions=EDGES, timeouts={"a": (1, "go")})


def direct_call_client(job: bt.Job, keys: list[str], *, machine: str) -> bt.Client:
    """bench_transitions' direct CALL (a plain connection, no Store), on ``machine``."""
    states = bt.created(job.settings, keys, machine)
    cur = bt.plain_connect(job.settings).cursor()
    call = f"CALL `fsm_{machine}_send_v2`(%s, %s, NULL, NULL, NULL, NULL, NULL, NULL)"

    def step(i: int) -> None:  # 1 round trip
        key = keys[i % len(keys)]
        cur.execute(call, (key, bt.NEXT[states[key]][0]))
        row = cur.fetchone()
        while cur.nextset():
            pass
        states[key] = row[3]

    return step, lambda: bt.session_questions(cur)


# bench_transitions' worker builds its client from bt.CLIENTS by approach name. Its processes
# are spawned: each imports this script again (as __mp_main__) before it unpickles its job,
# so the names registered here exist in them too.
for _kind, _machine in KINDS.items():
    bt.CLIENTS[f"Store.send, {_kind}"] = functools.partial(bt.pyfsm_client, machine=_machine)
    bt.CLIENTS[f"direct CALL, {_kind}"] = functools.partial(direct_call_client, machine=_machine)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def percentile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else float("nan")


def rates(results: list[bt.Result]) -> str:
    return " / ".join(f"{r.rate:,.0f}" for r in results)


# -- 1. per-transition cost ------------------------------------------------------------------


def per_transition(
    settings: Settings, pid: int | None, clients: list[int], rounds: int, seconds: float
) -> dict[str, Any]:
    runs: dict[tuple[str, str, int], list[bt.Result]] = {}
    ceilings: dict[int, list[bt.Result]] = {c: [] for c in clients}
    for n in range(rounds):
        kinds = list(KINDS) if n % 2 == 0 else list(KINDS)[::-1]  # neither always goes first
        for c in clients:
            print(f"round {n + 1}: ceiling, {c} client(s)...", file=sys.stderr, flush=True)
            ceilings[c].append(bt.measure("ceiling", c, settings, seconds, pid))
            for via in VIAS:
                for kind in kinds:
                    print(f"round {n + 1}: {via}, {kind}, {c} client(s)...", file=sys.stderr, flush=True)
                    runs.setdefault((via, kind, c), []).append(bt.measure(f"{via}, {kind}", c, settings, seconds, pid))
    return {"runs": runs, "ceilings": ceilings, "armed": timed_armed(settings)}


def timed_armed(settings: Settings) -> dict[str, int]:
    """Proof the timed arm did the timer work: one timer per timed instance, armed at its
    latest version (re-armed by its last transition); no timer and no timer trigger for the
    untimed type."""
    conn = bt.raw_connect(settings, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT COUNT(*), SUM(version - 1) FROM `fsm_{TIMED.name}`")
            instances, transitions = cur.fetchone()
            cur.execute(
                f"SELECT COUNT(*) FROM `fsm_{TIMED.name}` i JOIN fsm_timers t ON t.machine = %s "
                "AND t.timeout_of = i.id AND t.armed_version = i.version",
                (TIMED.name,),
            )
            current = cur.fetchone()[0]
            cur.execute("SELECT COUNT(*) FROM fsm_timers WHERE machine = %s", (UNTIMED.name,))
            untimed = cur.fetchone()[0]
            cur.execute(
                "SELECT event_object_table, COUNT(*) FROM information_schema.TRIGGERS "
                "WHERE trigger_schema = DATABASE() AND trigger_name LIKE '%%\\_timer\\_v%%' "
                "GROUP BY event_object_table"
            )
            triggers = dict(cur.fetchall())
    finally:
        conn.close()
    return {
        "instances": int(instances),
        "transitions": int(transitions or 0),
        "armed_at_version": int(current),
        "untimed_timers": int(untimed),
        "timed_triggers": int(triggers.get(f"fsm_{TIMED.name}", 0)),
        "untimed_triggers": int(triggers.get(f"fsm_{UNTIMED.name}", 0)),
    }


def per_transition_report(part: dict[str, Any]) -> list[str]:
    runs, ceilings, armed = part["runs"], part["ceilings"], part["armed"]
    lines = [
        "| via | clients | timed tx/s (median; rounds) | untimed tx/s (median; rounds) | timed / untimed "
        "(median; rounds) | ceiling tx/s (median) | timed vs ceiling | untimed vs ceiling "
        "| server CPU us/tx timed / untimed (medians) | CPU timed / untimed |",
        "|---|---:|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for via in VIAS:
        for c, ceiling_runs in ceilings.items():
            timed, untimed = runs[(via, "timed", c)], runs[(via, "untimed", c)]
            ratios = [t.rate / u.rate if u.rate else float("nan") for t, u in zip(timed, untimed, strict=True)]
            ceiling = median([r.rate for r in ceiling_runs])
            cpu_t = median([r.cpu_us() for r in timed if r.cpu_us()])
            cpu_u = median([r.cpu_us() for r in untimed if r.cpu_us()])
            t, u = median([r.rate for r in timed]), median([r.rate for r in untimed])
            lines.append(
                f"| {via} | {c} | {t:,.0f} ({rates(timed)}) | {u:,.0f} ({rates(untimed)}) | {median(ratios):.2f} "
                f"({' / '.join(f'{x:.2f}' for x in ratios)}) | {ceiling:,.0f} ({rates(ceiling_runs)}) | "
                f"{t / ceiling:.0%} | {u / ceiling:.0%} | {cpu_t:,.0f} / {cpu_u:,.0f} | {cpu_t / cpu_u:.2f} |"
            )
    errors = [
        f"{via}, {kind}, {c} clients: {n} x {msg}"
        for (via, kind, c), rs in runs.items()
        for r in rs
        for msg, n in (r.errors + r.warmup_errors).items()
    ]
    lines += [
        "",
        f"Errors (counted, not retried): {'; '.join(errors) if errors else 'none'}. Timer work done by the "
        f"timed arm: {armed['instances']:,} timed instances, {armed['transitions']:,} transitions, "
        f"{armed['armed_at_version']:,} timers armed at their instance's latest version (one each: every "
        f"transition re-armed); timer triggers: {armed['timed_triggers']} on the timed type, "
        f"{armed['untimed_triggers']} on the untimed one ({armed['untimed_timers']} timers).",
    ]
    return lines


# -- 2. drain ---------------------------------------------------------------------------------


def arm(settings: Settings, machine: str, count: int, prefix: str) -> float:
    """Create ``count`` instances of ``machine`` with raw multi-row INSERTs (the triggers fill
    in the rest and arm each start state's timeout); the seconds it took."""
    conn = bt.raw_connect(settings, autocommit=True)
    started = time.perf_counter()
    try:
        with conn.cursor() as cur:
            for first in range(0, count, INSERT_ROWS):
                keys = [f"{prefix}-{n}" for n in range(first, min(count, first + INSERT_ROWS))]
                cur.execute(
                    f"INSERT INTO `fsm_{machine}` (instance_key) VALUES " + ",".join(["(%s)"] * len(keys)), keys
                )
    finally:
        conn.close()
    return time.perf_counter() - started


def wait_until_due(settings: Settings, machine: str) -> None:
    """Sleep until the last armed timer of ``machine`` is due."""
    conn = bt.raw_connect(settings, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), MAX(due_at)) FROM fsm_timers WHERE machine = %s",
                (machine,),
            )
            wait = cur.fetchone()[0]
    finally:
        conn.close()
    if wait is not None and wait > 0:
        time.sleep(wait / 1e6 + 0.05)


def drain_worker(dsn: str, owner: str, limit: int, claim_seconds: float, go: Any, out: Any) -> None:
    """One firing process: connect, wait for the others, fire until a batch comes back short."""
    try:
        with Store(dsn, pool_size=1) as store:
            store.timers(limit=1)  # the connection is open before the clock starts
            calls = 0

            def fire_batch() -> list[Any]:
                nonlocal calls
                calls += 1
                return store.fire_timers(owner=owner, limit=limit, claim_seconds=claim_seconds)

            loop = TimerLoop(fire_batch, limit=limit)
            go.wait()
            started = time.time()
            loop.run(until_idle=True)
            out.put(
                {
                    "started": started,
                    "ended": time.time(),
                    "calls": calls,
                    "fired": loop.fired,
                    "dropped": loop.dropped,
                    "held": loop.held,
                }
            )
    except BaseException:
        go.abort()
        out.put(traceback.format_exc())


def drain(
    settings: Settings, pid: int | None, machine: str, firers: int, limit: int, claim_seconds: float
) -> dict[str, Any]:
    """K processes drain every due timer; rates from the first call to the last return."""
    ctx = mp.get_context("spawn")
    go, out = ctx.Barrier(firers + 1, timeout=120), ctx.Queue()
    procs = [
        ctx.Process(target=drain_worker, args=(settings.dsn(), f"drain-{k}", limit, claim_seconds, go, out))
        for k in range(firers)
    ]
    for p in procs:
        p.start()
    try:
        try:
            go.wait()
        except threading.BrokenBarrierError:
            pass  # a firer failed: its report says why
        cpu_before = bt.server_cpu_seconds(pid)
        parts = []
        for _ in procs:
            part = out.get(timeout=3600)
            if isinstance(part, str):
                raise RuntimeError(f"a firing process failed:\n{part}")
            parts.append(part)
        cpu_after = bt.server_cpu_seconds(pid)
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.terminate()
    elapsed = max(p["ended"] for p in parts) - min(p["started"] for p in parts)
    fired = sum(p["fired"] for p in parts)
    cpu = None if cpu_before is None or cpu_after is None or not fired else (cpu_after - cpu_before) * 1e6 / fired
    return {
        "firers": firers,
        "limit": limit,
        "seconds": elapsed,
        "fired": fired,
        "rate": fired / elapsed,
        "calls": sum(p["calls"] for p in parts),
        "dropped": sum(p["dropped"] for p in parts),
        "held": sum(p["held"] for p in parts),
        "cpu_us": cpu,
    }


def verify(settings: Settings, machine: str, expected: int) -> dict[str, Any]:
    """Did every timer of ``machine`` fire exactly once? The log, the history, what is left."""
    conn = bt.raw_connect(settings, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT outcome, COUNT(*) FROM fsm_timer_log WHERE machine = %s GROUP BY outcome", (machine,))
            outcomes = {k: int(v) for k, v in cur.fetchall()}
            cur.execute(
                f"SELECT COUNT(*), COUNT(DISTINCT request_id), COUNT(DISTINCT instance_id) "
                f"FROM `fsm_{machine}_transitions` WHERE request_id LIKE %s",
                (REQUEST_ID_PREFIX + "%",),
            )
            history, requests, instances = map(int, cur.fetchone())
            cur.execute("SELECT COUNT(*) FROM fsm_timers WHERE machine = %s", (machine,))
            left = int(cur.fetchone()[0])
            cur.execute(f"SELECT COUNT(*) FROM `fsm_{machine}` WHERE current_state <> 'b'")
            unmoved = int(cur.fetchone()[0])
    finally:
        conn.close()
    ok = outcomes == {"fired": expected} and history == requests == instances == expected and left == 0 and unmoved == 0
    return {"ok": ok, "outcomes": outcomes, "history": history, "left": left, "unmoved": unmoved}


def server_deadlocks(settings: Settings) -> int | None:
    """InnoDB's deadlock count since the server started (server-wide: other sessions' count too)."""
    conn = bt.raw_connect(settings, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'")  # MariaDB
            row = cur.fetchone()
            if row is None:  # MySQL: the metric, enabled by default
                cur.execute("SELECT `COUNT` FROM information_schema.INNODB_METRICS WHERE NAME = 'lock_deadlocks'")
                row = cur.fetchone()
                return None if row is None else int(row[0])
            return int(row[1])
    finally:
        conn.close()


def left_claimed(settings: Settings, machine: str) -> tuple[int, int, float]:
    """(timers of ``machine`` still armed, distinct claims among them, seconds until the last is due again)."""
    conn = bt.raw_connect(settings, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT COUNT(*), COUNT(DISTINCT claimed_by), "
                "TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), MAX(fire_at)) FROM fsm_timers WHERE machine = %s",
                (machine,),
            )
            left, claims, wait = cur.fetchone()
    finally:
        conn.close()
    return int(left), int(claims), max(0.0, (wait or 0) / 1e6)


def drains(settings: Settings, pid: int | None, args: argparse.Namespace) -> dict[str, Any]:
    results = []
    for k in args.firers:
        name = f"bench_drain_{k}"
        with Store(settings.dsn(), pool_size=1) as store:
            store.define(drain_machine(name))
        print(f"drain, {k} firer(s): arming {args.timers:,} timers...", file=sys.stderr, flush=True)
        armed_s = arm(settings, name, args.timers, f"d{k}")
        wait_until_due(settings, name)
        print(f"drain, {k} firer(s): ceiling...", file=sys.stderr, flush=True)
        ceiling = bt.measure("ceiling", k, settings, args.seconds, pid)
        print(f"drain, {k} firer(s): draining...", file=sys.stderr, flush=True)
        deadlocks = server_deadlocks(settings)
        started = time.perf_counter()
        result = drain(settings, pid, name, k, args.limit, args.claim_seconds)
        # A fire_timers call whose transaction deadlocks 3 times returns no rows and leaves its
        # timers claimed until their claim ends: fire those in a last pass once it has.
        left, claims, wait = left_claimed(settings, name)
        if left:
            print(
                f"drain, {k} firer(s): {left} timers left claimed by {claims} call(s); last pass in {wait:.0f} s...",
                file=sys.stderr,
                flush=True,
            )
            time.sleep(wait + 0.05)
            result["last_pass"] = drain(settings, None, name, 1, args.limit, args.claim_seconds)
        after = server_deadlocks(settings)
        result.update(
            armed_s=armed_s,
            timers=args.timers,
            ceiling=ceiling.rate,
            left=left,
            claims=claims,
            all_fired_s=time.perf_counter() - started,
            deadlocks=None if deadlocks is None or after is None else after - deadlocks,
            check=verify(settings, name, args.timers),
        )
        results.append(result)
    return {"drains": results, "sweep": sweep(settings, pid, args.sweep_limits, args.sweep_timers)}


def sweep(settings: Settings, pid: int | None, limits: list[int], per_step: int) -> list[dict[str, Any]]:
    """One firer, ``per_step`` timers at each limit (calls of exactly that many), the limits
    there and back, so drift shows; ms per call and timers per second."""
    if not limits:
        return []
    name = "bench_sweep"
    order = limits + limits[::-1]
    per_step -= per_step % max(limits)  # whole calls at every limit
    with Store(settings.dsn(), pool_size=1) as store:
        store.define(drain_machine(name))
        print(f"limit sweep: arming {per_step * len(order):,} timers...", file=sys.stderr, flush=True)
        arm(settings, name, per_step * len(order), "s")
        wait_until_due(settings, name)
        steps = []
        for limit in order:
            calls, fired = per_step // limit, 0
            started = time.perf_counter()
            for _ in range(calls):
                fired += len(store.fire_timers(owner="sweep", limit=limit))
            elapsed = time.perf_counter() - started
            steps.append(
                {"limit": limit, "fired": fired, "rate": fired / elapsed, "ms_per_call": elapsed / calls * 1e3}
            )
    return steps


def drain_report(part: dict[str, Any]) -> list[str]:
    lines = [
        "| firing processes | limit | timers | armed (raw INSERTs, s; rows/s) | drain s | fired in the drain "
        "| fired/s | ceiling tx/s, same clients | fired/s vs ceiling | server CPU us/timer | calls "
        "| left claimed (calls given up) | deadlocks (server-wide) | all fired after s (timers/s) "
        "| fired exactly once |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for d in part["drains"]:
        check = d["check"]
        verdict = (
            "yes"
            if check["ok"]
            else (
                f"NO: log {check['outcomes']}, history {check['history']:,}, "
                f"left armed {check['left']:,}, unmoved {check['unmoved']:,}"
            )
        )
        cpu = "n/a" if d["cpu_us"] is None else f"{d['cpu_us']:,.0f}"
        deadlocks = "n/a" if d["deadlocks"] is None else f"{d['deadlocks']:,}"
        lines.append(
            f"| {d['firers']} | {d['limit']} | {d['timers']:,} | {d['armed_s']:.1f}; "
            f"{d['timers'] / d['armed_s']:,.0f} | {d['seconds']:.1f} | {d['fired']:,} | {d['rate']:,.0f} | "
            f"{d['ceiling']:,.0f} | {d['rate'] / d['ceiling']:.2f}x | {cpu} | {d['calls']:,} | "
            f"{d['left']:,} ({d['claims']}) | {deadlocks} | {d['all_fired_s']:.1f} "
            f"({d['timers'] / d['all_fired_s']:,.0f}) | {verdict} |"
        )
    if part["sweep"]:
        by: dict[int, list[dict[str, Any]]] = {}
        for s in part["sweep"]:
            by.setdefault(s["limit"], []).append(s)
        lines += [
            "",
            f"Limit sweep (one firing process, {part['sweep'][0]['fired']:,} timers per step, the limits "
            "there and back):",
            "",
            "| limit | fired/s (there / back) | ms per call (there / back) | ms per timer |",
            "|---:|---|---|---:|",
        ]
        for limit, steps in by.items():
            per_timer = median([s["ms_per_call"] / limit for s in steps])
            there_back = [
                " / ".join(format(s[k], f) for s in steps) for k, f in (("rate", ",.0f"), ("ms_per_call", ",.1f"))
            ]
            lines.append(f"| {limit} | {there_back[0]} | {there_back[1]} | {per_timer:.2f} |")
    return lines


# -- 3. lag under load ------------------------------------------------------------------------


def load_worker(approach: str, client: int, settings: Settings, ready: Any, stop: Any, out: Any) -> None:
    """Transitions without pause until ``stop``: bench_transitions' client step of ``approach``."""
    try:
        keys = [f"{uuid.uuid4().hex[:12]}-{j}" for j in range(bt.INSTANCES_PER_CLIENT)]
        make_client = cast(Callable[[bt.Job, list[str]], bt.Client], bt.CLIENTS[approach])
        step, _questions = make_client(bt.Job(approach, client, settings, 0.0), keys)
        bt.timed_loop(step, bt.WARMUP_SECONDS, Counter(), [])
        ready.wait()
        errors: Counter[str] = Counter()
        ok = i = 0
        started = time.perf_counter()
        while not stop.is_set():
            try:
                step(i)
                ok += 1
            except Exception as exc:
                errors[f"{type(exc).__name__}: {str(exc)[:100]}"] += 1
            i += 1
        out.put({"count": ok, "seconds": time.perf_counter() - started, "errors": errors})
    except BaseException:
        ready.abort()
        out.put(traceback.format_exc())


def firer_worker(dsn: str, owner: str, limit: int, stop: Any, out: Any) -> None:
    """pyfsm's TimerLoop (what `pyfsm timers run` runs), polling every LAG_POLL_SECONDS, until ``stop``."""
    try:
        with Store(dsn, pool_size=1) as store:
            loop = TimerLoop(
                lambda: store.fire_timers(owner=owner, limit=limit), limit=limit, poll_seconds=LAG_POLL_SECONDS
            )

            def stop_when_told() -> None:
                stop.wait()
                loop.stop()

            threading.Thread(target=stop_when_told, daemon=True).start()
            loop.run()
            out.put({"fired": loop.fired, "dropped": loop.dropped, "held": loop.held})
    except BaseException:
        out.put(traceback.format_exc())


def lag(settings: Settings, pid: int | None, args: argparse.Namespace) -> dict[str, Any]:
    clients, count = args.load_clients, args.lag_timers
    print(f"lag: ceiling, {clients} client(s)...", file=sys.stderr, flush=True)
    ceiling = bt.measure("ceiling", clients, settings, args.seconds, pid)
    with Store(settings.dsn(), pool_size=1) as store:
        store.define(LAG)
    arm(settings, LAG.name, count, "lag")  # no timeouts: instances only
    ctx = mp.get_context("spawn")
    ready, stop, loads, fires = ctx.Barrier(clients + 1, timeout=120), ctx.Event(), ctx.Queue(), ctx.Queue()
    procs = [
        ctx.Process(target=load_worker, args=("Store.send, timed", c, settings, ready, stop, loads))
        for c in range(clients)
    ]
    procs += [
        ctx.Process(target=firer_worker, args=(settings.dsn(), f"lag-{k}", args.limit, stop, fires))
        for k in range(LAG_FIRERS)
    ]
    for p in procs:
        p.start()
    try:
        try:
            ready.wait()  # the load runs from here on
        except threading.BrokenBarrierError:
            pass  # a load client failed: its report says why
        print(f"lag: scheduling {count:,} timers under load...", file=sys.stderr, flush=True)
        deadlocks = server_deadlocks(settings)
        started = time.perf_counter()
        with Store(settings.dsn(), pool_size=1) as store:
            for n in range(count):
                store.send_at(LAG, f"lag-{n}", "go", after=random.uniform(1, args.spread))
        arming_s = time.perf_counter() - started
        done, deadline = 0, time.perf_counter() + args.spread + 120
        conn = bt.raw_connect(settings, autocommit=True)
        with conn.cursor() as cur:
            while time.perf_counter() < deadline:
                cur.execute("SELECT COUNT(*) FROM fsm_timer_log WHERE machine = %s", (LAG.name,))
                done = int(cur.fetchone()[0])
                if done >= count:
                    break
                time.sleep(0.5)
            window_s = time.perf_counter() - started
            stop.set()
            after = server_deadlocks(settings)
            cur.execute(
                "SELECT TIMESTAMPDIFF(MICROSECOND, due_at, done_at) / 1e6, outcome FROM fsm_timer_log "
                "WHERE machine = %s",
                (LAG.name,),
            )
            rows = cur.fetchall()
        conn.close()
        load = [loads.get(timeout=120) for _ in range(clients)]
        fired = [fires.get(timeout=120) for _ in range(LAG_FIRERS)]
    finally:
        stop.set()
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.terminate()
    failed = [part for part in load + fired if isinstance(part, str)]
    if failed:
        raise RuntimeError("a lag process failed:\n" + "\n".join(failed))
    lags = sorted(float(r[0]) for r in rows)
    return {
        "clients": clients,
        "ceiling": ceiling.rate,
        "timers": count,
        "done": done,
        "arming_s": arming_s,
        "window_s": window_s,
        "load_rate": sum(p["count"] / p["seconds"] for p in load),
        "load_errors": sum((p["errors"] for p in load), Counter()),
        "outcomes": Counter(r[1] for r in rows),
        "p50": percentile(lags, 50),
        "p99": percentile(lags, 99),
        "max": max(lags, default=float("nan")),
        "spread": args.spread,
        "limit": args.limit,
        "late": sum(1 for x in lags if x > 1.0),
        "deadlocks": None if deadlocks is None or after is None else after - deadlocks,
    }


def lag_report(part: dict[str, Any]) -> list[str]:
    outcomes = ", ".join(f"{n:,} {o}" for o, n in sorted(part["outcomes"].items()))
    errors = sum(part["load_errors"].values())
    return [
        "| load clients (Store.send, timed type) | load tx/s | ceiling tx/s, same clients | load vs ceiling "
        "| timers (send_at, after 1 to spread s) | scheduled in s | firing processes, poll | lag p50 s | lag p99 s "
        "| lag max s | outcomes |",
        "|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---|",
        f"| {part['clients']} | {part['load_rate']:,.0f} | {part['ceiling']:,.0f} | "
        f"{part['load_rate'] / part['ceiling']:.0%} | {part['timers']:,} (spread {part['spread']:g} s) | "
        f"{part['arming_s']:.1f} | {LAG_FIRERS}, {LAG_POLL_SECONDS:g} s (limit {part['limit']}) | "
        f"{part['p50']:.3f} | {part['p99']:.3f} | {part['max']:.3f} | {outcomes} |",
        "",
        f"Load errors: {errors}{'' if not errors else ' (' + str(dict(part['load_errors'])) + ')'}; load "
        f"measured over {part['window_s']:.1f} s (from the first send_at to the last timer logged); "
        f"{part['done']:,} of {part['timers']:,} timers done by then; {part['late']:,} more than 1 s late; "
        f"deadlocks meanwhile (server-wide): {'n/a' if part['deadlocks'] is None else part['deadlocks']}.",
    ]


# -- main -------------------------------------------------------------------------------------


def test_runs() -> int:
    """How many pytest processes run on this machine now (they share the CPUs and the servers)."""
    count = 0
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            count += b"pytest" in cmdline.read_bytes()
        except OSError:
            pass  # gone meanwhile
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dsn", default="mysql://root@127.0.0.1:3306/test", help="server (its database is ignored)")
    parser.add_argument("--quick", action="store_true", help="smaller sizes and shorter measurements (a smoke run)")
    parser.add_argument("--seconds", type=float, help="length of each tx/s measurement (default 4; quick 2)")
    parser.add_argument("--rounds", type=int, help="alternating rounds of part 1 (default 3; quick 1)")
    parser.add_argument("--clients", default="1,4", help="client processes of part 1, comma-separated")
    parser.add_argument("--timers", type=int, help="timers per drain (default 100000; quick 10000)")
    parser.add_argument("--firers", default="1,4", help="firing processes per drain, comma-separated")
    parser.add_argument("--limit", type=int, default=100, help="timers per fire_timers call (default 100)")
    parser.add_argument("--claim-seconds", type=float, default=30.0, help="fire_timers' claim_seconds")
    parser.add_argument("--sweep-limits", default="100,250,500", help="limits of the sweep ('' for none)")
    parser.add_argument("--sweep-timers", type=int, help="timers per sweep step (default 5000; quick 1000)")
    parser.add_argument("--load-clients", type=int, default=4, help="transition load's client processes (part 3)")
    parser.add_argument("--lag-timers", type=int, help="timers scheduled under load (default 3000; quick 500)")
    parser.add_argument(
        "--spread", type=float, help="timers due 1 to this many seconds after scheduling (default 20; quick 10)"
    )
    parser.add_argument("--parts", default="1,2,3", help="parts to run, comma-separated")
    parser.add_argument("--write", type=Path, help="update this server's block of this file (e.g. BENCHMARKS.md)")
    args = parser.parse_args(argv)
    defaults = {
        "seconds": (4.0, 2.0),
        "rounds": (3, 1),
        "timers": (100_000, 10_000),
        "sweep_timers": (5000, 1000),
        "lag_timers": (3000, 500),
        "spread": (20.0, 10.0),
    }
    for name, (full, quick) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    args.firers = [int(k) for k in args.firers.split(",")]
    args.sweep_limits = [int(k) for k in args.sweep_limits.split(",") if k.strip()]
    parts = {int(p) for p in args.parts.split(",")}
    started, tests_at_start = time.perf_counter(), test_runs()
    with bt.migrated_database(args.dsn) as (settings, server):
        with Store(settings.dsn(), pool_size=1) as store:
            store.define(TIMED)
            store.define(UNTIMED)
        pid = bt.server_pid(settings)
        timings, sections = {}, []
        if 1 in parts:
            t = time.perf_counter()
            cost = per_transition(settings, pid, [int(c) for c in args.clients.split(",")], args.rounds, args.seconds)
            timings["per transition"] = time.perf_counter() - t
            sections += [
                f"Per-transition cost of a timeout ({args.rounds} rounds of {args.seconds:g} s per "
                "measurement, the types alternating; medians, each round's value in brackets):",
                "",
                *per_transition_report(cost),
                "",
            ]
        if 2 in parts:
            t = time.perf_counter()
            drained = drains(settings, pid, args)
            timings["drain"] = time.perf_counter() - t
            sections += [
                f"Drain of {args.timers:,} timers due at once (1 s timeouts armed by the AFTER INSERT timer "
                f"trigger of raw {INSERT_ROWS:,}-row INSERTs; TimerLoop.run(until_idle=True) per firing "
                f"process, limit {args.limit}, claim_seconds {args.claim_seconds:g}):",
                "",
                *drain_report(drained),
                "",
            ]
        if 3 in parts:
            t = time.perf_counter()
            lagged = lag(settings, pid, args)
            timings["lag"] = time.perf_counter() - t
            sections += ["Firing lag under load (done_at - due_at in fsm_timer_log):", "", *lag_report(lagged), ""]
    load_end = " ".join(f"{x:.2f}" for x in os.getloadavg())
    header = (
        f"Run {datetime.date.today().isoformat()}: {os.cpu_count()} CPUs (load average {server['load']} at the "
        f"start, {load_end} at the end), server {server['version']}, innodb_flush_log_at_trx_commit="
        f"{server['flush']}; {time.perf_counter() - started:.0f} s in all ("
        + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items())
        + f"); pytest processes on the machine: "
        f"{tests_at_start} at the start, {test_runs()} at the end." + (" Quick run (--quick)." if args.quick else "")
    )
    text = "\n".join([header, "", *sections]).rstrip("\n")
    print(text)
    if args.write:
        bt.write_results(args.write, text, MARKS["mariadb" if "mariadb" in server["version"].lower() else "mysql"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
