"""`pyfsm upgrade` and the version counts of `pyfsm stats` (issue 35): a type's instances
moved to a newer definition version from the command line, checked against the raw tables:
the dry run's counts, the advice for a state the new version lacks, a malformed --map refused
before anything moves, a run with --map that moves everything once, instances that wait,
and the exit statuses.

The module has a database of its own: `pyfsm stats` lists every type of a database."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest
from helpers.cli import in_process, pyfsm
from helpers.common import fetch, granted_accounts, unique

from pyfsm import Machine, Store
from pyfsm.db import Settings
from pyfsm.errors import DatabaseUnavailable

#: Instances per state of version 1 (done is final): 2 in shipped, which version 2 renames.
V1_STATES = {"new": 4, "paid": 3, "shipped": 2, "done": 1}


def v1(name: str, **options: Any) -> Machine:
    return Machine(
        name=name,
        states=["new", "paid", "shipped", "done"],
        start=["new"],
        final=["done"],
        transitions=[("pay", "new", "paid"), ("ship", "paid", "shipped"), ("deliver", "shipped", "done")],
        **options,
    )


def v2(name: str, **options: Any) -> Machine:
    """shipped renamed sent; a transition added (a sent parcel can be sent back)."""
    return Machine(
        name=name,
        states=["new", "paid", "sent", "done"],
        start=["new"],
        final=["done"],
        transitions=[
            ("pay", "new", "paid"),
            ("ship", "paid", "sent"),
            ("deliver", "sent", "done"),
            ("return", "sent", "paid"),
        ],
        **options,
    )


@pytest.fixture(scope="module")
def database(make_database) -> Iterator[tuple[Settings, Store]]:  # type: ignore[no-untyped-def]
    settings = make_database("pyfsm_upg")
    with Store(settings.dsn()) as store:
        store.migrate()
        yield settings, store


@pytest.fixture
def parcel(database: tuple[Settings, Store]) -> str:
    """A type of its own: V1_STATES' instances at version 1, then version 2 defined and two
    instances created under it."""
    _, store = database
    name = unique("parcel")
    store.define(v1(name))
    path = ["pay", "ship", "deliver"]
    n = 0
    for depth, (_state, count) in enumerate(V1_STATES.items()):
        for _ in range(count):
            key = f"p-{n}"
            store.create(name, key, lookup_key=f"acct-{n}")
            for event in path[:depth]:
                store.send(name, key, event)
            n += 1
    store.define(v2(name))
    store.create(name, "p-new-1")
    store.create(name, "p-new-2")
    return name


def raw(database: tuple[Settings, Store], sql: str) -> list[dict[str, Any]]:
    conn = pymysql.connect(**database[0].connect_kwargs())
    try:
        return fetch(conn, sql)
    finally:
        conn.close()


def per_version(database: tuple[Settings, Store], name: str) -> dict[tuple[int, str], int]:
    """(definition version, state) -> instances, from the instance table itself."""
    rows = raw(
        database,
        f"SELECT definition_version, current_state, COUNT(*) AS n FROM `fsm_{name}` "
        "GROUP BY definition_version, current_state",
    )
    return {(int(r["definition_version"]), str(r["current_state"])): int(r["n"]) for r in rows}


def upgrade_rows(database: tuple[Settings, Store], name: str) -> int:
    return int(raw(database, f"SELECT COUNT(*) AS n FROM `fsm_{name}_transitions` WHERE source = 'upgrade'")[0]["n"])


def run(*args: str, dsn: str) -> subprocess.CompletedProcess[str]:
    return in_process(*args, "--dsn", dsn)


BEFORE = {**{(1, s): n for s, n in V1_STATES.items()}, (2, "new"): 2}


def test_the_dry_run_counts_what_the_tables_hold_and_moves_nothing(database, parcel) -> None:  # type: ignore[no-untyped-def]
    dsn = database[0].dsn()
    assert per_version(database, parcel) == BEFORE
    result = run("upgrade", parcel, "--dry-run", "--json", dsn=dsn)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["machine"], report["to_version"], report["dry_run"]) == (parcel, 2, True)
    groups = {(g["from_version"], g["from_state"]): g for g in report["groups"]}
    assert {k: g["instances"] for k, g in groups.items()} == {k: n for k, n in BEFORE.items() if k[0] == 1}
    assert {k: (g["to_state"], g["outcome"]) for k, g in groups.items()} == {
        (1, "new"): ("new", "move"),
        (1, "paid"): ("paid", "move"),
        (1, "done"): ("done", "move"),
        (1, "shipped"): (None, "unmapped"),
    }
    assert (report["moved"], report["waiting"], report["unmapped"]) == (8, 0, 2)

    text = run("upgrade", parcel, "--dry-run", dsn=dsn)
    assert text.returncode == 0 and text.stderr == ""
    lines = text.stdout.splitlines()
    assert lines[0] == f"{parcel} -> version 2 (dry run: nothing is written)"
    assert lines[1].split() == ["from", "version", "state", "to", "state", "outcome", "instances"]
    assert lines[-1] == (
        "would move 8, would wait 0, cannot move 2 (version 2 has no state shipped: give "
        "--map shipped=NEW, NEW one of new, paid, sent, done)"
    )
    assert any(line.split() == ["1", "shipped", "-", "unmapped", "2"] for line in lines)

    assert per_version(database, parcel) == BEFORE and upgrade_rows(database, parcel) == 0


def test_a_malformed_map_is_a_usage_error_and_nothing_moves(database, parcel) -> None:  # type: ignore[no-untyped-def]
    dsn = database[0].dsn()
    for bad, says in (
        (["--map", "shipped"], "--map takes OLD=NEW"),
        (["--map", "=sent"], "--map takes OLD=NEW"),
        (["--map", "shipped="], "--map takes OLD=NEW"),
        (["--map", "shipped=sent", "--map", "shipped=paid"], "--map maps shipped twice"),
        (["--batch", "0"], "--batch"),
        (["--to", "two"], "--to"),
    ):
        result = run("upgrade", parcel, *bad, dsn=dsn)
        assert result.returncode == 2 and result.stdout == "", (bad, result)
        [line] = result.stderr.splitlines()
        assert line.startswith(f"pyfsm: usage: pyfsm upgrade: {'argument ' if bad[0] != '--map' else ''}{says}"), line
    # as a user's shell runs it, once
    shell = pyfsm("upgrade", parcel, "--map", "shipped", "--dsn", dsn)
    assert shell.returncode == 2 and shell.stderr == (
        "pyfsm: usage: pyfsm upgrade: --map takes OLD=NEW (a state of an older version = a state of the target "
        "version), got 'shipped' (see pyfsm upgrade --help)\n"
    )
    # well formed, but the database refuses it: one error line, exit 1
    for refused, says in (
        (["--map", "shipped=lost"], "maps shipped to lost, no state of version 2"),
        (["--map", "sent=paid"], "names sent, no state of an older version"),
        (["--only-version", "2"], "older than 2"),
        (["--to", "3"], "has no definition version 3"),
    ):
        result = run("upgrade", parcel, *refused, dsn=dsn)
        assert result.returncode == 1 and result.stdout == "", (refused, result)
        [line] = result.stderr.splitlines()
        assert line.startswith("pyfsm: UpgradeRefused (31030): ") and says in line, line
    assert per_version(database, parcel) == BEFORE and upgrade_rows(database, parcel) == 0


def test_a_run_with_a_map_moves_every_instance_once(database, parcel) -> None:  # type: ignore[no-untyped-def]
    dsn = database[0].dsn()
    # without a map: what can move moves; shipped is left, and the exit status says so
    first = run("upgrade", parcel, dsn=dsn)
    assert first.returncode == 1 and first.stderr == "", first
    assert first.stdout.splitlines()[-1].startswith(
        "moved 8, waiting 0, cannot move 2 (version 2 has no state shipped: give --map shipped=NEW"
    )
    assert per_version(database, parcel) == {(1, "shipped"): 2, (2, "new"): 6, (2, "paid"): 3, (2, "done"): 1}

    second = run("upgrade", parcel, "--map", "shipped=sent", "--batch", "1", "--json", dsn=dsn)
    assert second.returncode == 0, second.stderr
    report = json.loads(second.stdout)
    assert report["groups"] == [
        {"from_version": 1, "from_state": "shipped", "to_state": "sent", "outcome": "moved", "instances": 2}
    ]
    assert (report["moved"], report["waiting"], report["unmapped"]) == (2, 0, 0)
    assert report["batches"] >= 2  # --batch 1: a call per instance
    assert per_version(database, parcel) == {(2, "new"): 6, (2, "paid"): 3, (2, "sent"): 2, (2, "done"): 1}
    assert upgrade_rows(database, parcel) == 10  # one history row per instance moved
    moved = raw(
        database,
        f"SELECT h.event, h.from_state, h.to_state, h.metadata FROM `fsm_{parcel}_transitions` h "
        f"JOIN `fsm_{parcel}` i ON i.id = h.instance_id WHERE i.instance_key = 'p-7' "
        "AND h.source = 'upgrade'",
    )
    assert [(m["event"], m["from_state"], m["to_state"], json.loads(m["metadata"])) for m in moved] == [
        (
            None,
            "shipped",
            "sent",
            {"upgrade": {"from_version": 1, "to_version": 2, "from_state": "shipped", "to_state": "sent"}},
        )
    ]
    assert json.loads(run("counts", parcel, "--json", dsn=dsn).stdout).get("sent") == 2
    sent = json.loads(run("send", parcel, "p-7", "return", "--json", dsn=dsn).stdout)  # version 2's new event
    assert (sent["from_state"], sent["to_state"]) == ("sent", "paid")

    again = run("upgrade", parcel, "--map", "shipped=sent", dsn=dsn)
    assert again.returncode == 0 and again.stdout.splitlines() == [
        f"{parcel} -> version 2",
        f"nothing to move: no selected {parcel} instance is of a version older than 2",
    ]
    again_json = json.loads(run("upgrade", parcel, "--json", dsn=dsn).stdout)
    assert (again_json["moved"], again_json["groups"]) == (0, [])
    assert upgrade_rows(database, parcel) == 10


def test_only_moves_the_instances_it_selects(database, parcel) -> None:  # type: ignore[no-untyped-def]
    dsn = database[0].dsn()
    result = run("upgrade", parcel, "--only-state", "paid", "--only-state", "done", "--only-version", "1", dsn=dsn)
    assert result.returncode == 0, result
    assert result.stdout.splitlines()[-1] == "moved 4, waiting 0, cannot move 0"
    assert per_version(database, parcel) == {
        (1, "new"): 4,
        (1, "shipped"): 2,
        (2, "paid"): 3,
        (2, "done"): 1,
        (2, "new"): 2,
    }


def test_an_instance_whose_lock_is_held_waits_for_the_next_run(database) -> None:  # type: ignore[no-untyped-def]
    settings, store = database
    dsn = settings.dsn()
    name = unique("parcel")
    store.define(v1(name, uses_local_lock=True))
    for i in range(3):
        store.create(name, f"l-{i}", lookup_key=f"acct-{i}")
    store.define(v2(name, uses_local_lock=True))
    with store.lock(name, "l-1"):
        dry = run("upgrade", name, "--dry-run", dsn=dsn)
        assert dry.returncode == 0 and dry.stdout.splitlines()[-1] == (
            "would move 2, would wait 1 (a worker runs them or their lock is held now: a run leaves them for the "
            "next), cannot move 0"
        )
        held = run("upgrade", name, dsn=dsn)
        assert held.returncode == 1 and held.stdout.splitlines()[-1] == (
            "moved 2, waiting 1 (a worker runs them or their lock is held: run it again later), cannot move 0"
        )
        assert any(line.split() == ["1", "new", "new", "locked", "1"] for line in held.stdout.splitlines())
    assert per_version(database, name) == {(1, "new"): 1, (2, "new"): 2}
    later = run("upgrade", name, dsn=dsn)
    assert later.returncode == 0 and later.stdout.splitlines()[-1] == "moved 1, waiting 0, cannot move 0"
    assert per_version(database, name) == {(2, "new"): 3}


def test_a_run_stopped_part_way_says_how_far_it_got_and_the_next_finishes(
    database, parcel, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    dsn = database[0].dsn()
    real = Store.upgrade_instances

    def lost_after_one_batch(self: Store, machine: str, **options: Any) -> Any:
        report_to = options.pop("progress")

        def then_fail(report: Any) -> None:
            report_to(report)
            raise DatabaseUnavailable("the connection was lost (a test)")

        return real(self, machine, **{**options, "batch": 1, "progress": then_fail})

    monkeypatch.setattr(Store, "upgrade_instances", lost_after_one_batch)
    stopped = run("upgrade", parcel, "--map", "shipped=sent", dsn=dsn)
    monkeypatch.undo()
    assert stopped.returncode == 1 and stopped.stdout == ""
    assert stopped.stderr.splitlines() == [
        "pyfsm: upgrade stopped after 1 moved in 1 batch; running it again carries on",
        "pyfsm: DatabaseUnavailable (2003): the connection was lost (a test)",
    ]
    assert sum(n for (version, _), n in per_version(database, parcel).items() if version == 2) == 3
    rest = json.loads(run("upgrade", parcel, "--map", "shipped=sent", "--json", dsn=dsn).stdout)
    assert (rest["moved"], rest["unmapped"]) == (9, 0)
    assert per_version(database, parcel) == {(2, "new"): 6, (2, "paid"): 3, (2, "sent"): 2, (2, "done"): 1}


def test_stats_shows_the_instances_of_each_version(server, database, parcel) -> None:  # type: ignore[no-untyped-def]
    settings, store = database
    dsn = settings.dsn()
    once = unique("once")
    store.define(v1(once))
    store.create(once, "o-1")

    text = run("stats", dsn=dsn)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].split()[:2] == ["machine", "instances"]
    assert (
        f"{parcel} versions: 1: 10, 2 (current): 2 (`pyfsm upgrade {parcel} --dry-run` says what would move)" in lines
    )
    assert not any(line.startswith(f"{once} versions") for line in lines)  # a type defined once: its row alone
    by_type = {s["machine"]: s for s in json.loads(run("stats", "--json", dsn=dsn).stdout)}
    assert by_type[parcel]["versions"] == [
        {"version": 1, "instances": 10, "is_current": False},
        {"version": 2, "instances": 2, "is_current": True},
    ]
    assert by_type[once]["versions"] == [{"version": 1, "instances": 1, "is_current": True}]

    # a reporting account counts them too (fsm_instances_per_version_v1 is granted to it)
    with granted_accounts(server, settings, ("reporting",), "pyfsm_u") as accounts:
        reporting = run("stats", "--json", dsn=accounts["reporting"].dsn())
        assert reporting.returncode == 0, reporting.stderr
        versions = {s["machine"]: s["versions"] for s in json.loads(reporting.stdout)}
        assert versions[parcel] == by_type[parcel]["versions"]

    assert run("upgrade", parcel, "--map", "shipped=sent", dsn=dsn).returncode == 0
    after = run("stats", dsn=dsn).stdout
    assert f"{parcel} versions" not in after
    by_type = {s["machine"]: s for s in json.loads(run("stats", "--json", dsn=dsn).stdout)}
    assert by_type[parcel]["versions"] == [{"version": 2, "instances": 12, "is_current": True}]
