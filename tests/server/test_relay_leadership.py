"""The relay's leadership (fsm_relay_lead_v1, fsm_relay_resign_v1, pyfsm.relay.leadership) on one
server: who may take the row, when it is renewed, and how a standby takes over. The same
rules across Galera nodes: tests/clusters/test_galera_relay.py."""

from __future__ import annotations

import time
from typing import Any

import pymysql
import pytest

from pyfsm import db
from pyfsm.db import Settings
from pyfsm.relay.leadership import Leadership

NAME = "pyfsm_relay_test"


@pytest.fixture
def settings(make_database) -> Settings:  # type: ignore[no-untyped-def]
    made: Settings = make_database("pyfsm_leader")
    from pyfsm import Store

    with Store(made.dsn()) as store:
        store.migrate()
    return made


def connect(settings: Settings) -> Any:
    return pymysql.connect(**settings.connect_kwargs(), cursorclass=pymysql.cursors.DictCursor)


def lead(conn: Any, holder: str, lease: float = 10) -> dict[str, Any]:
    with conn.cursor() as cur:
        cur.execute("CALL fsm_relay_lead_v1(%s, %s, %s)", (NAME, holder, lease))
        row: dict[str, Any] = cur.fetchone()
        while cur.nextset():
            pass
        return row


def test_the_row_decides_who_leads(settings: Settings) -> None:
    a, b = connect(settings), connect(settings)
    try:
        first = lead(a, "A")
        assert (first["leader"], first["holder"], first["term"]) == (1, "A", 1)
        refused = lead(b, "B")  # B holds no advisory lock: A's row stands until it expires
        assert (refused["leader"], refused["holder"], refused["term"]) == (0, "A", 1)
        renewed = lead(a, "A")
        assert (renewed["leader"], renewed["term"]) == (1, 1) and renewed["expires_at"] > first["expires_at"]
        with b.cursor() as cur:  # only the holder may resign
            cur.execute("CALL fsm_relay_resign_v1(%s, %s)", (NAME, "B"))
            assert cur.fetchone()["resigned"] == 0
        with a.cursor() as cur:
            cur.execute("CALL fsm_relay_resign_v1(%s, %s)", (NAME, "A"))
            assert cur.fetchone()["resigned"] == 1
        taken = lead(b, "B", lease=0.2)
        assert (taken["leader"], taken["holder"], taken["term"]) == (1, "B", 2)
        time.sleep(0.3)  # B's lease runs out: A may take over without B resigning
        back = lead(a, "A")
        assert (back["leader"], back["holder"], back["term"]) == (1, "A", 3)
    finally:
        a.close()
        b.close()


def test_a_holder_on_this_server_that_lost_its_advisory_lock_is_replaced_at_once(settings: Settings) -> None:
    a, b = connect(settings), connect(settings)
    try:
        with a.cursor() as cur:
            cur.execute("SELECT GET_LOCK(%s, 0)", (NAME,))
        assert lead(a, "A", lease=600)["leader"] == 1
        with b.cursor() as cur:  # A holds the advisory lock: B cannot get it, so nothing is taken
            cur.execute("SELECT GET_LOCK(%s, 0) AS got", (NAME,))
            assert cur.fetchone()["got"] == 0
        assert lead(b, "B")["leader"] == 0
        a.close()  # A's connection dies: the server frees its advisory lock
        with b.cursor() as cur:
            cur.execute("SELECT GET_LOCK(%s, 5) AS got", (NAME,))
            assert cur.fetchone()["got"] == 1
        taken = lead(b, "B")  # long before A's 600 s lease ran out
        assert (taken["leader"], taken["holder"], taken["term"]) == (1, "B", 2)
    finally:
        b.close()


@pytest.mark.parametrize(
    "args",
    [
        (None, "A", 10),
        ("x" * 65, "A", 10),
        (NAME, "", 10),
        (NAME, "h" * 129, 10),
        (NAME, "A", 0.05),
        (NAME, "A", 3601),
        (NAME, "A", None),
    ],
)
def test_bad_arguments_are_refused_and_change_nothing(settings: Settings, args: tuple[Any, ...]) -> None:
    conn = connect(settings)
    try:
        with conn.cursor() as cur, pytest.raises(pymysql.err.OperationalError) as caught:
            cur.execute("CALL fsm_relay_lead_v1(%s, %s, %s)", args)
        assert caught.value.args[0] == 31009
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) AS n FROM fsm_relay_leaders")
            assert cur.fetchone()["n"] == 0
    finally:
        conn.close()


def test_leadership_object_takes_keeps_and_resigns(settings: Settings) -> None:
    sleeps: list[float] = []
    one = db.Database(settings, pool_size=2)
    two = db.Database(settings, pool_size=2)
    try:
        first = Leadership(one, NAME, "one", lease=1.0, standby_wait=0, sleep=sleeps.append)
        second = Leadership(two, NAME, "two", lease=1.0, standby_wait=0, sleep=sleeps.append)
        assert first.ensure() and first.term == 1
        assert not second.ensure() and sleeps  # a standby: it waited instead of spinning
        time.sleep(0.4)
        assert first.ensure()  # a third of the lease passed: renewed, so it outlives the first second
        time.sleep(0.7)
        assert first.keep(force=True) and first.term == 1
        assert not second.ensure()
        first.resign()
        assert not first.held
        assert second.ensure() and second.term == 2  # at once after the resignation
    finally:
        one.close()
        two.close()


def test_a_leader_whose_lease_ran_out_stops_leading(settings: Settings) -> None:
    database = db.Database(settings, pool_size=2)
    try:
        leader = Leadership(database, NAME, "slow", lease=1.0, standby_wait=0, sleep=lambda _s: None)
        assert leader.ensure()
        time.sleep(1.1)  # no renewal within the lease (a stalled process): it no longer leads
        assert not leader.keep() and not leader.held
    finally:
        database.close()
