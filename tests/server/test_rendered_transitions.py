"""Each type's transition trigger rendered for that type, and send_v4 (issue 36, revision 0022).

fsm_{type}_bu_v13 (bu_v9 until revision 0023, bu_v10 until 0024, bu_v11 until 0028, bu_v12 until 0029) carries the rules of the definition versions
that hold instances (and of the current one) inline; any other version is looked up in
fsm_rules, so a version a DBA defines without `pyfsm sync` is enforced all the same, and fsm_define_v7 says tables_ready = 0 until
the type is synced. On MySQL the encoded-surrogate checks are left to the server's utf8mb4
(test_invalid_utf8.py checks the refusals); on MariaDB they stay. send_v4 answers as send_v3
(test_unknown_events.py compares every refusal); here: what it leaves behind.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers.common import errno_of, fetch, is_mariadb, order_machine
from pymysql.constants import SERVER_STATUS

from pyfsm import Machine, Store, TransitionNotAllowed
from pyfsm.schema.rendering import read_rules, render_transition_trigger, spans, valid_name
from pyfsm.schema.resources import read_sql

TEMPLATE = "machine/triggers/fsm_{type}_bu_v13.sql"
CONTEXT = "SELECT @fsm_event AS e, @fsm_metadata AS m, @fsm_handler AS h, @fsm_request_id AS r, @fsm_source AS s"


def trigger_text(raw: Any, machine: str) -> str:
    rows = fetch(
        raw,
        "SELECT action_statement AS body FROM information_schema.triggers "
        "WHERE trigger_schema = DATABASE() AND trigger_name = %s",
        (f"fsm_{machine}_bu_v13",),
    )
    assert len(rows) == 1
    body = rows[0]["body"]
    return body.decode() if isinstance(body, bytes) else str(body)


def machine_row(raw: Any, machine: str) -> dict[str, Any]:
    return fetch(
        raw,
        "SELECT current_version, rendered_version, rendered_digest FROM fsm_machines WHERE machine = %s",
        (machine,),
    )[0]


def dba_define(raw: Any, machine: Machine) -> dict[str, Any]:
    return fetch(raw, "CALL fsm_define_v8(%s, %s)", (machine.name, machine.to_json()))[0]


def test_the_template_marks_only_spans_pyfsm_renders() -> None:
    assert sorted(set(spans(read_sql(TEMPLATE)))) == ["event_data", "rules_by_event", "rules_by_target", "utf8"]


def test_a_rule_that_is_not_a_name_never_reaches_sql() -> None:
    for hostile in ("pay'; DROP TABLE x; --", "pay\\", "Pay", "pay/ship", "p" * 65, ""):
        with pytest.raises(ValueError):
            valid_name(hostile)


def test_the_rules_are_inline_and_the_server_decides_the_utf8_checks(store: Store, order: Machine, raw: Any) -> None:
    body = trigger_text(raw, order.name)
    assert "WHEN 'pay' THEN SET v_to = 'paid', v_final = 0;" in body
    assert "WHEN 'delivered' THEN SET v_n = 1, v_event = 'deliver', v_to = 'delivered', v_final = 1;" in body
    assert "FROM fsm_rules" in body  # the fallback of every CASE
    # MariaDB's utf8mb4 stores encoded surrogates, so the trigger refuses them; MySQL's refuses them itself
    assert ("fsm_valid_utf8_v1" in body) is is_mariadb(raw)
    row = machine_row(raw, order.name)
    assert row["rendered_version"] == row["current_version"] == 1
    assert fetch(raw, "SELECT fsm_rendered_ready_v1(%s) AS ok", (order.name,)) == [{"ok": 1}]


def test_a_version_a_dba_defines_is_enforced_before_and_after_sync(store: Store, raw: Any) -> None:
    """A new version defined with fsm_define_v7 and no sync: tables_ready 0, its instances are
    checked against fsm_rules (allowed and refused as the definition says); after sync the
    trigger carries its rules, tables_ready is 1, and the instances of version 1 still move."""
    first = order_machine()
    store.define(first)
    store.create(first, "v1-a")
    second = Machine(
        name=first.name,
        states=[*first.states, "returned"],
        start=["new"],
        final=["delivered", "cancelled", "returned"],
        transitions=[
            *[(t.event, list(t.sources), t.target) for t in first.transitions],
            ("send_back", "shipped", "returned"),
        ],
    )
    answer = dba_define(raw, second)
    assert (answer["version"], answer["changed"], answer["tables_ready"]) == (2, 1, 0)
    before = trigger_text(raw, first.name)
    assert "'send_back'" not in before
    store.send(first, "v2-a", "pay")  # a new instance: version 2, through the fallback
    store.send(first, "v2-a", "ship")
    assert store.send(first, "v2-a", "send_back").to_state == "returned"
    store.send(first, "v1-a", "pay")
    store.send(first, "v1-a", "ship")
    with pytest.raises(TransitionNotAllowed):  # version 1 has no such rule
        store.send(first, "v1-a", "send_back")
    assert fetch(raw, "SELECT fsm_rendered_ready_v1(%s) AS ok", (first.name,)) == [{"ok": 0}]
    store.sync(first.name)
    after = trigger_text(raw, first.name)
    assert "WHEN 'send_back' THEN SET v_to = 'returned', v_final = 1;" in after
    assert fetch(raw, "SELECT fsm_rendered_ready_v1(%s) AS ok", (first.name,)) == [{"ok": 1}]
    assert dba_define(raw, second) == {"machine": first.name, "version": 2, "changed": 0, "tables_ready": 1}
    store.create(first, "v2-b")
    store.send(first, "v2-b", "pay")
    store.send(first, "v2-b", "ship")
    assert store.send(first, "v2-b", "send_back").to_state == "returned"
    assert store.send(first, "v1-a", "deliver").to_state == "delivered"
    assert store.counts(first) == {"delivered": 1, "returned": 2}


def test_sync_renders_again_only_when_the_text_would_differ(store: Store, order: Machine, raw: Any) -> None:
    first = machine_row(raw, order.name)
    created = fetch(
        raw,
        "SELECT created AS c FROM information_schema.triggers WHERE trigger_schema = DATABASE() AND trigger_name = %s",
        (f"fsm_{order.name}_bu_v13",),
    )
    store.sync(order.name)
    assert machine_row(raw, order.name) == first
    assert (
        fetch(
            raw,
            "SELECT created AS c FROM information_schema.triggers WHERE trigger_schema = DATABASE() "
            "AND trigger_name = %s",
            (f"fsm_{order.name}_bu_v13",),
        )
        == created
    )


def test_the_rendering_matches_what_is_installed(store: Store, order: Machine, raw: Any) -> None:
    """The trigger on the table is the template rendered for the rules read now (nothing else
    edits it), byte for byte up to the server's own trimming."""
    expected = render_transition_trigger(read_sql(TEMPLATE), read_rules(raw, order.name))
    body = expected[expected.index("BEGIN") :]
    assert trigger_text(raw, order.name).strip() == body.strip()


def test_send_v4_leaves_no_context_and_answers_from_the_trigger(store: Store, order: Machine, raw: Any) -> None:
    fetch(raw, f"CALL `fsm_{order.name}_create_v1`('c-1', NULL, NULL, NULL, NULL, NULL)")
    (row,) = fetch(
        raw, f"CALL `fsm_{order.name}_send_v4`('c-1', 'pay', NULL, '{{\"by\": \"dba\"}}', 1, NULL, 'h', NULL)"
    )
    history = fetch(
        raw,
        f"SELECT id, sort_key, handler, metadata FROM `fsm_{order.name}_transitions` "
        "WHERE most_recent = 1 AND instance_id = %s",
        (row["instance_id"],),
    )
    assert (row["transition_id"], row["version"]) == (history[0]["id"], history[0]["sort_key"])
    assert (row["from_state"], row["to_state"], row["status"], row["created"], row["replayed"]) == (
        "new",
        "paid",
        "running",
        0,
        0,
    )
    assert history[0]["handler"] == "h"
    assert fetch(raw, CONTEXT) == [dict.fromkeys("emrhs")]
    # refused with the row found (paused), with none found (version), and a name that is not one
    fetch(raw, f"CALL fsm_pause_v1('{order.name}', 'c-1')")
    for args, errno in (
        (("c-1", "ship", None), 31011),
        (("c-1", "ship", 7), 31007),
        (("c-1", "Ship", None), 31009),
        (("c-404", "ship", None), 31003),
    ):
        assert errno_of(raw, f"CALL `fsm_{order.name}_send_v4`(%s, %s, NULL, NULL, %s, NULL, 'h', NULL)", args) == errno
        assert fetch(raw, CONTEXT) == [dict.fromkeys("emrhs")], args
    # inside the caller's transaction: 31016, and the caller's transaction is left open
    raw.begin()
    try:
        assert (
            errno_of(raw, f"CALL `fsm_{order.name}_send_v4`('c-1', 'ship', NULL, NULL, NULL, NULL, NULL, NULL)")
            == 31016
        )
        assert raw.server_status & SERVER_STATUS.SERVER_STATUS_IN_TRANS
        assert (
            errno_of(raw, f"CALL `fsm_{order.name}_send_v4`('c-1', 'Ship', NULL, NULL, NULL, NULL, NULL, NULL)")
            == 31009
        )  # a bad argument is told first, as send_v3 tells it
    finally:
        raw.rollback()


def test_the_inline_rules_answer_as_the_lookup_did(store: Store, order: Machine, raw: Any) -> None:
    """Byte for byte as fsm_rules was read: an event with a trailing space or another case is
    not the rule's (31005, nothing written); a raw UPDATE to the new state spelt with trailing
    spaces takes its one rule and stores the rule's spelling; one to a state no rule reaches is
    31005."""
    store.create(order, "b-1")
    table = f"`fsm_{order.name}`"
    before = fetch(raw, f"SELECT current_state, version FROM {table} WHERE instance_key = 'b-1'")
    for event in ("pay ", "Pay", "ship", "nope"):
        raw.cursor().execute("SET @fsm_event = %s", (event,))
        assert errno_of(raw, f"UPDATE {table} SET data = data WHERE instance_key = 'b-1'") == 31005, event
    assert fetch(raw, f"SELECT current_state, version FROM {table} WHERE instance_key = 'b-1'") == before
    assert errno_of(raw, f"UPDATE {table} SET current_state = 'shipped' WHERE instance_key = 'b-1'") == 31005
    raw.cursor().execute(f"UPDATE {table} SET current_state = 'paid  ' WHERE instance_key = 'b-1'")
    assert fetch(raw, f"SELECT current_state FROM {table} WHERE instance_key = 'b-1'") == [{"current_state": "paid"}]
    assert [(h.event, h.to_state) for h in store.history(order, "b-1")] == [(None, "new"), ("pay", "paid")]
    assert store.send(order, "b-1", "ship").to_state == "shipped"
