"""pyfsm/db/retrying.py without a server: which failures the pool makes again, how often, and
after which pause. The errors are built as pyfsm.db.translation makes them from PyMySQL's."""

from __future__ import annotations

import random

import pymysql
import pytest

from pyfsm import errors
from pyfsm.db import translation
from pyfsm.db.retrying import CONNECTION_RETRY_DELAYS, DEADLOCK_RETRY_DELAYS, Retries, Retry


def failure(errno: int, text: str = "whatever the server said") -> BaseException:
    return translation.translate(pymysql.err.OperationalError(errno, text))


def timed_out(errno: int = 2013) -> BaseException:
    """A socket timeout as PyMySQL raises it: its error made inside the TimeoutError's handler."""
    exc = pymysql.err.OperationalError(errno, "Lost connection to MySQL server during query")
    exc.__context__ = TimeoutError("timed out")
    return translation.translate(exc)


def attempts(retries: Retries, err: BaseException, **how: bool) -> list[Retry]:
    """Every retry granted for ``err`` until the call would be raised."""
    granted = []
    while (retry := retries.next(err, **how)) is not None:
        granted.append(retry)
        assert len(granted) <= 10, "retries never ran out"
    return granted


def test_a_connection_that_sent_nothing_is_retried_for_any_call_about_a_second() -> None:
    refused = failure(2003, "Can't connect to MySQL server on 'db-1'")
    granted = attempts(Retries(), refused, sent=False, repeatable=False)
    assert [r.why for r in granted] == ["outage"] * len(CONNECTION_RETRY_DELAYS)
    assert [r.delay for r in granted] == list(CONNECTION_RETRY_DELAYS)
    assert 0.8 <= sum(CONNECTION_RETRY_DELAYS) <= 1.5


def test_a_lost_reply_is_retried_only_when_a_repeat_is_safe() -> None:
    lost = failure(2013, "Lost connection to MySQL server during query")
    assert Retries().next(lost, sent=True, repeatable=False) is None  # a write: it may have committed
    assert Retries().next(lost, sent=True, repeatable=True) == Retry("outage", CONNECTION_RETRY_DELAYS[0])
    # errno 0: PyMySQL found its socket closed before sending: nothing ran, any call may retry
    closed = failure(0, "")
    assert isinstance(closed, errors.DatabaseUnavailable)
    assert Retries().next(closed, sent=True, repeatable=False) is not None


def test_a_lock_holders_connection_is_never_replaced() -> None:
    lost = failure(2013)
    assert Retries().next(lost, sent=True, repeatable=True, dedicated=True) is None
    # a deadlock rolled its transaction back on that same connection: made again there
    deadlock = failure(1213, "Deadlock found when trying to get lock")
    assert Retries().next(deadlock, sent=True, repeatable=False, dedicated=True) == Retry(
        "deadlock", DEADLOCK_RETRY_DELAYS[0]
    )


@pytest.mark.parametrize(
    "errno, text",
    [
        (1213, "Deadlock found when trying to get lock"),
        # MariaDB 11.6+ with innodb_snapshot_isolation (11.8's default), under REPEATABLE READ:
        # the whole transaction was rolled back, as after a deadlock
        (1020, "Record has changed since last read in table 'fsm_state_counts'"),
    ],
)
def test_a_deadlock_is_made_again_up_to_three_times_in_all(errno: int, text: str) -> None:
    deadlock = failure(errno, text)
    assert isinstance(deadlock, errors.Deadlock) and deadlock.errno == errno
    granted = attempts(Retries(), deadlock, sent=True, repeatable=False)
    assert [(r.why, r.delay) for r in granted] == [("deadlock", d) for d in DEADLOCK_RETRY_DELAYS]
    assert len(granted) + 1 == 3
    # the raw-connection reads leave deadlocks to their caller; a lock wait timeout is no deadlock
    assert Retries().next(deadlock, sent=True, repeatable=True, deadlocks=False) is None
    assert Retries().next(failure(1205, "Lock wait timeout exceeded"), sent=True, repeatable=True) is None


def test_outages_and_deadlocks_have_their_own_budgets() -> None:
    retries = Retries()
    lost, deadlock = failure(2013), failure(1213)
    assert len(attempts(retries, lost, sent=True, repeatable=True)) == len(CONNECTION_RETRY_DELAYS)
    assert retries.next(lost, sent=False, repeatable=True) is None  # spent, whatever was sent
    assert len(attempts(retries, deadlock, sent=True, repeatable=True)) == len(DEADLOCK_RETRY_DELAYS)


def test_a_timeout_is_never_retried() -> None:
    for errno in (2013, 2006):  # a read's bound, a write's bound
        err = timed_out(errno)
        assert translation.timed_out(err)
        for sent in (True, False):
            assert Retries().next(err, sent=sent, repeatable=True) is None


@pytest.mark.parametrize(
    "errno",
    [1064, 1146, 1305, 1370, 1045, 1049, 31001, 31005, 31032],
    ids=lambda n: str(n),
)
def test_what_would_come_again_is_raised_at_once(errno: int) -> None:
    err = failure(errno)
    for sent in (True, False):
        assert Retries().next(err, sent=sent, repeatable=True) is None


def test_every_transient_number_is_retried_when_nothing_was_sent() -> None:
    for errno in sorted(errors.TRANSIENT):
        err = failure(errno)
        assert translation.transient(err), errno
        assert Retries().next(err, sent=False, repeatable=False) is not None, errno


def test_the_pauses_are_jittered_within_their_bounds() -> None:
    rand = random.Random(7)
    outage = [Retry("outage", 0.4).seconds(rand) for _ in range(500)]
    assert 0.2 <= min(outage) < 0.25 and 0.55 < max(outage) <= 0.6
    deadlock = [Retry("deadlock", 0.008).seconds(rand) for _ in range(500)]
    assert 0 <= min(deadlock) < 0.001 and 0.007 < max(deadlock) <= 0.008
