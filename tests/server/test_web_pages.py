"""What the console's pages say (issue 34), in process on the real server: states in their
definition's order, an instance badged by what runs it (a worker's, or idle: nothing but
events moves it), a failed instance's error at the top with how to retry it, counts that
read right for 0 and 1, unreachable states marked as `pyfsm install` warns about them, and
metadata shown only where there is some.

The module has a database of its own: the index lists every type of a database."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.common import granted_accounts
from helpers.web_site import client

from pyfsm import Context, Machine, Outcome, Process, Store, UnreachableStateWarning
from pyfsm.db import Settings

#: The console reads the stored definition of door (a Machine built again): it warns as install did.
pytestmark = pytest.mark.filterwarnings("ignore::pyfsm.UnreachableStateWarning")

DECLINED = "it's declined"  # a key a shell and SQL need quoted


def fulfilment() -> Process:
    process = Process.linear("fulfilment", ["reserve", "charge", "pack", "ship"], max_attempts=1, backoff=0.01)

    @process.handler("charge")
    def charge(ctx: Context) -> Outcome:
        if ctx.data.get("card") == "declined":
            raise RuntimeError("card declined by the bank (code 51)")
        return ctx.next()

    for step in ("reserve", "pack", "ship"):
        process.register(step, lambda ctx: ctx.next())
    return process


@pytest.fixture(scope="module")
def site(server: Settings, make_database) -> Iterator[dict[str, Any]]:  # type: ignore[no-untyped-def]
    """fulfilment (a process: one queued for a worker, two failed in charge, one done); door (a
    plain type with an unreachable state, one instance opened with metadata); empty (none)."""
    settings = make_database("pyfsm_webpages")
    process = fulfilment()
    with pytest.warns(UnreachableStateWarning, match="'bricked' cannot be reached from its start state 'shut'"):
        door = Machine(
            name="door",
            states=["shut", "open", "bricked"],
            start=["shut"],
            transitions=[("open", "shut", "open"), ("close", "open", "shut")],
        )
    with Store(settings.dsn()) as store:
        store.migrate()
        store.define(process.machine)
        process.start(store, "f-queued", run_immediately=False)  # reserve here, charge queued (no worker runs)
        for key in (DECLINED, "-k"):
            assert process.start(store, key, data={"card": "declined"}).status == "failed"
        assert process.start(store, "f-done").status == "completed"
        store.define(door)
        store.create("door", "d-1")
        store.send("door", "d-1", "open", metadata={"ticket": "OPS-7"})
        store.define(Machine(name="empty", states=["a", "b"], start=["a"], final=["b"], transitions=[("go", "a", "b")]))
    with granted_accounts(server, settings, ("app", "reporting"), "pyfsm_wp") as made:
        yield {"root": settings, **{role: a.dsn() for role, a in made.items()}}


def card(page: str, machine: str) -> str:
    """One type's card on the index."""
    found = re.search(rf'<div class="card machine" id="machine-{machine}">(.*?)</table>', page, re.S)
    assert found, page
    return found.group(1)


def badges(fragment: str) -> list[str]:
    """The status badges in ``fragment``, each with the count after it if any."""
    return [
        f"{s} {n}".strip() for s, n in re.findall(r'class="badge s-[a-z]+"[^>]*>([a-z]+)</span>\s*([\d,]*)', fragment)
    ]


def test_the_index_lists_states_in_definition_order(site) -> None:  # type: ignore[no-untyped-def]
    with client(site) as c:
        index = c.get("/").text
        states = re.findall(r'\?state=([a-z_]+)"', card(index, "fulfilment"))
        assert states == ["reserve", "charge", "pack", "ship", "done"]  # not charge, done, pack, reserve, ship
        assert re.findall(r'\?state=([a-z_]+)"', card(index, "door")) == ["shut", "open", "bricked"]
        # the type's own page: the same order
        page = c.get("/m/fulfilment").text
        assert re.findall(r'<tr id="state-([a-z_]+)">', page) == ["reserve", "charge", "pack", "ship", "done"]


def test_counts_read_right_for_zero_and_one(site) -> None:  # type: ignore[no-untyped-def]
    with client(site) as c:
        index = c.get("/").text
    assert "4 instances:" in card(index, "fulfilment")
    assert "1 instance:" in card(index, "door") and "1 instances" not in card(index, "door")
    empty = card(index, "empty")
    assert "no instances yet" in empty and "0 instances" not in empty and "instances:" not in empty
    assert "0 events not yet published" in index


def test_only_what_a_worker_runs_is_badged_running(site) -> None:  # type: ignore[no-untyped-def]
    with client(site) as c:
        index = c.get("/").text
        assert "idle: status running, but no handler runs them" in index
        # door's instance has status running, but nothing runs it: idle; fulfilment's queued one runs
        assert badges(card(index, "door")) == ["idle 1"]
        assert badges(card(index, "fulfilment")) == ["running 1", "failed 2", "completed 1"]
        assert 'href="/m/door?status=running"' in card(index, "door")  # idle ones have status running
        door = c.get("/m/door").text
        listing = door.split('<table class="instances">')[1]
        assert badges(listing) == ["idle"]
        assert "idle: status running, but no handler runs them" in door
        flow = c.get("/m/fulfilment").text.split('<table class="instances">')[1]
        assert sorted(badges(flow)) == ["completed", "failed", "failed", "running"]
        one = c.get("/m/door/i/d-1").text
        assert badges(one.split('id="status">')[1].split("</td>")[0]) == ["idle"]
        assert "no handler runs this instance" in one and "s-running" not in one
        queued = c.get("/m/fulfilment/i/f-queued").text
        assert badges(queued.split('id="status">')[1])[0] == "running" and '<table class="run">' in queued


def test_a_failed_instance_shows_its_error_first_and_how_to_retry(site) -> None:  # type: ignore[no-untyped-def]
    url = "/m/fulfilment/i/it%27s%20declined"
    with client(site) as c:  # read-only: the command and the SQL call, quoted for a shell and for SQL
        page = c.get(url).text
    failure = page.index('id="failure"')
    assert failure < page.index('id="run"') < page.index("<h2>History") < page.index('id="errors"')
    notice = html.unescape(page[failure : page.index('id="run"')])
    assert "Failed in charge" in notice and "builtins.RuntimeError" in notice
    assert "card declined by the bank (code 51)" in notice and "handler charge" in notice
    retry = html.unescape(page[page.index('id="retry"') : page.index("<h2>Timers")])
    assert "pyfsm retry fulfilment 'it'\"'\"'s declined'" in retry  # shlex's quoting of it's declined
    assert "CALL fsm_retry_v1('fulfilment', 'it''s declined');" in retry
    assert "/confirm?action=retry" not in page
    with client(site) as c:  # a key a command line would take for an option comes after --
        assert "pyfsm retry fulfilment -- -k\nCALL fsm_retry_v1('fulfilment', '-k');" in html.unescape(
            c.get("/m/fulfilment/i/-k").text
        )
    with client(site, allow_actions=True, actions_dsn=site["app"]) as c:  # actions on: the console's retry
        page = c.get(url).text
    retry = page[page.index('id="retry"') : page.index("<h2>Timers")]
    assert 'href="/confirm?action=retry&amp;machine=fulfilment&amp;key=it%27s%20declined"' in retry
    assert "pyfsm retry" not in retry and "fsm_retry_v1" not in retry
    # what runs, and what is done, says so instead
    with client(site) as c:
        assert "None: the instance is completed" in c.get("/m/fulfilment/i/f-done").text
        assert 'id="failure"' not in c.get("/m/fulfilment/i/f-queued").text


def test_an_unreachable_state_is_marked(site) -> None:  # type: ignore[no-untyped-def]
    with client(site) as c:
        door = c.get("/m/door").text
        flow = c.get("/m/fulfilment").text
    marked = [
        s
        for s in ("shut", "open", "bricked")
        if "unreachable" in door.split(f'<tr id="state-{s}">')[1].split("</tr>")[0]
    ]
    assert marked == ["bricked"]
    notice = re.sub(r"<[^>]+>", "", door.split('id="unreachable">')[1].split("</p>")[0])
    assert notice.startswith(
        "State bricked cannot be reached from its start state shut: no instance will ever enter it"
    )
    assert "unreachable" not in flow


def test_metadata_is_shown_only_where_there_is_some(site) -> None:  # type: ignore[no-untyped-def]
    with client(site) as c:
        page = c.get("/m/door/i/d-1").text
    rows = page.split('<tr class="transition"')[1:]
    assert len(rows) == 2  # open (with metadata), then the creation (none)
    assert '<pre class="metadata">' in rows[0] and "OPS-7" in rows[0]
    assert "metadata" not in rows[1] and "{}" not in rows[1]
