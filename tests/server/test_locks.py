"""Locks in one process: what is held, who may move an instance, expiry, owners, force-release.

The multi-process proofs (no overlap, SIGKILL) are in test_lock_processes.py.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pymysql
import pytest
from helpers.common import errno_of, fetch, order_machine, unique

from pyfsm import (
    InvalidArgument,
    InvalidDefinition,
    LockHeld,
    LockLost,
    LockNotAcquired,
    Store,
    UnknownInstance,
)
from pyfsm.db import parse_dsn


def define(store: Store, **options: Any) -> str:
    machine = order_machine(**options)
    store.define(machine)
    return machine.name


def new_order(store: Store, machine: str, lookup_key: str | None) -> str:
    key = unique("o")
    store.create(machine, key, lookup_key=lookup_key)
    return key


def test_global_lock_excludes_every_type_of_the_account(store: Store, raw) -> None:  # type: ignore[no-untyped-def]
    a, b, free = define(store, uses_global_lock=True), define(store, uses_global_lock=True), define(store)
    account = unique("acct")
    a1, a2 = new_order(store, a, account), new_order(store, a, account)
    b1, f1 = new_order(store, b, account), new_order(store, free, account)
    other = new_order(store, a, unique("acct"))

    version = store.get(a, a1).version
    with store.lock(a, a1) as lease:
        assert (lease.global_lock, lease.local_lock, lease.lookup_key) == (True, False, account)
        locked = store.get(a, a1)  # the instance row says until when it is held; not a change
        assert locked.unlocked_at == lease.expires_at and locked.version == version
        held = store.locks(lookup_key=account)
        assert [(h.kind, h.owner, h.machine, h.instance_key) for h in held] == [("global", lease.owner, a, a1)]
        assert held[0].advisory_connection is not None and held[0].expires_at > held[0].since

        for machine, key in ((a, a2), (b, b1)):  # nobody else of this account may take it ...
            with pytest.raises(LockNotAcquired) as caught:
                store.lock(machine, key, attempts=2)
            assert lease.owner in str(caught.value)
            assert [h.owner for h in caught.value.fields["holders"]] == [lease.owner]
            with pytest.raises(LockHeld):  # ... or move its instances
                store.send(machine, key, "pay")
        assert errno_of(raw, "SET @fsm_event = 'pay'") is None
        assert errno_of(raw, f"UPDATE `fsm_{b}` SET current_state = 'paid' WHERE instance_key = %s", (b1,)) == 31018
        raw.cursor().execute("SET @fsm_event = NULL")

        assert lease.send("pay").to_state == "paid"  # the holder may
        assert store.send(free, f1, "pay").to_state == "paid"  # types without locks are not affected
        with store.lock(a, other) as elsewhere:  # nor other accounts
            assert elsewhere.global_lock
    assert store.locks(lookup_key=account) == []
    released = store.get(a, a1)
    assert released.unlocked_at is not None and released.unlocked_at < lease.expires_at  # type: ignore[operator]
    assert released.version == version + 1  # the one transition; locking and unlocking are bookkeeping
    assert store.send(b, b1, "pay").to_state == "paid"  # released: anyone may move it again
    assert [h.event for h in store.history(a, a1)] == [None, "pay"]
    assert [h.event for h in store.history(b, b1)] == [None, "pay"]


def test_local_lock_is_per_type_and_account(store: Store) -> None:
    p, q = define(store, uses_local_lock=True), define(store, uses_local_lock=True)
    account = unique("acct")
    p1, p2, q1 = new_order(store, p, account), new_order(store, p, account), new_order(store, q, account)
    with store.lock(p, p1) as lease:
        assert (lease.global_lock, lease.local_lock) == (False, True)
        with pytest.raises(LockNotAcquired):
            store.lock(p, p2, attempts=1)
        with pytest.raises(LockHeld):
            store.send(p, p2, "pay")
        with store.lock(q, q1) as other_type:  # another type of the same account runs in parallel
            assert other_type.send("pay").to_state == "paid"
        assert [h.kind for h in store.locks(lookup_key=account)] == ["local"]


def test_both_locks_are_taken_in_order_and_a_failure_leaves_none(store: Store, raw) -> None:  # type: ignore[no-untyped-def]
    both = define(store, uses_global_lock=True, uses_local_lock=True)
    account = unique("acct")
    e1, e2 = new_order(store, both, account), new_order(store, both, account)
    assert not store.set_locking(both, e1, global_lock=False).uses_global_lock  # e1: local lock only
    with store.lock(both, e1) as holder:
        assert (holder.global_lock, holder.local_lock) == (False, True)
        with pytest.raises(LockNotAcquired, match="held by"):
            store.lock(both, e2, attempts=1)  # takes the global lock, then fails on the local one
        # ... and gave the global lock back: neither the row nor the advisory lock is left
        assert [h.kind for h in store.locks(lookup_key=account)] == ["local"]
        assert fetch(raw, "SELECT IS_USED_LOCK(CONCAT('fsm:g:', SHA2(%s, 224))) AS c", (account,)) == [{"c": None}]
    with store.lock(both, e2) as lease:
        assert (lease.global_lock, lease.local_lock) == (True, True)
        assert sorted(h.kind for h in store.locks(lookup_key=account)) == ["global", "local"]


def test_expired_holder_can_neither_renew_nor_release_the_next_holders_lock(store: Store) -> None:
    machine = define(store, uses_global_lock=True)
    account = unique("acct")
    key = new_order(store, machine, account)
    old = store.lock(machine, key, lease_seconds=0.3, heartbeat=False)
    with pytest.raises(LockNotAcquired):
        store.lock(machine, key, attempts=1)
    time.sleep(0.5)  # the lease ran out; its connection still holds the advisory lock
    new = store.lock(machine, key, attempts=3)
    try:
        with pytest.raises(LockLost):
            old.renew()
        assert old.lost
        with pytest.raises(LockLost):
            old.send("pay")
        assert old.release() is False
        assert [h.owner for h in store.locks(lookup_key=account)] == [new.owner]  # untouched
        assert new.send("pay").to_state == "paid"
    finally:
        assert new.release() is True
    assert store.locks(lookup_key=account) == []


def test_heartbeat_keeps_a_lease_alive(store: Store) -> None:
    machine = define(store, uses_local_lock=True)
    account = unique("acct")
    key, other = new_order(store, machine, account), new_order(store, machine, account)
    with store.lock(machine, key, lease_seconds=0.3) as lease:
        first = lease.expires_at
        time.sleep(0.8)  # several leases long: only the heartbeat keeps it
        with pytest.raises(LockNotAcquired):
            store.lock(machine, other, attempts=1)
        assert lease.expires_at is not None and first is not None and lease.expires_at > first
        assert not lease.lost


def test_force_unlock_is_recorded_and_ends_the_old_lease(store: Store, raw) -> None:  # type: ignore[no-untyped-def]
    machine = define(store, uses_global_lock=True)
    account = unique("acct")
    key = new_order(store, machine, account)
    old = store.lock(machine, key, heartbeat=False)
    released = store.force_unlock(account, reason="holder host lost, OPS-12")
    assert [(r.owner, r.kind) for r in released] == [(old.owner, "global")]
    log = fetch(
        raw,
        "SELECT owner, reason, released_by, machine, instance_key FROM fsm_lock_log WHERE lookup_key = %s",
        (account,),
    )
    assert len(log) == 1 and log[0]["owner"] == old.owner and log[0]["reason"] == "holder host lost, OPS-12"
    assert log[0]["released_by"] and (log[0]["machine"], log[0]["instance_key"]) == (machine, key)
    with store.lock(machine, key) as new:  # the old holder's connection still has the advisory lock
        with pytest.raises(LockLost):
            old.renew()
        assert new.send("pay").to_state == "paid"
    assert old.release() is False
    assert store.force_unlock(account, reason="again") == []  # nothing held: nothing to do
    with pytest.raises(InvalidArgument):
        store.force_unlock(account, reason="")


def test_sql_api_lock_send_unlock(store: Store, dsn: str, raw) -> None:  # type: ignore[no-untyped-def]
    machine = define(store, uses_global_lock=True)
    account = unique("acct")
    key = new_order(store, machine, account)
    other = pymysql.connect(**parse_dsn(dsn).connect_kwargs())
    try:
        row = fetch(raw, "CALL fsm_lock_v2(%s, %s, 'dba:1', 30)", (machine, key))[0]
        assert (row["owner"], row["global_lock"], row["local_lock"]) == ("dba:1", 1, 0)
        assert (
            errno_of(other, f"CALL `fsm_{machine}_send_v1`(%s, 'pay', NULL, NULL, NULL, NULL, NULL, NULL)", (key,))
            == 31018
        )
        assert errno_of(other, "CALL fsm_lock_v2(%s, %s, 'dba:2', 30)", (machine, key)) == 31014
        assert errno_of(other, "CALL fsm_unlock_v1('dba:1')") is None  # not its connection: rows only
        assert errno_of(raw, "CALL fsm_lock_v2(%s, %s, 'dba:1', 30)", (machine, key)) is None  # re-take, same owner
        assert (
            fetch(raw, f"CALL `fsm_{machine}_send_v1`(%s, 'pay', NULL, NULL, NULL, NULL, NULL, NULL)", (key,))[0][
                "to_state"
            ]
            == "paid"
        )
        assert fetch(raw, "CALL fsm_renew_lock_v1('dba:1', 60)")[0]["renewed"] == 1
        assert fetch(raw, "CALL fsm_unlock_v1('dba:1')") == [{"released": 1}]
        assert fetch(raw, "SELECT @fsm_lock_owner AS o") == [{"o": None}]
        assert errno_of(raw, "CALL fsm_renew_lock_v1('dba:1', 60)") == 31019
        assert fetch(other, "CALL fsm_lock_v2(%s, %s, 'dba:2', 30)", (machine, key))[0]["owner"] == "dba:2"
        assert fetch(other, "CALL fsm_unlock_v1('dba:2')") == [{"released": 1}]
    finally:
        other.close()


def test_bad_lock_input_is_refused_and_changes_nothing(store: Store, raw) -> None:  # type: ignore[no-untyped-def]
    machine = define(store, uses_global_lock=True)
    account = unique("acct")
    key, orphan = new_order(store, machine, account), new_order(store, machine, None)
    for kwargs in (
        {"owner": "x`; DROP TABLE fsm_locks; --"},
        {"owner": ""},
        {"lease_seconds": 0},
        {"lease_seconds": 10**9},
        {"attempts": 0},
        {"backoff": -1},
    ):
        with pytest.raises(InvalidArgument):
            store.lock(machine, key, **kwargs)
    with pytest.raises(UnknownInstance):
        store.lock(machine, "no-such-key")
    with pytest.raises(InvalidArgument, match="lookup_key"):
        store.lock(machine, orphan)
    assert errno_of(raw, "CALL fsm_lock_v2(%s, %s, 'bad owner!', 30)", (machine, key)) == 31009
    assert errno_of(raw, "CALL fsm_lock_v2('x`; DROP TABLE t; --', 'k', 'o', 30)") == 31009
    assert errno_of(raw, "CALL fsm_lock_v2(%s, %s, 'o', 0.01)", (machine, key)) == 31009
    assert errno_of(raw, "CALL fsm_force_unlock_v1('*', %s, NULL)", (account,)) == 31009
    assert errno_of(raw, "CALL fsm_set_locking_v1(%s, %s, 2, NULL)", (machine, key)) == 31009
    assert fetch(raw, "SELECT COUNT(*) AS n FROM fsm_locks WHERE lookup_key = %s", (account,)) == [{"n": 0}]
    assert fetch(raw, "SELECT IS_USED_LOCK(CONCAT('fsm:g:', SHA2(%s, 224))) AS c", (account,)) == [{"c": None}]


def test_a_type_without_locks_gets_an_empty_lease(store: Store) -> None:
    machine = define(store)
    key = new_order(store, machine, None)
    with store.lock(machine, key) as lease:
        assert (lease.global_lock, lease.local_lock, lease.expires_at) == (False, False, None)
        assert lease.send("pay").to_state == "paid"


def test_definition_options_lease_and_event_data(store: Store, raw) -> None:  # type: ignore[no-untyped-def]
    machine = order_machine(uses_global_lock=True, lock_lease_seconds=300, topic="orders", event_data=False)
    store.define(machine)
    assert (
        store.define(
            order_machine(machine.name, uses_global_lock=True, lock_lease_seconds=301, topic="orders", event_data=False)
        ).version
        == 2
    )  # a changed option is a new version
    assert store.definition(machine.name).definition["options"]["lock_lease_seconds"] == 301
    key = new_order(store, machine.name, unique("acct"))
    with store.lock(machine.name, key) as lease:
        assert lease.lease_seconds == 301
        lease.send("pay", data={"secret": 1})
    rows = fetch(raw, "SELECT data FROM fsm_outbox WHERE machine = %s ORDER BY id", (machine.name,))
    assert rows == [{"data": None}, {"data": None}]  # event_data off: creation and pay carry no data
    with_data = order_machine(topic="orders")
    store.define(with_data)
    store.send(with_data.name, unique("o"), "pay", data={"total": 3})
    rows = fetch(raw, "SELECT data FROM fsm_outbox WHERE machine = %s ORDER BY id", (with_data.name,))
    assert [json.loads(r["data"]) for r in rows] == [{}, {"total": 3}]
    with pytest.raises(InvalidDefinition):
        order_machine(lock_lease_seconds=0)
    bad = '{"states": ["a"], "start": ["a"], "transitions": [], "options": {"lock_lease": 5}}'
    assert errno_of(raw, "CALL fsm_define_v2(%s, %s)", (unique("m"), bad)) == 31001
    bad = '{"states": ["a"], "start": ["a"], "transitions": [], "options": {"lock_lease_seconds": 1.5}}'
    assert errno_of(raw, "CALL fsm_define_v2(%s, %s)", (unique("m"), bad)) == 31001


def test_review_regressions_takeover_lease_gc_and_small_pools(store: Store, dsn: str) -> None:
    import gc

    machine = define(store, uses_global_lock=True)
    account = unique("acct")
    key = new_order(store, machine, account)
    stalled = store.lock(machine, key, lease_seconds=0.2, heartbeat=False)
    time.sleep(0.3)  # expired; its connection still holds the advisory lock
    with store.lock(machine, key, attempts=1):
        pass
    with store.lock(machine, key, attempts=1) as third:  # the lock stays usable after a takeover
        assert third.global_lock
    stalled.release()

    forgotten = store.lock(machine, key, heartbeat=False)  # never released ...
    del forgotten
    gc.collect()
    conn = pymysql.connect(**parse_dsn(dsn).connect_kwargs())
    try:  # ... its connection was closed, so its advisory lock is free at once
        deadline = time.monotonic() + 5
        while fetch(conn, "SELECT IS_USED_LOCK(CONCAT('fsm:g:', SHA2(%s, 224))) AS c", (account,))[0]["c"] is not None:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        conn.close()
    store.force_unlock(account, reason="test: the forgotten lease's row")

    with Store(dsn, pool_size=1) as small:  # leases do not take the pool's only connection
        other = new_order(store, machine, account)
        with small.lock(machine, key):
            started = time.monotonic()
            with pytest.raises(LockNotAcquired) as caught:
                small.lock(machine, other, attempts=2)
            assert time.monotonic() - started < 2 and caught.value.fields["holders"]
            assert small.get(machine, key).state == "new"


def test_lease_connections_are_reused_only_after_a_clean_release(store: Store) -> None:
    machine = define(store, uses_local_lock=True)
    account = unique("acct")
    key = new_order(store, machine, account)

    def connection_of_next_lease(**kwargs: Any) -> tuple[int | None, Any]:
        lease = store.lock(machine, key, **kwargs)
        return store.locks(lookup_key=account)[0].connection_id, lease

    first, lease = connection_of_next_lease()
    assert lease.release()
    second, lease = connection_of_next_lease(lease_seconds=0.2, heartbeat=False)
    assert second == first  # reused: the clean release gave everything back
    time.sleep(0.3)
    with store.lock(machine, key) as other:  # takes the expired lock over
        assert other.owner != lease.owner
    assert lease.release() is False  # lost: its connection is closed, not reused
    third, lease = connection_of_next_lease()
    assert third != second
    lease.release()


def test_the_locks_held_are_found_without_reading_every_account(make_database) -> None:  # type: ignore[no-untyped-def]
    """fsm_locks keeps a row per account that ever took a lock; fsm_held_locks_v1 (the metrics,
    the console) reads the index fsm_locks_held, not every row (revision 0016)."""
    settings = make_database()
    with Store(settings.dsn()) as store:
        store.migrate()
        name = define(store, uses_global_lock=True)
        keys = [new_order(store, name, f"acct-{n}") for n in range(3)]
        conn = pymysql.connect(**settings.connect_kwargs())
        try:
            with conn.cursor() as cur:  # 5,000 accounts whose locks were released, one that expired
                cur.executemany(
                    "INSERT INTO fsm_locks (scope, lookup_key, machine, instance_id, instance_key, owner, locked_at, "
                    "unlocked_at, expires_at, advisory_name) VALUES ('*', %s, %s, 1, 'k', 'old', "
                    "UTC_TIMESTAMP(6) - INTERVAL 1 DAY, %s, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, 'fsm_lock_x')",
                    [(f"old-{n}", name, None if n == 0 else "2020-01-01") for n in range(5000)],
                )
            conn.commit()
            held = [store.lock(name, key, heartbeat=False) for key in keys[:2]]
            released = store.lock(name, keys[2], heartbeat=False)
            released.release()
            with conn.cursor() as cur:
                cur.execute("FLUSH STATUS")
                cur.execute("SELECT lookup_key, owner FROM fsm_held_locks_v1 ORDER BY lookup_key")
                rows = cur.fetchall()
                cur.execute("SHOW SESSION STATUS LIKE 'Handler_read%'")
                reads = {k: int(v) for k, v in cur.fetchall()}
            assert rows == (("acct-0", held[0].owner), ("acct-1", held[1].owner))
            assert sum(reads.values()) < 100, reads  # 5,003 rows without the index
            for lease in held:
                lease.release()
        finally:
            conn.close()
