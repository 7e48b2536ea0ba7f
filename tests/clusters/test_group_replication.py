"""MySQL Group Replication, the engine under InnoDB Cluster (issue 26, item 4): pyfsm on a
three-member single-primary group of the tests' own (tests/helpers/group_replication.py).

pyfsm writes through the group's primary only: a new connection passes over a member that
is not the primary (db.refuse_unless_writer), so a DSN naming every member, in any order,
lands on the primary and a DSN naming only a secondary is refused with NotWriterNode. What
is migrated and defined through the primary is on every member, object for object, and the
secondaries serve reads. A planned change of primary (group_replication_set_as_primary)
under sender processes moves their writes to the new primary, nothing acknowledged lost or
doubled. The primary killed under load: tests/clusters/test_group_replication_failover.py; relays:
tests/clusters/test_group_replication_relay.py.

Run where PYFSM_TEST_DSN is a MySQL server (the MySQL pass of CI); skipped elsewhere.
"""

from __future__ import annotations

import itertools
import multiprocessing
import time
from dataclasses import replace

import pymysql
import pytest
from helpers.common import granted_accounts
from helpers.flips import FLIP, INSTANCES, eventually  # a secondary applies a commit right after it
from helpers.group_flips import assert_acknowledged_once, sender
from helpers.group_replication import GroupReplication, group_replication_fixture  # noqa: F401  (the group)
from helpers.relay import query, wait_for
from helpers.schemas import schema_of

from pyfsm import NotWriterNode, Store, UnknownInstance
from pyfsm.db import Database, Settings

pytestmark = pytest.mark.slow

SPAWN = multiprocessing.get_context("spawn")


def test_installed_through_the_primary_on_every_member(group_replication: GroupReplication) -> None:
    group = group_replication
    databases = group.database("pyfsm_gr_install")
    primary = group.primary_index()
    with Store(databases[primary].dsn()) as store:
        store.migrate()
        store.define(FLIP)
        store.create("flip", "k-1")
    group.wait_applied()
    schemas = []
    for member, settings in zip(group.members, databases, strict=True):
        conn = pymysql.connect(**member.settings.connect_kwargs(database=False))
        try:
            schemas.append(schema_of(conn, settings.database))
            assert schemas[-1]["tables"] and schemas[-1]["routines"] and schemas[-1]["triggers"], schemas[-1]
        finally:
            conn.close()
    assert all(s == schemas[0] for s in schemas[1:]), "every member holds the same objects"
    assert any(r[0] == "fsm_flip_send_v2" for r in schemas[0]["routines"])
    for n, settings in enumerate(databases):  # every member serves reads of the type (read_dsn: any member)
        with Store(group.listing(databases).dsn(), read_dsn=settings.dsn()) as store:
            assert [h.to_state for h in store.history("flip", "k-1")] == ["a"], n
    with Store(group.listing(databases).dsn()) as store:
        assert store.send("flip", "k-1", "flip", expected_version=1).to_state == "b"
        assert store.settings.in_use == (databases[primary].host, databases[primary].port)
    for settings in databases:
        with Store(settings.dsn(), read_dsn=settings.dsn()) as store:

            def applied(store: Store = store) -> None:
                try:
                    assert len(store.history("flip", "k-1")) == 2
                except UnknownInstance as exc:
                    raise AssertionError("not applied yet") from exc

            eventually(applied)


def test_writes_go_through_the_primary_only(group_replication: GroupReplication) -> None:
    """A DSN naming a secondary alone is refused with NotWriterNode (31025, retryable); one naming
    every member, secondaries first, lands on the primary; reads through read_dsn may use a
    secondary. A write that reaches a secondary anyway (galera_writes=any turns the check
    off) is refused by the server's super_read_only: 1290, NotWriterNode as well."""
    group = group_replication
    databases = group.database("pyfsm_gr_writer")
    primary = group.primary_index()
    secondaries = [n for n in range(len(databases)) if n != primary]
    with Store(databases[primary].dsn()) as store:
        store.migrate()
        store.define(FLIP)
        store.create("flip", "w-1")
    group.wait_applied()
    for n in secondaries:
        with Store(databases[n].dsn()) as store, pytest.raises(NotWriterNode) as refused:
            store.send("flip", "w-1", "flip")
        assert refused.value.errno == 31025 and refused.value.retryable
        assert "not its group's primary" in str(refused.value)
    listed = group.listing(databases, [*secondaries, primary])
    with Store(listed.dsn(), read_dsn=databases[secondaries[0]].dsn()) as store:
        assert store.send("flip", "w-1", "flip").to_state == "b"
        assert store.settings.in_use == (databases[primary].host, databases[primary].port)
        eventually(lambda: _assert_history(store, "w-1", 2))  # read through a secondary
    anywhere = replace(databases[secondaries[0]], galera_writes="any")
    with Store(anywhere.dsn()) as store, pytest.raises(NotWriterNode) as read_only:
        store.send("flip", "w-1", "flip")
    assert read_only.value.errno == 1290 and read_only.value.retryable  # super_read_only, by number
    with Store(listed.dsn()) as store:
        assert len(store.history("flip", "w-1")) == 2, "the refused write applied nothing"
    # an account of `pyfsm grant` may not read performance_schema: judged by super_read_only alone
    with granted_accounts(databases[primary], databases[primary], ["app"], "pyfsm_gr") as accounts:
        app = group.listing(
            [replace(s, user=accounts["app"].user, password=accounts["app"].password) for s in databases],
            [*secondaries, primary],
        )
        group.wait_applied()  # the account is created through the primary
        with Store(app.dsn()) as store:
            assert store.send("flip", "w-1", "flip").to_state == "a"
            assert store.settings.in_use == (databases[primary].host, databases[primary].port)


def test_a_pooled_connection_on_a_demoted_primary_is_replaced_on_checkout(group_replication: GroupReplication) -> None:
    """The checkout re-check (db._is_alive, every WRITER_RECHECK_SECONDS): after a switchover, a
    pooled connection on the old primary is found to be on a secondary and replaced through
    the DSN's members, before any call reaches the old primary."""
    group = group_replication
    databases, listed = prepare_flips(group, "pyfsm_gr_recheck")
    old = group.primary_index()
    new = (old + 1) % len(group.members)
    database = Database(listed, pool_size=1)
    try:
        with database.connection() as pooled:
            raw = pooled._con._con
            assert (raw.host, raw.port) == (databases[old].host, databases[old].port)
        uuid = group.members[new].sql("SELECT @@server_uuid")[0][0]
        group.members[old].sql("SELECT group_replication_set_as_primary(%s)", (uuid,), timeout=120)
        refused = _raised(group, old, 1290)
        raw.pyfsm_writer_checked = time.monotonic() - 60  # as if checked long ago
        with database.connection() as pooled:
            now = pooled._con._con
            assert (now.host, now.port) == (databases[new].host, databases[new].port)
            with now.cursor() as cur:
                cur.execute("DO 0")
        assert not raw.open, "the connection on the old primary was closed"
        assert _raised(group, old, 1290) == refused, "nothing was sent to the old primary"
    finally:
        database.close()


def _assert_history(store: Store, key: str, rows: int) -> None:
    assert len(store.history("flip", key)) == rows


def prepare_flips(group: GroupReplication, prefix: str) -> tuple[list[Settings], Settings]:
    """A database with the flip type and its instances; its settings per member and a DSN listing all."""
    databases = group.database(prefix)
    listed = group.listing(databases)
    with Store(listed.dsn()) as store:
        store.migrate()
        store.define(FLIP)
        for n in range(INSTANCES):
            store.create("flip", f"k-{n}")
    group.wait_applied()
    return databases, listed


def test_a_switchover_moves_the_writes_to_the_new_primary(group_replication: GroupReplication) -> None:
    """group_replication_set_as_primary() while three sender processes flip instances through
    a DSN listing every member: the old primary turns super_read_only; a call on one of its
    pooled connections is refused (1290, NotWriterNode) and made again on a new connection,
    which passes over it to the new primary. Nothing acknowledged is lost or applied twice."""
    group = group_replication
    databases, listed = prepare_flips(group, "pyfsm_gr_switch")
    old = group.primary_index()
    new = (old + 1) % len(group.members)
    stop, out = SPAWN.Event(), SPAWN.Queue()
    procs = [SPAWN.Process(target=sender, args=(listed.dsn(), seed, stop, out)) for seed in range(3)]
    for p in procs:
        p.start()
    try:
        wait_for(
            lambda: _count(databases[old], "SELECT COUNT(*) FROM fsm_flip_transitions") > INSTANCES + 150,
            "the senders to be under way",
            timeout=60,
        )
        uuid = group.members[new].sql("SELECT @@server_uuid")[0][0]
        refused_before = _raised(group, old, 1290)
        switched_at = time.monotonic()
        group.members[old].sql("SELECT group_replication_set_as_primary(%s)", (uuid,), timeout=120)
        switched = time.monotonic() - switched_at
        assert group.primary_index() == new
        writes = _count(databases[new], "SELECT COUNT(*) FROM fsm_flip_transitions")
        wait_for(
            lambda: _count(databases[new], "SELECT COUNT(*) FROM fsm_flip_transitions") > writes + 150,
            "the senders to go on through the new primary",
            timeout=60,
        )
    finally:
        stop.set()
        reports = [out.get(timeout=180) for _ in procs]
        for p in procs:
            p.join(timeout=60)
    errors = [r["error"] for r in reports if r["error"]]
    assert not errors, "\n".join(errors)
    refused = _raised(group, old, 1290) - refused_before  # calls the old primary refused, made again elsewhere
    group.wait_applied()
    moves = assert_acknowledged_once(databases, reports)
    longest = max(b - a for r in reports for a, b in itertools.pairwise(r["times"]))
    kinds: dict[str, int] = {}
    for r in reports:
        for kind, n in r["kinds"].items():
            kinds[kind] = kinds.get(kind, 0) + n
    print(
        f"\ngroup replication switchover: set_as_primary took {switched:.2f} s; the longest wait between two sends "
        f"of a sender {longest:.2f} s; {moves} flips, {sum(len(r['acked']) for r in reports)} "
        f"acknowledged; {refused} calls refused by the old primary (1290) and made again on the new one; failed "
        f"attempts the senders repeated: {kinds}"
    )


def _count(settings: Settings, sql: str) -> int:
    return int(next(iter(query(settings, sql)[0].values())))


def _raised(group: GroupReplication, index: int, errno: int) -> int:
    """How often a member has raised an error number (performance_schema's error summary)."""
    rows = group.members[index].sql(
        "SELECT SUM_ERROR_RAISED FROM performance_schema.events_errors_summary_global_by_error WHERE ERROR_NUMBER = %s",
        (errno,),
    )
    return int(rows[0][0]) if rows else 0
