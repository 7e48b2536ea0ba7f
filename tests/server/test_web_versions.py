"""Definition versions in the console (issue 35), in process on the real server, read with a
reporting account: a type's page counts the instances of each version while older ones hold
some (the current one marked), an instance's page says which version it follows, and a move
to a newer version shows in the history and the unpublished events as what it is, not as a
creation."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.common import granted_accounts
from helpers.web_site import client, rows

from pyfsm import Machine, Store
from pyfsm.db import Settings

V1 = Machine(
    name="parcel",
    states=["new", "paid", "shipped"],
    start=["new"],
    transitions=[("pay", "new", "paid"), ("ship", "paid", "shipped")],
    topic="parcels",
)
#: shipped renamed sent, an event added
V2 = Machine(
    name="parcel",
    states=["new", "paid", "sent"],
    start=["new"],
    transitions=[("pay", "new", "paid"), ("ship", "paid", "sent"), ("unpay", "paid", "new")],
    topic="parcels",
)


@pytest.fixture(scope="module")
def site(server: Settings, make_database) -> Iterator[dict[str, Any]]:  # type: ignore[no-untyped-def]
    """parcel: 5 instances at version 1 (p-0 shipped, p-1 and p-2 paid), version 2 defined,
    the paid ones moved to it and p-9 created under it; door: a type defined once; crate: two
    versions, an instance of each. The outbox keeps every event (no relay runs)."""
    settings = make_database("pyfsm_webver")
    with Store(settings.dsn()) as store:
        store.migrate()
        store.define(V1)
        for i in range(5):
            store.create("parcel", f"p-{i}")
        for key in ("p-0", "p-1", "p-2"):
            store.send("parcel", key, "pay")
        store.send("parcel", "p-0", "ship")
        store.define(V2)
        report = store.upgrade_instances("parcel", only={"states": ["paid"]}, batch=1)
        assert report.moved == 2  # p-1 and p-2
        store.create("parcel", "p-9")
        store.define(
            Machine(
                name="door",
                states=["shut", "open"],
                start=["shut"],
                transitions=[("open", "shut", "open"), ("close", "open", "shut")],
            )
        )
        store.create("door", "d-1")
        store.define(
            Machine(name="crate", states=["open", "shut"], start=["open"], transitions=[("close", "open", "shut")])
        )
        store.create("crate", "c-1")
        store.define(
            Machine(
                name="crate",
                states=["open", "shut", "sealed"],
                start=["open"],
                transitions=[("close", "open", "shut"), ("seal", "shut", "sealed")],
            )
        )
        store.create("crate", "c-2")
    with granted_accounts(server, settings, ("reporting",), "pyfsm_wv") as made:
        yield {"root": settings, "reporting": made["reporting"].dsn()}


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_a_types_page_counts_the_instances_of_each_version(site) -> None:  # type: ignore[no-untyped-def]
    raw = {
        int(r["definition_version"]): int(r["n"])
        for r in rows(site, "SELECT definition_version, COUNT(*) AS n FROM fsm_parcel GROUP BY definition_version")
    }
    assert raw == {1: 3, 2: 3}
    with client(site) as c:
        page = c.get("/m/parcel")
        assert page.status_code == 200
        assert text(re.search(r'<tr id="version-1">.*?</tr>', page.text).group(0)).split() == ["v1", "3"]  # type: ignore[union-attr]
        assert text(re.search(r'<tr id="version-2">.*?</tr>', page.text).group(0)).split() == ["v2", "current", "3"]  # type: ignore[union-attr]
        assert "pyfsm upgrade parcel" in text(page.text)
        door = c.get("/m/door")  # defined once: nothing to count, nothing shown
        assert door.status_code == 200 and 'id="versions"' not in door.text

    with client(site) as c:
        assert 'id="version-1"' in c.get("/m/crate").text
    with Store(site["root"].dsn()) as store:
        assert store.upgrade_instances("crate").moved == 1
    with client(site) as c:  # a console started now: no counts kept from before
        assert 'id="versions"' not in c.get("/m/crate").text  # every instance is of the current version


def test_an_instance_page_says_which_version_it_follows(site) -> None:  # type: ignore[no-untyped-def]
    with client(site) as c:
        new = c.get("/m/parcel/i/p-9")
        assert text(new.text).count("v2 (the rules it follows: the current definition)") == 1
        moved = c.get("/m/parcel/i/p-2")
        assert "v2 (the rules it follows: the current definition)" in text(moved.text)
        history = re.search(r'<tr class="transition" id="t-3">.*?</tr>', moved.text, re.S)
        assert history is not None
        cells = [text(cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", history.group(0), re.S)]
        assert cells[:3] == ["3", "upgrade v1 → v2", "paid → paid"]
        assert "upgrade" in cells[6]  # its source
        assert "(created)" in text(re.search(r'<tr class="transition" id="t-1">.*?</tr>', moved.text, re.S).group(0))  # type: ignore[union-attr]
        # the events the relay has not published yet: the creation, the payment, the move
        outbox = text(moved.text.split("<h2>Unpublished events</h2>")[1].split("<h2>")[0])
        assert "(created)" in outbox and "pay" in outbox and "(upgrade)" in outbox
        assert "(upgrade)" in text(c.get("/outbox").text)
        old = c.get("/m/parcel/i/p-3")
        assert "v1 (the rules it follows; the current is v2: pyfsm upgrade parcel moves it)" in text(old.text)
