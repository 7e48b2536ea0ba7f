"""Issue 46, from the command line and the Store: an idle instance (status running, and no
handler runs it) is called idle and handed to the workers by `pyfsm enqueue`; the row version
and the definition version are named apart; history is numbered 1..n; counts follow the
definition's order; errors name the states that would be right; an upgrade's arguments are
checked in Python so that both servers refuse them alike (31030); the engine's times are
UTC-aware.

Each test checks what the commands print against the tables or the Store."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from helpers.cli import in_process, pyfsm
from helpers.common import unique

from pyfsm import Machine, Store
from pyfsm.db import Settings
from pyfsm.errors import InvalidArgument, UpgradeRefused
from pyfsm.versions import MAX_MAP_ENTRIES

WORKER = "helpers.engine_fixtures:CLI_CHECKOUT"  # reserve -> charge -> ship -> done, a handler on each step


def run(*args: str, dsn: str) -> subprocess.CompletedProcess[str]:
    return in_process(*args, "--dsn", dsn)


def one_error(result: subprocess.CompletedProcess[str], name: str, errno: int) -> str:
    """The one stderr line of a command that failed with exit 1 and printed nothing else."""
    assert result.returncode == 1 and result.stdout == "", result
    [line] = result.stderr.splitlines()
    assert line.startswith(f"pyfsm: {name} ({errno}): "), line
    return line


@pytest.fixture(scope="module")
def database(make_database) -> Iterator[tuple[Settings, Store]]:  # type: ignore[no-untyped-def]
    settings = make_database("pyfsm_2nd")
    with Store(settings.dsn()) as store:
        store.migrate()
        yield settings, store


def order(name: str, states: list[str] | None = None) -> Machine:
    """States in an order that is not the alphabet's: new, paid, packed, done, cancelled."""
    states = states or ["new", "paid", "packed", "done", "cancelled"]
    moves = {"pay": ("new", "paid"), "pack": ("paid", states[2]), "finish": (states[2], "done")}
    return Machine(
        name=name,
        states=states,
        start=["new"],
        final=["done", "cancelled"],
        transitions=[(event, a, b) for event, (a, b) in moves.items()] + [("cancel", "new", "cancelled")],
    )


# -- item 1: idle, running, and `pyfsm enqueue` ---------------------------------------------------


def test_an_idle_instance_is_called_idle_and_enqueue_hands_it_to_the_workers(make_database) -> None:  # type: ignore[no-untyped-def]
    from helpers.engine_fixtures import CLI_CHECKOUT

    dsn = make_database("pyfsm_2nd").dsn()
    with Store(dsn) as store:
        store.migrate()
        store.define(CLI_CHECKOUT.machine)
        # created by a plain create, not process.start: no handler runs it
        assert run("create", "cli_checkout", "f-1", "--data", '{"items": 2}', dsn=dsn).returncode == 0
        idle_worker = pyfsm("worker", "--dsn", dsn, WORKER, "--until-idle", "0.5", "--json")
        assert idle_worker.returncode == 0 and json.loads(idle_worker.stdout)["runs"] == 0, idle_worker
        assert store.run_info("cli_checkout", "f-1") is None and store.get("cli_checkout", "f-1").status == "running"

        shown = run("show", "cli_checkout", "f-1", dsn=dsn)
        assert re.search(
            r"^  status +idle \(no handler runs it: .*`pyfsm enqueue cli_checkout f-1`", shown.stdout, re.M
        )
        shown_json = json.loads(run("show", "cli_checkout", "f-1", "--json", dsn=dsn).stdout)
        assert (shown_json["status"], shown_json["idle"]) == ("running", True)  # the stored word, and what it means

        # retry and resume say what it is and what to run, instead of "running, not failed"
        for command, wanted in (("retry", "failed"), ("resume", "paused")):
            line = one_error(run(command, "cli_checkout", "f-1", dsn=dsn), "InvalidStatus", 31022)
            assert line.endswith(
                f"cli_checkout f-1 is idle in reserve, not {wanted}: no handler runs it (it moves when an event "
                "is sent); `pyfsm enqueue cli_checkout f-1` hands it to the workers of its process"
            ), line
        assert store.run_info("cli_checkout", "f-1") is None  # the refusals changed nothing

        def stats() -> dict[str, Any]:
            [row] = [s for s in json.loads(run("stats", "--json", dsn=dsn).stdout) if s["machine"] == "cli_checkout"]
            return row

        assert (stats()["running"], stats()["idle"]) == (0, 1)
        table = run("stats", dsn=dsn).stdout.splitlines()
        assert table[0].split()[:4] == ["machine", "instances", "running", "idle"]
        assert table[1].split()[:4] == ["cli_checkout", "1", "0", "1"]

        queued = run("enqueue", "cli_checkout", "f-1", "--json", dsn=dsn)
        assert queued.returncode == 0, queued.stderr
        answer = json.loads(queued.stdout)
        info = store.run_info("cli_checkout", "f-1")
        assert info is not None and info.due_at is not None and info.claimed_by is None
        assert (answer["machine"], answer["instance_key"], answer["status"]) == ("cli_checkout", "f-1", "running")
        assert datetime.fromisoformat(answer["due_at"]) == info.due_at  # UTC-aware, as the Store's
        assert (stats()["running"], stats()["idle"]) == (1, 0)
        assert re.search(
            r"^  status +running \(queued for a worker, due ", run("show", "cli_checkout", "f-1", dsn=dsn).stdout, re.M
        )
        # again: still one run, due now
        again = run("enqueue", "cli_checkout", "f-1", dsn=dsn)
        assert again.returncode == 0 and again.stdout.startswith("cli_checkout f-1: running: queued, due "), again

        worked = pyfsm("worker", "--dsn", dsn, WORKER, "--until-idle", "0.5", "--json")
        assert worked.returncode == 0 and json.loads(worked.stdout)["runs"] == 1, worked
        done = store.get("cli_checkout", "f-1")
        assert (done.state, done.status, done.data["charged"]) == ("done", "completed", 20)
        one_error(run("enqueue", "cli_checkout", "f-1", dsn=dsn), "InvalidStatus", 31022)  # completed: refused

        # a paused instance keeps a run that is not due: enqueue says so, resume makes it due
        run("create", "cli_checkout", "f-2", dsn=dsn)
        assert run("pause", "cli_checkout", "f-2", dsn=dsn).returncode == 0
        paused = run("enqueue", "cli_checkout", "f-2", "--no-run-immediately", dsn=dsn)
        assert paused.stdout == (
            "cli_checkout f-2: paused; its run is kept in the engine's queue and is due when it is resumed "
            "(`pyfsm resume`)\n"
        ), paused
        info = store.run_info("cli_checkout", "f-2")
        assert info is not None and info.due_at is None and info.run_immediately == 0
        assert "running" in run("resume", "cli_checkout", "f-2", dsn=dsn).stdout
        info = store.run_info("cli_checkout", "f-2")
        assert info is not None and info.due_at is not None

    # a number out of range is a usage error, before anything connects
    for bad in ("-1", "nan", "soon", "1e12"):
        usage = run("enqueue", "cli_checkout", "f-3", "--delay", bad, dsn=dsn)
        assert usage.returncode == 2 and "--delay" in usage.stderr, (bad, usage)


def test_the_engine_times_are_utc_aware(database, make_database) -> None:  # type: ignore[no-untyped-def]
    _, store = database
    name = unique("aware")
    store.define(order(name))
    store.create(name, "a-1")
    before = datetime.now(UTC)
    queued = store.enqueue(name, "a-1", delay_seconds=60)
    info = store.run_info(name, "a-1")
    assert info is not None and queued.due_at is not None and info.due_at is not None
    assert queued.due_at.tzinfo is UTC and info.due_at.tzinfo is UTC
    assert queued.due_at == info.due_at
    assert timedelta(seconds=55) < info.due_at - before < timedelta(seconds=65)  # comparable with an aware now
    instance = store.get(name, "a-1")
    assert info.due_at > instance.updated_at  # and with the instance's times
    stats = [s for s in store.stats() if s.machine == name]
    assert stats[0].oldest_unpublished_at is None and (stats[0].running, stats[0].idle) == (1, 0)


# -- item 5: one word for each thing --------------------------------------------------------------


def test_row_version_and_definition_version_are_named_apart(database) -> None:  # type: ignore[no-untyped-def]
    settings, store = database
    dsn = settings.dsn()
    name = unique("named")
    store.define(order(name))
    store.define(order(name, ["new", "paid", "boxed", "done", "cancelled"]))  # definition version 2

    created = run("create", name, "n-1", dsn=dsn)
    assert created.stdout == f"{name} n-1: created in new (row version 1)\n", created
    sent = run("send", name, "n-1", "pay", dsn=dsn)
    assert sent.stdout == f"{name} n-1: pay: new -> paid, row version 2\n", sent
    shown = run("show", name, "n-1", dsn=dsn).stdout
    assert re.search(r"^  row version +2 \(", shown, re.M) and re.search(r"^  definition version +2 \(", shown, re.M)
    assert not re.search(r"^  version ", shown, re.M)
    listed = run("list", name, "paid", dsn=dsn).stdout.splitlines()
    assert listed[0].split()[:5] == ["id", "key", "status", "row", "version"]
    # --json keeps the fields' names
    assert json.loads(run("create", name, "n-2", "--json", dsn=dsn).stdout)["version"] == 1
    shown_json = json.loads(run("show", name, "n-1", "--json", dsn=dsn).stdout)
    assert (shown_json["version"], shown_json["definition_version"]) == (2, 2)

    # a pause and a resume change the row (its status) without a transition: the row versions skip 3 and 4
    store.pause(name, "n-1")
    store.resume(name, "n-1")
    store.send(name, "n-1", "pack")
    history = store.history(name, "n-1")
    assert [h.sort_key for h in history] == [1, 2, 5]
    text = run("history", name, "n-1", dsn=dsn).stdout.splitlines()
    assert text[0].split()[:6] == ["#", "event", "from", "to", "row", "version"]
    rows = [line.split() for line in text[1:4]]
    assert [(r[0], r[4]) for r in rows] == [("1", "1"), ("2", "2"), ("3", "5")]  # #, then the row version
    assert text[4].startswith("(row version: the instance's, after that row; changes that are not transitions")
    assert len(text) == 5
    # without a gap, no note
    assert run("history", name, "n-2", dsn=dsn).stdout.splitlines()[-1].split()[0] == "1"
    assert [h["sort_key"] for h in json.loads(run("history", name, "n-1", "--json", dsn=dsn).stdout)] == [1, 2, 5]


def test_counts_follow_the_definition_order_then_older_versions_states(database) -> None:  # type: ignore[no-untyped-def]
    settings, store = database
    dsn = settings.dsn()
    name = unique("counted")
    store.define(order(name))
    for key, events in {"c-1": [], "c-2": ["pay"], "c-3": ["pay", "pack"], "c-4": ["cancel"], "c-5": ["pay"]}.items():
        store.create(name, key)
        for event in events:
            store.send(name, key, event)
    expected = {"new": 1, "paid": 2, "packed": 1, "cancelled": 1}
    assert list(json.loads(run("counts", name, "--json", dsn=dsn).stdout).items()) == list(expected.items())
    text = run("counts", name, dsn=dsn).stdout.splitlines()
    assert [line.split() for line in text] == [["state", "instances"], *([s, str(n)] for s, n in expected.items())]

    # version 2 renames packed: the instance still there is listed after the current states
    store.define(order(name, ["new", "paid", "boxed", "done", "cancelled"]))
    store.create(name, "c-6")
    store.send(name, "c-6", "pay")
    store.send(name, "c-6", "pack")
    counts = json.loads(run("counts", name, "--json", dsn=dsn).stdout)
    assert list(counts) == ["new", "paid", "boxed", "cancelled", "packed"]
    text = run("counts", name, dsn=dsn).stdout.splitlines()
    assert [line.split()[0] for line in text[1:6]] == ["new", "paid", "boxed", "cancelled", "packed"]
    assert text[6] == (
        f"(packed: no state of the current definition of {name}; `pyfsm upgrade {name} --dry-run` says where "
        "they would go)"
    )


# -- item 6: errors that say what would be right --------------------------------------------------


def test_list_of_a_state_the_type_lacks_names_its_states(database) -> None:  # type: ignore[no-untyped-def]
    settings, store = database
    dsn = settings.dsn()
    name = unique("listed")
    store.define(order(name))
    line = one_error(run("list", name, "nostate", dsn=dsn), "InvalidArgument", 31009)
    assert line.endswith(
        f"machine type '{name}' has no state 'nostate'; its states: new, paid, packed, done, cancelled"
    )
    assert run("list", name, "paid", dsn=dsn).returncode == 0  # a state with no instance is fine
    # a state only an older version has is still a state of the type: listed, not refused
    store.define(order(name, ["new", "paid", "boxed", "done", "cancelled"]))
    assert run("list", name, "packed", dsn=dsn).returncode == 0
    # the Store's own error is the database's (the CLI reads the definition after the refusal)
    with pytest.raises(InvalidArgument) as refused:
        store.in_state(name, "nostate")
    assert refused.value.errno == 31009


def test_a_map_onto_a_state_the_target_lacks_lists_the_target_states(database) -> None:  # type: ignore[no-untyped-def]
    settings, store = database
    dsn = settings.dsn()
    name = unique("mapped")
    store.define(order(name))
    store.create(name, "m-1")
    store.send(name, "m-1", "pay")
    store.send(name, "m-1", "pack")
    store.define(order(name, ["new", "paid", "boxed", "done", "cancelled"]))
    target = "new, paid, boxed, done, cancelled"
    for dry in ([], ["--dry-run"]):
        line = one_error(run("upgrade", name, "--map", "packed=box", *dry, dsn=dsn), "UpgradeRefused", 31030)
        assert line.endswith(
            f"the state map maps packed to box, no state of version 2; the states of {name} version 2: {target}"
        ), line
    for dry_run in (True, False):
        with pytest.raises(UpgradeRefused) as refused:
            store.upgrade_instances(name, states={"packed": "box", "paid": "payed"}, dry_run=dry_run)
        assert str(refused.value) == (
            f"the state map maps packed to box and paid to payed, no states of version 2; the states of {name} "
            f"version 2: {target}"
        )
        assert refused.value.fields["states"] == target.split(", ") and refused.value.__cause__ is not None
    # refusals the map's targets do not explain keep the database's words
    with pytest.raises(UpgradeRefused, match="names nothing_here, no state of an older version"):
        store.upgrade_instances(name, states={"nothing_here": "boxed"}, dry_run=True)
    assert store.get(name, "m-1").definition_version == 1  # nothing moved
    assert run("upgrade", name, "--map", "packed=boxed", dsn=dsn).returncode == 0
    assert (store.get(name, "m-1").state, store.get(name, "m-1").definition_version) == ("boxed", 2)


# -- item 8: an upgrade's arguments refused alike on both servers ---------------------------------


def test_an_upgrades_arguments_are_refused_in_python_alike_on_both_servers(database) -> None:  # type: ignore[no-untyped-def]
    settings, store = database
    name = unique("sized")
    store.define(order(name))
    store.create(name, "s-1")
    store.send(name, "s-1", "pay")
    store.send(name, "s-1", "pack")
    store.define(order(name, ["new", "paid", "boxed", "done", "cancelled"]))
    huge = "x" * 1_000_000
    too_many = {f"s{n}": "boxed" for n in range(MAX_MAP_ENTRIES + 1)}
    cases: list[tuple[dict[str, Any], str]] = [
        ({"states": {"packed": huge}}, "the state map maps packed to something that is not a state name"),
        ({"states": {huge: "boxed"}}, "a key of the state map is not a state name"),
        ({"states": {"packed": "b" * 65}}, "at most 64 characters"),
        ({"states": {"Packed": "boxed"}}, "a key of the state map is not a state name"),
        ({"states": too_many}, f"the state map has more than {MAX_MAP_ENTRIES} entries ({MAX_MAP_ENTRIES + 1})"),
        ({"only": {"states": [huge]}}, "only.states must list state names"),
        ({"only": {"states": ["packed"] * (MAX_MAP_ENTRIES + 1)}}, f"only lists more than {MAX_MAP_ENTRIES} states"),
        ({"only": {"versions": [True]}}, "only.versions must list definition versions"),
    ]
    for arguments, says in cases:
        for dry_run in (True, False):
            with pytest.raises(UpgradeRefused) as refused:
                store.upgrade_instances(name, dry_run=dry_run, **arguments)
            assert refused.value.errno == 31030 and says in str(refused.value), (says, refused.value)
            assert refused.value.__cause__ is None  # raised in Python: nothing was sent
    # what fits goes to the database, which checks the names (and says so with the same number)
    with pytest.raises(UpgradeRefused) as by_the_database:
        store.upgrade_instances(name, states={"packed": "b" * 64}, dry_run=True)
    assert by_the_database.value.__cause__ is not None
    # from the shell: one line, exit 1, nothing moved
    line = one_error(run("upgrade", name, "--map", f"packed={'b' * 65}", dsn=settings.dsn()), "UpgradeRefused", 31030)
    assert "the state map maps packed to something that is not a state name" in line
    # a key given twice on the command line with two targets is a usage error (a mapping has one value per key)
    twice = run("upgrade", name, "--map", "packed=boxed", "--map", "packed=new", dsn=settings.dsn())
    assert twice.returncode == 2 and "--map maps packed twice: to boxed and to new" in twice.stderr
    assert store.get(name, "s-1").definition_version == 1
