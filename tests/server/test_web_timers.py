"""The console's timers (issue 28) in process, on the real server: the /timers page (armed
timers by due time, filters, the summary, recent outcomes) and an instance's timers read by
a reporting account through fsm_v_timers and fsm_v_timer_log, and the cancel action run by
the app account through Store.cancel_timer and recorded in fsm_operator_log.

Timers are global to a database: the module has a database of its own."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pymysql
import pytest
from helpers.common import fetch, granted_accounts
from helpers.web_site import client, rows
from starlette.testclient import TestClient

from pyfsm import Store
from pyfsm.db import Settings
from pyfsm.web.reads import PAGE

SHOP = {
    "states": ["new", "paid", "cancelled"],
    "start": ["new"],
    "final": ["cancelled"],
    "transitions": [
        {"event": "pay", "from": ["new"], "to": "paid"},
        {"event": "cancel", "from": ["new", "paid"], "to": "cancelled"},
    ],
    "timeouts": {"new": {"after": 3600, "event": "cancel"}},
}
DESK = {
    "states": ["open", "closed"],
    "start": ["open"],
    "final": ["closed"],
    "transitions": [{"event": "close", "from": ["open"], "to": "closed"}],
}
SHOPS = 60  # more state timeouts than a page shows


def define(settings: Settings, store: Store, name: str, definition: dict[str, Any]) -> None:
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        fetch(conn, "CALL fsm_define_v6(%s, %s)", (name, json.dumps(definition)))
    finally:
        conn.close()
    store.sync(name)


@pytest.fixture(scope="module")
def site(server: Settings, make_database) -> Iterator[dict[str, Any]]:  # type: ignore[no-untyped-def]
    """shop s-00..s-59 each with its state timeout (due in an hour); s-01 also with a
    scheduled pay 2 minutes overdue; desk d-1 paused with a held close; and in the log: d-2's
    close fired, x-1's pay dropped (x-1 was cancelled first), s-59's timeout cancelled."""
    settings = make_database("pyfsm_webtimers")
    with Store(settings.dsn()) as store:
        store.migrate()
        define(settings, store, "shop", SHOP)
        define(settings, store, "desk", DESK)
        for n in range(SHOPS):
            store.create("shop", f"s-{n:02d}")
        for key in ("d-1", "d-2"):
            store.create("desk", key)
            store.send_at("desk", key, "close", after=0)
        store.pause("desk", "d-1")
        store.create("shop", "x-1")
        store.send_at("shop", "x-1", "pay", after=0)
        store.send("shop", "x-1", "cancel")
        outcomes = {(o.machine, o.instance_key): (o.outcome, o.errno) for o in store.fire_timers()}
        assert outcomes == {
            ("desk", "d-1"): ("held", 31011),
            ("desk", "d-2"): ("fired", None),
            ("shop", "x-1"): ("dropped", 31005),
        }
        [timeout] = store.timers("shop", "s-59")
        store.cancel_timer(timeout.timer_id, "customer called")
        store.send_at("shop", "s-01", "pay", at=datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=120))
    with granted_accounts(server, settings, ("app", "reporting"), "pyfsm_tw") as made:
        yield {"root": settings, **{role: a.dsn() for role, a in made.items()}}


def armed(site: dict[str, Any], where: str = "1 = 1") -> list[int]:
    """Armed timer ids in the page's order (due time, then id)."""
    return [int(r["id"]) for r in rows(site, f"SELECT id FROM fsm_timers WHERE {where} ORDER BY due_at, id")]


def shown(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'<tr id="timer-(\d+)"', html)]


def row_of(html: str, element_id: str) -> str:
    found = re.search(rf'<tr id="{element_id}"[^>]*>(.*?)</tr>', html, re.S)
    assert found, f"no row {element_id}"
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", found.group(1))).strip()


def timer_of(site: dict[str, Any], machine: str, key: str, kind: str) -> int:
    [found] = rows(
        site, "SELECT id FROM fsm_timers WHERE machine = %s AND instance_key = %s AND kind = %s", (machine, key, kind)
    )
    return int(found["id"])


def test_the_page_shows_armed_timers_a_summary_and_recent_outcomes(site) -> None:  # type: ignore[no-untyped-def]
    every = armed(site)
    overdue = armed(site, "due_at <= UTC_TIMESTAMP(6)")
    assert len(every) == SHOPS - 1 + 2 and len(overdue) == 2  # the timeouts but s-59's, s-01's pay, d-1's close
    with client(site) as c:
        page = c.get("/timers")
    assert page.status_code == 200 and 'href="/timers" class="here"' in page.text
    assert re.search(rf'id="armed">{len(every)}</strong> armed', page.text)
    assert re.search(r'id="overdue">2</strong> overdue \(1 held\)', page.text)
    oldest = float(re.search(r'id="oldest-overdue">([\d.]+) s', page.text).group(1))  # type: ignore[union-attr]
    assert 120 <= oldest < 600
    assert shown(page.text) == every[:PAGE]  # the most overdue first
    pay = timer_of(site, "shop", "s-01", "scheduled")
    assert row_of(page.text, f"timer-{pay}").startswith(f"{pay} shop s-01 scheduled pay ")
    assert 'href="/m/shop/i/s-01"' in page.text
    held = row_of(page.text, f"timer-{timer_of(site, 'desk', 'd-1', 'scheduled')}")
    assert "desk d-1 scheduled close" in held and " 1 31011: " in held and "paused" in held
    timeout = row_of(page.text, f"timer-{every[2]}")  # a state timeout, due in an hour: not overdue
    assert re.fullmatch(rf"{every[2]} shop s-\d\d timeout new cancel [\d-]+ [\d:.]+", timeout), timeout
    log = {r["instance_key"]: r for r in rows(site, "SELECT id, instance_key FROM fsm_timer_log")}
    assert set(log) == {"d-2", "x-1", "s-59"}
    assert " fired " in row_of(page.text, f"outcome-{log['d-2']['id']}")
    assert re.search(r" dropped 31005(: .+)? [\d.]+ ", row_of(page.text, f"outcome-{log['x-1']['id']}"))
    cancelled = row_of(page.text, f"outcome-{log['s-59']['id']}")
    assert " cancelled customer called before due " in cancelled
    assert "Cancel…" not in page.text  # read-only: no action offered


def test_the_reporting_account_reads_the_views_only(site) -> None:  # type: ignore[no-untyped-def]
    """The page works with the reporting role, which may read fsm_v_timers but not fsm_timers."""
    from pyfsm.db import parse_dsn

    conn = pymysql.connect(**parse_dsn(site["reporting"]).connect_kwargs())
    try:
        assert fetch(conn, "SELECT COUNT(*) AS n FROM fsm_v_timer_log")[0]["n"] == 3
        with pytest.raises(pymysql.err.MySQLError) as denied:
            fetch(conn, "SELECT COUNT(*) FROM fsm_timers")
        assert denied.value.args[0] == 1142
    finally:
        conn.close()
    with client(site) as c:
        assert c.get("/timers?machine=desk&overdue=1").status_code == 200


def test_filters_by_machine_and_overdue(site) -> None:  # type: ignore[no-untyped-def]
    with client(site) as c:
        desk = c.get("/timers?machine=desk").text
        assert shown(desk) == armed(site, "machine = 'desk'") and len(shown(desk)) == 1
        assert 'id="armed">1</strong> armed of desk' in desk and "<option selected>desk</option>" in desk
        fired = rows(site, "SELECT id FROM fsm_timer_log WHERE machine = 'desk'")
        assert re.findall(r'<tr id="outcome-(\d+)"', desk) == [str(fired[0]["id"])]  # recent outcomes: desk's only
        overdue = c.get("/timers?overdue=1").text
        assert shown(overdue) == armed(site, "due_at <= UTC_TIMESTAMP(6)") and len(shown(overdue)) == 2
        assert 'name="overdue" value="1" checked' in overdue
        both = c.get("/timers?machine=shop&overdue=1").text
        assert shown(both) == [timer_of(site, "shop", "s-01", "scheduled")]
        nothing = c.get("/timers?machine=desk&overdue=1&after_due=2999-01-01T00:00&after_id=1").text
        assert shown(nothing) == [] and "no armed timer is overdue" in nothing


def test_pages_by_due_time_show_every_timer_once(site) -> None:  # type: ignore[no-untyped-def]
    seen: list[int] = []
    with client(site) as c:
        url: str | None = "/timers"
        while url is not None:
            page = c.get(url)
            assert page.status_code == 200
            seen += shown(page.text)
            found = re.search(r'id="next-page" href="([^"]+)"', page.text)
            url = found.group(1).replace("&amp;", "&") if found else None
    assert seen == armed(site) and len(seen) > PAGE


def test_an_instance_page_lists_its_timers(site) -> None:  # type: ignore[no-untyped-def]
    with client(site) as c:
        page = c.get("/m/shop/i/s-01").text
        closed = c.get("/m/desk/i/d-2").text
    timeout, pay = timer_of(site, "shop", "s-01", "timeout"), timer_of(site, "shop", "s-01", "scheduled")
    assert sorted(shown(page)) == sorted([timeout, pay])
    assert row_of(page, f"timer-{pay}").startswith(f"{pay} scheduled pay ")
    assert row_of(page, f"timer-{timeout}").startswith(f"{timeout} timeout new cancel ")
    assert shown(closed) == [] and "none armed" in closed


@pytest.mark.parametrize(
    "url, status, message",
    [
        ("/timers?machine=Bad-Name", 400, "machine name"),
        ("/timers?after_id=x&after_due=2026-01-01T00:00", 400, "after_id must be a positive integer"),
        ("/timers?after_id=3&after_due=soon", 400, "after_due must be a time like"),
        ("/confirm?action=cancel_timer&timer_id=1", 403, "actions are off"),
    ],
)
def test_bad_input_gets_a_clear_error_page(site, url: str, status: int, message: str) -> None:  # type: ignore[no-untyped-def]
    with client(site) as c:
        page = c.get(url)
    assert page.status_code == status and message in page.text.replace("&#39;", "'"), page.text[-800:]


def act(c: TestClient, **form: str) -> Any:
    c.get("/timers")  # the browser's CSRF cookie
    return c.post(
        "/action", data={"csrf": c.cookies.get("pyfsm_csrf") or "", "operator": "alice", **form}, follow_redirects=True
    )


def test_cancel_cancels_the_timer_and_is_recorded(site) -> None:  # type: ignore[no-untyped-def]
    timer = timer_of(site, "shop", "s-02", "timeout")
    start = int(rows(site, "SELECT COALESCE(MAX(id), 0) AS n FROM fsm_operator_log")[0]["n"])
    with client(site, allow_actions=True, actions_dsn=site["app"]) as c:
        listing = c.get("/timers")
        assert f"/confirm?action=cancel_timer&amp;timer_id={timer}&amp;back=%2Ftimers" in listing.text
        confirm = c.get(f"/confirm?action=cancel_timer&timer_id={timer}&back=/timers")
        assert confirm.status_code == 200 and "the timeout of state new" in confirm.text
        assert "shop s-02" in confirm.text and f'name="timer_id" value="{timer}"' in confirm.text
        done = act(c, action="cancel_timer", timer_id=str(timer), reason="duplicate order", back="/timers")
        assert done.status_code == 200, done.text[-600:]  # 500: fsm_operator_action_v1 refuses cancel_timer
        assert str(done.url).startswith("http://testserver/timers?action=")
        assert re.search(
            r"\(cancel_timer by alice\): <strong>done</strong>: cancelled timer \d+ \(timeout cancel "
            r"of shop s-02",
            done.text,
        )
        assert timer not in shown(done.text)
        again = act(c, action="cancel_timer", timer_id=str(timer), back="/m/shop/i/s-02")
        assert (
            "<strong>refused</strong> (error 31029)" in again.text and "no longer armed: it was cancelled" in again.text
        )
        instance = c.get("/m/shop/i/s-02").text
        assert "none armed" in instance and "cancel_timer" in instance  # its operator actions
    assert rows(site, "SELECT id FROM fsm_timers WHERE id = %s", (timer,)) == []
    [logged] = rows(site, "SELECT outcome, reason, instance_key FROM fsm_timer_log WHERE id = %s", (timer,))
    assert logged == {"outcome": "cancelled", "reason": "pyfsm web, alice: duplicate order", "instance_key": "s-02"}
    log = rows(site, "SELECT * FROM fsm_operator_log WHERE id > %s ORDER BY id", (start,))
    assert [(r["action"], r["machine"], r["instance_key"], r["outcome"], r["errno"]) for r in log] == [
        ("cancel_timer", "shop", "s-02", "done", None),
        ("cancel_timer", None, None, "refused", 31029),
    ]
    assert json.loads(log[0]["detail"]) == {"timer_id": timer, "reason": "duplicate order"}
    assert log[0]["account"].startswith("pyfsm_twapp") and log[0]["finished_at"] is not None


def test_cancel_from_an_instance_page_returns_there(site) -> None:  # type: ignore[no-untyped-def]
    timer = timer_of(site, "shop", "s-03", "timeout")
    with client(site, allow_actions=True, actions_dsn=site["app"]) as c:
        page = c.get("/m/shop/i/s-03").text
        assert f"/confirm?action=cancel_timer&amp;timer_id={timer}&amp;back=%2Fm%2Fshop%2Fi%2Fs-03" in page
        done = act(c, action="cancel_timer", timer_id=str(timer), back="/m/shop/i/s-03")
    assert str(done.url).startswith("http://testserver/m/shop/i/s-03?action=") and "none armed" in done.text
    [logged] = rows(site, "SELECT reason FROM fsm_timer_log WHERE id = %s", (timer,))
    assert logged["reason"] == "pyfsm web, alice"  # no reason given: the operator still is


@pytest.mark.parametrize(
    "form, message",
    [
        ({"action": "cancel_timer"}, "timer_id is required"),
        ({"action": "cancel_timer", "timer_id": "x"}, "timer_id must be a positive integer"),
        ({"action": "cancel_timer", "timer_id": "0"}, "timer_id must be a positive integer"),
    ],
)
def test_bad_cancel_input_changes_nothing(site, form: dict[str, str], message: str) -> None:  # type: ignore[no-untyped-def]
    start = int(rows(site, "SELECT COALESCE(MAX(id), 0) AS n FROM fsm_operator_log")[0]["n"])
    before = armed(site)
    with client(site, allow_actions=True, actions_dsn=site["app"]) as c:
        page = act(c, **form)
    assert page.status_code == 400 and message in page.text
    assert rows(site, "SELECT id FROM fsm_operator_log WHERE id > %s", (start,)) == [] and armed(site) == before
