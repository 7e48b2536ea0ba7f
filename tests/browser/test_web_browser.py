"""The web console in a real browser: `pyfsm web` as a subprocess, driven by headless Chromium.

One database holds an order type with more than a page of instances, a checkout Process
whose charge handler fails (through a real run) and two of whose runs are claimed by workers
(written as root: one died an hour ago, so its run is stuck; one holds a live lease), a type
using the global lock with two leases held, a type with a Kafka topic whose outbox has
parked events, and a ticket type with state timeouts and scheduled events (armed, overdue,
fired, dropped and cancelled ones; nothing fires timers while the tests run). Three consoles run on it: with actions (reading as a reporting account, acting
as an app account, as in production), read-only, and with a token. Every action goes through
its confirmation page and is checked in the database.

Chromium is Debian's (``apt-get install chromium``); Playwright never downloads a browser.
With ``PYFSM_SCREENSHOTS=docs/images`` the page test saves the screenshots of the docs there.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import urllib.parse
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pymysql
import pytest
from helpers.common import fetch, granted_accounts, order_machine
from helpers.console_server import Console, consoles, http

from pyfsm import Lease, Machine, Process, Store
from pyfsm.db import Settings
from pyfsm.web.reads import PAGE

TOKEN = "tok-" + uuid.uuid4().hex
HOSTILE_SCRIPT = "<script>window.__pwned=1</script>"
HOSTILE_IMG = "<img src=x onerror=alert(document.domain)>"
NUMBERED = 60  # order instances o-001 .. o-060: more than a page


def chromium_path() -> str:
    return shutil.which("chromium") or "/usr/bin/chromium"


# -- the database ---------------------------------------------------------------------------


@dataclass
class World:
    root: Settings  # the schema owner's (root): what the tests check with
    reporting_dsn: str
    app_dsn: str
    leases: list[Lease]
    parked: dict[str, int]  # shipment key -> its parked outbox id
    order_keys: list[str]

    def rows(self, sql: str, args: Any = None) -> list[dict[str, Any]]:
        conn = pymysql.connect(**self.root.connect_kwargs())
        try:
            conn.cursor().execute("SET time_zone = '+00:00'")
            return fetch(conn, sql, args)
        finally:
            conn.close()

    def one(self, sql: str, args: Any = None) -> dict[str, Any]:
        found = self.rows(sql, args)
        assert len(found) == 1, found
        return found[0]

    def instance(self, machine: str, key: str) -> dict[str, Any]:
        return self.one(
            f"SELECT current_state, status, version, data FROM `fsm_v_{machine}` WHERE instance_key = %s", (key,)
        )

    def log(self, operator: str) -> list[dict[str, Any]]:
        return self.rows(
            "SELECT id, operator, action, machine, instance_key, detail, outcome, errno, message "
            "FROM fsm_operator_log WHERE operator = %s ORDER BY id",
            (operator,),
        )


def checkout_process() -> Process:
    process = Process.linear("checkout", ["reserve", "charge", "ship"], max_attempts=1, backoff=0.01)

    @process.handler("reserve")
    def reserve(ctx: Any) -> Any:
        ctx.data["reserved"] = ctx.data.get("items", 1)
        return ctx.next()

    @process.handler("charge")
    def charge(ctx: Any) -> Any:
        if ctx.data.get("card") == "declined":
            raise RuntimeError("card declined by the bank (code 51)")
        ctx.data["charged"] = ctx.data["reserved"] * 10
        return ctx.next()

    @process.handler("ship")
    def ship(ctx: Any) -> Any:
        ctx.data["tracking"] = f"TRK-{ctx.key}"
        return ctx.next()

    return process


@pytest.fixture(scope="module")
def world(server: Settings, make_database) -> Iterator[World]:  # type: ignore[no-untyped-def]
    settings = make_database("pyfsm_web")
    store = Store(settings.dsn())
    store.migrate()

    # orders: 60 numbered ones (the last ones paid, shipped, one delivered), then the named ones
    store.define(order_machine("order"))
    keys = [f"o-{i:03d}" for i in range(1, NUMBERED + 1)]
    for i, key in enumerate(keys, 1):
        store.create(
            "order",
            key,
            lookup_key=f"acct-{i % 5}",
            data={"items": 1 + i % 4, "customer": f"acct-{i % 5}"},
            metadata={"source": "shop"},
        )
    for i, key in enumerate(keys[-8:], NUMBERED - 7):
        store.send(
            "order",
            key,
            "pay",
            data={"items": 1 + i % 4, "customer": f"acct-{i % 5}", "paid": 12.5 * i},
            metadata={"payment": f"pay-{i}"},
        )
    for key in keys[-3:]:
        store.send("order", key, "ship", metadata={"carrier": "dhl"})
    store.send("order", keys[-1], "deliver")
    for key in ("o-send", "o-pause", "o-refuse"):
        store.create("order", key, lookup_key="acct-ops", data={"items": 2})
    store.create(
        "order",
        "o-xss",
        lookup_key="acct-x",
        data={"note": HOSTILE_SCRIPT, "img": HOSTILE_IMG},
        metadata={"comment": HOSTILE_IMG},
    )
    keys += ["o-send", "o-pause", "o-refuse", "o-xss"]

    # a checkout process: two runs fail in charge, one completes, two are queued for workers
    checkout = checkout_process()
    store.define(checkout.machine)
    for key in ("c-fail-1", "c-fail-2"):
        assert checkout.start(store, key, data={"items": 2, "card": "declined"}).status == "failed"
    assert checkout.start(store, "c-ok", data={"items": 3}).status == "completed"
    for key in ("c-stuck", "c-claimed"):  # one step here, the rest queued for a worker (none runs)
        checkout.start(store, key, data={"items": 1}, run_immediately=False)

    # a type using the global lock: two leases held (one shown, one force-unlocked by a test)
    store.define(
        Machine(
            name="payout",
            states=["new", "sent"],
            start=["new"],
            final=["sent"],
            transitions=[("send", "new", "sent")],
            uses_global_lock=True,
            lock_lease_seconds=600,
        )
    )
    store.create("payout", "p-1", lookup_key="customer-7")
    store.create("payout", "p-2", lookup_key="customer-9")
    leases = [store.lock("payout", "p-1", heartbeat=False), store.lock("payout", "p-2", heartbeat=False)]

    # a type with a Kafka topic: its events wait in the outbox (no relay runs); two are parked
    store.define(
        Machine(
            name="shipment",
            states=["new", "sent"],
            start=["new"],
            final=["sent"],
            transitions=[("send", "new", "sent")],
            topic="shipments",
        )
    )
    for key in ("s-1", "s-2", "s-3"):
        store.create("shipment", key, data={"parcel": key})

    # tickets: each open one's timeout armed (closes it in 2 days); t-2's scheduled close fired,
    # t-3's dropped (closed before), t-4's timeout cancelled; then t-1's close 2 minutes overdue
    store.define(
        Machine(
            name="ticket",
            states=["open", "closed"],
            start=["open"],
            final=["closed"],
            transitions=[("close", "open", "closed")],
            timeouts={"open": ("2d", "close")},
        )
    )
    for key in ("t-1", "t-2", "t-3", "t-4", "t-5"):
        store.create("ticket", key, lookup_key="desk-1")
    for key in ("t-2", "t-3"):
        store.send_at("ticket", key, "close", after=0)
    store.send("ticket", "t-3", "close")
    assert sorted((o.instance_key, o.outcome) for o in store.fire_timers()) == [("t-2", "fired"), ("t-3", "dropped")]
    store.cancel_timer(store.timers("ticket", "t-4")[0].timer_id, "customer called back")
    store.send_at("ticket", "t-1", "close", at=datetime.now(UTC).replace(tzinfo=None) - timedelta(minutes=2))
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        cur = conn.cursor()
        # c-stuck: its worker claimed it and died an hour ago (the lease ran out, nobody took it over);
        # c-claimed: a live worker's claim (its lease ends in a minute)
        for key, claimer, due in (
            ("c-stuck", "worker-b:2211", "- INTERVAL 1 HOUR"),
            ("c-claimed", "worker-a:4711", "+ INTERVAL 45 SECOND"),
        ):
            cur.execute(
                f"UPDATE fsm_runs SET claimed_by = %s, attempt = 1, due_at = UTC_TIMESTAMP(6) {due} "
                "WHERE machine = 'checkout' AND instance_key = %s",
                (claimer, key),
            )
            assert cur.rowcount == 1
        parked = {}
        for key, error in (("s-1", "message too large (1.4 MB > 1 MB)"), ("s-2", "too large")):
            cur.execute("SELECT id FROM fsm_outbox WHERE machine = 'shipment' AND instance_key = %s", (key,))
            ((outbox_id,),) = cur.fetchall()
            cur.execute(
                "UPDATE fsm_outbox SET parked_at = UTC_TIMESTAMP(6), attempts = 5, last_error = %s WHERE id = %s",
                (error, outbox_id),
            )
            parked[key] = int(outbox_id)
        conn.commit()
    finally:
        conn.close()
    try:
        with granted_accounts(server, settings, ("app", "reporting"), "pyfsm_web_") as accounts:
            yield World(settings, accounts["reporting"].dsn(), accounts["app"].dsn(), leases, parked, keys)
    finally:
        for lease in leases:
            lease.release()
        store.close()


@pytest.fixture(scope="module")
def servers(world: World) -> Iterator[dict[str, Console]]:
    """Three consoles, started together: "web" with actions on (reads as the reporting account,
    acts as the app account), "read_only", and "guarded" (a token is required)."""
    with consoles(
        {
            "web": {"dsn": world.reporting_dsn, "actions_dsn": world.app_dsn},
            "read_only": {"dsn": world.reporting_dsn},
            "guarded": {"dsn": world.reporting_dsn, "token": TOKEN, "host": "127.0.0.1"},
        }
    ) as running:
        yield running


@pytest.fixture(scope="module")
def web(servers: dict[str, Console]) -> Console:
    return servers["web"]


# -- the browser ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = chromium_path()
    if not os.path.exists(path):
        pytest.fail(
            f"the browser tests need Chromium at {path}: apt-get install chromium "
            "(Playwright must not download a browser of its own)",
            pytrace=False,
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(
            "the browser tests need Playwright: pip install playwright (no browser download: "
            "they use the system's Chromium, apt-get install chromium)",
            pytrace=False,
        )
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=path, args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


@dataclass
class Tab:
    """A page in a fresh browser context (its own cookies), and the dialogs it opened."""

    page: Any
    dialogs: list[str]

    def go(self, path: str, status: int = 200) -> Any:
        response = self.page.goto(path)
        assert response is not None and response.status == status, (path, response and response.status)
        return response

    def text(self, selector: str = "main") -> str:
        return str(self.page.locator(selector).inner_text())

    def rows(self, table: str) -> list[list[str]]:
        """The cells' texts of a table's rows, the header row left out."""
        cells = self.page.locator(f"table.{table} tr").evaluate_all(
            "rows => rows.map(r => Array.from(r.querySelectorAll('td')).map(c => c.innerText.trim()))"
        )
        return [r for r in cells if r]

    def shot(self, name: str) -> None:
        folder = os.environ.get("PYFSM_SCREENSHOTS")
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
            self.page.screenshot(path=str(Path(folder) / f"console-{name}.png"), full_page=True)


@contextlib.contextmanager
def open_tab(browser: Any, console: Console) -> Iterator[Tab]:
    context = browser.new_context(base_url=console.url, viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(10_000)
    dialogs: list[str] = []

    def on_dialog(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    try:
        yield Tab(page, dialogs)
    finally:
        context.close()


@pytest.fixture
def tab(browser: Any, web: Console) -> Iterator[Tab]:
    with open_tab(browser, web) as opened:
        yield opened


def badges(tab: Tab, selector: str) -> list[str]:
    """The status badges in ``selector``, each with the count that follows it, if any."""
    texts = tab.page.locator(f"{selector} .badge").evaluate_all(
        "bs => bs.map(b => (b.innerText + ' ' + (b.nextSibling && b.nextSibling.nodeType === 3 ? "
        "b.nextSibling.textContent : '')).trim())"
    )
    return [" ".join(str(t).split()) for t in texts]


def confirm(tab: Tab, operator: str, **fields: str) -> int:
    """On a confirmation page: fill the fields and the operator's name, confirm; the action's id."""
    for name, value in fields.items():
        if name == "event":
            tab.page.select_option("select[name=event]", value)
        else:
            tab.page.fill(f"[name={name}]", value)
    tab.page.fill("input[name=operator]", operator)
    with tab.page.expect_navigation():
        tab.page.click("#confirm-button")
    found = re.search(r"[?&]action=(\d+)", tab.page.url)
    assert found, tab.page.url
    return int(found.group(1))


# -- pages ----------------------------------------------------------------------------------


def test_pages_links_filters_and_pagination(tab: Tab, world: World) -> None:
    """Every page on the data as the fixture left it: this test runs first (file order), before
    the actions below change counts, the failed list, a lock and a parked event."""
    page = tab.page
    # the index: every type with its counts, the relay's lag
    tab.go("/")
    assert page.title() == "Machine types · pyfsm web"
    card = tab.text("#machine-order")
    assert f"{NUMBERED + 4:,} instances" in card and "completed 1" in card
    assert re.search(r"paid\s+5", card) and re.search(r"shipped\s+2", card) and re.search(r"delivered\s+1", card)
    assert "failed 2" in tab.text("#machine-checkout")
    assert "actions on" in tab.text("header")
    assert re.search(r"3 events not yet published, 2 parked", tab.text())
    # states in the definition's order, as on the type's page (not a-z)
    assert page.locator("#machine-order table.counts td:first-child").all_inner_texts() == [
        "new",
        "paid",
        "shipped",
        "delivered",
        "cancelled",
    ]
    # what nothing runs is idle (a plain type's running instances), what a worker runs is running
    assert badges(tab, "#machine-order p.total") == ["idle 63", "completed 1"]
    assert badges(tab, "#machine-checkout p.total") == ["running 2", "failed 2", "completed 1"]
    assert tab.text("#machine-ticket p.total").startswith("5 instances:")
    assert badges(tab, "#machine-ticket p.total") == ["idle 3", "completed 2"]
    tab.shot("index")

    # index -> type page: diagram, counts per state, the first page of instances
    page.click("#machine-order h2 a")
    page.wait_for_url("**/m/order")
    assert page.locator("h1").inner_text() == "order"
    # o-xss, o-refuse, o-pause, o-send, o-060 (delivered), o-059, ...: nothing runs the others
    assert badges(tab, "table.instances") == ["idle"] * 4 + ["completed"] + ["idle"] * (PAGE - 5)
    diagram = page.request.get("/m/order/diagram.svg")
    assert diagram.status == 200 and b"<svg" in diagram.body()
    counts = dict((r[0].replace(" final", ""), r[1]) for r in tab.rows("counts"))
    assert counts == {"new": "56", "paid": "5", "shipped": "2", "delivered": "1", "cancelled": "0"}
    first = tab.rows("instances")
    assert len(first) == PAGE
    assert [r[1] for r in first[:4]] == ["o-xss", "o-refuse", "o-pause", "o-send"]

    # "Older" pages on by keyset: the rest, nothing twice, nothing left out
    page.click("#next-page")
    page.wait_for_url(re.compile(r"/m/order\?before=\d+$"))
    second = tab.rows("instances")
    assert len(second) == len(world.order_keys) - PAGE
    assert sorted(r[1] for r in first + second) == sorted(world.order_keys)
    assert page.locator("#next-page").count() == 0 and "last page" in tab.text(".pager")

    # filters: state, status, lookup key, updated time
    tab.go("/m/order")
    page.select_option("select[name=state]", "paid")
    with page.expect_navigation():
        page.click("form.filters button")
    assert "state=paid" in page.url
    assert sorted(r[1] for r in tab.rows("instances")) == [f"o-{i:03d}" for i in range(53, 58)]
    assert {r[3] for r in tab.rows("instances")} == {"paid"}
    tab.go("/m/order")
    page.fill("input[name=lookup_key]", "acct-3")
    with page.expect_navigation():
        page.click("form.filters button")
    expected = sorted(
        r["instance_key"] for r in world.rows("SELECT instance_key FROM fsm_v_order WHERE lookup_key = 'acct-3'")
    )
    assert sorted(r[1] for r in tab.rows("instances")) == expected and len(expected) == 12
    assert page.input_value("input[name=lookup_key]") == "acct-3"
    tab.shot("machine")  # a short page: the type, its diagram, one account's instances
    tab.go("/m/order?status=completed")
    assert [r[1] for r in tab.rows("instances")] == ["o-060"]
    tab.go("/m/order")
    page.fill("input[name=updated_after]", "2099-01-01T00:00:00")
    with page.expect_navigation():
        page.click("form.filters button")
    assert "updated_after=2099-01-01T00%3A00" in page.url
    assert tab.rows("instances") == [["no instance among these ids"]]
    assert "searched ids" in tab.text()
    tab.go("/m/order?updated_before=2099-01-01T00:00&state=shipped")
    assert sorted(r[1] for r in tab.rows("instances")) == ["o-058", "o-059"]
    tab.go("/m/order?state=Paid", status=400)
    assert "state must match" in tab.text("#error")

    # "go to a key", then the instance: facts, data, history with data diff and metadata
    tab.go("/m/order")
    page.fill("input[name=key]", "o-060")
    with page.expect_navigation():
        page.click("form.filters button")
    page.wait_for_url("**/m/order/i/o-060")
    assert tab.text("#current-state") == "delivered" and tab.text("#status") == "completed"
    assert json.loads(tab.text("#data")) == {"items": 1, "customer": "acct-0", "paid": 750.0}
    history = tab.rows("history")
    assert [(h[1], h[2]) for h in history] == [
        ("deliver", "shipped → delivered"),
        ("ship", "paid → shipped"),
        ("pay", "new → paid"),
        ("(created)", "· → new"),
    ]
    assert "paid: 750.0" in history[2][4] and '"payment": "pay-60"' in history[2][5]
    assert 'customer: "acct-0"' in history[3][4] and "items: 1" in history[3][4]
    assert '"carrier": "dhl"' in history[1][5] and "no change" in history[1][4]
    assert history[0][5] == "" and page.locator("pre.metadata").count() == 3  # deliver had no metadata: no box
    assert "now" in history[0][8]
    assert tab.text("#status") == "completed" and "None: the instance is completed" in tab.text()
    tab.shot("instance")
    page.click("h1 a")  # back to its type
    page.wait_for_url("**/m/order")

    # a link from the type page's list to an instance
    page.click("table.instances a:text-is('o-send')")
    page.wait_for_url("**/m/order/i/o-send")
    assert tab.text("#current-state") == "new" and "Send an event…" in tab.text(".actions")

    # failed: both failed checkouts with their error; one's page has the traceback
    tab.go("/failed")
    failed = tab.rows("failed")
    assert sorted(r[0] for r in failed) == ["c-fail-1", "c-fail-2"]
    assert all(
        r[1] == "charge"
        and r[2] == "charge"
        and "card declined by the bank (code 51)" in r[4]
        and "RuntimeError" in r[4]
        for r in failed
    )
    tab.shot("failed")
    page.click("table.failed a:text-is('c-fail-1')")
    page.wait_for_url("**/m/checkout/i/c-fail-1")
    assert tab.text("#status") == "failed" and "Retry…" in tab.text(".actions")
    # the error, in the first screen, and the Run section's way to retry
    failure = page.locator("#failure")
    assert "Failed in charge" in failure.inner_text() and "card declined by the bank (code 51)" in failure.inner_text()
    box = failure.bounding_box()
    assert box is not None and box["y"] + box["height"] < 800, box
    assert "nothing runs it until it is retried" in tab.text("#retry") and "Retry it…" in tab.text("#retry")
    error = page.locator(".card.error").first
    assert "card declined by the bank (code 51)" in error.inner_text()
    assert not page.locator("pre.traceback").first.is_visible()
    page.click(".card.error summary")
    traceback = page.locator("pre.traceback").first.inner_text()
    assert "Traceback" in traceback and "raise RuntimeError" in traceback and "in charge" in traceback
    tab.shot("instance-failed")

    # stuck: the run whose worker died an hour ago (not the one a live worker holds)
    tab.go("/stuck")
    stuck = tab.rows("stuck")
    assert [r[0] for r in stuck] == ["c-stuck"], tab.text()
    assert (stuck[0][1], stuck[0][2], stuck[0][5], stuck[0][6]) == ("charge", "running", "worker-b:2211", "1")
    assert stuck[0][4].startswith(("1:00:", "0:59:"))
    tab.shot("stuck")
    # the queue: both runs by due time, who holds claims
    tab.go("/queue")
    summary = {r[0]: r[1:] for r in tab.rows("queue-summary")}
    # due now: c-stuck (its claim ran out), claimed: c-claimed (fsm_stats_v2, as the metrics count)
    assert summary["checkout"][:2] == ["1", "1"] and summary["order"][:2] == ["0", "0"]
    assert [r[0] for r in tab.rows("runs")] == ["c-stuck", "c-claimed"]
    assert [r[:3] for r in tab.rows("claimers")] == [
        ["worker-a:4711", "checkout", "1"],
        ["worker-b:2211", "checkout", "1"],
    ]
    assert summary["checkout"][2] == "2" and summary["order"][2] == "0"  # running: what workers run (order's: idle)
    tab.shot("queue")

    # locks: the leases held, with their owner
    tab.go("/locks")
    locks = {r[2]: r for r in tab.rows("locks")}
    assert locks["customer-7"][0] == "global" and locks["customer-7"][3].startswith("p-1")
    assert world.leases[0].owner in locks["customer-7"][4]
    assert "Force unlock…" in locks["customer-7"][8]
    tab.shot("locks")
    tab.go("/m/payout/i/p-1")
    assert "customer-7" in tab.text("table.locks")

    # outbox: the parked events with their error, the oldest waiting one
    tab.go("/outbox")
    s1 = tab.text(f"#outbox-{world.parked['s-1']}")
    assert "message too large (1.4 MB > 1 MB)" in s1 and "shipments" in s1 and "Re-queue…" in s1
    assert "s-3" in tab.text("main table:not(.parked)")
    tab.shot("outbox")
    tab.go("/m/shipment/i/s-1")
    assert "message too large" in tab.text()

    # a confirmation page (cancelled: nothing happens)
    tab.go("/m/order/i/o-001")
    page.click("a:text-is('Send an event…')")
    page.wait_for_url(re.compile(r"/confirm\?action=send"))
    assert page.locator("h1").inner_text() == "Confirm: send"
    assert page.locator("select[name=event] option").all_inner_texts() == ["pay", "cancel"]
    page.fill("input[name=operator]", "alice")
    tab.shot("confirm")
    page.click("a:text-is('Cancel')")
    page.wait_for_url("**/m/order/i/o-001")
    assert world.instance("order", "o-001")["version"] == 1

    # metrics, and unknown things answer 404 with a page saying so
    tab.go("/metrics")
    metrics = page.locator("body").inner_text()
    assert "pyfsm_up 1.0" in metrics and 'pyfsm_instances_by_status{machine="checkout",status="failed"} 2.0' in metrics
    tab.go("/m/nope", status=404)
    tab.go("/m/order/i/o-nope", status=404)
    assert "o-nope" in tab.text("#error")
    assert tab.dialogs == []


def test_timers_page(tab: Tab, world: World) -> None:
    """The armed timers by due time (the overdue one first), the summary, the recent outcomes."""
    tab.go("/timers")
    assert (tab.text("#armed"), tab.text("#overdue")) == ("3", "1")  # t-1's close and timeout, t-5's timeout
    armed = tab.rows("timers")
    assert [(r[2], r[3], r[5]) for r in armed] == [
        ("t-1", "scheduled", "close"),
        ("t-1", "timeout", "close"),
        ("t-5", "timeout", "close"),
    ]
    assert float(armed[0][7]) >= 119 and armed[1][7] == ""
    outcomes = {r[2]: r for r in tab.rows("timer-log")}
    assert outcomes["t-2"][6] == "fired" and outcomes["t-3"][6] == "dropped" and outcomes["t-3"][7].startswith("31005")
    assert outcomes["t-4"][6] == "cancelled" and "customer called back" in outcomes["t-4"][7]
    assert "Cancel…" in armed[0][10]
    tab.shot("timers")
    tab.go("/timers?overdue=1")
    assert [r[2] for r in tab.rows("timers")] == ["t-1"]


# -- actions --------------------------------------------------------------------------------


def test_send_through_the_confirmation_page(tab: Tab, world: World) -> None:
    tab.go("/m/order/i/o-send")
    tab.page.click("a:text-is('Send an event…')")
    action = confirm(tab, "alice", event="pay", data='{"items": 2, "paid": 25.0}', metadata='{"ticket": "OPS-12"}')
    tab.page.wait_for_url(f"**/m/order/i/o-send?action={action}")
    assert "done" in tab.text("#result") and "alice" in tab.text("#result")
    assert tab.text("#current-state") == "paid"
    assert "alice" in tab.rows("history")[0][6] and f"web-{action}" in tab.rows("history")[0][6]
    assert ["send", "done"] == [tab.rows("operator-log")[0][3], tab.rows("operator-log")[0][5].split()[0]]

    row = world.instance("order", "o-send")
    assert (row["current_state"], row["status"], row["version"]) == ("paid", "running", 2)
    assert json.loads(row["data"]) == {"items": 2, "paid": 25.0}
    last = world.one(
        "SELECT event, request_id, metadata FROM fsm_v_order_transitions WHERE instance_key = 'o-send' AND is_current"
    )
    assert last["event"] == "pay" and last["request_id"] == f"web-{action}"
    assert json.loads(last["metadata"]) == {"ticket": "OPS-12", "operator": "alice", "via": "pyfsm web"}
    log = world.one(
        "SELECT operator, action, machine, instance_key, detail, outcome, errno, account "
        "FROM fsm_operator_log WHERE id = %s",
        (action,),
    )
    assert (log["operator"], log["action"], log["machine"], log["instance_key"], log["outcome"], log["errno"]) == (
        "alice",
        "send",
        "order",
        "o-send",
        "done",
        None,
    )
    assert json.loads(log["detail"])["event"] == "pay"
    assert log["account"].startswith("pyfsm_web_app_")  # the app account acted, not the reporting one


def test_pause_and_resume(tab: Tab, world: World) -> None:
    tab.go("/m/order/i/o-pause")
    tab.page.click("a:text-is('Pause…')")
    assert "Pause order o-pause" in tab.text("form.confirm")
    paused = confirm(tab, "bob")
    assert "done" in tab.text("#result") and tab.text("#status") == "paused"
    assert world.instance("order", "o-pause")["status"] == "paused"
    assert tab.page.locator("a:text-is('Pause…')").count() == 0

    tab.page.click("a:text-is('Resume…')")
    assert tab.page.input_value("input[name=operator]") == "bob"  # remembered from the last action
    resumed = confirm(tab, "bob")
    assert "done" in tab.text("#result") and tab.text("#status") == "idle"  # status running, nothing runs it
    row = world.instance("order", "o-pause")
    assert (row["current_state"], row["status"]) == ("new", "running")
    assert [(r["id"], r["action"], r["outcome"], r["instance_key"]) for r in world.log("bob")] == [
        (paused, "pause", "done", "o-pause"),
        (resumed, "resume", "done", "o-pause"),
    ]


def test_retry_a_failed_instance(tab: Tab, world: World) -> None:
    tab.go("/failed")
    tab.page.click("table.failed a:text-is('c-fail-2')")
    tab.page.click("a:text-is('Retry…')")
    assert tab.page.locator("h1").inner_text() == "Confirm: retry"
    action = confirm(tab, "carol")
    tab.page.wait_for_url(f"**/m/checkout/i/c-fail-2?action={action}")
    assert "done" in tab.text("#result") and tab.text("#status") == "running"
    row = world.instance("checkout", "c-fail-2")
    assert (row["current_state"], row["status"]) == ("charge", "running")
    due = world.one(
        "SELECT r.due_at IS NOT NULL AS due FROM fsm_runs r JOIN fsm_v_checkout i ON i.id = r.instance_id "
        "WHERE r.machine = 'checkout' AND i.instance_key = 'c-fail-2'"
    )
    assert due["due"] == 1  # queued for a worker again
    assert [(r["action"], r["outcome"]) for r in world.log("carol")] == [("retry", "done")]
    tab.go("/failed")
    assert [r[0] for r in tab.rows("failed")] == ["c-fail-1"]


def test_force_unlock_a_held_lock(tab: Tab, world: World) -> None:
    tab.go("/locks")
    row = tab.page.locator("table.locks tr", has_text="customer-9")
    row.locator("a:text-is('Force unlock…')").click()
    assert "global lock of customer-9" in tab.text("form.confirm")
    action = confirm(tab, "dave", reason="holder hung (ticket OPS-13)")
    tab.page.wait_for_url(f"**/locks?action={action}")
    assert "done" in tab.text("#result") and "released 1 lock(s) of customer-9" in tab.text("#result")
    assert "customer-9" not in tab.text("table.locks") and "customer-7" in tab.text("table.locks")

    lock = world.one("SELECT unlocked_at FROM fsm_locks WHERE scope = '*' AND lookup_key = 'customer-9'")
    assert lock["unlocked_at"] is not None
    held = world.one("SELECT unlocked_at FROM fsm_locks WHERE scope = '*' AND lookup_key = 'customer-7'")
    assert held["unlocked_at"] is None  # the other lease is untouched
    logged = world.log("dave")
    assert [(r["action"], r["outcome"]) for r in logged] == [("force_unlock", "done")]
    assert json.loads(logged[0]["detail"])["reason"] == "holder hung (ticket OPS-13)"
    reason = world.one("SELECT reason FROM fsm_lock_log WHERE lookup_key = 'customer-9' ORDER BY id DESC LIMIT 1")
    assert "dave" in reason["reason"] and "pyfsm web" in reason["reason"]


def test_requeue_a_parked_outbox_event(tab: Tab, world: World) -> None:
    outbox_id = world.parked["s-2"]
    tab.go("/outbox")
    tab.page.locator(f"#outbox-{outbox_id} a:text-is('Re-queue…')").click()
    assert "parked for: too large" in tab.text("form.confirm")
    assert tab.page.is_checked("input[name=skip][value='0']")
    action = confirm(tab, "erin")
    tab.page.wait_for_url(f"**/outbox?action={action}")
    assert "done" in tab.text("#result") and f"re-queued outbox event {outbox_id}" in tab.text("#result")
    assert tab.page.locator(f"#outbox-{outbox_id}").count() == 0

    row = world.one("SELECT parked_at, published_at FROM fsm_outbox WHERE id = %s", (outbox_id,))
    assert row["parked_at"] is None and row["published_at"] is None  # waits for the relay again
    assert world.one("SELECT parked_at FROM fsm_outbox WHERE id = %s", (world.parked["s-1"],))["parked_at"]
    assert [(r["action"], r["outcome"]) for r in world.log("erin")] == [("unpark", "done")]


def test_refused_actions_change_nothing(tab: Tab, world: World) -> None:
    before = world.instance("order", "o-refuse")
    # retry of an instance that did not fail, through a crafted confirmation URL
    tab.go("/confirm?action=retry&machine=order&key=o-refuse")
    action = confirm(tab, "frank")
    tab.page.wait_for_url(f"**/m/order/i/o-refuse?action={action}")
    assert "refused" in tab.text("#result")
    # an event the state does not allow (the form offers only allowed ones: post it by hand)
    tab.page.click("a:text-is('Send an event…')")
    csrf = tab.page.input_value("input[name=csrf]")
    reply = tab.page.request.post(
        "/action",
        form={
            "csrf": csrf,
            "action": "send",
            "machine": "order",
            "key": "o-refuse",
            "event": "ship",
            "operator": "frank",
        },
    )
    assert reply.status == 200 and "/m/order/i/o-refuse?action=" in reply.url
    tab.go(reply.url)
    assert "refused" in tab.text("#result") and "ship" in tab.text("#result")

    assert world.instance("order", "o-refuse") == before
    logged = world.log("frank")
    assert [(r["action"], r["outcome"]) for r in logged] == [("retry", "refused"), ("send", "refused")]
    assert all(r["errno"] for r in logged)
    assert tab.text("#current-state") == "new" and tab.rows("history")[0][1] == "(created)"


def test_hostile_data_is_shown_as_text(tab: Tab, world: World) -> None:
    tab.go("/m/order/i/o-xss")
    text = tab.text()
    assert HOSTILE_SCRIPT in text and HOSTILE_IMG in text  # the data, shown as JSON
    assert HOSTILE_IMG in tab.text("pre.metadata")  # the creation's metadata
    assert tab.page.locator("main script").count() == 0 and tab.page.locator("main img").count() == 0
    assert tab.page.evaluate("window.__pwned") is None
    tab.page.wait_for_timeout(200)  # an onerror would have fired by now
    assert tab.page.evaluate("window.__pwned") is None and tab.dialogs == []
    # the data, also on the confirmation page's back link and the operator log
    tab.go("/confirm?action=pause&machine=order&key=" + urllib.parse.quote(HOSTILE_SCRIPT))
    assert HOSTILE_SCRIPT in tab.text("form.confirm")
    assert tab.page.evaluate("window.__pwned") is None and tab.dialogs == []
    assert world.instance("order", "o-xss")["version"] == 1


def test_post_without_csrf_token_is_refused(tab: Tab, world: World, web: Console) -> None:
    before = world.instance("order", "o-refuse")
    tab.go("/m/order/i/o-refuse")  # the browser has its CSRF cookie now
    form = {"action": "pause", "machine": "order", "key": "o-refuse", "operator": "mallory"}
    for extra in ({}, {"csrf": "forged-" + uuid.uuid4().hex}):
        reply = tab.page.request.post("/action", form={**form, **extra}, max_redirects=0)
        assert reply.status == 403 and "CSRF token does not match" in reply.text()
    csrf = tab.page.input_value("input[name=csrf]") if tab.page.locator("input[name=csrf]").count() else None
    cookie = next(c["value"] for c in tab.page.context.cookies() if c["name"] == "pyfsm_csrf")
    assert csrf is None  # the instance page has no form: the token is on the confirmation page
    # the right token from another site (its Origin) is refused too
    reply = tab.page.request.post(
        "/action", form={**form, "csrf": cookie}, max_redirects=0, headers={"Origin": "http://evil.example"}
    )
    assert reply.status == 403
    # and a plain client with no cookie at all
    assert http(f"{web.url}/action", method="POST", form={**form, "csrf": cookie})[0] == 403
    assert world.instance("order", "o-refuse") == before
    assert world.log("mallory") == []


# -- other consoles -------------------------------------------------------------------------


def test_read_only_console(browser: Any, world: World, servers: dict[str, Console]) -> None:
    with open_tab(browser, servers["read_only"]) as tab:
        tab.go("/m/checkout/i/c-fail-1")
        assert tab.text("#status") == "failed" and "card declined" in tab.text()
        assert "read-only" in tab.text("header")
        assert tab.page.locator("main a.button").count() == 0 and "Retry…" not in tab.text()
        # how to retry, without the console: the command and the procedure
        retry = tab.text("#retry")
        assert "pyfsm retry checkout c-fail-1" in retry and "CALL fsm_retry_v1('checkout', 'c-fail-1');" in retry
        assert "Retry it…" not in retry
        tab.go("/locks")
        assert "customer-7" in tab.text("table.locks") and "Force unlock…" not in tab.text()
        tab.go("/outbox")
        assert "too large" in tab.text() and "Re-queue…" not in tab.text()
        tab.go("/confirm?action=retry&machine=checkout&key=c-fail-1", status=403)
        assert "actions are off" in tab.text("#error")
        cookie = next(c["value"] for c in tab.page.context.cookies() if c["name"] == "pyfsm_csrf")
        reply = tab.page.request.post(
            "/action",
            max_redirects=0,
            form={"csrf": cookie, "action": "retry", "machine": "checkout", "key": "c-fail-1", "operator": "mallory"},
        )
        assert reply.status == 403 and "actions are off" in reply.text()
    assert world.instance("checkout", "c-fail-1")["status"] == "failed"
    assert world.log("mallory") == []


def test_token_console(browser: Any, world: World, servers: dict[str, Console]) -> None:
    guarded = servers["guarded"]
    with open_tab(browser, guarded) as tab:
        tab.go("/failed")
        assert tab.page.url == f"{guarded.url}/login?next=%2Ffailed"
        assert tab.page.locator("h1").inner_text() == "Sign in"
        tab.page.fill("input[name=token]", "wrong-" + TOKEN)
        with tab.page.expect_navigation() as navigation:
            tab.page.click("button[type=submit]")
        assert navigation.value.status == 401 and "wrong token" in tab.text()
        tab.page.fill("input[name=token]", TOKEN)
        with tab.page.expect_navigation():
            tab.page.click("button[type=submit]")
        assert tab.page.url == f"{guarded.url}/failed" and "c-fail-1" in tab.text()
        session = next(c for c in tab.page.context.cookies() if c["name"] == "pyfsm_session")
        assert session["httpOnly"] and TOKEN not in session["value"]
        tab.go("/m/order/i/o-060")
        assert tab.text("#current-state") == "delivered"

    status, body = http(f"{guarded.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert status == 200 and "pyfsm_up 1.0" in body
    status, body = http(f"{guarded.url}/metrics")
    assert status == 401 and "token is required" in body
    assert http(f"{guarded.url}/metrics", headers={"Authorization": "Bearer wrong-" + TOKEN})[0] == 401
    # a page without the session cookie: to the login page (urllib follows the redirect)
    status, body = http(f"{guarded.url}/queue")
    assert status == 200 and "Sign in" in body and "c-stuck" not in body
