"""pyfsm.limits states the sizes the SQL declares: the per-type tables' columns, the
procedures' parameters and their range checks say the same numbers."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.common import errno_of, fetch

from pyfsm import InvalidArgument, Machine, Store, limits
from pyfsm.schema.resources import read_sql


def column_chars(raw: Any, table: str, column: str) -> int:
    rows = fetch(
        raw,
        "SELECT character_maximum_length AS n FROM information_schema.columns "
        "WHERE table_schema = DATABASE() AND table_name = %s AND column_name = %s",
        (table, column),
    )
    assert rows, f"{table}.{column} not found"
    return int(rows[0]["n"])


def test_the_tables_declare_the_python_limits(store: Store, order: Machine, raw: Any) -> None:
    instances, history = f"fsm_{order.name}", f"fsm_{order.name}_transitions"
    assert column_chars(raw, instances, "instance_key") == limits.KEY_CHARS
    assert column_chars(raw, instances, "lookup_key") == limits.KEY_CHARS
    assert column_chars(raw, instances, "current_state") == limits.NAME_CHARS
    assert column_chars(raw, history, "request_id") == limits.REQUEST_ID_CHARS
    assert column_chars(raw, history, "handler") == limits.HANDLER_CHARS
    assert column_chars(raw, history, "event") == limits.NAME_CHARS
    assert column_chars(raw, "fsm_definitions", "machine") == limits.MACHINE_NAME_CHARS
    assert column_chars(raw, "fsm_lock_log", "reason") == limits.REASON_CHARS


def test_the_procedures_accept_each_limit_and_refuse_one_past_it(store: Store, order: Machine, raw: Any) -> None:
    """The procedures take TEXT and check the lengths themselves (31009, nothing written), so a
    DBA's CALL meets the same limits as the Python: each limit is accepted, one past it refused."""
    create = f"CALL `fsm_{order.name}_create_v1`(%s, NULL, NULL, NULL, %s, %s)"
    send = f"CALL `fsm_{order.name}_send_v2`(%s, 'pay', NULL, NULL, NULL, NULL, %s, NULL)"
    key = "k" * limits.KEY_CHARS
    for args in (
        (key + "k", None, None),
        ("k-1", "r" * (limits.REQUEST_ID_CHARS + 1), None),
        ("k-2", None, "a" * (limits.KEY_CHARS + 1)),
    ):
        assert errno_of(raw, create, args) == InvalidArgument.errno, args
    assert errno_of(raw, create, (key, "r" * limits.REQUEST_ID_CHARS, "a" * limits.KEY_CHARS)) is None
    assert errno_of(raw, send, (key, "h" * (limits.HANDLER_CHARS + 1))) == InvalidArgument.errno
    assert store.get(order, key).state == "new"  # the refused call changed nothing
    assert errno_of(raw, send, (key, "h" * limits.HANDLER_CHARS)) is None
    assert store.get(order, key).state == "paid"
    refused = "CALL fsm_force_unlock_v2(NULL, 'acct', %s)"
    assert errno_of(raw, refused, ("r" * (limits.REASON_CHARS + 1),)) == InvalidArgument.errno


def test_the_listing_procedures_check_the_same_page_size() -> None:
    for name in (
        "procedures/fsm_failed_v1.sql",
        "functions/fsm_instances_in_state_sql_v1.sql",
        "functions/fsm_account_history_sql_v1.sql",
        "machine/procedures/fsm_{type}_in_state_v1.sql",
    ):
        text = read_sql(name)
        assert f"p_limit NOT BETWEEN 1 AND {limits.PAGE_ROWS}" in text, name


def test_the_store_refuses_one_past_each_limit(store: Store, order: Machine) -> None:
    too_long = {"key": "k" * (limits.KEY_CHARS + 1)}
    with pytest.raises(InvalidArgument, match=str(limits.KEY_CHARS)):
        store.create(order, **too_long)
    with pytest.raises(InvalidArgument, match=str(limits.REQUEST_ID_CHARS)):
        store.send(order, "k", "pay", request_id="r" * (limits.REQUEST_ID_CHARS + 1))
    with pytest.raises(InvalidArgument, match=str(limits.PAGE_ROWS)):
        store.failed(order, limit=limits.PAGE_ROWS + 1)
    store.create(order, "k" * limits.KEY_CHARS)  # the limit itself is accepted
