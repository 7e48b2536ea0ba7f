"""The web console (pyfsm web) in process, through Starlette's TestClient, on the real server:
pages read with a reporting account, actions run with an app account and recorded in
fsm_operator_log, keyset pages, filters, escaping, CSRF, tokens, and bad input refused.
The browser suite (tests/browser/test_web_browser.py) drives the same pages in Chromium."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest
from helpers.common import granted_accounts, order_machine
from helpers.engine_fixtures import checkout
from helpers.web_site import client, rows
from starlette.testclient import TestClient

from pyfsm import Context, Outcome, Store, Worker
from pyfsm.cli import main
from pyfsm.db import Settings
from pyfsm.errors import InvalidArgument, NotParked, ParkedBehind
from pyfsm.web import ConsoleConfig
from pyfsm.web.reads import PAGE, SCAN_WINDOW

HOSTILE = "<script>window.__pwned=1</script><img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def site(server: Settings, make_database) -> Iterator[dict[str, Any]]:  # type: ignore[no-untyped-def]
    """A database with an order type (120 instances, some paid, one with hostile data, a
    locked account), a process with a failed instance, and a reporting and an app account."""
    settings = make_database("pyfsm_web")
    process = checkout("flow", backoff=0.0, max_attempts=1)

    def broken(ctx: Context) -> Outcome:
        raise ConnectionError("card processor down")

    process.handlers.pop("charge")
    process.register("charge", broken)
    with Store(settings.dsn()) as store:
        store.migrate()
        store.define(order_machine("order", topic="orders", uses_global_lock=True))
        for i in range(120):
            store.create("order", f"o-{i:03d}", data={"total": i}, lookup_key=f"acct-{i % 7}")
            if i % 2:
                store.send("order", f"o-{i:03d}", "pay", data={"total": i, "paid": True})
        store.create("order", "hostile/key?&", data={"note": HOSTILE}, lookup_key="acct-x")
        store.define(process.machine)
        process.start(store, "f-1")
        Worker(store, [process], idle_min=0.01, idle_max=0.05).run(handle_signals=False, until_idle=0.3)
        assert store.get("flow", "f-1").status == "failed"
    with granted_accounts(server, settings, ("app", "reporting"), "pyfsm_w") as made:
        yield {"root": settings, "process": process, **{role: a.dsn() for role, a in made.items()}}


def text(html: str) -> str:
    return re.sub(r"<[^>]+>", " ", html)


def test_every_page_renders_for_a_reporting_account(site) -> None:  # type: ignore[no-untyped-def]
    with client(site) as c:
        index = c.get("/")
        assert index.status_code == 200 and 'href="/m/order"' in index.text and 'href="/m/flow"' in index.text
        assert "121 instances" in index.text  # the counters: 120 + the hostile one
        order = c.get("/m/order")
        assert order.status_code == 200 and "read-only" in order.text and "Confirm" not in order.text
        assert order.text.count('href="/m/order/i/') == PAGE
        instance = c.get("/m/order/i/o-001")
        assert instance.status_code == 200 and ">paid<" in instance.text and "(created)" in instance.text
        assert re.search(r'class="add"><span class="mono">paid</span>', instance.text)  # the pay's data diff
        failed = c.get("/failed")
        assert (
            failed.status_code == 200
            and "builtins.ConnectionError" in failed.text
            and "card processor down" in failed.text
        )
        flow = c.get("/m/flow/i/f-1")
        assert "Traceback" in flow.text and "card processor down" in flow.text
        for path in ("/stuck", "/queue", "/locks", "/outbox"):
            page = c.get(path)
            assert page.status_code == 200, (path, page.text[:500])
        metrics = c.get("/metrics")
        assert metrics.status_code == 200 and 'pyfsm_instances{machine="order",state="paid"} 60.0' in metrics.text
        # every response carries the policy that forbids script
        assert "default-src 'none'" in index.headers["content-security-policy"]
        assert float(index.headers["server-timing"].split("dur=")[1]) > 0


def test_hostile_data_and_keys_are_shown_as_text(site) -> None:  # type: ignore[no-untyped-def]
    with client(site) as c:
        page = c.get("/m/order/i/hostile%2Fkey%3F%26")
        assert page.status_code == 200
        assert "<script>window" not in page.text and "<img src=x" not in page.text
        assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page.text
        listing = c.get("/m/order?lookup_key=acct-x")
        assert 'href="/m/order/i/hostile%2Fkey%3F%26"' in listing.text and "hostile/key?&amp;" in listing.text


def test_keyset_pages_cover_every_instance_once(site) -> None:  # type: ignore[no-untyped-def]
    with client(site) as c:
        seen: list[str] = []
        url: str | None = "/m/order"
        while url is not None:
            page = c.get(url)
            seen += re.findall(r'href="/m/order/i/([^"]+)"', page.text)
            found = re.search(r'id="next-page" href="([^"]+)"', page.text)
            url = found.group(1).replace("&amp;", "&") if found else None
        assert len(seen) == len(set(seen)) == 121
        paid = re.findall(r'href="/m/order/i/(o-\d+)"', c.get("/m/order?state=paid").text)
        assert len(paid) == PAGE and all(int(k[2:]) % 2 == 1 for k in paid)
        account = re.findall(r'href="/m/order/i/(o-\d+)"', c.get("/m/order?lookup_key=acct-3").text)
        assert sorted(account) == sorted(f"o-{i:03d}" for i in range(120) if i % 7 == 3)


def test_filters_without_an_index_read_a_bounded_window(site) -> None:  # type: ignore[no-untyped-def]
    with client(site) as c:
        page = c.get("/m/order?updated_after=2000-01-01T00:00&state=paid")
        keys = re.findall(r'href="/m/order/i/(o-\d+)"', page.text)
        assert len(keys) == PAGE and "searched ids" in page.text
        assert "no instance" in c.get("/m/order?updated_before=2000-01-01T00:00").text
        # both filters together: every paid instance still running, across windowed pages
        both = c.get("/m/order?state=paid&status=running")
        assert both.status_code == 200 and len(re.findall(r'href="/m/order/i/', both.text)) == PAGE
    assert SCAN_WINDOW >= 1000  # a window is bounded, not tiny


@pytest.mark.parametrize(
    "url, status, message",
    [
        ("/m/order?status=bogus", 400, "status must be one of"),
        ("/m/order?state=Bad-State", 400, "state must match"),
        ("/m/order?updated_after=yesterday", 400, "must be a time like"),
        ("/m/order?before=-5", 400, "positive integer"),
        ("/m/Order", 400, "machine name"),
        ("/m/nosuchtype", 404, "no machine type 'nosuchtype'; installed: flow, order"),
        ("/m/nosuchtype/i/k-1", 404, "no machine type 'nosuchtype'; installed: flow, order"),
        ("/m/order/i/no-such-key", 404, "UnknownInstance"),
        ("/confirm?action=send&machine=order&key=o-001", 403, "actions are off"),
    ],
)
def test_bad_input_gets_a_clear_error_page(site, url: str, status: int, message: str) -> None:  # type: ignore[no-untyped-def]
    with client(site) as c:
        page = c.get(url)
        assert page.status_code == status and message in text(page.text).replace("&#39;", "'"), page.text[-800:]


def act(c: TestClient, **form: str) -> Any:
    c.get("/")  # the browser's CSRF cookie
    return c.post(
        "/action", data={"csrf": c.cookies.get("pyfsm_csrf") or "", "operator": "alice", **form}, follow_redirects=True
    )


def log_rows(site: dict[str, Any], since: int) -> list[dict[str, Any]]:
    return rows(site, "SELECT * FROM fsm_operator_log WHERE id > %s ORDER BY id", (since,))


def last_log_id(site: dict[str, Any]) -> int:
    return int(rows(site, "SELECT COALESCE(MAX(id), 0) AS n FROM fsm_operator_log")[0]["n"])


def test_actions_run_as_the_app_account_and_are_recorded(site) -> None:  # type: ignore[no-untyped-def]
    start = last_log_id(site)
    with client(site, allow_actions=True, actions_dsn=site["app"]) as c:
        confirm = c.get("/confirm?action=send&machine=order&key=o-005")
        assert (
            confirm.status_code == 200
            and "<option>ship</option>" in confirm.text
            and "<option>pay</option>" not in confirm.text
        )
        done = act(c, action="send", machine="order", key="o-005", event="ship", metadata='{"ticket": "OPS-1"}')
        assert done.status_code == 200 and "shipped" in done.text and "done" in done.text
        act(c, action="send", machine="order", key="o-005", event="pay")  # not allowed from shipped: refused
        process = site["process"]
        act(c, action="retry", machine=process.name, key="f-1")
        with Store(site["root"].dsn()) as store:
            assert store.get("order", "o-005").state == "shipped"
            [last] = [h for h in store.history("order", "o-005") if h.event == "ship"]
            assert last.metadata == {"ticket": "OPS-1", "operator": "alice", "via": "pyfsm web"}
            assert store.get(process.name, "f-1").status == "running"  # retried: due again
            store.create("order", "p-1", lookup_key="acct-p")
        act(c, action="pause", machine="order", key="p-1")
        with Store(site["root"].dsn()) as store:
            assert store.get("order", "p-1").status == "paused"
        act(c, action="resume", machine="order", key="p-1")
        with Store(site["root"].dsn()) as store:
            assert store.get("order", "p-1").status == "running"
            with store.lock("order", "o-010", heartbeat=False) as lease:
                held = c.get("/locks")
                assert "acct-3" in held.text and "Force unlock" in held.text
                act(
                    c,
                    action="force_unlock",
                    lookup_key="acct-3",
                    scope="*",
                    machine="order",
                    key="o-010",
                    reason="stuck holder",
                    back="/locks",
                )
                assert rows(site, "SELECT unlocked_at FROM fsm_locks WHERE lookup_key = 'acct-3'")[0]["unlocked_at"]
                assert (
                    rows(site, "SELECT reason FROM fsm_lock_log ORDER BY id DESC LIMIT 1")[0]["reason"]
                    == "pyfsm web, alice: stuck holder"
                )
                del lease
    log = log_rows(site, start)
    assert [(r["action"], r["outcome"], r["errno"]) for r in log] == [
        ("send", "done", None),
        ("send", "refused", 31005),
        ("retry", "done", None),
        ("pause", "done", None),
        ("resume", "done", None),
        ("force_unlock", "done", None),
    ]
    assert {r["operator"] for r in log} == {"alice"} and all(r["account"].startswith("pyfsm_wapp") for r in log)
    assert all(r["finished_at"] is not None for r in log)


def test_parked_events_are_requeued_or_skipped(site) -> None:  # type: ignore[no-untyped-def]
    with Store(site["root"].dsn()) as store:
        store.create("order", "k-1")
        store.send("order", "k-1", "pay")
    conn = pymysql.connect(**site["root"].connect_kwargs())
    try:
        with conn.cursor() as cur:
            cur.execute(
                "UPDATE fsm_outbox SET parked_at = UTC_TIMESTAMP(6), last_error = 'too large' "
                "WHERE machine = 'order' AND instance_key = 'k-1' AND published_at IS NULL"
            )
    finally:
        conn.close()
    first, second = (
        int(r["id"]) for r in rows(site, "SELECT id FROM fsm_outbox WHERE instance_key = 'k-1' ORDER BY id")
    )
    with client(site, allow_actions=True, actions_dsn=site["app"]) as c:
        outbox = c.get("/outbox")
        assert f'id="outbox-{first}"' in outbox.text and "too large" in outbox.text
        refused = act(c, action="unpark", outbox_id=str(second), skip="1", back="/outbox")  # waits behind the first
        assert "refused" in refused.text and "31027" in refused.text
        assert act(c, action="unpark", outbox_id=str(first), skip="0", back="/outbox").status_code == 200
    left = rows(site, "SELECT parked_at, published_at FROM fsm_outbox WHERE instance_key = 'k-1'")
    assert all(r["parked_at"] is None and r["published_at"] is None for r in left)  # pending again


def test_unpark_procedure_errors_have_their_own_numbers(site) -> None:  # type: ignore[no-untyped-def]
    with Store(site["app"]) as store:
        from pyfsm import Relay

        relay = Relay(site["app"])  # the app account may unpark: EXECUTE on fsm_unpark_v1
        try:
            with pytest.raises(NotParked) as missing:
                relay.unpark(987654321)
            assert missing.value.errno == 31026 and isinstance(missing.value, InvalidArgument)
            with pytest.raises(InvalidArgument):
                relay.unpark(0)
        finally:
            relay.close()
        del store
    assert issubclass(ParkedBehind, InvalidArgument) and ParkedBehind.errno == 31027


@pytest.mark.parametrize(
    "form, message",
    [
        (
            {"action": "send", "machine": "order", "key": "o-007", "event": "ship", "data": "[1, 2]"},
            "must be a JSON object",
        ),
        ({"action": "send", "machine": "order", "key": "o-007", "event": "ship", "data": "{bad"}, "not valid JSON"),
        ({"action": "send", "machine": "order", "key": "o-007"}, "choose the event"),
        ({"action": "force_unlock", "lookup_key": "acct-1", "reason": "  "}, "give a reason"),
        ({"action": "explode", "machine": "order", "key": "o-007"}, "action must be one of"),
        ({"action": "pause", "machine": "order", "key": "o-007", "operator": " "}, "operator: give your name"),
    ],
)
def test_bad_action_input_changes_nothing(site, form: dict[str, str], message: str) -> None:  # type: ignore[no-untyped-def]
    start = last_log_id(site)
    with client(site, allow_actions=True, actions_dsn=site["app"]) as c:
        page = act(c, **form)
    assert page.status_code == 400 and message in text(page.text).replace("&#39;", "'")
    assert log_rows(site, start) == []
    assert rows(site, "SELECT current_state FROM fsm_order WHERE instance_key = 'o-007'")[0]["current_state"] == "paid"


def test_posts_need_the_csrf_token_and_actions_on(site) -> None:  # type: ignore[no-untyped-def]
    start = last_log_id(site)
    with client(site, allow_actions=True, actions_dsn=site["app"]) as c:
        c.get("/")
        forged = c.post(
            "/action",
            data={"csrf": "forged", "operator": "mallory", "action": "pause", "machine": "order", "key": "o-009"},
        )
        assert forged.status_code == 403 and "CSRF" in forged.text
        other_site = c.post(
            "/action",
            headers={"origin": "https://evil.example"},
            data={
                "csrf": c.cookies.get("pyfsm_csrf"),
                "operator": "mallory",
                "action": "pause",
                "machine": "order",
                "key": "o-009",
            },
        )
        assert other_site.status_code == 403
    with client(site) as c:  # read-only
        c.get("/")
        assert act(c, action="pause", machine="order", key="o-009").status_code == 403
    assert log_rows(site, start) == []
    assert rows(site, "SELECT status FROM fsm_order WHERE instance_key = 'o-009'")[0]["status"] == "running"


def test_a_token_guards_every_page(site) -> None:  # type: ignore[no-untyped-def]
    token = "t0ken-" + uuid.uuid4().hex
    with client(site, token=token) as c:
        assert c.get("/m/order", follow_redirects=False).headers["location"] == "/login?next=%2Fm%2Forder"
        assert c.get("/metrics").status_code == 401
        assert c.get("/metrics", headers={"authorization": f"Bearer {token}"}).status_code == 200
        c.get("/login")
        wrong = c.post("/login?next=/m/order", data={"csrf": c.cookies.get("pyfsm_csrf"), "token": "nope"})
        assert wrong.status_code == 401
        right = c.post(
            "/login?next=/m/order", data={"csrf": c.cookies.get("pyfsm_csrf"), "token": token}, follow_redirects=False
        )
        assert right.headers["location"] == "/m/order" and token not in right.headers["set-cookie"]
        assert c.get("/m/order").status_code == 200
        # a redirect never leaves the console
        away = c.post(
            "/login?next=//evil.example/",
            data={"csrf": c.cookies.get("pyfsm_csrf"), "token": token},
            follow_redirects=False,
        )
        assert away.headers["location"] == "/"


def test_a_port_in_use_is_one_line_and_exit_1_before_anything_says_serving(site) -> None:  # type: ignore[no-untyped-def]
    """docs/cli.md: an error is one line on stderr and exit 1; the console binds its port
    before it says where it serves (uvicorn alone printed its own error and exited 3)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "pyfsm", "web", "--dsn", site["reporting"], "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith(f"pyfsm: InvalidArgument (31009): cannot serve the console on 127.0.0.1:{port}: ")
    assert len(result.stderr.splitlines()) == 1 and "http://" not in result.stderr, result.stderr


def test_configuration_is_checked_before_serving(site, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["web", "--dsn", site["reporting"], "--host", "0.0.0.0"]) == 1  # noqa: S104
    assert "give --token" in capsys.readouterr().err
    assert main(["web", "--dsn", site["reporting"], "--allow-actions"]) == 1
    assert "--actions-dsn" in capsys.readouterr().err
    with pytest.raises(InvalidArgument, match="at least 16"):
        ConsoleConfig(dsn=site["reporting"], token="short")
