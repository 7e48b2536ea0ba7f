"""What the state counters (revision 0004) cost a transition: A/B in one run.

The same machine type is measured with its current triggers (v3 and later: the transition also moves
one instance between two rows of fsm_state_counts, and stamps left_at) and with the v2
triggers of revision 0003 swapped back in place, alternating, several rounds, beside the
INSERT+COMMIT ceiling. Both arms send through fsm_bench_send_v1 (send_v2 reads what only the
v5 trigger leaves behind). Prints a table; ``--write BENCHMARKS.md`` updates its block.

    .venv/bin/python bench/bench_counters.py --write BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import bench_transitions as bt

from pyfsm import Store, db
from pyfsm.schema import install as schema


def _current(family: str) -> str:
    """The current file of a trigger family, e.g. machine/triggers/fsm_{type}_bu_v7.sql for trigger_bu."""
    return schema.current_template(family)


#: (current trigger, the one revision 0003 had): the current ones keep the counters and left_at
#: and the history triggers of that revision too: the current ones (0017) accept only the guard's
#: '<id>/<created_at>' form, which the v2 triggers (guard = the instance id) do not set
V2 = [
    (_current("trigger_ai"), "trigger_ai_v2"),
    (_current("trigger_bu"), "trigger_bu_v2"),
    (_current("trigger_hbi"), "trigger_hbi_v1"),
    (_current("trigger_hbu"), "trigger_hbu_v1"),
]
MARKS = ("<!-- bench-counters:start -->", "<!-- bench-counters:end -->")


def swap(settings: db.Settings, to_v2: bool) -> None:
    conn = db.connect(settings)
    try:
        name = bt.MACHINE.name
        pairs = V2 if to_v2 else [(new, old) for old, new in V2]
        schema.replace_machine_triggers(
            conn,
            name,
            pairs,
            "v2" if to_v2 else schema.MACHINE_OBJECTS_VERSION,
            also_lock=(f"fsm_{name}_transitions", "fsm_state_counts"),
            while_locked=None if to_v2 else (lambda cur: schema.rebuild_state_counts(cur, name)),
        )
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", default="mysql://root@127.0.0.1:3306/test")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--write", type=Path)
    parser.add_argument("--json", type=Path, help="also write the measurements to this file as JSON")
    args = parser.parse_args(argv)
    rates: dict[str, list[float]] = {"ceiling": [], "current (counters)": [], "v2 (no counters)": []}
    p50: dict[str, list[float]] = {k: [] for k in rates}
    with bt.migrated_database(args.dsn) as (settings, server):
        with Store(settings.dsn(), pool_size=1) as store:
            store.define(bt.MACHINE)
        for n in range(args.rounds):
            for label in ("ceiling", "current (counters)", "v2 (no counters)"):
                if label.startswith("v2"):
                    swap(settings, to_v2=True)
                print(f"round {n + 1}: {label}...", file=sys.stderr)
                # send_v1 in both arms: send_v2 reads what only the v5 trigger leaves behind
                approach = "ceiling" if label == "ceiling" else "pyfsm, send_v1"
                result = bt.measure(approach, args.clients, settings, args.seconds)
                if label.startswith("v2"):
                    swap(settings, to_v2=False)
                rates[label].append(result.rate)
                p50[label].append(result.pct(50))
    lines = [
        f"Run with {args.clients} clients, {args.rounds} alternating rounds of {args.seconds:g} s each; server "
        f"{server['version']}, load {server['load']} at the start. Medians over the rounds.",
        "",
        "| triggers | tx/s (median) | tx/s per round | p50 ms (median) | tx/s vs ceiling |",
        "|---|---:|---|---:|---:|",
    ]
    ceiling = statistics.median(rates["ceiling"])
    for label, values in rates.items():
        med = statistics.median(values)
        lines.append(
            f"| {label} | {med:,.0f} | {', '.join(f'{v:,.0f}' for v in values)} | "
            f"{statistics.median(p50[label]):.2f} | {100 * med / ceiling:.0f}% |"
        )
    v3, v2 = statistics.median(rates["current (counters)"]), statistics.median(rates["v2 (no counters)"])
    if not v2 or not v3:  # e.g. two transition triggers at once: every transition refused
        raise SystemExit(f"no transitions measured (current {v3:,.0f}, v2 {v2:,.0f} tx/s): the trigger swap failed")
    lines += [
        "",
        f"The counters cost {100 * (1 - v3 / v2):.0f}% of the transitions per second in this run "
        f"({v3:,.0f} against {v2:,.0f} tx/s).",
    ]
    text = "\n".join(lines)
    print(text)
    if args.write:
        bt.write_results(args.write, text, MARKS)
    if args.json:
        bt.write_json(
            args.json,
            {
                "server": server,
                "clients": args.clients,
                "rounds": args.rounds,
                "rates": rates,
                "p50_ms": p50,
                "median_rate": {k: statistics.median(v) for k, v in rates.items()},
                "median_p50_ms": {k: statistics.median(v) for k, v in p50.items()},
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
