"""AsyncStore: the Store for asyncio applications (FastAPI, Starlette, aiohttp).

``await store.send(...)`` runs the Store's own call, unchanged, in a thread of a pool that
belongs to the AsyncStore, so the event loop never waits on the database: the same
procedures, the same errors (``pyfsm.errors``), the same retries and timeouts. The thread
pool is as large as the connection pool, so a call never waits for a thread while a
connection is free.

**Cancellation.** Cancelling an awaited call (``task.cancel()``, a timeout) cannot take
back what was already sent: the call goes on in its thread and commits or not, and the
coroutine raises ``CancelledError`` at once. So after a cancelled ``send`` the transition
either happened or did not. Send it again with the same ``request_id`` to find out and to
finish it: the repeat returns the original transition with ``replayed=True`` if it
happened, and applies it now if it did not. (Without a request id there is no telling.)

**Leases.** ``await store.lock(...)`` takes the locks in the pool and returns an
:class:`AsyncLease`: ``async with await store.lock("payout", "p-1") as lease:`` then
``await lease.send(...)``; leaving the block releases it (in the pool). Its heartbeat is
the Lease's own thread, so a busy event loop never lets a lease run out. ``await
store.call(fn)`` runs ``fn(sync_store)`` in the pool, for anything else.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Concatenate, ParamSpec, TypeVar

from .locks import Lease
from .models import TransitionResult
from .store import Store

P = ParamSpec("P")
R = TypeVar("R")


def _in_thread(
    method: Callable[Concatenate[Store, P], R],
) -> Callable[Concatenate[AsyncStore, P], Coroutine[Any, Any, R]]:
    """The Store method as a coroutine method of AsyncStore that runs it in the pool."""

    @functools.wraps(method)
    async def call(self: AsyncStore, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self._run(functools.partial(method, self.store, *args, **kwargs))

    return call


class AsyncLease:
    """A :class:`pyfsm.Lease` for coroutines: ``send``, ``renew`` and ``release`` run in the
    AsyncStore's pool; ``lease`` is the Lease itself (``owner``, ``lost``, ...)."""

    def __init__(self, lease: Lease, run: Callable[[Callable[[], Any]], Coroutine[Any, Any, Any]]) -> None:
        self.lease = lease
        self._run = run

    @property
    def lost(self) -> bool:
        return self.lease.lost

    async def send(self, event: str, **kwargs: Any) -> TransitionResult:
        """Send ``event`` to the leased instance under this lease (see :meth:`pyfsm.Lease.send`)."""
        result: TransitionResult = await self._run(functools.partial(self.lease.send, event, **kwargs))
        return result

    async def renew(self) -> None:
        await self._run(self.lease.renew)

    async def release(self) -> bool:
        """Release the locks (never raises, as :meth:`pyfsm.Lease.release`)."""
        released: bool = await self._run(self.lease.release)
        return released

    async def __aenter__(self) -> AsyncLease:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.release()


class AsyncStore:
    """``AsyncStore(dsn, pool_size=8, ...)``: the arguments of :class:`pyfsm.Store`.

    Use ``async with AsyncStore(dsn) as store:`` or ``await store.close()``. ``store.store``
    is the Store underneath (for what is not offered as a coroutine).
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        pool_size: int = 8,
        read_timeout: float | None = None,
        write_timeout: float | None = None,
        read_dsn: str | None = None,
    ) -> None:
        self.store = Store(
            dsn, pool_size=pool_size, read_timeout=read_timeout, write_timeout=write_timeout, read_dsn=read_dsn
        )
        self._executor = ThreadPoolExecutor(max_workers=pool_size, thread_name_prefix="pyfsm-aio")

    async def _run(self, call: Callable[[], R]) -> R:
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    async def call(self, fn: Callable[[Store], R]) -> R:
        """Run ``fn(store)`` (the blocking Store) in the pool, e.g. code that holds a lease."""
        return await self._run(functools.partial(fn, self.store))

    async def lock(self, machine: Any, key: str, **kwargs: Any) -> AsyncLease:
        """Take the instance's locks (the arguments of :meth:`pyfsm.Store.lock`) in the pool.

        Cancelled while the locks are being taken: the lease that arrives is released at once
        (in the pool), so a cancelled caller never leaves locks held until they expire.
        """
        taking = asyncio.get_running_loop().run_in_executor(
            self._executor, functools.partial(self.store.lock, machine, key, **kwargs)
        )
        try:
            lease = await asyncio.shield(taking)
        except asyncio.CancelledError:
            taking.add_done_callback(self._release_unwanted)
            raise
        return AsyncLease(lease, self._run)

    def _release_unwanted(self, taking: asyncio.Future[Lease]) -> None:
        if taking.cancelled() or taking.exception() is not None:
            return
        try:
            self._executor.submit(taking.result().release)
        except RuntimeError:  # the pool is shut down (closing): release here
            taking.result().release()

    async def close(self) -> None:
        """Wait for the calls under way (cancelled ones too), then close the connections."""
        await asyncio.get_running_loop().run_in_executor(None, self._close)

    def _close(self) -> None:
        self._executor.shutdown(wait=True)
        self.store.close()

    async def __aenter__(self) -> AsyncStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    migrate = _in_thread(Store.migrate)
    define = _in_thread(Store.define)
    sync = _in_thread(Store.sync)
    definition = _in_thread(Store.definition)
    create = _in_thread(Store.create)
    send = _in_thread(Store.send)
    send_many = _in_thread(Store.send_many)
    get = _in_thread(Store.get)
    allowed_events = _in_thread(Store.allowed_events)
    history = _in_thread(Store.history)
    in_state = _in_thread(Store.in_state)
    instances_in_state = _in_thread(Store.instances_in_state)
    account_history = _in_thread(Store.account_history)
    counts = _in_thread(Store.counts)
    state_at = _in_thread(Store.state_at)
    stats = _in_thread(Store.stats)
    locks = _in_thread(Store.locks)
    force_unlock = _in_thread(Store.force_unlock)
    set_locking = _in_thread(Store.set_locking)
    pause = _in_thread(Store.pause)
    resume = _in_thread(Store.resume)
    retry = _in_thread(Store.retry)
    enqueue = _in_thread(Store.enqueue)
    failed = _in_thread(Store.failed)
    errors = _in_thread(Store.errors)
    run_info = _in_thread(Store.run_info)
    send_at = _in_thread(Store.send_at)
    cancel_timer = _in_thread(Store.cancel_timer)
    timers = _in_thread(Store.timers)
    fire_timers = _in_thread(Store.fire_timers)
    # machines on the application's own tables (a progress callback of adopt runs in the pool's thread)
    attach = _in_thread(Store.attach)
    attach_plan = _in_thread(Store.attach_plan)
    adopt = _in_thread(Store.adopt)
    detach = _in_thread(Store.detach)
    attachment = _in_thread(Store.attachment)
