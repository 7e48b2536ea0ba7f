"""Exact matches in a database of the server's default collation.

A user's database is rarely utf8mb4_bin: MariaDB 11.8 creates databases as
``utf8mb4_uca1400_ai_ci`` (case- and accent-insensitive: 'Café' = 'cafe', 'ß' = 'ss'), 10.11 as
``utf8mb4_general_ci``, MySQL 9.7 as ``utf8mb4_0900_ai_ci``. Routine parameters and variables
without a collation of their own take the database's when the routines are created, and so
would compare that way. pyfsm pins ``utf8mb4_bin`` on every column and on every parameter or
variable it compares keys, names, request ids, owners and lookup keys with, so that keys which
differ only in case or accents stay distinct instances, locks and requests on every server;
and a DBA's literal compared with pyfsm's columns compares exactly too (the column's
collation wins). What each server answers here is the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from helpers.common import admin, fetch, order_machine, unique

from pyfsm import LockNotAcquired, Store
from pyfsm.db import Settings

# each group: keys equal under a case- or accent-insensitive collation, distinct under utf8mb4_bin
LOOKALIKES = (("cafe", "Café", "CAFE", "café"), ("strasse", "straße"), ("a-b", "A-B"))


@pytest.fixture(scope="module")
def default_collation_store(server: Settings) -> Iterator[Store]:
    """pyfsm migrated into a database created with nothing but the character set, so that it
    takes the server's default utf8mb4 collation, as a user's database does."""
    name = f"pyfsm_coll_{unique('db')}"
    conn = admin(server)
    try:
        conn.cursor().execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
        collation = fetch(
            conn, f"SELECT DEFAULT_COLLATION_NAME AS c FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '{name}'"
        )
    finally:
        conn.close()
    assert collation[0]["c"] != "utf8mb4_bin", collation  # the point: not the collation pyfsm pins
    store = Store(server.with_database(name).dsn())
    store.migrate()
    try:
        yield store
    finally:
        store.close()
        conn = admin(server)
        try:
            conn.cursor().execute(f"DROP DATABASE `{name}`")
        finally:
            conn.close()


def test_keys_that_differ_in_case_or_accents_are_different_instances(default_collation_store: Store) -> None:
    store = default_collation_store
    machine = order_machine()
    store.define(machine)
    keys = [key for group in LOOKALIKES for key in group]
    for key in keys:
        store.create(machine.name, key, data={"key": key})
    for group in LOOKALIKES:
        first, *others = group
        store.send(machine.name, first, "pay")
        assert store.get(machine.name, first).state == "paid"
        for other in others:
            got = store.get(machine.name, other)
            assert (got.key, got.state, got.data) == (other, "new", {"key": other})
            assert [h.to_state for h in store.history(machine.name, other)] == ["new"]
    assert store.counts(machine) == {"paid": len(LOOKALIKES), "new": len(keys) - len(LOOKALIKES)}
    # the instances of a key's look-alikes are not found by it: reads and lists are exact
    assert sorted(i.key for i in store.in_state(machine.name, "paid")) == sorted(g[0] for g in LOOKALIKES)


def test_a_request_id_matches_only_itself(default_collation_store: Store) -> None:
    store = default_collation_store
    machine = order_machine()
    store.define(machine)
    store.create(machine.name, "k1")
    store.create(machine.name, "k2")
    first = store.send(machine.name, "k1", "pay", request_id="req-é")
    assert store.send(machine.name, "k1", "pay", request_id="req-é").replayed
    # a look-alike request id is another request: on k2 it applies, not a replay of k1's
    other = store.send(machine.name, "k2", "pay", request_id="REQ-e")
    assert not other.replayed and other.transition_id != first.transition_id
    assert store.get(machine.name, "k2").state == "paid"


def test_lock_owners_and_lookup_keys_are_exact(default_collation_store: Store) -> None:
    store = default_collation_store
    machine = order_machine(uses_local_lock=True)
    store.define(machine)
    store.create(machine.name, "o1", lookup_key="Account-É")
    store.create(machine.name, "o2", lookup_key="account-e")
    with store.lock(machine.name, "o1", owner="Ann"):
        # another account's lock: the look-alike lookup key is not the same account
        with store.lock(machine.name, "o2", owner="ann") as other:
            assert other.send("pay").to_state == "paid"
        # the same account, an owner that differs in case: another owner, refused
        store.create(machine.name, "o3", lookup_key="Account-É")
        with pytest.raises(LockNotAcquired):
            store.lock(machine.name, "o3", owner="ANN", attempts=1)
    assert [h.lookup_key for h in store.locks(lookup_key="account-e")] == []


def test_a_dbas_literal_compares_exactly_with_pyfsms_columns(default_collation_store: Store) -> None:
    store = default_collation_store
    machine = order_machine()
    store.define(machine)
    for key in LOOKALIKES[0]:
        store.create(machine.name, key)
    conn = admin(store.settings)
    try:
        conn.select_db(store.settings.database)
        rows: list[dict[str, Any]] = fetch(
            conn, f"SELECT instance_key FROM `fsm_{machine.name}` WHERE instance_key = 'cafe'"
        )
        assert [r["instance_key"] for r in rows] == ["cafe"]
        with conn.cursor() as cur:
            cur.execute(f"UPDATE `fsm_{machine.name}` SET current_state = 'paid' WHERE instance_key = 'Café'")
            assert cur.rowcount == 1
        conn.commit()
        # what the database's own collation does: a DBA's scratch table of the same keys, made
        # without a collation, finds every look-alike (unless its column names utf8mb4_bin)
        scratch = f"scratch_{machine.name}"
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE `{scratch}` (k VARCHAR(191) NOT NULL) ENGINE=InnoDB")
            cur.executemany(f"INSERT INTO `{scratch}` VALUES (%s)", [(k,) for k in LOOKALIKES[0]])
        conn.commit()
        loose = fetch(conn, f"SELECT k FROM `{scratch}` WHERE k = 'cafe'")
        exact = fetch(conn, f"SELECT k FROM `{scratch}` WHERE k = 'cafe' COLLATE utf8mb4_bin")
        assert (len(loose), [r["k"] for r in exact]) == (len(LOOKALIKES[0]), ["cafe"])
    finally:
        conn.close()
    assert {k: store.get(machine.name, k).state for k in LOOKALIKES[0]} == {
        "cafe": "new",
        "Café": "paid",
        "CAFE": "new",
        "café": "new",
    }
