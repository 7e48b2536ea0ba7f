"""Promoting a replica when its primary dies (issue 16, part 3): with semi-synchronous
replication, nothing the primary acknowledged is lost, and request ids keep the senders'
repeats from applying anything twice.

A primary and a replica of the tests' own (tests/helpers/replica_pair.py), semi-synchronous: the
primary acknowledges a commit only once the replica has received it. Sender processes
flip instances with request ids through the primary; the primary is killed (SIGKILL);
the replica applies what it received, is made writable, and the senders are pointed at it
(what changing the application's DSN or a DNS name does) and repeat their unacknowledged
requests there. Every acknowledged request is then in the promoted server's history
exactly once, and every history is a valid chain."""

from __future__ import annotations

import multiprocessing
import random
import time
import traceback
from typing import Any

import pymysql
import pytest
from helpers.flips import FLIP, INSTANCES
from helpers.histories import check_chains
from helpers.relay import query
from helpers.replica_pair import ReplicaPair, replica_pair  # noqa: F401  (the fixture)

from pyfsm import FsmError, Store

pytestmark = pytest.mark.slow

SPAWN = multiprocessing.get_context("spawn")
SENDERS = 3


def sender(dsns: Any, seed: int, stop: Any, out: Any) -> None:
    """Flip random instances with request ids through ``dsns[0]`` until it fails, then through
    ``dsns[1]`` once it is there: each unacknowledged request repeated until acknowledged."""
    rng = random.Random(seed)
    acked: list[str] = []
    error = None
    current = 0
    try:
        store = Store(dsns[0], pool_size=1)
        n = 0
        while not stop.is_set():
            request, key = f"p{seed}-{n}", f"k-{rng.randrange(INSTANCES)}"
            while True:
                try:
                    store.send("flip", key, "flip", request_id=request)
                    break
                except FsmError:
                    if current == 0 and len(dsns) > 1 and dsns[1]:  # the application is pointed elsewhere
                        store.close()
                        store, current = Store(dsns[1], pool_size=1), 1
                    time.sleep(0.05)
            acked.append(request)
            n += 1
            time.sleep(0.002)
        store.close()
    except Exception:
        error = traceback.format_exc()
    out.put({"acked": acked, "error": error})


def admin(server: Any) -> Any:
    return pymysql.connect(**{**server.settings.connect_kwargs(database=False), "autocommit": True})


def test_a_promoted_semi_synchronous_replica_has_every_acknowledged_transition(replica_pair: ReplicaPair) -> None:  # noqa: F811
    pair = replica_pair
    with admin(pair.primary) as conn, conn.cursor() as cur:
        cur.execute("SET GLOBAL rpl_semi_sync_master_enabled = ON")
        cur.execute("SET GLOBAL rpl_semi_sync_master_timeout = 600000")  # never fall back to asynchronous
    with admin(pair.replica) as conn, conn.cursor() as cur:
        cur.execute("SET GLOBAL rpl_semi_sync_slave_enabled = ON")
        cur.execute("STOP SLAVE IO_THREAD")  # the receiving thread reads the setting when it starts
        cur.execute("START SLAVE IO_THREAD")
    primary, replica = pair.database("pyfsm_promote")
    with Store(primary.dsn()) as store:
        store.migrate()
        store.define(FLIP)
        for n in range(INSTANCES):
            store.create("flip", f"k-{n}")
    pair.caught_up()
    with admin(pair.primary) as conn, conn.cursor() as cur:
        cur.execute("SHOW STATUS LIKE 'Rpl_semi_sync_master_status'")
        assert cur.fetchone()[1] == "ON", "the primary waits for the replica's acknowledgement"

    manager = SPAWN.Manager()
    dsns = manager.list([primary.dsn(), ""])
    stop, out = SPAWN.Event(), SPAWN.Queue()
    procs = [SPAWN.Process(target=sender, args=(dsns, seed, stop, out)) for seed in range(SENDERS)]
    for p in procs:
        p.start()
    try:
        deadline = time.monotonic() + 60
        while query(primary, "SELECT COUNT(*) AS n FROM fsm_flip_transitions")[0]["n"] < 300:
            assert time.monotonic() < deadline, "the senders did not get going"
            time.sleep(0.05)
        pair.primary.kill()  # mid-stream: requests in flight, some committed and unacknowledged
        killed_at = time.monotonic()
        with admin(pair.replica) as conn, conn.cursor(pymysql.cursors.DictCursor) as cur:
            _applied_all_received(cur)
            cur.execute("STOP SLAVE")
            cur.execute("RESET SLAVE ALL")
            cur.execute("SET GLOBAL read_only = OFF")
        dsns[1] = replica.dsn()  # the application now points at the promoted replica
        promoted_in = time.monotonic() - killed_at
        time.sleep(2)
    finally:
        stop.set()
        reports = [out.get(timeout=120) for _ in procs]
        for p in procs:
            p.join(timeout=60)
    assert [r["error"] for r in reports if r["error"]] == []
    acked = sorted(request for r in reports for request in r["acked"])
    check_chains(replica, FLIP)
    applied = sorted(
        r["request_id"]
        for r in query(replica, "SELECT request_id FROM fsm_flip_transitions WHERE request_id IS NOT NULL")
    )
    assert applied == acked, (
        f"{len(set(acked) - set(applied))} acknowledged lost, "
        f"{len(set(applied) - set(acked))} applied but never acknowledged"
    )
    print(
        f"\npromotion: primary killed after {len(acked)} acknowledged sends in all; the replica "
        f"applied what it had received and took writes {promoted_in:.2f} s after the kill; nothing lost"
    )


def _applied_all_received(cur: Any, timeout: float = 30.0) -> None:
    """Until the replica's SQL thread has applied everything its IO thread received."""
    deadline = time.monotonic() + timeout
    while True:
        cur.execute("SHOW SLAVE STATUS")
        status = cur.fetchone()
        done = (status["Relay_Master_Log_File"], status["Exec_Master_Log_Pos"]) == (
            status["Master_Log_File"],
            status["Read_Master_Log_Pos"],
        )
        if done:
            return
        assert time.monotonic() < deadline, f"the replica did not apply its relay log: {status}"
        time.sleep(0.05)
