"""Issue 34 (migration 0020), against the real server:

* an event the type does not have is UnknownEvent (31028) listing the type's events, on a
  key without an instance as on one with: from the Store, AsyncStore, send_many and the
  command line, and from fsm_{type}_send_v3 and fsm_send_v3 for a DBA; every other refusal
  keeps its number, nothing is written, and the deprecated send_v2 procedures answer as
  before (31005, 31003);
* send_at refuses metadata with its own key "timer" (31009, nothing armed), which the
  firing would replace: from the Store, AsyncStore, `pyfsm timers schedule` and
  fsm_send_at_v2, while the deprecated fsm_send_at_v1 keeps replacing it.

Timers are global to a database (a firing call fires every due timer), so this module has a
database of its own.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest
from helpers.cli import in_process
from helpers.common import errno_of, fetch, order_machine
from helpers.schemas import install_type_as_of

from pyfsm import (
    InvalidArgument,
    Machine,
    Store,
    TransitionNotAllowed,
    UnknownEvent,
    UnknownInstance,
)
from pyfsm.aio import AsyncStore
from pyfsm.db import Settings
from pyfsm.schema import install as schema
from pyfsm.schema import routines

#: order_machine()'s events in definition order (as Python lists them), and sorted (as SQL does)
EVENTS = ["pay", "ship", "deliver", "cancel", "refund"]
SORTED = ", ".join(sorted(EVENTS))
#: The session variables a send sets while it runs; a failed call must leave none behind.
CONTEXT = (
    "SELECT @fsm_event AS e, @fsm_metadata AS m, @fsm_handler AS h, @fsm_request_id AS r, "
    "@fsm_source AS s, @fsm_guard AS g"
)


@pytest.fixture
def settings(module_db: tuple[Settings, Store]) -> Settings:
    return module_db[0]


@pytest.fixture
def ustore(module_db: tuple[Settings, Store]) -> Store:
    return module_db[1]


@pytest.fixture
def dba(module_dba: pymysql.connections.Connection) -> pymysql.connections.Connection:
    return module_dba


@pytest.fixture
def order(ustore: Store) -> Machine:
    machine = order_machine()
    ustore.define(machine)
    return machine


def written(conn: Any, machine: str) -> list[dict[str, Any]]:
    """What a transition or a scheduled event writes: the type's rows, its counters, outbox and timers."""
    tables = [
        f"fsm_{machine}",
        f"fsm_{machine}_transitions",
        "fsm_state_counts",
        "fsm_outbox",
        "fsm_timers",
        "fsm_timer_log",
        "fsm_runs",
    ]
    return fetch(conn, "CHECKSUM TABLE " + ", ".join(f"`{t}`" for t in tables))


def refused(conn: Any, sql: str, args: Any = None) -> tuple[int, str]:
    """(errno, message) of a statement that must fail."""
    with pytest.raises(pymysql.err.MySQLError) as info:
        fetch(conn, sql, args)
    return int(info.value.args[0]), str(info.value.args[1])


def send_sql(version: int, machine: str, generic: bool = False) -> str:
    """A DBA's CALL of fsm_{type}_send_vN (or fsm_send_vN): key, event, expected version, request id."""
    if generic:
        return f"CALL fsm_send_v{version}('{machine}', %s, %s, NULL, '{{\"by\": \"dba\"}}', %s, %s, NULL, NULL)"
    return f'CALL `fsm_{machine}_send_v{version}`(%s, %s, NULL, \'{{"by": "dba"}}\', %s, %s, NULL, NULL)'


# --- a misspelt event ------------------------------------------------------------------------


def test_store_send_of_a_misspelt_event_to_a_new_key_is_unknown_event(ustore: Store, order: Machine, dba: Any) -> None:
    ustore.create(order, "e-1")
    before = written(dba, order.name)
    with pytest.raises(UnknownEvent) as info:
        ustore.send(order, "new-1", "delivr", lookup_key="acct-1", metadata={"by": "test"})
    err = info.value
    assert isinstance(err, TransitionNotAllowed) and not isinstance(err, UnknownInstance)
    assert (err.errno, err.machine, err.key, err.state, err.event) == (31028, order.name, "new-1", None, "delivr")
    assert str(err) == f"machine type {order.name!r} has no event 'delivr'; its events: {', '.join(EVENTS)}"
    assert err.fields["events"] == EVENTS
    with pytest.raises(UnknownEvent) as existing:  # the same answer as on a key with an instance
        ustore.send(order, "e-1", "delivr")
    assert str(existing.value) == str(err) and existing.value.state == "new"
    assert written(dba, order.name) == before
    with pytest.raises(UnknownInstance):
        ustore.get(order, "new-1")
    # an event the type has that no start state allows: still UnknownInstance, "cannot create one"
    with pytest.raises(UnknownInstance) as info_instance:
        ustore.send(order, "new-1", "ship")
    assert info_instance.value.errno == 31003 and "cannot create one" in str(info_instance.value)
    assert written(dba, order.name) == before


def test_async_store_and_send_many_say_the_same(settings: Settings, ustore: Store, order: Machine, dba: Any) -> None:
    before = written(dba, order.name)

    async def send() -> None:
        async with AsyncStore(settings.dsn(), pool_size=1) as astore:
            with pytest.raises(UnknownEvent) as info:
                await astore.send(order.name, "new-2", "delivr")
            assert info.value.fields["events"] == EVENTS and info.value.key == "new-2"

    asyncio.run(send())
    outcomes = ustore.send_many(order, [("new-3", "delivr"), ("new-3", "ship"), ("new-4", "pay")])
    assert type(outcomes[0]) is UnknownEvent and outcomes[0].fields["events"] == EVENTS
    assert str(outcomes[0]) == f"machine type {order.name!r} has no event 'delivr'; its events: {', '.join(EVENTS)}"
    assert type(outcomes[1]) is UnknownInstance and outcomes[1].errno == 31003  # an event it has: as before
    assert outcomes[2].to_state == "paid"  # type: ignore[union-attr]
    assert [i.key for i in ustore.in_state(order, "paid")] == ["new-4"]
    assert before != written(dba, order.name)  # new-4 only


def test_the_command_line_names_the_events_for_a_new_key(settings: Settings, order: Machine, dba: Any) -> None:
    before = written(dba, order.name)
    result = in_process("send", order.name, "o-new", "delivr", "--dsn", settings.dsn())
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"pyfsm: UnknownEvent (31028): machine type {order.name!r} has no event 'delivr'; "
        f"its events: {', '.join(EVENTS)}\n"
    )
    assert written(dba, order.name) == before


@pytest.mark.parametrize("version", [3, 4], ids=["v3", "v4"])
@pytest.mark.parametrize("generic", [False, True], ids=["per-type", "generic"])
def test_send_v3_and_v4_answer_31028_on_existing_and_missing_keys(
    order: Machine, dba: Any, generic: bool, version: int
) -> None:
    fetch(dba, f"CALL fsm_{order.name}_create_v1('k-1', NULL, NULL, NULL, NULL, NULL)")
    call = send_sql(version, order.name, generic)
    before = written(dba, order.name)
    message = f"fsm: {order.name} has no event delivr (definition version 1); its events: {SORTED}"
    for key, version, request_id in (
        ("k-1", None, None),
        ("k-404", None, None),
        ("k-1", None, "r-1"),
        ("k-404", 0, "r-2"),
        ("k-1", 1, None),
    ):
        errno, text = refused(dba, call, (key, "delivr", version, request_id))
        assert (errno, text) == (31028, message[:128]), (key, version, request_id)
        assert fetch(dba, CONTEXT) == [dict.fromkeys("emrhsg")]
    assert written(dba, order.name) == before


@pytest.mark.parametrize("version", [3, 4], ids=["v3", "v4"])
@pytest.mark.parametrize("generic", [False, True], ids=["per-type", "generic"])
def test_send_v3_and_v4_keep_every_other_refusal_and_what_they_do(
    ustore: Store, order: Machine, dba: Any, generic: bool, version: int
) -> None:
    fetch(dba, f"CALL fsm_{order.name}_create_v1('k-1', NULL, NULL, NULL, NULL, NULL)")
    fetch(dba, f"CALL fsm_{order.name}_create_v1('k-2', NULL, NULL, NULL, NULL, NULL)")
    call = send_sql(version, order.name, generic)
    fetch(dba, call, ("k-1", "pay", None, "used-1"))
    fetch(dba, f"CALL fsm_pause_v1('{order.name}', 'k-2')")
    before = written(dba, order.name)
    cases = [
        (("k-1", "pay", None, None), 31005),  # an event it has, not allowed from paid
        (("k-404", "ship", None, None), 31003),  # an event it has, no start state allows it
        (("k-404", "delivr", 3, None), 31007),  # the version is checked first on a missing key, as in v2 ...
        (("k-1", "delivr", 5, None), 31007),  # ... and on an existing one
        (("k-1", "delivr", None, "used-1"), 31010),  # the request id names another transition
        (("k-2", "delivr", None, None), 31011),  # paused: refused before the rule is looked up
        (("k-1", "Delivr", None, None), 31009),  # not a name
    ]
    for args, errno in cases:
        assert refused(dba, call, args)[0] == errno, args
        assert refused(dba, call.replace(f"_v{version}", "_v2"), args)[0] == errno, ("v2", args)
    assert written(dba, order.name) == before
    # what it does is v2's: the same row for the same transition
    got = fetch(dba, call, ("k-1", "ship", 2, "ship-1"))[0]
    again = fetch(dba, call.replace(f"_v{version}", "_v2"), ("k-1", "ship", 2, "ship-1"))[0]  # a replay, through v2
    assert {**got, "replayed": 1} == again and (got["from_state"], got["to_state"], got["version"]) == (
        "paid",
        "shipped",
        3,
    )
    created = fetch(dba, call, ("k-3", "pay", 0, None))[0]
    assert (created["created"], created["to_state"], created["version"]) == (1, "paid", 2)
    assert ustore.get(order, "k-3").state == "paid"


@pytest.mark.parametrize("generic", [False, True], ids=["per-type", "generic"])
def test_the_deprecated_send_v2_answers_as_before(order: Machine, dba: Any, generic: bool) -> None:
    fetch(dba, f"CALL fsm_{order.name}_create_v1('k-1', NULL, NULL, NULL, NULL, NULL)")
    call = send_sql(2, order.name, generic)
    before = written(dba, order.name)
    assert refused(dba, call, ("k-1", "delivr", None, None)) == (
        31005,
        f"fsm: event delivr not allowed from new ({order.name} k-1)",
    )
    assert refused(dba, call, ("k-404", "delivr", None, None)) == (
        31003,
        f"fsm: no {order.name} k-404 and event delivr cannot create one",
    )
    assert written(dba, order.name) == before


def test_an_instance_of_an_older_version_is_checked_against_its_version(ustore: Store, dba: Any) -> None:
    v1 = order_machine()
    ustore.define(v1)
    ustore.create(v1, "old")
    ustore.define(
        Machine(
            name=v1.name,
            states=[*v1.states, "held"],
            start=["new"],
            final=list(v1.final),
            transitions=[*v1.transitions, ("hold", "new", "held")],
        )
    )
    errno, message = refused(dba, send_sql(3, v1.name), ("old", "hold", None, None))
    assert (errno, message) == (
        31028,
        f"fsm: {v1.name} has no event hold (definition version 1); its events: {SORTED}"[:128],
    )
    assert refused(dba, send_sql(3, v1.name), ("old", "hld", None, None))[0] == 31028
    assert fetch(dba, send_sql(3, v1.name), ("young", "hold", None, None))[0]["to_state"] == "held"  # v2's event
    with pytest.raises(UnknownEvent, match=r"\(version 1, which old follows\) has no event 'hold'"):
        ustore.send(v1, "old", "hold")
    with pytest.raises(UnknownEvent) as info:  # a new key follows the current version
        ustore.send(v1, "new-1", "hld")
    assert info.value.fields["events"] == [*EVENTS, "hold"]


def test_the_store_calls_send_v5() -> None:
    assert routines.SEND.name_for("order") == "fsm_order_send_v5"  # v4's answers, and a data patch
    assert routines.SEND_AT.name == "fsm_send_at_v2"


def test_migration_0020_gives_types_send_v3_and_keeps_v2(make_database) -> None:  # type: ignore[no-untyped-def]
    """A type installed at 0019 (object set v11) gets fsm_{type}_send_v3 and is marked v12; the
    v2 procedures and fsm_send_at_v1 stay; the Store, through v3, says UnknownEvent (once the
    later revisions have run too: the Store needs the head)."""
    settings = make_database("pyfsm_0020")
    schema.migrate(settings, revision="0019")
    machine = order_machine("order")
    install_type_as_of(
        settings, machine, "v11", "CALL fsm_order_send_v2('o-1', 'pay', NULL, NULL, NULL, NULL, NULL, NULL)"
    )
    schema.migrate(settings, revision="0020")
    raw = pymysql.connect(**settings.connect_kwargs())
    try:
        assert fetch(raw, "SELECT objects_version FROM fsm_machines") == [{"objects_version": "v12"}]
        found = {
            r["name"]
            for r in fetch(
                raw,
                "SELECT routine_name AS name FROM information_schema.routines "
                "WHERE routine_schema = DATABASE() AND routine_name IN ("
                "'fsm_order_send_v2', 'fsm_order_send_v3', 'fsm_send_v2', "
                "'fsm_send_v3', 'fsm_send_at_v1', 'fsm_send_at_v2')",
            )
        }
        assert len(found) == 6, found
        assert errno_of(raw, "CALL fsm_order_send_v3('o-1', 'delivr', NULL, NULL, NULL, NULL, NULL, NULL)") == 31028
        assert errno_of(raw, "CALL fsm_order_send_v2('o-1', 'delivr', NULL, NULL, NULL, NULL, NULL, NULL)") == 31005
        schema.migrate(settings)
        assert fetch(raw, "SELECT objects_version FROM fsm_machines") == [
            {"objects_version": schema.MACHINE_OBJECTS_VERSION}
        ]
        with Store(settings.dsn()) as store:
            with pytest.raises(UnknownEvent):
                store.send("order", "o-2", "delivr")
            assert store.send("order", "o-1", "ship").to_state == "shipped"
            assert {n for n, _, _ in schema.deprecated_present(raw)} >= {
                "fsm_order_send_v2",
                "fsm_send_v2",
                "fsm_send_at_v1",
            }
    finally:
        raw.close()


# --- send_at metadata with its own "timer" ---------------------------------------------------


@pytest.fixture
def scheduled(ustore: Store, order: Machine) -> Iterator[Machine]:
    ustore.create(order, "s-1")
    yield order


def test_send_at_refuses_metadata_with_a_timer_key_from_python(
    settings: Settings, ustore: Store, scheduled: Machine, dba: Any
) -> None:
    before = written(dba, scheduled.name)
    for metadata in ({"timer": 1}, {"by": "me", "timer": {"id": 7}}, {"timer": None}):
        with pytest.raises(InvalidArgument, match='metadata must not have a key "timer"') as info:
            ustore.send_at(scheduled, "s-1", "pay", after=60, metadata=metadata)
        assert info.value.errno == 31009

    async def schedule() -> None:
        async with AsyncStore(settings.dsn(), pool_size=1) as astore:
            with pytest.raises(InvalidArgument):
                await astore.send_at(scheduled.name, "s-1", "pay", after=60, metadata={"timer": "mine"})

    asyncio.run(schedule())
    cli = in_process(
        "timers",
        "schedule",
        scheduled.name,
        "s-1",
        "pay",
        "--after",
        "1h",
        "--metadata",
        '{"timer": "mine"}',
        "--dsn",
        settings.dsn(),
    )
    assert cli.returncode == 1 and cli.stderr.startswith("pyfsm: InvalidArgument (31009): metadata must not have"), (
        cli.stderr
    )
    assert len(cli.stderr.splitlines()) == 1
    assert written(dba, scheduled.name) == before
    # a nested "timer", or another spelling, is the caller's own: scheduled, and kept when it fires
    timer = ustore.send_at(scheduled, "s-1", "pay", after=0, metadata={"Timer": 1, "x": {"timer": 2}})
    [fired] = [t for t in ustore.fire_timers(owner="test-unknown", limit=1000) if t.timer_id == timer.timer_id]
    assert fired.outcome == "fired"
    last = ustore.history(scheduled, "s-1")[-1]
    assert (last.metadata["Timer"], last.metadata["x"]) == (1, {"timer": 2})
    assert last.metadata["timer"]["id"] == timer.timer_id and last.metadata["timer"]["kind"] == "scheduled"


def test_send_at_v2_refuses_it_from_sql_and_v1_still_replaces_it(ustore: Store, scheduled: Machine, dba: Any) -> None:
    call = "CALL fsm_send_at_v{}(%s, 's-1', 'pay', NULL, 0, %s, NULL)"
    before = written(dba, scheduled.name)
    for metadata in ('{"timer": 1}', '{"a": 1, "timer": {"id": 1}}', '{"tim\\u0065r": 1}', '{"timer": 1, "timer": 2}'):
        errno, message = refused(dba, call.format(2), (scheduled.name, metadata))
        assert (errno, message) == (
            31009,
            'fsm: metadata must not have a key "timer": the firing records the timer there',
        ), metadata
    assert refused(dba, call.format(2), (scheduled.name, "[1]"))[0] == 31008  # not an object: as v1
    assert written(dba, scheduled.name) == before
    # the deprecated v1 takes it, and the firing replaces it, as it always did
    [row] = fetch(dba, call.format(1), (scheduled.name, '{"timer": "mine", "by": "dba"}'))
    [fired] = [t for t in ustore.fire_timers(owner="test-unknown", limit=1000) if t.timer_id == row["timer_id"]]
    assert fired.outcome == "fired"
    [history] = fetch(
        dba, f"SELECT metadata FROM `fsm_{scheduled.name}_transitions` WHERE id = %s", (fired.transition_id,)
    )
    metadata = json.loads(history["metadata"])
    assert metadata["by"] == "dba" and metadata["timer"]["id"] == row["timer_id"]
    # v2 with metadata of its own, and with none
    later = call.format(2).replace("'pay'", "'ship'").replace("NULL, 0", "NULL, 3600")
    for metadata in ('{"by": "dba"}', None):
        [timer] = fetch(dba, later, (scheduled.name, metadata))
        assert (timer["kind"], timer["event"], timer["replayed"]) == ("scheduled", "ship", 0)
        ustore.cancel_timer(timer["timer_id"], "test done")
