"""The least a transition can cost the server in pyfsm's design, for bench_transitions and bench_instructions.

A type whose transition trigger is the current one reduced to what applying a transition in
a trigger and keeping pyfsm's history take: taking and clearing the procedure's context, the
rule, the most_recent flip, the history row with its guard (so the history triggers stay),
the version, and the values left for the caller. Every check (arguments, identity columns,
status, data, locks, pause, metadata, UTF-8), the state counters, the outbox, the waking of
a waiting instance, request ids and the bookkeeping branch are taken out, and the procedure
is five statements. No design that applies transitions in a trigger for every writer and
keeps that history can cost less; it is a yardstick, not something to run.
"""

from __future__ import annotations

from typing import Any

from pyfsm.schema import install as schema
from pyfsm.schema.ddl import object_name
from pyfsm.schema.resources import render


def cut(text: str, start: str, end: str) -> str:
    """``text`` without the part from ``start`` up to (not including) ``end``; both must be there."""
    i = text.index(start)
    return text[:i] + text[text.index(end, i) :]


def without_counters(trigger: str) -> str:
    """The current transition trigger without the state counters."""
    return cut(trigger, "    IF NOT (v_count_later OR", "    -- @fsm_guard lets")


def unchecked_trigger(trigger: str) -> str:
    """The current transition trigger without its checks (identity columns, status, data,
    UTF-8, pause, locks, metadata): what they cost, beside the full one. Counters, outbox and
    waking stay. (With the first test gone v_upgrade stays 0: the upgrade branch is never taken.)"""
    t = cut(trigger, "  -- One test for the checks every update passes", "  IF v_upgrade THEN")
    return cut(t, "    -- one test for the checks a transition passes", "    IF v_event IS NOT NULL THEN\n")


def floor_trigger(trigger: str) -> str:
    """The current transition trigger reduced as the module's docstring says."""
    t = unchecked_trigger(trigger)
    # no upgrade branch: the transition branch becomes the first
    start, end = t.index("  IF v_upgrade THEN"), t.index("  ELSEIF v_event IS NOT NULL OR")
    t = t[:start] + "  IF" + t[end + len("  ELSEIF") :]
    t = cut(t, "    IF v_final OR OLD.status = 'waiting' THEN", "    -- @fsm_guard lets")
    t = cut(t, "    IF NEW.kafka_topic IS NOT NULL THEN", "  ELSEIF NOT")
    return cut(t, "  ELSEIF NOT", "  END IF;\nEND")


def floor_procedure(machine: str) -> str:
    """``fsm_{type}_send_floor(key, event)``: the context (as fire_v1 sets it), the one UPDATE, the
    commit, the answer."""
    return f"""CREATE PROCEDURE `fsm_{machine}_send_floor`(IN p_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_event TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  SET @fsm_event = p_event, @fsm_source = 'fire';
  UPDATE `fsm_{machine}` SET data = data WHERE instance_key = p_key;
  COMMIT;
  SELECT @fsm_last_transition_id AS transition_id, @fsm_last_instance_id AS instance_id, @fsm_last_from AS from_state,
         @fsm_last_to AS to_state, @fsm_last_version AS version, @fsm_last_status AS status, 0 AS created,
         0 AS replayed;
END"""


def replace_transition_trigger(conn: Any, machine: str, text: str) -> None:
    """Put ``text`` (a rendered transition trigger) in place of ``machine``'s current one (a
    benchmark's own type: no lock, nothing runs on it meanwhile)."""
    bu = schema.current_template("trigger_bu")
    with conn.cursor() as cur:
        cur.execute(f"DROP TRIGGER `{object_name(bu, machine)}`")
    schema.execute_ddl(conn, [text])


def install_floor(conn: Any, machine: str) -> None:
    """Make ``machine`` (already defined) the design floor: its trigger and send_floor procedure."""
    bu = schema.current_template("trigger_bu")
    replace_transition_trigger(conn, machine, floor_trigger(render(bu, machine)))
    schema.execute_ddl(conn, [floor_procedure(machine)])
