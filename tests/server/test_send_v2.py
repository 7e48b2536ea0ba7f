"""Revision 0006's faster objects against what they replace: the edges an independent review
found, each run on the real server (the v5 trigger, send_v2, step_v2, Store.define)."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.common import errno_of, fetch, order_machine

from pyfsm import Store, UnknownMachine, db
from pyfsm.schema import install as schema
from pyfsm.schema import routines
from pyfsm.schema.upgrades import replace_machine_triggers

CONTEXT = "SELECT @fsm_event AS e, @fsm_metadata AS m, @fsm_handler AS h, @fsm_request_id AS r"


@pytest.fixture
def order(store: Store) -> Any:
    machine = order_machine()
    store.define(machine)
    return machine


def test_a_too_long_event_in_a_raw_update_leaves_no_context_behind(store: Store, order: Any, raw: Any) -> None:
    store.create(order, "long-1")
    raw.cursor().execute(
        "SET @fsm_event = REPEAT('x', 70), @fsm_handler = 'h', @fsm_metadata = '{}', @fsm_request_id = 'r'"
    )
    assert errno_of(raw, f"UPDATE `fsm_{order.name}` SET current_state = 'paid' WHERE instance_key = 'long-1'") == 1406
    assert fetch(raw, CONTEXT) == [{"e": None, "m": None, "h": None, "r": None}]
    assert store.get(order, "long-1").state == "new"


def test_counters_stay_exact_with_a_counter_row_spelled_with_trailing_spaces(
    store: Store, order: Any, raw: Any
) -> None:
    """Counter rows rebuilt from states an old trigger stored padded may keep that spelling
    (the key ignores trailing spaces); moves into and out of that state still count right."""
    created = store.create(order, "pad-1")
    shard = created.instance_id % 16
    raw.cursor().execute(
        "UPDATE fsm_state_counts SET state = 'new  ' WHERE machine = %s AND state = 'new' AND shard = %s",
        (order.name, shard),
    )
    store.send(order, "pad-1", "pay")
    store.send(order, "pad-1", "refund")  # back into new
    rows = fetch(
        raw, "SELECT SUM(instances) AS n FROM fsm_state_counts WHERE machine = %s AND state = 'new'", (order.name,)
    )
    assert int(rows[0]["n"]) == 1  # v5 before the fix: -1 (the padded row was taken for the one left)
    assert fetch(
        raw, "SELECT COUNT(*) AS n FROM fsm_state_counts WHERE machine = %s AND instances < 0", (order.name,)
    ) == [{"n": 0}]


@pytest.mark.parametrize(
    "call",
    [
        "CALL `fsm_{m}_send_v2`(NULL, 'pay', NULL, NULL, NULL, NULL, NULL, NULL)",
        "CALL `fsm_{m}_send_v2`(NULL, 'ship', NULL, NULL, 3, NULL, NULL, NULL)",
        "CALL fsm_send_v2('{m}', NULL, 'pay', NULL, NULL, NULL, NULL, NULL, NULL)",
    ],
)
def test_send_v2_refuses_a_null_key_as_send_v1_does(store: Store, order: Any, raw: Any, call: str) -> None:
    assert errno_of(raw, call.format(m=order.name)) == 31009
    assert errno_of(raw, call.format(m=order.name).replace("send_v2", "send_v1")) == 31009


def test_send_v3_answers_right_under_an_older_transition_trigger(store: Store, order: Any, dsn: str) -> None:
    """A type whose trigger is still v4 (mid-migration): the deprecated send_v3's one UPDATE
    is applied by v4, which leaves none of the @fsm_last_* send_v3 reads, and stale ones from
    an earlier call on the same connection must not be taken for this call's. (send_v4 has no
    such branch: it is only ever created beside bu_v9, test_rendered_transitions.py.)"""
    other = order_machine()
    store.define(other)
    for key in ("o-0", "o-1", "o-2"):  # another id, state and version than k-1's
        store.create(other, key)
    store.send(other, "o-2", "pay")
    store.create(order, "k-1")
    conn = db.connect(db.parse_dsn(dsn))
    try:
        # an older transition trigger needs the history triggers of its own time (v7's check
        # the guard's time too)
        replace_machine_triggers(conn, order.name, OLDER, "v5", also_lock=(f"fsm_{order.name}_transitions",))
        one = db.connect(db.parse_dsn(dsn))  # one connection: the other type's send leaves its @fsm_last_*
        try:
            fetch(one, f"CALL `fsm_{other.name}_send_v3`('o-2', 'ship', NULL, NULL, NULL, NULL, NULL, NULL)")
            (sent,) = fetch(one, f"CALL `fsm_{order.name}_send_v3`('k-1', 'pay', NULL, NULL, NULL, NULL, NULL, NULL)")
        finally:
            one.close()
        assert (sent["from_state"], sent["to_state"], sent["version"], sent["status"]) == ("new", "paid", 2, "running")
        assert sent["instance_id"] == store.get(order, "k-1").id
        assert sent["transition_id"] == store.history(order, "k-1")[-1].id
    finally:
        replace_machine_triggers(
            conn,
            order.name,
            [(new, old) for old, new in OLDER],
            schema.MACHINE_OBJECTS_VERSION,
            also_lock=(f"fsm_{order.name}_transitions",),
        )
        conn.close()


OLDER = [
    (schema.current_template("trigger_bu"), "trigger_bu_v4"),
    (schema.current_template("trigger_hbi"), "trigger_hbi_v1"),
    (schema.current_template("trigger_hbu"), "trigger_hbu_v2"),
]


def test_define_brings_an_older_object_set_up_to_date(store: Store, order: Any, raw: Any) -> None:
    """A type an older pyfsm installed (without the send procedure the Store calls, marked v4)
    works again after define()."""
    store.create(order, "old-1")
    for routine in (routines.SEND, routines.FIRE):  # the send procedures the Store calls
        raw.cursor().execute(f"DROP PROCEDURE `{routine.name_for(order.name)}`")
    raw.cursor().execute("UPDATE fsm_machines SET objects_version = 'v4' WHERE machine = %s", (order.name,))
    with pytest.raises(UnknownMachine, match=f"pyfsm sync {order.name}"):
        store.send(order, "old-1", "pay")
    assert not store.define(order).changed
    assert store.send(order, "old-1", "pay").to_state == "paid"
    assert fetch(raw, "SELECT objects_version FROM fsm_machines WHERE machine = %s", (order.name,)) == [
        {"objects_version": schema.MACHINE_OBJECTS_VERSION}
    ]


def test_step_v2_extends_a_claim_without_a_due_time(store: Store, order: Any, raw: Any) -> None:
    """A claimed run whose due_at is NULL gets one when its claimer goes on."""
    store.create(order, "due-1")
    raw.cursor().execute(f"CALL fsm_claim_v1('{order.name}', 'w:1', 1, 60, 'due-1')")
    iid = store.get(order, "due-1").id
    raw.cursor().execute("UPDATE fsm_runs SET due_at = NULL WHERE machine = %s AND instance_id = %s", (order.name, iid))
    rows = fetch(
        raw,
        f"CALL `fsm_{order.name}_step_v2`('due-1', 'w:1', 1, '[{{\"event\": \"pay\"}}]', 'running', 1, 60, NULL, NULL)",
    )
    assert rows[0]["continue"] == 1 and rows[0]["state"] == "paid"
    [run] = fetch(
        raw,
        "SELECT due_at > UTC_TIMESTAMP(6) AS later FROM fsm_runs WHERE machine = %s AND instance_id = %s",
        (order.name, iid),
    )
    assert run["later"] == 1


def test_a_step_without_an_event_is_refused_and_writes_nothing(store: Store, order: Any, raw: Any) -> None:
    store.create(order, "noev-1")
    raw.cursor().execute(f"CALL fsm_claim_v1('{order.name}', 'w:2', 1, 60, 'noev-1')")
    call = (
        f'CALL `fsm_{order.name}_step_v2`(\'noev-1\', \'w:2\', 1, \'[{{"handler": "h", "data": {{"a": 1}}}}]\', '
        "'running', 1, 60, NULL, NULL)"
    )
    assert errno_of(raw, call) == 31009
    got = store.get(order, "noev-1")
    assert (got.state, got.version, got.data) == ("new", 1, {})
    assert fetch(raw, CONTEXT) == [{"e": None, "m": None, "h": None, "r": None}]
