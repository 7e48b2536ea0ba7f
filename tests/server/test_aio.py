"""AsyncStore (pyfsm.aio) against the real server: the Store's calls as coroutines that never
block the event loop, the same errors, and cancellation whose outcome a request id tells.

The tests are coroutines run by anyio's pytest plugin on asyncio (the backend AsyncStore is for)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pymysql
import pytest
from helpers.common import unique

from pyfsm import Machine, Store, TransitionNotAllowed, UnknownInstance
from pyfsm.aio import AsyncStore
from pyfsm.db import parse_dsn

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def blocker(dsn: str, machine: Machine, key: str) -> Any:
    """A plain connection holding the instance's row lock, so that a transition waits on it."""
    conn = pymysql.connect(**parse_dsn(dsn).connect_kwargs())
    conn.autocommit(False)
    with conn.cursor() as cur:
        cur.execute(f"SELECT id FROM `fsm_{machine.name}` WHERE instance_key = %s FOR UPDATE", (key,))
    return conn


def waiting_on(dsn: str, machine: Machine, key: str) -> bool:
    """Whether a statement on the instance ``key`` runs on the server (a send waiting for its
    row lock). The process list shows the procedure's statement that runs: MariaDB with the
    key in it (NAME_CONST), MySQL with the parameter's name instead, so there it is the row
    lock's SELECT ... FOR UPDATE on the type's table. (Not information_schema.INNODB_TRX: InnoDB
    refreshes it only when it was not read for 0.1 s, and this is polled faster.)"""
    conn = pymysql.connect(**parse_dsn(dsn).connect_kwargs())
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE id <> CONNECTION_ID() "
                "AND db = DATABASE() AND command = 'Query' AND (info LIKE %s OR info LIKE %s)",
                (f"%'{key}'%", f"%`fsm_{machine.name}` WHERE instance_key = %FOR UPDATE%"),
            )
            return bool(cur.fetchone()[0])
    finally:
        conn.close()


async def test_the_store_api_as_coroutines_with_the_same_results_and_errors(dsn: str, order: Machine) -> None:
    async def main() -> None:
        async with AsyncStore(dsn, pool_size=4) as store:
            key = unique("a")
            created = await store.create(order, key, data={"total": 5})
            assert created.to_state == "new"
            paid = await store.send(order, key, "pay", request_id=f"{key}-pay")
            assert (paid.from_state, paid.to_state, paid.replayed) == ("new", "paid", False)
            assert (await store.get(order, key)).state == "paid"
            assert [h.to_state for h in await store.history(order, key)] == ["new", "paid"]
            assert (await store.counts(order)).get("paid", 0) >= 1
            with pytest.raises(TransitionNotAllowed):
                await store.send(order, key, "deliver")
            with pytest.raises(UnknownInstance):
                await store.get(order, unique("missing"))
            many = await asyncio.gather(*(store.create(order, unique("g")) for _ in range(20)))
            assert {r.to_state for r in many} == {"new"}
            assert (await store.call(lambda s: s.get(order, key))).state == "paid"

    await main()


async def test_a_call_waiting_on_the_database_does_not_block_the_event_loop(dsn: str, order: Machine) -> None:
    key = unique("b")
    with Store(dsn) as sync_store:
        sync_store.create(order, key)
    holder = blocker(dsn, order, key)

    async def main() -> tuple[float, str]:
        async with AsyncStore(dsn, pool_size=2) as store:
            sending = asyncio.ensure_future(store.send(order, key, "pay"))
            gaps, last = [], time.monotonic()
            for _ in range(40):  # 0.4 s while the send waits for the row lock
                await asyncio.sleep(0.01)
                now = time.monotonic()
                gaps.append(now - last)
                last = now
            assert not sending.done(), "the send waits for the row lock"
            holder.rollback()
            result = await sending
            return max(gaps), result.to_state

    try:
        longest, state = await main()
    finally:
        holder.close()
    assert state == "paid"
    assert longest < 0.1, f"the event loop stalled {longest:.3f} s"


async def test_a_cancelled_send_happened_or_not_and_its_request_id_tells_which(dsn: str, order: Machine) -> None:
    """Cancelled while the server was applying it: it happened, and the repeat says so
    (replayed). Cancelled before it could start (the pool was busy): it did not, and the
    repeat applies it."""
    happened, not_yet = unique("c"), unique("d")
    with Store(dsn) as sync_store:
        sync_store.create(order, happened)
        sync_store.create(order, not_yet)
    holder = blocker(dsn, order, happened)

    async def main() -> tuple[Any, Any]:
        async with AsyncStore(dsn, pool_size=1) as store:  # one thread: the second call queues
            first = asyncio.ensure_future(store.send(order, happened, "pay", request_id=f"{happened}-pay"))
            deadline = time.monotonic() + 20
            while not waiting_on(dsn, order, happened):  # the send is on the server, waiting for the row lock
                assert time.monotonic() < deadline and not first.done(), f"the send never waited for the row: {first}"
                await asyncio.sleep(0.02)
            second = asyncio.ensure_future(store.send(order, not_yet, "pay", request_id=f"{not_yet}-pay"))
            await asyncio.sleep(0.05)
            first.cancel()
            second.cancel()
            for task in (first, second):
                with pytest.raises(asyncio.CancelledError):
                    await task
            holder.rollback()  # the first send goes on in its thread and commits
            await asyncio.sleep(0.3)
            return (
                await store.send(order, happened, "pay", request_id=f"{happened}-pay"),
                await store.send(order, not_yet, "pay", request_id=f"{not_yet}-pay"),
            )

    try:
        again_happened, again_not_yet = await main()
    finally:
        holder.close()
    assert (again_happened.to_state, again_happened.replayed) == ("paid", True)
    with Store(dsn) as sync_store:
        assert sync_store.get(order, happened).version == 2  # applied once
        assert sync_store.get(order, not_yet).version == 2
    assert (again_not_yet.to_state, again_not_yet.replayed) == ("paid", False)  # it had not run


async def test_leases_as_coroutines_and_a_cancelled_lock_leaves_nothing_held(dsn: str, store: Store) -> None:
    from helpers.common import order_machine

    from pyfsm import LockNotAcquired

    payout = order_machine(uses_global_lock=True)
    store.define(payout)
    account = unique("acct")
    first, second = unique("l"), unique("l")
    store.create(payout, first, lookup_key=account)
    store.create(payout, second, lookup_key=account)

    async def main() -> None:
        async with AsyncStore(dsn, pool_size=4) as astore:
            async with await astore.lock(payout, first) as lease:
                assert (await lease.send("pay")).to_state == "paid"
                with pytest.raises(LockNotAcquired):  # one holder per account
                    await astore.lock(payout, second, attempts=1)
                assert not lease.lost
            assert await astore.locks(lookup_key=account) == []  # released on leaving the block
            taking = asyncio.ensure_future(astore.lock(payout, second))
            await asyncio.sleep(0)  # the lock is being taken in the pool
            taking.cancel()
            with pytest.raises(asyncio.CancelledError):
                await taking
            await asyncio.sleep(0.5)  # the lease arrives meanwhile, and is released at once
            deadline = time.monotonic() + 10
            while await astore.locks(lookup_key=account):  # the lease that arrived was released
                assert time.monotonic() < deadline, "a cancelled lock left its lease held"
                await asyncio.sleep(0.05)
            async with await astore.lock(payout, second) as again:  # free for the next taker
                assert (await again.send("pay")).to_state == "paid"

    await main()
