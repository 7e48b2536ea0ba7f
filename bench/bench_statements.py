"""Statements the server runs per transition, by kind: the ``Com_*`` counters of one session.

Issue 49 asks how many statements each way of making a transition executes inside its
procedures and triggers, and what each is for. A stored program's statements count in the
session's ``Com_*`` status as a client's do (one ``SET`` of three user variables inside a
procedure is three ``Com_set_option``; a local variable's ``SET`` and a ``DECLARE`` are none),
so the deltas of one session around N calls, less what the ``SHOW SESSION STATUS`` itself
adds, say it exactly: the counts are the same in every run and on every machine.

Each way runs on a ``Store(pool_size=1)``, whose one pooled connection is the counted
session (so pyfsm's own round trips count too), on a two-state machine in a fresh database
per server:

* ``bare CALL``: bench_transitions' hand-written procedure (row lock, rule, flip, history
  insert, instance update, commit): the floor the issue compares with;
* ``Store.send`` (``fsm_{type}_fire_v2``), and with an option (``metadata``: ``send_v5``);
* ``raw UPDATE`` of the state column then ``COMMIT``, as a DBA's or a legacy writer's;
* ``send_many`` per item (one call of 100 items);
* ``engine step`` per step (``Process.start`` of a 20-step process, 16 of them);
* ``timer fired`` per timer (``Store.fire_timers`` of 50 due timers).

    .venv/bin/python bench/bench_statements.py --dsn mysql://root@127.0.0.1:3306/test --dsn mysql://root@127.0.0.1:3307/test
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_transitions as bt
from bench_engine import linear

from pyfsm import Machine, Store

TWO_STATES: dict[str, Any] = {
    "states": ["a", "b"],
    "start": ["a"],
    "transitions": [("go", "a", "b"), ("back", "b", "a")],
}
#: the columns of the table, in order: (heading, the Com_ counters it adds up)
COLUMNS = (
    ("SET", ("Com_set_option",)),
    ("SELECT", ("Com_select",)),
    ("INSERT", ("Com_insert", "Com_insert_select")),
    ("UPDATE", ("Com_update", "Com_update_multi")),
    ("DELETE", ("Com_delete", "Com_delete_multi")),
    ("BEGIN", ("Com_begin",)),
    ("COMMIT", ("Com_commit",)),
    ("CALL", ("Com_call_procedure",)),
)


def status(store: Store) -> dict[str, int]:
    def read(conn: Any) -> dict[str, int]:
        with conn.cursor() as cur:
            cur.execute("SHOW SESSION STATUS LIKE 'Com\\_%'")
            return {name: int(value) for name, value in cur.fetchall()}

    return store.gateway.on_primary(read)


def per_call(store: Store, run: Callable[[], int]) -> dict[str, float]:
    """Com_* deltas per unit of ``run()`` (which returns how many units it made), less what
    reading the status itself adds."""
    first, second = status(store), status(store)
    own = {k: second[k] - first[k] for k in second}
    before = status(store)
    units = run()
    after = status(store)
    return {k: (after[k] - before[k] - own.get(k, 0)) / units for k in after if after[k] - before[k] - own.get(k, 0)}


def ways(store: Store, raw_sql: Callable[..., None], n: int) -> dict[str, Callable[[], int]]:
    """Each way's run (all on store's one connection), warmed once before it is counted."""
    state: dict[str, str] = {}

    def flip(machine: str, key: str) -> str:
        now = state.get(f"{machine}/{key}", "a")
        state[f"{machine}/{key}"] = "b" if now == "a" else "a"
        return "go" if now == "a" else "back"

    def sends(**options: Any) -> Callable[[], int]:
        def run() -> int:
            for i in range(n):
                store.send("st_send", f"k{i % 8}", flip("st_send", f"k{i % 8}"), **options)
            return n

        return run

    def bare() -> int:
        for i in range(n):
            key = f"k{i % 8}"
            raw_sql("CALL bare_send(%s, %s)", (key, flip("bare", key)), commit=False)
        return n

    def raw_update() -> int:
        for i in range(n):
            key = f"k{i % 8}"
            target = "b" if flip("st_raw", key) == "go" else "a"
            raw_sql("UPDATE fsm_st_raw SET current_state = %s WHERE instance_key = %s", (target, key))
        return n

    def send_many() -> int:
        items = [(f"m{i}", flip("st_many", f"m{i}")) for i in range(100)]
        results = store.send_many("st_many", items)
        assert all(not isinstance(r, Exception) for r in results), results
        return len(items)

    steps = linear("st_steps", 20)
    runs = {"n": 0}

    def engine() -> int:  # 16 processes: the warm-up's have written every shard's counter rows
        done = 0
        for _ in range(16):
            runs["n"] += 1
            result = steps.start(store, f"p{runs['n']}")
            assert result.steps == 20, result
            done += result.steps
        return done

    def timers() -> int:
        for i in range(50):
            store.create("st_timer", f"t{runs['n']}-{i}")
        runs["n"] += 1
        time.sleep(1.2)  # the timeouts are one second
        fired = store.fire_timers(limit=100)
        assert len(fired) == 50, fired
        return len(fired)

    store.define(steps.machine)
    store.define(Machine(name="st_timer", timeouts={"a": ("1s", "go")}, **TWO_STATES))
    return {
        "bare CALL": bare,
        "Store.send (fire_v2)": sends(),
        "Store.send with metadata (send_v5)": sends(metadata={"by": "bench"}),
        "raw UPDATE of the state": raw_update,
        "send_many, per item (100 per call)": send_many,
        "engine step, per step (Process.start of 20 steps, 16 times)": engine,
        "timer fired, per timer (fire_timers of 50)": timers,
    }


def measure(dsn: str, n: int) -> tuple[str, dict[str, dict[str, float]]]:
    with bt.migrated_database(dsn) as (settings, server), Store(settings.dsn(), pool_size=1) as store:
        for statement in bt.TABLES[1:]:
            if "same_" in statement or "bare_send" in statement:
                store.gateway.on_primary(lambda conn, s=statement: conn.cursor().execute(s))
        for name in ("bench", "st_send", "st_raw", "st_many"):
            store.define(Machine(name=name, **TWO_STATES))

        def raw_sql(sql: str, args: tuple[Any, ...], *, commit: bool = True) -> None:
            def run(conn: Any) -> None:
                with conn.cursor() as cur:
                    cur.execute(sql, args)
                    while cur.nextset():
                        pass
                if commit:  # an UPDATE or INSERT of the client's; a CALL commits itself
                    conn.commit()

            store.gateway.on_primary(run)

        bt.seed_same_rows(raw_sql, "same", [f"k{k}" for k in range(8)])
        for k in range(8):
            for machine in ("st_send", "st_raw"):
                store.create(machine, f"k{k}")
        for i in range(100):
            store.create("st_many", f"m{i}")
        counted = {}
        for way, run in ways(store, raw_sql, n).items():
            # warm: the first call of a routine in a session parses it, and the first move into
            # a state in a counter shard writes the counter rows (bu_v12: an INSERT, not an UPDATE)
            run()
            counted[way] = per_call(store, run)
    return server["version"], counted


def table(version: str, counted: dict[str, dict[str, float]]) -> str:
    known = {name for _, names in COLUMNS for name in names}
    lines = [
        f"**{version}** (statements per transition, `Com_*` of the session)",
        "",
        "| way | " + " | ".join(h for h, _ in COLUMNS) + " | other | all |",
        "|---|" + "---:|" * (len(COLUMNS) + 2),
    ]
    for way, deltas in counted.items():
        cells = [sum(deltas.get(name, 0.0) for name in names) for _, names in COLUMNS]
        other = {k: v for k, v in deltas.items() if k not in known}
        shown_other = ", ".join(f"{k[4:]} {v:g}" for k, v in sorted(other.items())) or "0"
        lines.append(
            f"| {way} | "
            + " | ".join(f"{c:.2f}".rstrip("0").rstrip(".") for c in cells)
            + f" | {shown_other} | {sum(deltas.values()):.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", action="append", help="a server (repeat for several); default 127.0.0.1:3306")
    parser.add_argument("--calls", type=int, default=200, help="transitions per way (send, raw UPDATE, bare CALL)")
    args = parser.parse_args(argv)
    for dsn in args.dsn or ["mysql://root@127.0.0.1:3306/test"]:
        print(table(*measure(dsn, args.calls)))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
