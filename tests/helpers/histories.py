"""pyfsm's invariants checked on the history tables: after processes were killed or a
server restarted (``check_invariants``), on every node of a cluster (``check_chains``)."""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from typing import Any

import pymysql

from helpers.relay import query
from pyfsm import Machine
from pyfsm.db import Settings


def history_rows(settings: Settings, machine: str) -> list[dict[str, Any]]:
    """Every history row of ``machine`` with its instance's current state, in id order."""
    return query(settings, f"SELECT i.instance_key, i.current_state, i.status, i.version, t.id, t.sort_key, "
                           f"t.most_recent, t.event, t.from_state, t.to_state, t.handler, t.request_id "
                           f"FROM `fsm_{machine}_transitions` t JOIN `fsm_{machine}` i ON i.id = t.instance_id "
                           f"ORDER BY t.id")


def check_invariants(settings: Settings, machine: Machine) -> dict[str, list[dict[str, Any]]]:
    """pyfsm's invariants over every instance of ``machine``; its history rows per instance key.

    Per instance: sort_key strictly increasing in the order the rows were written; exactly
    one most_recent row, the last one; the first row a creation into a start state, every
    later one an allowed transition from the state the previous one entered; the instance
    row at the last row's state and version. And the per-state counters the triggers keep
    equal the instances' real states (they are written in the same transaction).
    """
    by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in history_rows(settings, machine.name):
        by_key[row["instance_key"]].append(row)
    problems: list[str] = []
    for key, rows in by_key.items():
        sort_keys = [r["sort_key"] for r in rows]
        if sort_keys != sorted(set(sort_keys)):
            problems.append(f"{key}: sort_keys not strictly increasing: {sort_keys}")
        recent = [r["sort_key"] for r in rows if r["most_recent"] == 1]
        if recent != [sort_keys[-1]]:
            problems.append(f"{key}: most_recent on {recent}, last sort_key {sort_keys[-1]}")
        first = rows[0]
        if first["event"] is not None or first["from_state"] is not None or first["to_state"] not in machine.start:
            problems.append(f"{key}: first row is not a creation: {first}")
        for before, after in itertools.pairwise(rows):
            allowed = machine.target(after["from_state"] or "", after["event"] or "") == after["to_state"]
            if after["from_state"] != before["to_state"] or not allowed:
                problems.append(f"{key}: {before['to_state']} then {after['event']}: "
                                f"{after['from_state']} -> {after['to_state']}")
        last = rows[-1]
        if (last["current_state"], last["version"]) != (last["to_state"], last["sort_key"]):
            problems.append(f"{key}: instance at {last['current_state']} v{last['version']}, history ends at "
                            f"{last['to_state']} sort_key {last['sort_key']}")
    assert problems == [], problems[:20]
    counted = {r["state"]: int(r["n"]) for r in query(
        settings, "SELECT state, SUM(instances) AS n FROM fsm_state_counts WHERE machine = %s GROUP BY state "
                  "HAVING SUM(instances) <> 0", (machine.name,))}
    assert counted == dict(Counter(rows[-1]["to_state"] for rows in by_key.values())), "state counters drifted"
    return dict(by_key)


def check_chains(settings: Settings, machine: Machine) -> dict[str, int]:
    """The invariants, per instance, in sort_key order: sort_keys 1..n without a gap, the
    first row a creation, each next one an allowed move from the state the one before
    entered, most_recent on the last row only, the instance at the last row's state and
    version; the counters equal the instances' states. Not in id order: each Galera node
    takes AUTO_INCREMENT values of its own (auto_increment_offset), so ids from different
    nodes do not follow the order of the commits. Returns the moves per instance key."""
    by_key: dict[str, list[dict[str, Any]]] = {}
    for row in history_rows(settings, machine.name):
        by_key.setdefault(row["instance_key"], []).append(row)
    problems = []
    for key, rows in by_key.items():
        rows.sort(key=lambda r: r["sort_key"])
        if [r["sort_key"] for r in rows] != list(range(1, len(rows) + 1)):
            problems.append(f"{key}: sort_keys {[r['sort_key'] for r in rows]}")
        if [r["sort_key"] for r in rows if r["most_recent"] == 1] != [len(rows)]:
            problems.append(f"{key}: most_recent not on the last row only")
        if rows[0]["event"] is not None or rows[0]["to_state"] not in machine.start:
            problems.append(f"{key}: the first row is not a creation")
        for before, after in itertools.pairwise(rows):
            if after["from_state"] != before["to_state"] or \
                    machine.target(after["from_state"], after["event"] or "") != after["to_state"]:
                problems.append(f"{key}: {before['to_state']} then {after['from_state']} -> {after['to_state']}")
        if (rows[-1]["current_state"], rows[-1]["version"]) != (rows[-1]["to_state"], rows[-1]["sort_key"]):
            problems.append(f"{key}: the instance is not where its history ends")
    assert problems == [], problems[:20]
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT state, SUM(instances) FROM fsm_state_counts WHERE machine = %s GROUP BY state "
                        "HAVING SUM(instances) <> 0", (machine.name,))
            counted = {state: int(n) for state, n in cur.fetchall()}
    finally:
        conn.close()
    ends: dict[str, int] = {}
    for rows in by_key.values():
        ends[rows[-1]["to_state"]] = ends.get(rows[-1]["to_state"], 0) + 1
    assert counted == ends, "the state counters drifted"
    return {key: len(rows) - 1 for key, rows in by_key.items()}
