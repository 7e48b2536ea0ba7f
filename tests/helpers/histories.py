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
    return query(
        settings,
        f"SELECT i.instance_key, i.current_state, i.status, i.version, t.id, t.sort_key, "
        f"t.most_recent, t.event, t.from_state, t.to_state, t.handler, t.request_id "
        f"FROM `fsm_{machine}_transitions` t JOIN `fsm_{machine}` i ON i.id = t.instance_id "
        f"ORDER BY t.id",
    )


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
                problems.append(
                    f"{key}: {before['to_state']} then {after['event']}: {after['from_state']} -> {after['to_state']}"
                )
        last = rows[-1]
        if (last["current_state"], last["version"]) != (last["to_state"], last["sort_key"]):
            problems.append(
                f"{key}: instance at {last['current_state']} v{last['version']}, history ends at "
                f"{last['to_state']} sort_key {last['sort_key']}"
            )
    assert problems == [], problems[:20]
    counted = {
        r["state"]: int(r["n"])
        for r in query(
            settings,
            "SELECT state, SUM(instances) AS n FROM fsm_state_counts WHERE machine = %s GROUP BY state "
            "HAVING SUM(instances) <> 0",
            (machine.name,),
        )
    }
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
            if (
                after["from_state"] != before["to_state"]
                or machine.target(after["from_state"], after["event"] or "") != after["to_state"]
            ):
                problems.append(f"{key}: {before['to_state']} then {after['from_state']} -> {after['to_state']}")
        if (rows[-1]["current_state"], rows[-1]["version"]) != (rows[-1]["to_state"], rows[-1]["sort_key"]):
            problems.append(f"{key}: the instance is not where its history ends")
    assert problems == [], problems[:20]
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT state, SUM(instances) FROM fsm_state_counts WHERE machine = %s GROUP BY state "
                "HAVING SUM(instances) <> 0",
                (machine.name,),
            )
            counted = {state: int(n) for state, n in cur.fetchall()}
    finally:
        conn.close()
    ends: dict[str, int] = {}
    for rows in by_key.values():
        ends[rows[-1]["to_state"]] = ends.get(rows[-1]["to_state"], 0) + 1
    assert counted == ends, "the state counters drifted"
    return {key: len(rows) - 1 for key, rows in by_key.items()}


def check_upgraded_chains(
    settings: Settings,
    name: str,
    before: Machine,
    after: Machine,
    states: dict[str, str] | None = None,
    *,
    from_version: int = 1,
    to_version: int = 2,
    all_moved: bool = False,
) -> dict[str, list[dict[str, Any]]]:
    """The invariants of a type some of whose instances were upgraded from ``from_version``
    (rules ``before``) to ``to_version`` (rules ``after``), ``states`` the map used; the
    history rows per instance key, in sort_key order.

    Per instance: sort_keys 1..n; most_recent on the last row only; the first row a creation
    under ``from_version``; each row starting where the one before ended; at most one move
    (exactly one with ``all_moved``): event NULL, ``to_version``, to the mapped state, its
    metadata saying so; rows before it allowed by ``before`` and recorded under
    ``from_version``, after it by ``after`` under ``to_version``; the instance at its last
    row's state and version, and at ``to_version`` exactly when it was moved. The counters
    equal a GROUP BY of the instance table."""
    import json

    states = states or {}
    rows = query(
        settings,
        f"SELECT i.instance_key, i.current_state, i.version, i.definition_version AS instance_dv, "
        f"t.sort_key, t.most_recent, t.event, t.from_state, t.to_state, t.source, t.request_id, "
        f"t.metadata, t.definition_version AS dv FROM `fsm_{name}_transitions` t "
        f"JOIN `fsm_{name}` i ON i.id = t.instance_id ORDER BY i.instance_key, t.sort_key",
    )
    by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_key[row["instance_key"]].append(row)
    problems: list[str] = []
    for key, hist in by_key.items():
        if [r["sort_key"] for r in hist] != list(range(1, len(hist) + 1)):
            problems.append(f"{key}: sort_keys {[r['sort_key'] for r in hist]}")
            continue
        if [r["sort_key"] for r in hist if r["most_recent"] == 1] != [len(hist)]:
            problems.append(f"{key}: most_recent not on the last row only")
        first = hist[0]
        if (first["event"], first["from_state"], first["dv"]) != (None, None, from_version) or first[
            "to_state"
        ] not in before.start:
            problems.append(f"{key}: the first row is not a creation under version {from_version}: {first}")
        moves = [r for r in hist if r["source"] == "upgrade"]
        if len(moves) > 1 or (all_moved and not moves):
            problems.append(f"{key}: {len(moves)} moves")
            continue
        rules, version = before, from_version
        for prev, row in itertools.pairwise(hist):
            if row["from_state"] != prev["to_state"]:
                problems.append(f"{key}: row {row['sort_key']} starts at {row['from_state']}, not {prev['to_state']}")
            if row["source"] == "upgrade":
                meta = json.loads(row["metadata"])["upgrade"]
                if (
                    row["event"] is not None
                    or row["dv"] != to_version
                    or row["to_state"] != states.get(row["from_state"], row["from_state"])
                    or (meta["from_version"], meta["to_version"], meta["from_state"], meta["to_state"])
                    != (from_version, to_version, row["from_state"], row["to_state"])
                ):
                    problems.append(f"{key}: the move {row}")
                rules, version = after, to_version
            elif rules.target(row["from_state"], row["event"] or "") != row["to_state"] or row["dv"] != version:
                problems.append(
                    f"{key}: {row['from_state']} -{row['event']}-> {row['to_state']} (version "
                    f"{row['dv']}) not a transition of version {version}"
                )
        last = hist[-1]
        if (last["current_state"], last["version"]) != (last["to_state"], last["sort_key"]):
            problems.append(
                f"{key}: instance at {last['current_state']} v{last['version']}, its history ends at "
                f"{last['to_state']} sort_key {last['sort_key']}"
            )
        if last["instance_dv"] != (to_version if moves else from_version):
            problems.append(f"{key}: at definition version {last['instance_dv']} with {len(moves)} moves")
    assert problems == [], problems[:10]
    counted = {
        r["state"]: int(r["n"])
        for r in query(
            settings,
            "SELECT state, SUM(instances) AS n FROM fsm_state_counts WHERE machine = %s GROUP BY state "
            "HAVING SUM(instances) <> 0",
            (name,),
        )
    }
    grouped = {
        r["current_state"]: int(r["n"])
        for r in query(settings, f"SELECT current_state, COUNT(*) AS n FROM `fsm_{name}` GROUP BY current_state")
    }
    assert counted == grouped, "the state counters drifted"
    return dict(by_key)
