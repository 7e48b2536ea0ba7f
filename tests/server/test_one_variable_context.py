"""fsm_{type}_send_v6 and send_many_v4 (revision 0030): the context in one variable.

They hand the transition trigger (bu_v14) their whole context, event, handler, request id,
metadata and whether the counters are left to the caller, packed into @fsm_source 'ctx/...',
and read its answer from @fsm_last, where send_v5 and send_many_v3 (through apply_send_v1) set
and cleared a variable each. Their answers must not change: every case here runs through the
new procedure and the one it replaces, on twin instances in the same state, and the answers,
the rows written (history's handler, metadata, request id and source included) and the
session left behind are compared. The texts packed hold what a separator would trip on: '/',
digits, multibyte letters, a 128-character handler.
"""

from __future__ import annotations

import json
from typing import Any

from helpers.common import answer, fetch, order_machine

from pyfsm import Store

#: every variable of a transition's context, the packed one included
CONTEXT = (
    "SELECT @fsm_event AS e, @fsm_metadata AS m, @fsm_handler AS h, @fsm_request_id AS r, "
    "@fsm_source AS s, @fsm_guard AS g, @fsm_count_later AS c"
)
CLEAR = dict.fromkeys("emhrsgc")
SEND = "CALL `fsm_{m}_{p}`(%s, %s, %s, %s, %s, %s, %s, %s, %s)"
HANDLER = "h/1/2//é" + "ü" * 120  # 128 characters, separators and digits in it


def written(raw: Any, machine: str, key: str) -> list[tuple[Any, ...]]:
    """The instance of ``key`` and its history, ids left out, request ids without the twin's
    prefix (a request id is the type's: each twin has its own, '<prefix>:...')."""
    instance = fetch(
        raw, f"SELECT current_state, version, status, data FROM `fsm_{machine}` WHERE instance_key = %s", (key,)
    )
    history = fetch(
        raw,
        f"SELECT t.sort_key, t.event, t.from_state, t.to_state, t.handler, t.metadata, t.request_id, t.source "
        f"FROM `fsm_{machine}_transitions` t JOIN `fsm_{machine}` i ON i.id = t.instance_id "
        "WHERE i.instance_key = %s ORDER BY t.sort_key",
        (key,),
    )
    for row in history:
        row["request_id"] = row["request_id"] and row["request_id"].split(":", 1)[1]
    return [tuple(r.values()) for r in instance + history]


def test_send_v6_answers_every_call_as_send_v5(store: Store, raw: Any) -> None:
    machine = order_machine()
    store.define(machine)
    name = machine.name
    for prefix in ("a", "b"):
        for key in ("1", "2", "paused"):
            store.create(machine, f"{prefix}-{key}")
        store.pause(machine, f"{prefix}-paused")
    meta = json.dumps({"note": "a/b/3/", "ü": [1, "/"]})
    # (key suffix, event, data, metadata, expected version, request id, handler, lookup key, data patch)
    cases: list[tuple[Any, ...]] = [
        ("1", "pay", None, meta, None, None, HANDLER, None, None),  # every option that travels packed
        ("1", "ship", None, None, 2, "{}:r/1/é", None, None, None),  # a request id, its own path
        ("1", "ship", None, None, None, "{}:r/1/é", None, None, None),  # repeated: a replay (same answer)
        ("1", "deliver", None, None, None, "{}:r/1/é", None, None, None),  # used for another event (31010)
        ("1", "deliver", None, "{}", 9, None, "h", None, None),  # version conflict (31007)
        ("1", "deliver", None, None, None, None, None, None, '{"x": "/"}'),  # a patch, nothing else
        ("2", "ship", None, meta, None, None, "h", None, None),  # not allowed (31005)
        ("2", "pay", '{"d": 1}', '{"a": 1}', 1, "{}:r-2", "h2", None, None),  # data, request id and the rest
        ("2", "ship", None, "[1]", None, None, None, None, None),  # metadata not an object (31008)
        ("paused", "pay", None, meta, None, None, "h", None, None),  # paused (31011)
        ("new", "pay", None, meta, None, None, HANDLER, "lk/1", None),  # created, then moved
        ("new2", "pay", None, None, 0, "{}:r-3", "h", None, '{"p": 1}'),  # created with a request id
        ("none", "ship", None, meta, None, None, None, None, None),  # no start state allows it (31003)
        ("1", "nope", None, meta, None, None, "h", None, None),  # not an event of the type (31028)
    ]
    answers = []
    for suffix, event, *options in cases:
        got = {}
        for prefix, procedure in (("a", "send_v6"), ("b", "send_v5")):
            args = [o.format(prefix) if isinstance(o, str) and o.startswith("{}:") else o for o in options]
            got[procedure] = answer(raw, SEND.format(m=name, p=procedure), (f"{prefix}-{suffix}", event, *args))
            assert fetch(raw, CONTEXT) == [CLEAR], (procedure, suffix, event)
        assert got["send_v6"] == got["send_v5"], (suffix, event)
        assert written(raw, name, f"a-{suffix}") == written(raw, name, f"b-{suffix}"), (suffix, event)
        answers.append(got["send_v6"])
    # what the cases were for
    assert [a[1] if a[0] == "errno" else a[1]["to_state"] for a in answers] == [
        "paid",
        "shipped",
        "shipped",
        31010,
        31007,
        "delivered",
        31005,
        "paid",
        31008,
        31011,
        "paid",
        "paid",
        31003,
        31028,
    ]
    assert answers[2][1]["replayed"] == 1 and answers[10][1]["created"] == 1
    history = written(raw, name, "a-1")[1:]
    assert [(h[1], h[4], h[5] and json.loads(h[5]), h[6], h[7]) for h in history] == [
        (None, None, {}, None, "procedure"),  # Store.create
        ("pay", HANDLER, json.loads(meta), None, "procedure"),
        ("ship", None, {}, "r/1/é", "procedure"),
        ("deliver", None, {}, None, "procedure"),
    ]
    assert json.loads(written(raw, name, "a-1")[0][3]) == {"x": "/"}


def test_send_many_v4_answers_as_send_many_v3(store: Store, raw: Any) -> None:
    machine = order_machine()
    store.define(machine)
    name = machine.name
    for prefix in ("a", "b"):
        for key in ("1", "2", "3"):
            store.create(machine, f"{prefix}-{key}")
        store.pause(machine, f"{prefix}-3")

    def items(prefix: str) -> str:
        return json.dumps(
            [
                {"key": f"{prefix}-1", "event": "pay", "metadata": {"n": "/1/"}, "handler": HANDLER},
                {"key": f"{prefix}-1", "event": "ship", "request_id": f"{prefix}:m/1"},
                {"key": f"{prefix}-1", "event": "ship", "request_id": f"{prefix}:m/1"},  # repeated
                {"key": f"{prefix}-2", "event": "ship"},  # not allowed (31005)
                {"key": f"{prefix}-2", "event": "pay", "data_patch": {"p": 1}, "expected_version": 1},
                {"key": f"{prefix}-3", "event": "pay"},  # paused (31011)
                {"key": f"{prefix}-4", "event": "pay", "handler": "h", "lookup_key": "l/4"},  # created
                {"key": f"{prefix}-2", "event": "cancel", "metadata": [1]},  # metadata not an object
            ]
        )

    rows = {}
    for prefix, procedure in (("a", "send_many_v4"), ("b", "send_many_v3")):
        rows[procedure] = [
            {k: (v.replace(f"{prefix}-", "") if k in ("instance_key", "message") and v else v) for k, v in r.items()}
            for r in fetch(raw, f"CALL `fsm_{name}_{procedure}`(%s)", (items(prefix),))
        ]
        assert fetch(raw, CONTEXT) == [CLEAR], procedure
    strip = [{k: v for k, v in r.items() if k not in ("transition_id", "instance_id")} for r in rows["send_many_v4"]]
    assert strip == [
        {k: v for k, v in r.items() if k not in ("transition_id", "instance_id")} for r in rows["send_many_v3"]
    ]
    assert [r["errno"] or r["to_state"] for r in strip] == [
        "paid",
        "shipped",
        "shipped",  # a repeat of request id m/1: replayed
        31005,
        "paid",
        31011,
        "paid",
        31008,
    ]
    for key in ("1", "2", "3", "4"):
        assert written(raw, name, f"a-{key}") == written(raw, name, f"b-{key}"), key
    # the counters, left to the call by the packed context, equal a GROUP BY
    counted = fetch(
        raw,
        "SELECT TRIM(TRAILING ' ' FROM state) AS state, SUM(instances) AS n FROM fsm_state_counts "
        "WHERE machine = %s GROUP BY state HAVING n <> 0 ORDER BY state",
        (name,),
    )
    grouped = fetch(
        raw, f"SELECT current_state AS state, COUNT(*) AS n FROM `fsm_{name}` GROUP BY current_state ORDER BY state", ()
    )
    assert [(r["state"], int(r["n"])) for r in counted] == [(r["state"], int(r["n"])) for r in grouped]


def test_a_packed_context_a_failed_call_left_is_taken_by_no_other_call(store: Store, raw: Any) -> None:
    """A call killed after it set @fsm_source and before its UPDATE leaves 'ctx/...' behind: the
    next call of any procedure sets its own, so the stale one steers nothing of pyfsm's."""
    machine = order_machine()
    store.define(machine)
    name = machine.name
    for key in ("k-1", "k-2", "k-3"):
        store.create(machine, key)
    stale = "SET @fsm_source = 'ctx/p1/6/5//2/cancelstale{}'"
    for call, args in (
        (f"CALL `fsm_{name}_fire_v2`(%s, 'pay')", ("k-1",)),
        (SEND.format(m=name, p="send_v6"), ("k-2", "pay", None, '{"a": 1}', None, None, None, None, None)),
        (f"CALL `fsm_{name}_send_many_v4`(%s)", (json.dumps([{"key": "k-3", "event": "pay"}]),)),
    ):
        raw.cursor().execute(stale)
        fetch(raw, call, args)
        assert fetch(raw, CONTEXT) == [CLEAR], call
    for key in ("k-1", "k-2", "k-3"):
        last = store.history(machine, key)[-1]
        assert (last.event, last.to_state, last.handler) == ("pay", "paid", None), key
    assert store.counts(machine) == {"paid": 3}


def test_a_timer_of_a_type_whose_trigger_is_older_is_held_not_fired(store: Store, raw: Any) -> None:
    """fsm_fire_timers_v4 hands the context in the form bu_v14 takes; a type whose objects are
    behind (an older trigger, `pyfsm sync` not run) would apply nothing. Its timer is held
    with 31031 (SyncNeeded), the instance left alone, and fires once the type is synced."""
    from pyfsm.schema.resources import render

    machine = order_machine()
    store.define(machine)
    name = machine.name
    store.create(machine, "t-1")
    store.send_at(machine, "t-1", "pay", after=3600)
    raw.cursor().execute(
        "UPDATE fsm_timers SET due_at = due_at - INTERVAL 2 HOUR, fire_at = fire_at - INTERVAL 2 HOUR WHERE machine = %s",
        (name,),
    )
    with raw.cursor() as cur:  # revision 0029's trigger in place of bu_v14, as on a type not synced
        cur.execute(f"DROP TRIGGER `fsm_{name}_bu_v14`")
        cur.execute(render("trigger_bu_v13", name))
    try:
        (held,) = fetch(raw, "CALL fsm_fire_timers_v4('t-old', 10, 30)", ())
        assert (held["outcome"], held["errno"]) == ("held", 31031)
        assert fetch(raw, CONTEXT) == [CLEAR]
        assert store.get(machine, "t-1").state == "new"
        assert [h.event for h in store.history(machine, "t-1")] == [None]
        (timer,) = fetch(raw, "SELECT last_errno, holds FROM fsm_timers WHERE machine = %s", (name,))
        assert (timer["last_errno"], timer["holds"]) == (31031, 1)
    finally:
        with raw.cursor() as cur:
            cur.execute(f"DROP TRIGGER IF EXISTS `fsm_{name}_bu_v13`")
        store.sync(name)
    raw.cursor().execute(
        "UPDATE fsm_timers SET fire_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE machine = %s", (name,)
    )
    (fired,) = fetch(raw, "CALL fsm_fire_timers_v4('t-old', 10, 30)", ())
    assert fired["outcome"] == "fired"
    assert store.get(machine, "t-1").state == "paid"
