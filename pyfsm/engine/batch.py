"""Running several claimed instances side by side, their steps committed together.

A worker that claims a batch of runs (``Worker(batch=n)``, ``pyfsm worker --batch n``) runs
them in rounds: each round runs the next handler of every instance of the batch, then
commits all of those steps with one call of ``fsm_{type}_steps_v1``, one transaction. Most of
what a step costs the server is the call and the commit, so a round of ten steps costs little
more than one step does.

Nothing is weaker than one instance at a time:

* Each instance is still committed after each of its steps (save_after_step): a crash loses
  at most the step in progress of each instance, and its transition is applied at most once
  (steps_v1 makes step_v2's checks for every instance).
* An instance whose commit is refused (its claim lost, its version moved, a transition the
  database does not allow) is rolled back alone, inside the transaction, and handled as
  run_claimed handles it; the others are committed.
* A deadlock rolls the whole round back (the database retries it twice); if it still fails,
  or the call fails for any other reason, the round is committed one instance at a time.

What changes is latency: an instance's next step waits for the handlers of the whole round.
Instances that use locks (each holds a lock connection of its own) or run with
save_after_step off (which already groups steps) are run one at a time, as before.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .. import db
from ..db.driver import errors as pymysql_errors
from ..errors import DatabaseUnavailable, FsmError
from ..schema import routines
from .context import ProcessLike, RunResult
from .runner import ClaimedRun, recover

if TYPE_CHECKING:
    from ..store import Store
    from .metrics import WorkerMetrics

log = logging.getLogger("pyfsm.engine")


def run_claimed_batch(
    store: Store,
    process: ProcessLike,
    rows: Sequence[Mapping[str, Any]],
    owner: str,
    stop: threading.Event | None = None,
    metrics: WorkerMetrics | None = None,
) -> list[RunResult]:
    """Run the instances the caller has claimed (rows of fsm_claim_v1), side by side; a
    RunResult for each, in the order of ``rows``. ``metrics``: a worker's, to time handlers
    and commits."""
    runs = [ClaimedRun(store, process, row, owner, stop, metrics) for row in rows]
    results: dict[int, RunResult] = {}
    together = [run for run in runs if run.save_after_step and not run.uses_locks]
    for run in runs:
        if run not in together:
            try:
                results[id(run)] = run.run()
            except FsmError as exc:
                results[id(run)] = recover(run, exc)
    active = together
    while active:
        requests: list[tuple[ClaimedRun, dict[str, Any]]] = []
        for run in active:
            try:
                request = run.advance()
            except FsmError as exc:  # recording a failure failed
                results[id(run)] = recover(run, exc)
                continue
            if request is None:
                results[id(run)] = run.result()
            else:
                requests.append((run, request))
        going_on = _commit_round(store, process, requests, owner, results)
        active = [run for run in going_on if id(run) not in results]
    return [results[id(run)] for run in runs]


#: At most this much JSON per steps_v1 call: a round of large data is split into several
#: calls (each its own transaction) rather than exceed the server's max_allowed_packet
#: (16 MiB by default on MariaDB, 64 MiB on MySQL 8), which would drop the connection.
MAX_CALL_BYTES = 1 << 20


def _commit_round(
    store: Store,
    process: ProcessLike,
    requests: list[tuple[ClaimedRun, dict[str, Any]]],
    owner: str,
    results: dict[int, RunResult],
) -> list[ClaimedRun]:
    """Commit one round; the runs that go on. Each run that ends gets its result."""
    going_on: list[ClaimedRun] = []
    group: list[tuple[ClaimedRun, dict[str, Any], str]] = []
    size = 0
    for run, request in requests:
        key, _owner, version, steps, status, go_on, _seconds, requeue, data = run.step_args(**request)
        item = (
            f'{{"key":{json.dumps(key, ensure_ascii=False)},"version":{version},"steps":{steps},'
            f'"status":"{status}","continue":{go_on},"requeue_seconds":{json.dumps(requeue)},'
            f'"data":{"null" if data is None else data}}}'
        )
        if group and size + len(item) > MAX_CALL_BYTES:
            going_on += _commit_group(store, process, group, owner, results)
            group, size = [], 0
        group.append((run, request, item))
        size += len(item)
    if group:
        going_on += _commit_group(store, process, group, owner, results)
    return going_on


def _commit_group(
    store: Store,
    process: ProcessLike,
    group: list[tuple[ClaimedRun, dict[str, Any], str]],
    owner: str,
    results: dict[int, RunResult],
) -> list[ClaimedRun]:
    """Commit some of a round's steps in one transaction; the runs that go on."""
    going_on: list[ClaimedRun] = []

    def took(run: ClaimedRun, row: Mapping[str, Any]) -> None:
        if run.committed(row):
            going_on.append(run)
        else:
            results[id(run)] = run.result()

    def one_by_one() -> None:
        for run, request, _item in group:
            try:
                took(run, run.commit_call(run.step_args(**request)))
            except FsmError as exc:
                results[id(run)] = recover(run, exc)

    if len(group) == 1:  # one instance: step_v2, which returns a row and no JSON to parse
        one_by_one()
        return going_on
    metrics = group[0][0].metrics

    def call() -> list[dict[str, Any]]:
        return store.gateway.call(
            routines.STEPS,
            (owner, process.claim_seconds, "[" + ",".join(item for _r, _q, item in group) + "]"),
            retry_connection=False,
            writes=True,
            machine=process.name,
        )

    try:
        rows = call() if metrics is None else metrics.time_commit(process.name, call)
        answers = json.loads(rows[0]["results"])
    except DatabaseUnavailable as exc:  # committed or not, nobody knows: each run finds out as run_claimed does
        for run, _request, _item in group:
            results[id(run)] = recover(run, exc)
        return going_on
    except FsmError as exc:  # a deadlock that stayed, or an older schema: one at a time
        log.info(
            "pyfsm: %s: committing %d steps together failed (%s); committing them one by one",
            process.name,
            len(group),
            exc,
        )
        one_by_one()
        return going_on
    for (run, _request, _item), answer in zip(group, answers, strict=True):
        if "errno" in answer:
            error = db.translate(
                pymysql_errors.OperationalError(int(answer["errno"]), answer["message"]),
                machine=process.name,
                key=run.key,
            )
            if not isinstance(error, FsmError):
                error = FsmError(str(answer["message"]), errno=int(answer["errno"]), machine=process.name, key=run.key)
            results[id(run)] = recover(run, error)
        else:
            took(run, answer)
    return going_on
