"""The Python facade against the real server: transitions, creation, idempotency, reads."""

from __future__ import annotations

from datetime import UTC

import pytest
from helpers.common import missing_database, order_machine, unique

from pyfsm import (
    Conflict,
    InstanceExists,
    Machine,
    RequestIdReused,
    SchemaVersionMismatch,
    Store,
    TransitionNotAllowed,
    UnknownEvent,
    UnknownInstance,
    UnknownMachine,
    retry,
)


def test_send_moves_state_and_records_history(store: Store, order: Machine) -> None:
    store.create(order, "o1", data={"total": 10}, lookup_key="acct-1")
    result = store.send(order, "o1", "pay", data={"total": 10, "paid": True}, metadata={"by": "test"}, handler="charge")
    assert (result.from_state, result.event, result.to_state, result.version) == ("new", "pay", "paid", 2)
    inst = store.get(order, "o1")
    assert (inst.state, inst.version, inst.status, inst.lookup_key) == ("paid", 2, "running", "acct-1")
    assert inst.data == {"total": 10, "paid": True}
    assert inst.created_at.tzinfo is UTC
    created, paid = store.history(order, "o1")
    assert (created.event, created.from_state, created.to_state, created.most_recent) == (None, None, "new", False)
    assert (paid.event, paid.from_state, paid.to_state, paid.most_recent) == ("pay", "new", "paid", True)
    assert paid.data_before == {"total": 10} and paid.data_after == {"total": 10, "paid": True}
    assert paid.metadata == {"by": "test"} and paid.handler == "charge" and paid.source == "procedure"
    assert paid.sort_key > created.sort_key and paid.definition_version == 1


def test_final_state_completes_the_instance(store: Store, order: Machine) -> None:
    for event in ("pay", "ship", "deliver"):
        last = store.send(order, "o-done", event)
    assert last.status == "completed" and store.get(order, "o-done").status == "completed"
    with pytest.raises(TransitionNotAllowed):
        store.send(order, "o-done", "cancel")


def test_not_allowed_changes_nothing_and_names_the_state(store: Store, order: Machine) -> None:
    store.create(order, "o2")
    with pytest.raises(TransitionNotAllowed) as info:
        store.send(order, "o2", "ship")
    err = info.value
    assert (err.errno, err.machine, err.key, err.state, err.event) == (31005, order.name, "o2", "new", "ship")
    assert store.get(order, "o2").version == 1 and len(store.history(order, "o2")) == 1


def test_send_to_missing_key_creates_from_a_start_state(store: Store) -> None:
    machine = Machine(
        name=unique("multi"),
        states=["web", "phone", "done"],
        start=["web", "phone"],
        final=["done"],
        transitions=[("call", "phone", "done"), ("click", "web", "done")],
    )
    store.define(machine)
    result = store.send(machine, "m1", "call", lookup_key="acct")
    assert result.created and (result.from_state, result.to_state) == ("phone", "done")
    assert [h.to_state for h in store.history(machine, "m1")] == ["phone", "done"]
    with pytest.raises(UnknownEvent) as info:  # not an event of the type: UnknownEvent (issue 34), not UnknownInstance
        store.send(machine, "m2", "finish_unknown")
    assert info.value.errno == 31028 and info.value.fields["events"] == ["call", "click"]
    with pytest.raises(UnknownInstance):
        store.get(machine, "m2")


def test_explicit_create_rejects_duplicates_and_non_start_states(store: Store, order: Machine) -> None:
    store.create(order, "c1")
    with pytest.raises(InstanceExists):
        store.create(order, "c1")
    with pytest.raises(TransitionNotAllowed):
        store.create(order, "c2", state="paid")
    with pytest.raises(UnknownInstance):
        store.get(order, "c2")


def test_request_id_makes_a_repeat_return_the_original(store: Store, order: Machine) -> None:
    first = store.send(order, "r1", "pay", request_id="req-1")
    again = store.send(order, "r1", "pay", request_id="req-1")
    assert again.replayed and not first.replayed
    assert (again.transition_id, again.to_state, again.sort_key) == (first.transition_id, "paid", first.sort_key)
    assert len(store.history(order, "r1")) == 2
    with pytest.raises(RequestIdReused):
        store.send(order, "r1", "ship", request_id="req-1")
    with pytest.raises(RequestIdReused):
        store.send(order, "r-other", "pay", request_id="req-1")
    made = store.create(order, "r2", request_id="req-create")
    assert store.create(order, "r2", request_id="req-create").replayed
    assert made.created


def test_expected_version_conflict_changes_nothing(store: Store, order: Machine) -> None:
    store.create(order, "v1")
    with pytest.raises(Conflict) as info:
        store.send(order, "v1", "pay", expected_version=7)
    assert info.value.errno == 31007
    assert store.get(order, "v1").version == 1
    assert store.send(order, "v1", "pay", expected_version=1).version == 2
    with pytest.raises(Conflict):
        store.send(order, "v1", "ship", expected_version=0)  # 0: must not exist yet
    assert store.send(order, "v-new", "pay", expected_version=0).created


def test_retry_helper_rereads_after_a_conflict(store: Store, order: Machine) -> None:
    store.create(order, "rr")
    calls = []

    def attempt() -> object:
        seen = store.get(order, "rr").version
        if not calls:  # another writer slips in between our read and our write, once
            store.send(order, "rr", "pay")
        calls.append(seen)
        return store.send(order, "rr", "ship", expected_version=seen)

    result = retry(attempt, attempts=3, sleep=lambda _s: None)
    assert result.to_state == "shipped" and calls == [1, 2]  # type: ignore[attr-defined]


def test_in_state_pages_and_counts(store: Store, order: Machine) -> None:
    for i in range(7):
        store.send(order, f"p{i}", "pay")
    store.send(order, "p0", "ship")
    first = store.in_state(order, "paid", limit=4)
    rest = store.in_state(order, "paid", after_id=first[-1].id, limit=100)
    assert [i.key for i in first + rest] == [f"p{i}" for i in range(1, 7)]
    assert store.counts(order) == {"paid": 6, "shipped": 1}
    assert store.in_state(order, "delivered") == []


def test_new_definition_version_leaves_old_instances_alone(store: Store) -> None:
    v1 = order_machine()
    store.define(v1)
    store.create(v1, "old")
    v2 = Machine(
        name=v1.name,
        states=[*v1.states, "held"],
        start=["new"],
        final=list(v1.final),
        transitions=[*v1.transitions, ("hold", "new", "held")],
    )
    defined = store.define(v2)
    assert defined.changed and defined.version == 2
    assert not store.define(v2).changed
    store.create(v2, "young")
    assert store.send(v2, "young", "hold").to_state == "held"
    with pytest.raises(TransitionNotAllowed):
        store.send(v2, "old", "hold")  # created under version 1, which has no hold
    assert store.get(v1, "old").definition_version == 1
    assert store.definition(v1.name, 1).definition["states"] == list(v1.states)
    assert store.definition(v1.name).version == 2


def test_unknown_machine(store: Store) -> None:
    with pytest.raises(UnknownMachine):
        store.send("never_defined", "k", "go")
    with pytest.raises(UnknownMachine):
        store.get("never_defined", "k")


def test_schema_mismatch_is_refused_with_the_fix(make_database) -> None:  # type: ignore[no-untyped-def]
    empty = make_database()
    with Store(empty.dsn()) as store, pytest.raises(SchemaVersionMismatch) as info:
        store.get("order", "x")
    assert "pyfsm migrate" in str(info.value) and info.value.errno == 31015


def _schema_of(server, name: str) -> tuple[str, str] | None:  # type: ignore[no-untyped-def]
    from helpers.common import admin

    conn = admin(server)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT default_character_set_name, default_collation_name FROM information_schema.schemata "
                "WHERE schema_name = %s",
                (name,),
            )
            row = cur.fetchone()
            return None if row is None else (row[0], row[1])
    finally:
        conn.close()


def test_migrate_creates_a_missing_database_and_says_so(make_database, server, caplog) -> None:  # type: ignore[no-untyped-def]
    """The README's example on a fresh server: Store.migrate() creates the DSN's database as
    pyfsm's tables expect it (utf8mb4_bin) and logs it; later migrations create nothing."""
    import logging

    from pyfsm.schema import install as schema

    settings = missing_database(make_database, server)
    with Store(settings.dsn()) as fresh:
        with caplog.at_level(logging.INFO, logger="pyfsm.db"):
            fresh.migrate()
        assert [r.getMessage() for r in caplog.records if r.name == "pyfsm.db"] == [
            f"pyfsm: created database `{settings.database}` (CHARACTER SET utf8mb4 COLLATE utf8mb4_bin) on "
            f"{settings.host}:{settings.port}"
        ]
        assert _schema_of(server, settings.database) == ("utf8mb4", "utf8mb4_bin")
        machine = order_machine()
        fresh.define(machine)
        assert fresh.create(machine, "k-1").to_state == "new"
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="pyfsm.db"):
            fresh.migrate()
        assert not [r for r in caplog.records if r.name == "pyfsm.db"]
    assert schema.migrate(settings) is False


def test_migrate_without_the_right_to_create_the_database(make_database, server, dsn: str) -> None:  # type: ignore[no-untyped-def]
    """A least-privilege account meets one AccessDenied naming the statement to run, whether
    it has some right on the missing database's name (1049, then 1044 for CREATE) or none
    (1044 at connect); no traceback of the driver is chained to it."""
    from dataclasses import replace

    from helpers.common import admin, granted_accounts

    from pyfsm import AccessDenied
    from pyfsm.db import parse_dsn

    settings = missing_database(make_database, server)
    create = f"CREATE DATABASE IF NOT EXISTS `{settings.database}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
    with granted_accounts(server, parse_dsn(dsn), ["app"], "pyfsm_nodb") as accounts:
        app = replace(accounts["app"], database=settings.database)
        with Store(app.dsn()) as store, pytest.raises(AccessDenied) as none:
            store.migrate()
        assert none.value.errno == 1044 and create in str(none.value) and "GRANT ALL ON" in str(none.value)
        assert none.value.__cause__ is None and none.value.__suppress_context__
        conn = admin(server)
        try:  # a right on the name, not the right to create it: the server now says 1049 to the login
            conn.cursor().execute(f"GRANT SELECT ON `{settings.database}`.* TO `{app.user}`@'%'")
        finally:
            conn.close()
        with Store(app.dsn()) as store, pytest.raises(AccessDenied) as some:
            store.migrate()
        message = str(some.value)
        assert some.value.errno == 1044 and create in message and "may not create it" in message
        assert some.value.__cause__ is None and some.value.__suppress_context__
        assert len(message.splitlines()) == 1
    assert _schema_of(server, settings.database) is None
