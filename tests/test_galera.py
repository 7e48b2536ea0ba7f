"""A MariaDB Galera cluster (issue 16, part 2, first steps): pyfsm migrated and a type defined
through one node are on every node, object for object, and the other nodes serve it.

Not here yet (issue 16): processes sending to the same instances through several nodes
(certification conflicts), locks, workers and the relay across nodes, and failover."""

from __future__ import annotations

import time
from typing import Any

import pymysql
import pytest
from galera_cluster import GaleraCluster, galera  # noqa: F401  (the fixture)
from test_migrations import schema_of

from pyfsm import Machine, Store, UnknownInstance

pytestmark = pytest.mark.slow

FLIP = Machine(name="flip", states=["a", "b"], start=["a"], transitions=[("flip", "a", "b"), ("flip", "b", "a")])


def eventually(check: Any, timeout: float = 10.0) -> Any:
    """Galera applies a commit on the other nodes right after it, not with it: wait for it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_installed_through_one_node_on_every_node(galera: GaleraCluster) -> None:  # noqa: F811
    nodes = galera.database()
    with Store(nodes[0].dsn()) as store:
        store.migrate()
        store.define(FLIP)
    galera.wait_synced()
    schemas = []
    for node, settings in zip(galera.nodes, nodes, strict=True):
        conn = pymysql.connect(**node.settings.connect_kwargs(database=False))
        try:
            schemas.append(schema_of(conn, settings.database))
        finally:
            conn.close()
    assert all(s == schemas[0] for s in schemas[1:])
    assert any(r[0] == "fsm_flip_send_v2" for r in schemas[0]["routines"])
    with Store(nodes[2].dsn()) as store:
        store.create("flip", "k-1")
    with Store(nodes[1].dsn()) as store:
        def replicated() -> None:
            try:
                store.get("flip", "k-1")
            except UnknownInstance as exc:
                raise AssertionError("not on node 1 yet") from exc
        eventually(replicated)  # applied on the other nodes right after the commit, not with it
        assert store.send("flip", "k-1", "flip", expected_version=1).to_state == "b"
