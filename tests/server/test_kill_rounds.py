"""Process faults over many rounds: workers and relays killed with SIGKILL at random moments.

Workers: a few hundred instances of the checkout-shaped process reserve -> charge -> ship ->
done (tests/helpers/engine_fixtures.py, kind "slow": its handlers record every run in the table
``side_effects``, and ``charge`` takes a moment, so a kill often lands inside it), four
worker processes, and a killer that SIGKILLs one of them at a random moment, again and
again, starting a replacement each time. Claims are short (1 s), so the work of a killed
worker is due again quickly. Afterwards every instance must be done with each step's
transition exactly once in history; handlers may have run more than once (at least once),
and the test counts how often.

Relays: a stream of transitions of a type with a Kafka topic while two relay processes
(one leads, one stands by) are SIGKILLed at random and restarted. Afterwards every event
in history is on the topic, the first copies of each instance's events are in sort_key
order, and a duplicate is always the same event (same id, same content).

The rounds are random; the seed is printed (``PYFSM_KILL_SEED=... pytest ...`` repeats
the kill schedule, not the exact interleaving). Both tests are bounded in kills and time:
10 worker kills and 5 relay kills in CI, ``PYFSM_KILL_ROUNDS=N`` for N times as many.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections import Counter, deque
from pathlib import Path
from typing import Any

import pymysql
from helpers.common import unique
from helpers.engine_fixtures import build
from helpers.histories import check_invariants
from helpers.kafka_broker import Broker, Received
from helpers.relay import cycle, partition_order, query, relay_process, stop_process, unpublished
from helpers.workers import SPAWN, effects, spawn_worker

from pyfsm import Store
from pyfsm.db import parse_dsn

# fixtures of tests/server/conftest.py: fresh (a migrated database of its own), side (the side_effects table)

# -- the kill schedule ------------------------------------------------------------------


def seeded() -> tuple[int, random.Random]:
    seed = int(os.environ.get("PYFSM_KILL_SEED") or random.SystemRandom().randrange(1, 10**9))
    return seed, random.Random(seed)


# -- workers ------------------------------------------------------------------------------

INSTANCES = 300
WORKERS = 4
SPARES = 2
#: PYFSM_KILL_ROUNDS=N multiplies the kills (and their time bounds); CI runs 1
SCALE = max(1, int(os.environ.get("PYFSM_KILL_ROUNDS", "1")))
KILLS = 10 * SCALE
KILL_WINDOW = 25.0 * SCALE  # seconds: the killer stops after this many, whatever the count
CLAIM_SECONDS = 1.0
CHARGE_SECONDS = "0.06"  # the charge handler's sleep: a kill often lands inside it


def _in_handler(side_conn: Any, machine: str, pids: set[int]) -> int | None:
    """A worker whose last recorded side effect is 'charge-start': it is inside the handler now."""
    with side_conn.cursor() as cur:
        cur.execute(
            "SELECT pid, what FROM side_effects WHERE id IN (SELECT MAX(id) FROM side_effects "
            "WHERE machine = %s GROUP BY pid)",
            (machine,),
        )
        inside = [pid for pid, what in cur.fetchall() if what == "charge-start" and pid in pids]
    return inside[0] if inside else None


def test_workers_killed_at_random_every_instance_done_each_step_once(  # type: ignore[no-untyped-def]
    store: Store, dsn: str, side
) -> None:
    began = time.monotonic()
    seed, rng = seeded()
    name = unique("killw")
    settings = {"claim_seconds": CLAIM_SECONDS, "max_attempts": 50, "backoff": 0.05, "max_backoff": 0.2}
    env = {"PYFSM_SLOW_SECONDS": CHARGE_SECONDS}
    machine = build("slow", name, **settings).machine
    store.define(machine)
    keys = [f"w-{i:04d}" for i in range(INSTANCES)]
    conn = pymysql.connect(**parse_dsn(dsn).connect_kwargs())
    try:
        conn.cursor().execute(
            f"INSERT INTO `fsm_{name}` (instance_key) VALUES " + ", ".join(["(%s)"] * len(keys)), keys
        )
    finally:
        conn.close()
    for key in keys:
        store.enqueue(name, key)

    out = SPAWN.Queue()

    signals: list[Any] = []  # kept: a child unpickles its Event after the start, from the parent's semaphore

    def spawn() -> tuple[Any, Any]:
        """A worker process and its start signal: it imports and connects, then waits for the signal."""
        go = SPAWN.Event()
        signals.append(go)
        return spawn_worker(dsn, "slow", name, settings, env, 3.0, go, out), go

    def finished() -> bool:
        return store.counts(name) == {"done": INSTANCES}

    def working(alive: set[int], at_least: int) -> set[int]:
        """The live workers that have run a handler, once there are ``at_least`` (or after 8 s)."""
        deadline = time.monotonic() + 8
        while True:
            with side.cursor() as cur:
                cur.execute("SELECT DISTINCT pid FROM side_effects WHERE machine = %s", (name,))
                pids = {pid for (pid,) in cur.fetchall()} & alive
            if len(pids) >= at_least or time.monotonic() > deadline:
                return pids
            time.sleep(0.05)

    workers = []
    for proc, go in [spawn() for _ in range(WORKERS)]:
        go.set()
        workers.append(proc)
    # replacements are started ahead and take over the moment a worker is killed: starting a
    # Python process takes a second or more (several on a loaded machine)
    spares = deque(spawn() for _ in range(SPARES))
    killed: list[int] = []
    chosen_inside = 0
    try:
        kill_until = time.monotonic() + KILL_WINDOW
        for round_ in range(KILLS):
            time.sleep(rng.uniform(0.05, 0.5))
            if time.monotonic() > kill_until or finished():
                break
            alive = {w.pid: w for w in workers if w.is_alive()}
            busy = working(set(alive), at_least=min(2, len(alive)))
            victim_pid = None
            if round_ % 2 == 1:  # every other round: a worker that is inside a handler right now
                deadline = time.monotonic() + 2
                while victim_pid is None and time.monotonic() < deadline:
                    victim_pid = _in_handler(side, name, busy)
                    time.sleep(0.01)
                chosen_inside += victim_pid is not None
            if victim_pid is None:
                victim_pid = rng.choice(sorted(busy or set(alive)))
            victim = alive[victim_pid]
            os.kill(victim.pid, signal.SIGKILL)
            victim.join(30)
            killed.append(victim.pid)
            workers.remove(victim)
            proc, go = spares.popleft()
            go.set()
            workers.append(proc)
            spares.append(spawn())
        for proc, go in spares:  # the spares help to finish
            go.set()
            workers.append(proc)
        spares.clear()
        kill_phase = time.monotonic() - began
        done_by_then = store.counts(name).get("done", 0)
        deadline = time.monotonic() + 60
        while not finished():
            assert time.monotonic() < deadline, f"not all done 60 s after the kills: {store.counts(name)}"
            time.sleep(0.1)
        reports = [out.get(timeout=60) for _ in workers]  # every worker not killed ends when idle and reports
        for w in workers:
            w.join(30)
    finally:
        for w in [*workers, *(proc for proc, _go in spares)]:
            if w.is_alive():
                w.kill()
                w.join(10)
    assert len(killed) >= KILLS * 2 // 3, f"only {len(killed)} kills landed before the work was done (seed {seed})"
    assert [r["error"] for r in reports if r["error"]] == []

    histories = check_invariants(parse_dsn(dsn), machine)
    expected = [(None, None), ("next", "counted"), ("next", "slow_charge"), ("next", "counted")]
    wrong = {
        k: [(r["event"], r["handler"]) for r in rows]
        for k, rows in histories.items()
        if [(r["event"], r["handler"]) for r in rows] != expected
    }
    duplicates = sum(len(rows) - len({r["to_state"] for r in rows}) for rows in histories.values())
    assert sorted(histories) == keys and wrong == {}, f"each step's transition once (seed {seed}): {wrong}"
    assert all(store.get(name, key).data.get("charged") is True for key in keys[:: INSTANCES // 20])
    rows = query(parse_dsn(dsn), "SELECT status, COUNT(*) AS n FROM `fsm_" + name + "` GROUP BY status")
    assert {r["status"]: r["n"] for r in rows} == {"completed": INSTANCES}
    assert query(parse_dsn(dsn), "SELECT COUNT(*) AS n FROM fsm_runs WHERE machine = %s", (name,))[0]["n"] == 0
    errors = query(
        parse_dsn(dsn),
        "SELECT error_type, COUNT(*) AS n FROM fsm_errors WHERE machine = %s GROUP BY error_type",
        (name,),
    )

    ran = Counter((k, what) for k, what, _pid in effects(side, name))
    missing = [
        (k, what) for k in keys for what in ("reserve", "charge-start", "charge-end", "ship") if ran[(k, what)] == 0
    ]
    assert missing == [], missing[:10]  # every committed step's handler ran (at least once)
    reruns = {kw: n - 1 for kw, n in ran.items() if n > 1}
    last = {}
    for _k, what, pid in effects(side, name):
        last[pid] = what
    mid_handler = sum(last.get(pid) == "charge-start" for pid in killed)
    assert mid_handler >= 1, f"no kill landed inside a handler (seed {seed})"
    assert sum(reruns.values()) >= mid_handler, "a handler interrupted by a kill is run again"
    print(
        f"\nkill rounds, workers (seed {seed}): {INSTANCES} instances x 3 steps, {WORKERS} workers, "
        f"{len(killed)} SIGKILLs ({mid_handler} inside the charge handler, {chosen_inside} chosen so), "
        f"{sum(reruns.values())} handler re-runs ({dict(Counter(w for (_k, w) in reruns))}), "
        f"{duplicates} duplicate transitions, errors recorded {[(e['error_type'], e['n']) for e in errors]}; "
        f"kill phase {kill_phase:.1f} s ({done_by_then} done by then), total {time.monotonic() - began:.1f} s"
    )


# -- relays -------------------------------------------------------------------------------

RELAY_KILLS = 5 * SCALE
RELAY_WINDOW = 25.0 * SCALE  # seconds: no new round after this many, whatever the count
RELAY_KEYS = 30


def _leads(log: Path, name: str) -> bool:
    return f"leader: relay {name} " in log.read_text(errors="replace")


def test_relays_killed_at_random_every_event_published_in_order(  # type: ignore[no-untyped-def]
    fresh, kafka: Broker, tmp_path: Path
) -> None:
    began = time.monotonic()
    seed, rng = seeded()
    settings, store = fresh
    topic = unique("t.killrounds")
    kafka.create_topic(topic, partitions=4)
    machine = cycle(topic)
    store.define(machine)

    stop_writing = threading.Event()
    written = [0]
    writer_errors: list[BaseException] = []

    def write() -> None:
        try:
            with Store(settings.dsn(), pool_size=1) as writer:
                n = 0
                while not stop_writing.is_set():
                    key = f"k{n % RELAY_KEYS:02d}"
                    if n < RELAY_KEYS:
                        writer.create(machine, key)
                    else:
                        writer.send(machine, key, "go" if (n // RELAY_KEYS) % 2 == 1 else "back")
                    n += 1
                    written[0] = n
        except BaseException as exc:
            writer_errors.append(exc)

    procs: dict[str, Any] = {}
    logs: dict[str, Path] = {}
    counter = [0]

    def start_relay() -> str:
        counter[0] += 1
        name = f"R{counter[0]}"
        logs[name] = tmp_path / f"{name}.log"
        procs[name] = relay_process(settings, kafka, name, logs[name], "--batch-size", "50")
        return name

    def wait(check: Any, what: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            assert time.monotonic() < deadline, f"timed out waiting for {what} (seed {seed})"
            time.sleep(0.05)

    def up(name: str) -> None:  # a round starts once the replacement leads or stands by
        wait(
            lambda: _leads(logs[name], name) or "standby:" in logs[name].read_text(errors="replace"),
            f"relay {name} to start",
        )

    kills: list[tuple[str, bool, int]] = []  # relay, whether it led, unpublished events at the kill
    writer = threading.Thread(target=write, daemon=True)
    try:
        first = start_relay()
        wait(lambda: _leads(logs[first], first), "the first relay to lead")
        up(start_relay())
        writer.start()
        for _round in range(RELAY_KILLS):
            time.sleep(rng.uniform(0.1, 0.6))
            if time.monotonic() - began > RELAY_WINDOW:
                break
            wait(lambda: any(_leads(logs[n], n) for n, p in procs.items() if p.poll() is None), "a relay to lead")
            alive = [n for n, p in procs.items() if p.poll() is None]
            leaders = [n for n in alive if _leads(logs[n], n)]
            others = [n for n in alive if n not in leaders]
            pick_leader = leaders and (not others or rng.random() < 0.75)
            victim = rng.choice(leaders if pick_leader else others)
            backlog, deadline = unpublished(settings), time.monotonic() + 1.0
            while pick_leader and backlog < 10 and time.monotonic() < deadline:  # the leader: mid-stream
                backlog = unpublished(settings)
            procs[victim].kill()  # SIGKILL: no release, no flush, no mark
            procs[victim].wait(10)
            kills.append((victim, victim in leaders, backlog))
            up(start_relay())
        wait(
            lambda: written[0] > 0 and any(_leads(logs[n], n) for n, p in procs.items() if p.poll() is None),
            "a live relay to lead after the last kill",
        )
    finally:
        stop_writing.set()
        if writer.is_alive():
            writer.join(30)
    try:
        wait(lambda: unpublished(settings) == 0, "the outbox to drain after the kills", timeout=60)
    finally:
        for proc in procs.values():
            stop_process(proc)
    assert writer_errors == []
    assert len(kills) >= RELAY_KILLS // 2 and sum(led for _v, led, _b in kills) >= 1, kills
    drain_done = time.monotonic() - began

    history = query(
        settings,
        f"SELECT i.instance_key, t.id, t.sort_key FROM `fsm_{machine.name}_transitions` t "
        f"JOIN `fsm_{machine.name}` i ON i.id = t.instance_id",
    )
    assert len(history) == written[0]
    messages: list[Received] = kafka.read(topic, count=len(history))
    expected_ids = {f"{machine.name}:{h['id']}" for h in history}
    got_ids = Counter(m.event["id"] for m in messages)
    assert set(got_ids) == expected_ids, (
        f"lost {len(expected_ids - set(got_ids))}, unknown {len(set(got_ids) - expected_ids)} (seed {seed})"
    )
    first_copy: dict[str, dict[str, Any]] = {}
    for m in messages:  # a duplicate is the same event: same id, same content
        assert first_copy.setdefault(m.event["id"], m.event) == m.event
    per_key = Counter(h["instance_key"] for h in history)
    assert partition_order(messages) == {key: list(range(1, n + 1)) for key, n in per_key.items()}
    duplicates = sum(n - 1 for n in got_ids.values())
    print(
        f"\nkill rounds, relays (seed {seed}): {len(kills)} SIGKILLs "
        f"({sum(led for _v, led, _b in kills)} of the leader), {len(procs)} relay processes in all, "
        f"backlog at the kills {[b for _v, _l, b in kills]}; {len(history)} events over {len(per_key)} "
        f"instances, all on the topic, {duplicates} duplicates (same id and content), order kept; "
        f"drained at {drain_done:.1f} s, total {time.monotonic() - began:.1f} s"
    )
