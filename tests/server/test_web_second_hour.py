"""The console and `pyfsm graph` after a new definition version renamed a state, the console's
Queue action, and the words it uses (issue 46, items 1, 3 and 5), in process on the real server.

shop_order v1 has ``packed``; v2 renames it ``boxed``. S-1..S-3 were packed and moved by
`Store.upgrade_instances(states={"packed": "boxed"})`; S-4 was left on v1 (in paid, then packed
by v1's rules). parcel had the same rename with every packed instance moved, so no instance is
in ``packed`` any more. nc_flow is a process whose instances nothing started: idle.

The module has a database of its own: the index lists every type of a database."""

from __future__ import annotations

import html
import json
import re
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.cli import in_process
from helpers.common import granted_accounts
from helpers.web_site import client, rows

from pyfsm import Context, Machine, Outcome, Process, Store, Worker
from pyfsm.db import Settings


def shop(name: str, packed: str) -> Machine:
    return Machine(
        name=name,
        states=["new", "paid", packed, "shipped"],
        start=["new"],
        final=["shipped"],
        transitions=[("pay", "new", "paid"), ("pack", "paid", packed), ("ship", packed, "shipped")],
    )


def flow() -> Process:
    """Handlers on paid and packed: a worker runs an instance there once it is queued."""
    process = Process.linear("nc_flow", ["new", "paid", "packed"], backoff=0.01)

    def forward(ctx: Context) -> Outcome:
        return ctx.next()

    process.register("paid", forward)
    process.register("packed", forward)
    return process


@pytest.fixture(scope="module")
def site(server: Settings, make_database) -> Iterator[dict[str, Any]]:  # type: ignore[no-untyped-def]
    settings = make_database("pyfsm_web46")
    process = flow()
    with Store(settings.dsn()) as store:
        store.migrate()
        for name in ("shop_order", "parcel"):
            store.define(shop(name, "packed"))
            for key in ("S-1", "S-2", "S-3", "S-4"):
                store.create(name, key)
                store.send(name, key, "pay")
                if key != "S-4" or name == "parcel":
                    store.send(name, key, "pack")
            store.define(shop(name, "boxed"))
            moved = store.upgrade_instances(name, states={"packed": "boxed"}, only={"states": ["packed"]})
            assert sum(g.instances for g in moved.groups) == (3 if name == "shop_order" else 4)
        store.send("shop_order", "S-4", "pack")  # by v1's rules, which S-4 still follows
        assert (store.get("shop_order", "S-4").state, store.get("shop_order", "S-4").definition_version) == (
            "packed",
            1,
        )
        store.define(process.machine)
        for key in ("F-1", "F-2", "-F-3"):
            store.create("nc_flow", key)
            store.send("nc_flow", key, "next")  # into paid, which has a handler: nothing queues it
    with granted_accounts(server, settings, ("app", "reporting"), "pyfsm_w46") as made:
        yield {"root": settings, "process": process, **{role: a.dsn() for role, a in made.items()}}


def card(page: str, machine: str) -> str:
    found = re.search(rf'<div class="card machine" id="machine-{machine}">(.*?)</table>', page, re.S)
    assert found, page
    return found.group(1)


def text(page: str) -> str:
    """The page's text, tags dropped, entities read, spaces squeezed."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


# --- item 3: a renamed state --------------------------------------------------------------


def test_the_index_lists_current_states_and_states_still_holding_instances(site) -> None:  # type: ignore[no-untyped-def]
    with client(site) as c:
        index = c.get("/").text
    shop_card, parcel_card = card(index, "shop_order"), card(index, "parcel")
    # the current definition's states in its order, then packed: S-4 (v1) is in it
    assert re.findall(r'\?state=([a-z_]+)"', shop_card) == ["new", "paid", "boxed", "shipped", "packed"]
    assert "not in v2" in shop_card.split("?state=packed")[1] and "not in v2" not in shop_card.split("?state=packed")[0]
    # every packed parcel was moved: no "packed 0" row
    assert re.findall(r'\?state=([a-z_]+)"', parcel_card) == ["new", "paid", "boxed", "shipped"]
    assert "packed" not in parcel_card
    # the same rule as fsm_v_state_counts, read as root
    for name, shown in (("shop_order", shop_card), ("parcel", parcel_card)):
        view = rows(site, "SELECT state FROM fsm_v_state_counts WHERE machine = %s", (name,))
        assert sorted(re.findall(r'\?state=([a-z_]+)"', shown)) == sorted(r["state"] for r in view)


def test_the_type_page_says_how_many_instances_are_in_states_the_current_version_lacks(site) -> None:  # type: ignore[no-untyped-def]
    with client(site) as c:
        page = c.get("/m/shop_order").text
        listed = c.get("/m/shop_order?state=packed").text
        parcel = c.get("/m/parcel").text
    counts = page.split('<table class="counts">')[1].split("</table>")[0]
    assert re.findall(r'<tr id="state-([a-z_]+)"', counts) == ["new", "paid", "boxed", "shipped", "packed"]
    assert re.search(r'id="state-boxed"><td>.*?<td class="num">3</td>', counts)
    assert re.search(r'id="state-packed" class="elsewhere">.*?not in v2.*?<td class="num">1</td>', counts)
    notice = text(page.split('id="elsewhere">')[1].split("</p>")[0])
    assert notice.startswith("1 instance is in a state the current definition (v2) does not have: packed 1.")
    assert "pyfsm upgrade shop_order --map packed=STATE" in notice
    # the filter offers packed, and lists its instance
    assert "<option>packed</option>" in page
    instances = listed.split('<table class="instances">')[1]
    assert re.findall(r'/m/shop_order/i/([^"]+)"', instances) == ["S-4"]
    assert 'id="elsewhere"' not in parcel and 'class="elsewhere"' not in parcel


def test_the_type_diagram_draws_the_current_definition_with_its_counts(site) -> None:  # type: ignore[no-untyped-def]
    if shutil.which("dot") is None:
        pytest.skip("Graphviz (dot) is not installed (make system installs it)")
    with client(site) as c:
        page = c.get("/m/shop_order").text
        svg = c.get("/m/shop_order/diagram.svg")
    assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg+xml")
    labels = re.findall(r"<text[^>]*>([^<]*)</text>", svg.text)
    assert {"new", "paid", "boxed", "shipped", "(3)"} <= set(labels) and "packed" not in labels
    image = re.search(r'<img class="diagram" src="/m/shop_order/diagram.svg" alt="([^"]*)"', page)
    assert image, page
    # the alt text blames nothing that did not fail: Graphviz is installed
    assert "Graphviz" not in image.group(1) and "state diagram of shop_order, definition v2" in image.group(1)
    assert 'id="diagram-problem"' not in page


def test_without_graphviz_the_page_says_so_instead_of_a_broken_image(site, monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no dot program on the way
    with client(site) as c:
        page = c.get("/m/shop_order").text
        svg = c.get("/m/shop_order/diagram.svg")
    assert "<img" not in page
    problem = text(page.split('id="diagram-problem">')[1].split("</p>")[0])
    assert problem.startswith("No diagram image: Graphviz is not installed (no 'dot' program found)")
    assert '<details open><summary class="muted">Mermaid</summary>' in page and "s_boxed" in page
    assert svg.status_code == 404 and svg.text.startswith("Graphviz is not installed")


def test_graph_draws_the_version_an_instance_follows(site) -> None:  # type: ignore[no-untyped-def]
    dsn = site["reporting"]
    upgraded = in_process("graph", "shop_order", "--instance", "S-3", "--dsn", dsn)
    assert upgraded.returncode == 0, upgraded.stderr
    assert upgraded.stderr == ""  # it follows the current definition: nothing to say
    lines = upgraded.stdout.splitlines()
    assert '    state "boxed" as s_boxed' in lines and "packed" not in upgraded.stdout
    # the move packed -> boxed is no step: pay, then pack into boxed, as v2 names it
    assert "    s_new --> s_paid: pay ★ step 1" in lines and "    s_paid --> s_boxed: pack ★ step 2" in lines
    assert "    class s_new,s_paid,s_boxed onpath" in lines

    older = in_process("graph", "shop_order", "--instance", "S-4", "--dsn", dsn, "--format", "dot")
    assert older.returncode == 0, older.stderr
    assert '"state_packed"' in older.stdout and "boxed" not in older.stdout  # v1, which S-4 follows
    assert older.stderr == (
        "pyfsm graph: S-4 follows definition version 1 of shop_order (the current is 2): drew version 1\n"
    )
    as_json = json.loads(in_process("graph", "shop_order", "--instance", "S-4", "--dsn", dsn, "--json").stdout)
    assert as_json["definition_version"] == 1 and "s_packed" in as_json["text"]


def test_graph_counts_draw_the_current_states_and_say_what_they_leave_out(site) -> None:  # type: ignore[no-untyped-def]
    dsn = site["reporting"]
    drawn = in_process("graph", "shop_order", "--counts", "--dsn", dsn)
    assert drawn.returncode == 0, drawn.stderr
    assert '    state "boxed (3)" as s_boxed' in drawn.stdout.splitlines() and "packed" not in drawn.stdout
    assert drawn.stderr == (
        "pyfsm graph: 1 instance is in a state the current definition lacks (packed 1): not drawn; "
        "`pyfsm upgrade shop_order --map packed=STATE` moves it (`--dry-run` first)\n"
    )
    as_json = json.loads(in_process("graph", "shop_order", "--counts", "--dsn", dsn, "--json").stdout)
    assert as_json["not_drawn"] == {"packed": 1}
    every_one_moved = in_process("graph", "parcel", "--counts", "--dsn", dsn)
    assert every_one_moved.returncode == 0 and every_one_moved.stderr == ""


def test_graph_of_an_instance_that_does_not_exist_is_one_line(site) -> None:  # type: ignore[no-untyped-def]
    missing = in_process("graph", "shop_order", "--instance", "NOPE", "--dsn", site["reporting"])
    assert missing.returncode == 1 and missing.stdout == ""
    assert missing.stderr.startswith("pyfsm: UnknownInstance (31003): ") and len(missing.stderr.splitlines()) == 1


# --- item 1: queue an idle instance --------------------------------------------------------


def act(c: Any, **form: str) -> Any:
    c.get("/")  # the browser's CSRF cookie
    return c.post(
        "/action", data={"csrf": c.cookies.get("pyfsm_csrf") or "", "operator": "alice", **form}, follow_redirects=True
    )


def log_since(site: dict[str, Any], since: int) -> list[dict[str, Any]]:
    return rows(site, "SELECT * FROM fsm_operator_log WHERE id > %s ORDER BY id", (since,))


def last_log_id(site: dict[str, Any]) -> int:
    return int(rows(site, "SELECT COALESCE(MAX(id), 0) AS n FROM fsm_operator_log")[0]["n"])


def due_runs(site: dict[str, Any], key: str) -> list[dict[str, Any]]:
    return rows(
        site,
        "SELECT r.due_at FROM fsm_runs r JOIN fsm_nc_flow i ON i.id = r.instance_id "
        "WHERE r.machine = 'nc_flow' AND i.instance_key = %s AND r.due_at IS NOT NULL",
        (key,),
    )


def test_the_queue_action_hands_an_idle_instance_to_its_workers(site) -> None:  # type: ignore[no-untyped-def]
    start = last_log_id(site)
    with client(site, allow_actions=True, actions_dsn=site["app"]) as c:
        before = c.get("/m/nc_flow/i/F-1").text
        assert re.search(r'class="badge s-idle"[^>]*>idle<', before.split('id="status">')[1])
        assert 'href="/confirm?action=enqueue&amp;machine=nc_flow&amp;key=F-1"' in before
        confirm = c.get("/confirm?action=enqueue&machine=nc_flow&key=F-1")
        assert confirm.status_code == 200 and "Confirm enqueue" in confirm.text
        assert "a worker of its process runs the handler of its state" in text(confirm.text)
        assert due_runs(site, "F-1") == []
        done = act(c, action="enqueue", machine="nc_flow", key="F-1")
        assert done.status_code == 200 and str(done.url).startswith("http://testserver/m/nc_flow/i/F-1?action=")
        result = text(done.text.split('id="result">')[1].split("</div>")[0])
        assert "(enqueue by alice): done" in result
        assert "enqueue: nc_flow F-1 is queued for the workers of its process (due " in result
        assert len(due_runs(site, "F-1")) == 1
        after = done.text.split('id="status">')[1].split("</td>")[0]
        assert re.search(r'class="badge s-running"[^>]*>running<', after) and "s-idle" not in after
        assert "action=enqueue" not in done.text  # no longer idle: no Queue button
        act(c, action="enqueue", machine="nc_flow", key="NOPE")  # refused and recorded (its page: a 404)
    log = log_since(site, start)
    assert [(r["action"], r["machine"], r["instance_key"], r["outcome"], r["errno"]) for r in log] == [
        ("enqueue", "nc_flow", "F-1", "done", None),
        ("enqueue", "nc_flow", "NOPE", "refused", 31003),
    ]
    assert log[0]["operator"] == "alice" and log[0]["account"].startswith("pyfsm_w46app")
    # queued, a worker of its process runs it: paid -> packed -> done
    with Store(site["root"].dsn()) as store:
        Worker(store, [site["process"]], idle_min=0.01, idle_max=0.05).run(handle_signals=False, until_idle=0.3)
        finished = store.get("nc_flow", "F-1")
        assert (finished.state, finished.status) == ("done", "completed")
        assert store.get("nc_flow", "F-2").state == "paid"  # not queued: nothing ran it


def test_queueing_needs_the_csrf_token_and_actions_on(site) -> None:  # type: ignore[no-untyped-def]
    start = last_log_id(site)
    with client(site, allow_actions=True, actions_dsn=site["app"]) as c:
        c.get("/")
        forged = c.post(
            "/action",
            data={"csrf": "forged", "operator": "mallory", "action": "enqueue", "machine": "nc_flow", "key": "F-2"},
        )
        assert forged.status_code == 403 and "CSRF" in forged.text
    with client(site) as c:  # read-only: no button, the command and the SQL call instead
        assert act(c, action="enqueue", machine="nc_flow", key="F-2").status_code == 403
        page = c.get("/m/nc_flow/i/-F-3").text
    assert "action=enqueue" not in page
    commands = html.unescape(page.split('<pre class="queue-commands">')[1].split("</pre>")[0])
    assert commands == "pyfsm enqueue nc_flow -- -F-3\nCALL fsm_enqueue_v2('nc_flow', '-F-3', NULL, NULL);"
    assert log_since(site, start) == []
    assert due_runs(site, "F-2") == [] and due_runs(site, "-F-3") == []


def test_the_status_words_are_reporting_md_s(site) -> None:  # type: ignore[no-untyped-def]
    with client(site) as c:
        index = c.get("/").text
        queue = c.get("/queue").text
        idle = c.get("/m/nc_flow/i/F-2").text
    footer = text(index.split("<h2>Relay</h2>")[0].rsplit('<p class="muted">', 1)[1])
    assert "running: a handler runs them or will (their run has a due time: due, later, or claimed)" in footer
    assert "idle: status running, but no handler runs them (they move when an event is sent)" in footer
    # fsm_stats_v3's idle column, on the queue page too
    head = re.findall(r"<th[^>]*>([a-z ]+)</th>", queue.split('<table class="queue-summary">')[1].split("</tr>")[0])
    assert head == ["machine", "due now", "claimed", "running", "idle", "waiting", "paused"]
    stats = {r["machine"]: r for r in rows(site, "CALL fsm_stats_v3()")}
    row = re.search(r'<td><a href="/m/nc_flow">nc_flow</a></td>((?:<td class="num">\d+</td>)+)', queue)
    assert row, queue
    shown = [int(n) for n in re.findall(r"\d+", row.group(1))]
    expected = stats["nc_flow"]
    assert shown == [expected[k] for k in ("due", "claimed", "running", "idle", "waiting", "paused")]
    assert expected["idle"] >= 1
    assert 'title="idle: not done, and no handler runs it (stored status running, no run with a due time)' in idle


# --- item 5: row version and definition version -------------------------------------------


def test_row_version_and_definition_version_are_labelled_apart(site) -> None:  # type: ignore[no-untyped-def]
    with client(site) as c:
        upgraded = c.get("/m/shop_order/i/S-3").text
        older = c.get("/m/shop_order/i/S-4").text
        listing = c.get("/m/shop_order").text
        index = c.get("/").text
    facts = re.findall(r"<tr><th>([a-z ]+)</th><td[^>]*>(.*?)</td></tr>", upgraded)
    labels = [label for label, _ in facts]
    assert "version" not in labels and {"row version", "definition version"} <= set(labels)
    values = {label: text(value).strip() for label, value in facts}
    # S-3: created (1), pay (2), pack (3), moved to v2 (4)
    assert values["row version"] == "4 (counts its changes)"
    assert values["definition version"] == "v2 (the rules it follows: the current definition)"
    older_values = {
        label: text(v).strip() for label, v in re.findall(r"<tr><th>([a-z ]+)</th><td[^>]*>(.*?)</td></tr>", older)
    }
    assert older_values["definition version"].startswith("v1 (the rules it follows; the current is v2: pyfsm upgrade")
    history_head = re.findall(r"<th[^>]*>([^<]+)</th>", upgraded.split('<table class="history">')[1].split("</tr>")[0])
    assert history_head[0] == "row version"
    columns = re.findall(r"<th[^>]*>([^<]+)</th>", listing.split('<table class="instances">')[1].split("</tr>")[0])
    assert "row version" in columns and "version" not in columns
    assert re.search(r'<a href="/m/shop_order">shop_order</a> <span class="muted"[^>]*>definition v2</span>', index)


def test_every_state_listing_is_in_definition_order(site) -> None:  # type: ignore[no-untyped-def]
    order = ["new", "paid", "boxed", "shipped", "packed"]  # packed: an older version's, last
    with client(site) as c:
        page = c.get("/m/shop_order").text
        index = c.get("/").text
    select = page.split('<select name="state">')[1].split("</select>")[0]
    assert re.findall(r"<option(?: selected)?>([a-z_]+)</option>", select) == order
    assert re.findall(r'\?state=([a-z_]+)"', card(index, "shop_order")) == order
