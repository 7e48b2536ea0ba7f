"""The invariants after connection faults (test_fault_proxy; test_send_many and
test_session_context check them too): every instance's history a valid chain, the counters
and the outbox in step, and, given the calls as their callers saw them, each acknowledged
call applied exactly once and nothing applied that nobody sent."""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections import Counter, defaultdict
from typing import Any

import pymysql

from pyfsm.db import Settings


@dataclasses.dataclass
class Call:
    """One send as its caller saw it: ok, failed (a pyfsm error from the server: nothing
    applied), unknown (DatabaseUnavailable: the connection died, the outcome is unknown) or
    raw (anything that is not a pyfsm error: a finding)."""

    caller: str
    seq: int
    key: str
    event: str
    call_id: str
    request_id: str | None
    outcome: str
    error: str | None = None
    replayed: bool = False
    attempts: int = 1


def direct(settings: Settings) -> pymysql.connections.Connection:
    """A plain connection to the server itself, not through the proxy."""
    return pymysql.connect(**settings.connect_kwargs(), cursorclass=pymysql.cursors.DictCursor)


def check_invariants(
    settings: Settings,
    machine: str,
    calls: list[Call] | None = None,
    *,
    keys: set[str] | None = None,
    exact_version: bool = True,
) -> dict[str, list[dict[str, Any]]]:
    """Check the invariants of every instance of ``machine`` (read directly, not through the
    proxy) and, with ``calls``, that history equals the acknowledged calls (each call's
    metadata carries its ``call_id``). Returns each instance's history by key.

    ``keys``: check only these instances (the counters are checked for the whole type).
    ``exact_version``: the instance's version equals its last sort_key (only transitions
    moved it); off for engine-run instances, whose status changes also count a version.
    """
    problems: list[str] = []
    conn = direct(settings)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT id, instance_key, current_state, version FROM `fsm_{machine}`")
            instances = list(cur.fetchall())
            cur.execute(
                "SELECT id, instance_id, sort_key, most_recent, event, from_state, to_state, "
                f"definition_version, metadata, request_id FROM `fsm_{machine}_transitions` "
                "ORDER BY instance_id, sort_key"
            )
            history = list(cur.fetchall())
            cur.execute("SELECT version, from_state, event, to_state FROM fsm_rules WHERE machine = %s", (machine,))
            rules = {(r["version"], r["from_state"], r["event"], r["to_state"]) for r in cur.fetchall()}
            cur.execute("SELECT version, state FROM fsm_states WHERE machine = %s AND is_start", (machine,))
            starts = {(r["version"], r["state"]) for r in cur.fetchall()}
            cur.execute(
                "SELECT state, SUM(instances) AS n FROM fsm_state_counts WHERE machine = %s GROUP BY state", (machine,)
            )
            counted = {r["state"]: int(r["n"]) for r in cur.fetchall() if int(r["n"])}
            cur.execute("SELECT kafka_topic FROM `fsm_" + machine + "` WHERE kafka_topic IS NOT NULL LIMIT 1")
            has_topic = bool(cur.fetchall())
            cur.execute("SELECT transition_id FROM fsm_outbox WHERE machine = %s", (machine,))
            outbox = Counter(r["transition_id"] for r in cur.fetchall())
    finally:
        conn.close()
    actual = dict(Counter(i["current_state"] for i in instances))
    if counted != actual:
        problems.append(f"fsm_state_counts {counted} != instances per state {actual}")
    by_instance: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for h in history:
        by_instance[h["instance_id"]].append(h)
    if keys is not None:
        missing = keys - {i["instance_key"] for i in instances}
        if missing:
            problems.append(f"no instances {sorted(missing)}")
        instances = [i for i in instances if i["instance_key"] in keys]
        by_instance = {i["id"]: by_instance.pop(i["id"], []) for i in instances}
        history = [h for rows in by_instance.values() for h in rows]
    by_key: dict[str, list[dict[str, Any]]] = {}
    for inst in instances:
        rows = by_instance.pop(inst["id"], [])
        key = inst["instance_key"]
        by_key[key] = rows
        if not rows:
            problems.append(f"{key}: no history")
            continue
        recent = [h for h in rows if h["most_recent"] == 1]
        if len(recent) != 1 or recent[0] is not rows[-1]:
            problems.append(
                f"{key}: most_recent rows {[h['sort_key'] for h in recent]}, last is {rows[-1]['sort_key']}"
            )
        if any(h["most_recent"] not in (1, None) for h in rows):
            problems.append(f"{key}: most_recent not 1 or NULL")
        keys_by_id = [h["sort_key"] for h in sorted(rows, key=lambda h: h["id"])]
        if any(b <= a for a, b in itertools.pairwise(keys_by_id)):
            problems.append(f"{key}: sort_key not strictly increasing in write order: {keys_by_id}")
        first = rows[0]
        if (
            first["event"] is not None
            or first["from_state"] is not None
            or (first["definition_version"], first["to_state"]) not in starts
        ):
            problems.append(f"{key}: first history row is not a creation in a start state: {first}")
        for before, h in itertools.pairwise(rows):
            if (h["definition_version"], h["from_state"], h["event"], h["to_state"]) not in rules:
                problems.append(
                    f"{key}: #{h['sort_key']} {h['from_state']} -{h['event']}-> {h['to_state']} not allowed"
                )
            if h["from_state"] != before["to_state"]:
                problems.append(
                    f"{key}: #{h['sort_key']} leaves {h['from_state']} but #{before['sort_key']} "
                    f"entered {before['to_state']}"
                )
        last = rows[-1]
        if inst["current_state"] != last["to_state"]:
            problems.append(f"{key}: instance in {inst['current_state']}, history ends in {last['to_state']}")
        if (inst["version"] != last["sort_key"]) if exact_version else (inst["version"] < last["sort_key"]):
            problems.append(f"{key}: instance version {inst['version']}, last sort_key {last['sort_key']}")
    if by_instance:
        problems.append(f"history rows of instances that do not exist: {sorted(by_instance)}")
    if has_topic:
        ids = Counter(h["id"] for h in history)
        if keys is not None:
            outbox = Counter({t: n for t, n in outbox.items() if t in ids})
        if set(outbox) != set(ids) or any(n != 1 for n in outbox.values()):
            problems.append(
                f"outbox rows do not match history one to one: {len(outbox)} rows for {len(ids)} "
                f"history rows, missing {sorted(set(ids) - set(outbox))[:10]}"
            )
    if calls is not None:
        problems += _check_calls(by_key, calls)
    assert not problems, f"{len(problems)} invariant violations:\n" + "\n".join(problems[:40])
    return by_key


def _check_calls(by_key: dict[str, list[dict[str, Any]]], calls: list[Call]) -> list[str]:
    problems: list[str] = []
    calls_by_id = {c.call_id: c for c in calls}
    applied: dict[str, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    for key, rows in by_key.items():
        for h in rows[1:]:
            meta = h["metadata"] if isinstance(h["metadata"], dict) else json.loads(h["metadata"] or "{}")
            call_id = meta.get("call")
            if call_id is None or call_id not in calls_by_id:
                problems.append(f"{key}: #{h['sort_key']} was applied by no call anyone made: {meta}")
                continue
            applied[call_id].append((key, h))
    for call in calls:
        rows = applied.get(call.call_id, [])
        if len(rows) > 1:
            problems.append(f"call {call.call_id} applied {len(rows)} times")
        if call.outcome == "ok" and len(rows) != 1:
            problems.append(f"call {call.call_id} was acknowledged but is in history {len(rows)} times")
        if call.outcome == "failed" and rows:
            problems.append(f"call {call.call_id} failed with {call.error} but was applied")
        for key, h in rows:
            if (key, h["event"], h["request_id"]) != (call.key, call.event, call.request_id):
                problems.append(
                    f"call {call.call_id} ({call.key} {call.event} {call.request_id}) applied as "
                    f"({key} {h['event']} {h['request_id']})"
                )
    # one caller's acknowledged calls of one instance are in its history in the order it made them
    order: dict[tuple[str, str], list[int]] = defaultdict(list)
    for call in sorted(calls, key=lambda c: (c.caller, c.seq)):
        if call.outcome == "ok" and len(applied.get(call.call_id, [])) == 1:
            order[(call.caller, call.key)].append(applied[call.call_id][0][1]["sort_key"])
    for (caller, key), sort_keys in order.items():
        if sort_keys != sorted(sort_keys):
            problems.append(f"{caller}'s calls to {key} are in history out of order: {sort_keys}")
    return problems
