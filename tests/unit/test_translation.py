"""pyfsm/db/translation.py without a server: driver errors made into pyfsm's by their number
(never their text), what a failure means for the connection, and whether it is worth another
attempt. The driver's errors are built as PyMySQL builds them from a server's error packet."""

from __future__ import annotations

import pymysql
import pytest

from pyfsm import errors
from pyfsm.db import translation
from pyfsm.db.marks import mark_tried


def driver(errno: int, text: str = "whatever the server said") -> pymysql.err.OperationalError:
    return pymysql.err.OperationalError(errno, text)


@pytest.mark.parametrize("cls", sorted(set(errors.SIGNALLED.values()), key=lambda c: c.errno))
def test_every_number_pyfsm_signals_becomes_its_class(cls: type[errors.FsmError]) -> None:
    err = translation.translate(driver(cls.errno, "fsm: some refusal"), machine="order", key="o-1")
    assert type(err) is cls and err.errno == cls.errno  # type: ignore[attr-defined]
    assert (err.machine, err.key) == ("order", "o-1")  # type: ignore[attr-defined]
    assert translation.keeps_connection(err) and translation.is_server_error(driver(cls.errno))


def test_the_text_never_decides() -> None:
    # a refusal worded like another one is still the error its number says
    assert type(translation.translate(driver(31032, "fsm: no order o-1"))) is errors.GuardRefused
    assert type(translation.translate(driver(31003, "fsm: guard x refuses pay from new"))) is errors.UnknownInstance
    unknown = driver(1064, "You have an error in your SQL syntax; fsm: guard")  # no pyfsm meaning: itself
    assert translation.translate(unknown) is unknown


def test_a_refused_login_or_database_names_the_server_and_the_fix() -> None:
    refused = driver(1045, "Access denied for user 'app'@'10.0.0.7' (using password: YES)")
    mark_tried(refused, [("db-1:3306", "refused")])
    err = translation.translate(refused)
    assert isinstance(err, errors.LoginFailed)
    assert err.message.startswith("the MySQL server at db-1:3306 refused the login (Access denied")
    assert "check the user name and password" in err.message and err.fields["servers"] == ["db-1:3306"]
    assert translation.cause(err, refused) is None  # the message says it all: no driver traceback
    missing = translation.translate(driver(1049, "Unknown database 'shop'"))
    assert isinstance(missing, errors.UnknownDatabase) and "`pyfsm migrate`" in missing.message
    assert not translation.transient(err) and not translation.transient(missing)


def test_what_a_failure_means_for_the_connection_and_a_retry() -> None:
    lost = translation.translate(driver(2013, "Lost connection to MySQL server during query"))
    assert isinstance(lost, errors.DatabaseUnavailable) and translation.transient(lost)
    assert not translation.keeps_connection(lost) and not translation.is_server_error(driver(2013))
    deadlock = translation.translate(driver(1213, "Deadlock found"))
    assert isinstance(deadlock, errors.Deadlock) and not translation.keeps_connection(deadlock)
    assert translation.is_server_error(driver(1213)) and not translation.transient(deadlock)
    assert not translation.transient(errors.GuardRefused("fsm: guard g refuses e from a"))


def test_a_timeout_is_told_from_a_cut_connection_and_says_what_it_means() -> None:
    cut = driver(2013)
    timed = driver(2013, "Lost connection to MySQL server during query")
    timed.__context__ = TimeoutError("timed out")  # PyMySQL raises it inside its handler of the timeout
    assert translation.timed_out(timed) and not translation.timed_out(cut)
    err = translation.timeout_error(translation.translate(timed), sent=True, writes=True, seconds=30)
    assert err.fields["timed_out"] is True  # type: ignore[attr-defined]
    assert str(err) == (
        "no reply within 30 s (read_timeout): the connection is stalled or the server hangs; the call "
        "may or may not have been applied (its outcome is unknown, as for a lost reply)"
    )
    unsent = translation.timeout_error(errors.DatabaseUnavailable("x", errno=2013), sent=False, writes=True, seconds=5)
    assert "nothing was sent" in str(unsent)


def test_text_that_is_not_utf8_either_way() -> None:
    going = translation.encoding_error(UnicodeEncodeError("utf-8", "a\ud800", 1, 2, "surrogates not allowed"))
    coming = translation.encoding_error(UnicodeDecodeError("utf-8", b"\xed\xa0\x80", 0, 1, "invalid"))
    assert isinstance(going, errors.InvalidEncoding) and "position 1" in str(going) and "nothing was sent" in str(going)
    assert "fsm_valid_utf8_v1" in str(coming) and going.errno == coming.errno == 31024


def test_a_snapshot_conflict_is_a_deadlock_that_says_why_and_what_to_do() -> None:
    text = "Record has changed since last read in table 'fsm_state_counts'; try restarting transaction"
    err = translation.translate(driver(1020, text))
    assert isinstance(err, errors.Deadlock) and err.errno == 1020 and err.retryable
    assert str(err) == f"{text} ({errors.SNAPSHOT_CHANGED_HINT})"
    assert "innodb_snapshot_isolation = OFF" in str(err) and "rolled back whole" in str(err)
    assert not translation.keeps_connection(err) and translation.is_server_error(driver(1020))
    # translated twice (a retried call's error made again): the hint once
    assert str(errors.error_for(1020, str(err))).count(errors.SNAPSHOT_CHANGED_HINT) == 1
