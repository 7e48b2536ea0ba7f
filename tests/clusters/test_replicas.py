"""Read replicas (issue 16, part 1): Store(read_dsn=...) and --read-dsn send the reads that may
be stale to a replica and everything else to the primary, against a real primary/replica pair
of the tests' own (tests/helpers/replica_pair.py), the replica read_only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pymysql
import pytest
from helpers.cli import pyfsm
from helpers.common import order_machine
from helpers.replica_pair import ReplicaPair, replica_pair  # noqa: F401  (the fixture)

from pyfsm import SchemaVersionMismatch, Store
from pyfsm.schema.grants import Account, grant

PASSWORD = "App-" + uuid.uuid4().hex
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pair_db(replica_pair: ReplicaPair) -> Iterator[dict[str, Any]]:  # noqa: F811
    """A migrated database on the primary with an order type, a few instances on two accounts,
    and an app account (no right to bypass read_only), all replicated."""
    primary, replica = replica_pair.database()
    machine = order_machine("order")
    with Store(primary.dsn()) as store:
        store.migrate()
        store.define(machine)
        for n in range(6):
            store.create("order", f"o-{n}", lookup_key=f"acct-{n % 2}")
        for n in range(4):
            store.send("order", f"o-{n}", "pay")
        store.send("order", "o-0", "ship")
    user, reader = f"app_{primary.database[-8:]}", f"rep_{primary.database[-8:]}"
    conn = pymysql.connect(**{**primary.connect_kwargs(), "autocommit": True})
    try:
        grant(
            conn,
            [Account.parse(f"{user}@127.0.0.1", "app"), Account.parse(f"{reader}@127.0.0.1", "reporting")],
            passwords={f"{user}@127.0.0.1": PASSWORD, f"{reader}@127.0.0.1": PASSWORD},
        )
    finally:
        conn.close()
    replica_pair.caught_up()
    yield {
        "pair": replica_pair,
        "primary": replace(primary, user=user, password=PASSWORD),
        "replica": replace(replica, user=user, password=PASSWORD),
        "machine": machine,
        "primary_reporting": replace(primary, user=reader, password=PASSWORD),
        "replica_reporting": replace(replica, user=reader, password=PASSWORD),
    }


def reads(store: Store) -> dict[str, Any]:
    """Every read that Store(read_dsn=...) sends to the replica."""
    return {
        "history": [(h.sort_key, h.event, h.to_state) for h in store.history("order", "o-0")],
        "counts": store.counts("order"),
        "in_state": [i.key for i in store.in_state("order", "paid")],
        "instances_in_state": [i.key for i in store.instances_in_state("paid")],
        "account_history": [(e.machine, e.sort_key, e.to_state) for e in store.account_history("acct-0")],
        "state_at": store.state_at("order", "o-0", datetime.now(UTC)).state,  # type: ignore[union-attr]
        "stats": [(s.machine, s.instances) for s in store.stats()],
    }


def rows_written(pair: ReplicaPair) -> int:
    """Rows the replica's InnoDB inserted, updated or deleted since it started (any session)."""
    conn = pymysql.connect(**pair.replica.settings.connect_kwargs(database=False))
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SHOW GLOBAL STATUS WHERE Variable_name IN "
                "('Innodb_rows_inserted', 'Innodb_rows_updated', 'Innodb_rows_deleted')"
            )
            return sum(int(value) for _, value in cur.fetchall())
    finally:
        conn.close()


@pytest.fixture
def replication_stopped(pair_db: dict[str, Any]) -> Iterator[None]:
    """The replica stops applying the primary's changes for the test (started again after it)."""
    pair: ReplicaPair = pair_db["pair"]
    admin = pymysql.connect(**{**pair.replica.settings.connect_kwargs(database=False), "autocommit": True})
    admin.cursor().execute("STOP SLAVE")
    try:
        yield
    finally:
        admin.cursor().execute("START SLAVE")
        admin.close()
        pair.caught_up()


def test_reads_on_the_replica_match_the_primary_once_it_caught_up(pair_db: dict[str, Any]) -> None:
    primary, replica = pair_db["primary"], pair_db["replica"]
    with Store(primary.dsn()) as only_primary, Store(primary.dsn(), read_dsn=replica.dsn()) as both:
        assert reads(both) == reads(only_primary)
        assert reads(both)["counts"] == {"new": 2, "paid": 3, "shipped": 1}


def test_stale_reads_come_from_the_replica_and_everything_else_from_the_primary(
    pair_db: dict[str, Any], replication_stopped: None
) -> None:
    """With replication stopped, a transition on the primary shows in get() (the primary) and
    not yet in counts(), history() or the listings (the replica): which calls may be stale is
    exactly what the Store documents. Writes through such a Store go to the primary."""
    primary, replica = pair_db["primary"], pair_db["replica"]
    written = rows_written(pair_db["pair"])
    with Store(primary.dsn(), read_dsn=replica.dsn()) as store:
        before = reads(store)
        store.send("order", "o-5", "pay")  # a write: to the primary
        assert store.get("order", "o-5").state == "paid"
        assert reads(store) == before  # stale: the replica has not applied it
        with Store(primary.dsn()) as only_primary:
            assert only_primary.counts("order")["paid"] == before["counts"]["paid"] + 1
    # nothing was written on the replica. Its read_only cannot show that on MariaDB: pyfsm's
    # procedures are SQL SECURITY DEFINER, and a definer with READ ONLY ADMIN (root) may write
    # through them; the server's own row counters can
    assert rows_written(pair_db["pair"]) == written
    stale = pyfsm("counts", "order", "--dsn", primary.dsn(), "--read-dsn", replica.dsn(), "--json")
    fresh = pyfsm("counts", "order", "--dsn", primary.dsn(), "--json")
    assert stale.returncode == fresh.returncode == 0, stale.stderr + fresh.stderr
    assert json.loads(stale.stdout)["paid"] + 1 == json.loads(fresh.stdout)["paid"]

    # the metrics (a reporting account's) read the replica when told with --read-dsn, and
    # only then: $PYFSM_READ_DSN leaves them on the primary
    def paid(*read_dsn: str, env: dict[str, str] | None = None) -> float:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pyfsm",
                "metrics",
                "--dsn",
                pair_db["primary_reporting"].dsn(),
                *read_dsn,
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={k: v for k, v in os.environ.items() if k != "PYFSM_READ_DSN"} | (env or {}),
        )
        assert result.returncode == 0, result.stderr
        [value] = [
            s["value"]
            for f in json.loads(result.stdout)
            if f["name"] == "pyfsm_instances"
            for s in f["samples"]
            if s["labels"] == {"machine": "order", "state": "paid"}
        ]
        return float(value)

    on_primary = json.loads(fresh.stdout)["paid"]
    assert paid("--read-dsn", pair_db["replica_reporting"].dsn()) + 1 == paid() == on_primary
    assert paid(env={"PYFSM_READ_DSN": pair_db["replica_reporting"].dsn()}) == on_primary


def test_a_replica_behind_the_primarys_migration_is_refused_with_the_fix(replica_pair: ReplicaPair) -> None:  # noqa: F811
    primary, replica = replica_pair.database("pyfsm_repl_behind")
    admin = pymysql.connect(**{**replica_pair.replica.settings.connect_kwargs(database=False), "autocommit": True})
    admin.cursor().execute("STOP SLAVE")
    try:
        with Store(primary.dsn()) as store:
            store.migrate()
            store.define(order_machine("order"))
        with Store(primary.dsn(), read_dsn=replica.dsn()) as store:
            store.create("order", "o-1")  # writes and get() need only the primary
            assert store.get("order", "o-1").state == "new"
            with pytest.raises(SchemaVersionMismatch, match="let the replica catch up"):
                store.counts("order")
    finally:
        admin.cursor().execute("START SLAVE")
        admin.close()
    replica_pair.caught_up()
    with Store(primary.dsn(), read_dsn=replica.dsn()) as store:
        assert store.counts("order") == {"new": 1}
