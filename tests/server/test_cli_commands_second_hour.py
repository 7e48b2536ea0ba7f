"""Issue 46's commands (its item 7, and the CLI's parts of items 3 and 6): `pyfsm --version`,
`grant --print` of an account not there yet, a closed stdout, the timers a worker fired in its
summary, `timers run`'s line per timer not fired, and what `install` of a new version leaves
on older ones. The demo's database and its numbers: test_demo.py; every numeric option:
tests/unit/test_cli_numbers.py."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.common import admin, unique

import pyfsm as package
from pyfsm import Machine, Store
from pyfsm.cli import STDOUT_CLOSED
from pyfsm.db import Settings
from pyfsm.schema.grants import Account, exists

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "pyfsm", *args]


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYFSM_DSN", "PYFSM_READ_DSN")}


def pyfsm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command(*args), capture_output=True, text=True, timeout=120, cwd=TESTS, env=env())


@pytest.fixture
def fresh(make_database) -> Iterator[tuple[Settings, Store]]:  # type: ignore[no-untyped-def]
    """A migrated database of this test's own: timers and workers see every type in one."""
    settings = make_database("pyfsm_2h")
    with Store(settings.dsn()) as store:
        store.migrate()
        yield settings, store


def payment(name: str | None = None) -> Machine:
    return Machine(
        name=name or unique("pay2h"),
        states=["new", "paid", "cancelled"],
        start=["new"],
        final=["paid", "cancelled"],
        transitions=[("pay", "new", "paid"), ("cancel", "new", "cancelled")],
    )


# -- --version ----------------------------------------------------------------------------


def test_version_prints_the_version_of_the_code_and_the_distribution() -> None:
    result = pyfsm("--version")
    assert result.returncode == 0 and result.stderr == "", result
    assert result.stdout == f"pyfsm {package.__version__}\n"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert package.__version__ == project["version"] == importlib.metadata.version("pyfsm-mysql")


# -- grant --print of an account that does not exist yet ------------------------------------


def test_grant_print_shows_the_sql_for_an_account_not_there_yet_and_runs_nothing(
    server: Settings, fresh: tuple[Settings, Store]
) -> None:
    settings, _store = fresh
    user = unique("nc_app")[:32]
    account = Account.parse(user, "app")
    result = pyfsm("grant", "--dsn", settings.dsn(), "--app", user, "--print")
    assert result.returncode == 0 and result.stderr == "", result
    lines = result.stdout.splitlines()
    assert lines[0] == (
        f"-- {user}@% does not exist: running this needs --create (a generated password) or --password-env VAR"
    )
    assert lines[1] == f"CREATE USER '{user}'@'%' IDENTIFIED BY '***';"
    assert f"GRANT EXECUTE ON PROCEDURE `{settings.database}`.`fsm_send_v1` TO '{user}'@'%';" in lines
    assert not any("fsm_define_" in line for line in lines)  # definitions are the owner's
    as_json = pyfsm("grant", "--dsn", settings.dsn(), "--app", user, "--print", "--json")
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["missing_accounts"] == [f"{user}@%"]
    assert data["statements"] == [line.removesuffix(";") for line in lines[1:]]
    conn = admin(server)
    try:
        assert not exists(conn, account)  # only printed: nothing was run
        with conn.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM `{settings.database}`.fsm_accounts")
            assert cur.fetchone()[0] == 0  # and nothing recorded
    finally:
        conn.close()


# -- a closed stdout ------------------------------------------------------------------------


def test_a_reader_that_stops_early_ends_the_command_quietly(fresh: tuple[Settings, Store]) -> None:
    """`pyfsm list ... | head -1`: the reader takes one line and closes the pipe while the
    command still writes (far more than a pipe holds): exit 141, nothing on stderr."""
    settings, store = fresh
    machine = payment()
    store.define(machine)
    for n in range(1200):  # about 300 bytes a line: four times what a pipe holds
        store.create(machine.name, f"{n:05d}-" + "k" * 180, data={"pad": "x" * 40})
    proc = subprocess.Popen(
        command("list", "--dsn", settings.dsn(), machine.name, "new", "--limit", "10000"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=TESTS,
        env=env(),
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    code = proc.wait(timeout=60)
    err = proc.stderr.read()
    proc.stderr.close()
    assert first.split()[0] == "id", first  # the table's header line came
    assert (code, err) == (STDOUT_CLOSED, ""), (code, err)


def test_a_pipe_closed_before_anything_is_written_ends_quietly_too(fresh: tuple[Settings, Store]) -> None:
    """What is buffered goes out in main, where the closed pipe is caught: not at the
    interpreter's exit, which printed `Exception ignored ... BrokenPipeError` and exit 120."""
    settings, _store = fresh
    proc = subprocess.Popen(
        command("check", "--dsn", settings.dsn()),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=TESTS,
        env=env(),
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before the command has connected, so before it writes
    code = proc.wait(timeout=60)
    err = proc.stderr.read()
    proc.stderr.close()
    assert (code, err) == (STDOUT_CLOSED, ""), (code, err)
    assert pyfsm("check", "--dsn", settings.dsn()).returncode == 0  # the same command with a reader: 0


# -- timers: a worker's summary, `timers run`'s lines ---------------------------------------


def _timers_of_three_outcomes(store: Store) -> tuple[str, dict[str, int]]:
    """A type with three scheduled events due now: one fires, one is dropped (its instance
    was cancelled: pay is not allowed), one is held (its instance is paused)."""
    machine = payment()
    store.define(machine)
    ids = {}
    for key in ("fires", "dropped", "held"):
        store.create(machine.name, key)
        ids[key] = store.send_at(machine.name, key, "pay", after=0).timer_id
    store.send(machine.name, "dropped", "cancel")
    store.pause(machine.name, "held")
    return machine.name, ids


def test_a_worker_says_how_many_timers_it_fired_dropped_and_held(fresh: tuple[Settings, Store]) -> None:
    from helpers.engine_fixtures import CLI_CHECKOUT

    settings, store = fresh
    store.define(CLI_CHECKOUT.machine)
    store.create("cli_checkout", "w-1", data={"items": 1})
    store.enqueue("cli_checkout", "w-1")
    name, _ids = _timers_of_three_outcomes(store)
    worker = ("worker", "--dsn", settings.dsn(), "helpers.engine_fixtures:CLI_CHECKOUT", "--until-idle", "1")
    text = pyfsm(*worker)
    assert text.returncode == 0, text.stderr
    # held: each time a timer was held, and a held one is tried again a second later
    assert re.fullmatch(r"ran 1 runs, 3 steps; timers: fired 1, dropped 1, held [1-9][0-9]*\n", text.stdout), text
    assert store.get(name, "fires").state == "paid" and store.get(name, "dropped").state == "cancelled"

    store.resume(name, "held")  # its held timer is due again at once: the next worker fires it
    as_json = pyfsm(*worker, "--json")
    assert as_json.returncode == 0, as_json.stderr
    stats = json.loads(as_json.stdout)
    assert (stats["runs"], stats["timers_fired"], stats["timers_dropped"], stats["timers_held"]) == (0, 1, 0, 0)
    assert store.get(name, "held").state == "paid"


def test_timers_run_reports_each_timer_not_fired_in_one_line(fresh: tuple[Settings, Store]) -> None:
    settings, store = fresh
    name, ids = _timers_of_three_outcomes(store)
    result = pyfsm("timers", "run", "--dsn", settings.dsn(), "--until-idle")
    assert result.returncode == 0 and result.stderr == "", result  # no logging lines
    lines = result.stdout.splitlines()
    assert len(lines) == 3 and lines[-1] == "timers: fired 1, dropped 1, held 1", lines
    dropped, held = sorted(lines[:2])
    assert dropped.startswith(f"dropped timer {ids['dropped']}: pay for {name} dropped (scheduled, due "), dropped
    assert dropped.endswith(" UTC): TransitionNotAllowed (31005); nothing was sent"), dropped
    assert held.startswith(f"held timer {ids['held']}: pay for {name} held (scheduled, due "), held
    assert held.endswith(" UTC): InstancePaused (31011); it stays armed and is tried again later"), held
    assert store.get(name, "held").state == "new" and store.get(name, "held").status == "paused"


# -- install of a version that leaves instances behind --------------------------------------


def test_install_says_which_instances_stay_on_older_versions_and_the_upgrade_that_moves_them(
    fresh: tuple[Settings, Store], tmp_path: Path
) -> None:
    settings, store = fresh
    name = unique("ship2h")

    def version(path: Path, states: list[str]) -> str:
        middle = states[2]
        path.write_text(
            json.dumps(
                {
                    "name": name,
                    "states": states,
                    "start": ["new"],
                    "final": ["shipped"],
                    "transitions": [
                        {"event": "pay", "from": "new", "to": "paid"},
                        {"event": "pack", "from": "paid", "to": middle},
                        {"event": "ship", "from": middle, "to": "shipped"},
                    ],
                }
            )
        )
        return str(path)

    first = version(tmp_path / "v1.json", ["new", "paid", "packed", "shipped"])
    renamed = version(tmp_path / "v2.json", ["new", "paid", "boxed", "shipped"])
    installed = pyfsm("install", "--dsn", settings.dsn(), first)
    assert installed.stdout == f"{name}: version 1 (new version) from {first}\n", installed  # a first version: no line
    for key, events in (("a", ["pay", "pack"]), ("b", ["pay"]), ("c", [])):
        store.create(name, key)
        for event in events:
            store.send(name, key, event)

    result = pyfsm("install", "--dsn", settings.dsn(), renamed)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"{name}: version 2 (new version) from {renamed}",
        f"  3 instances stay on older versions (version 1: 3): `pyfsm upgrade {name} --map packed=NEW` moves "
        "them to version 2, NEW one of new, paid, boxed, shipped (add --dry-run to see where each goes first)",
    ]
    [again] = json.loads(pyfsm("install", "--dsn", settings.dsn(), renamed, "--json").stdout)
    assert again["changed"] is False and again["older_instances"] == 3
    assert again["older_versions"] == [{"version": 1, "instances": 3}]
    assert again["upgrade"] == f"pyfsm upgrade {name} --map packed=NEW"

    # the line, with NEW chosen, moves them all; then nothing stays behind
    moved = pyfsm(*again["upgrade"].replace("NEW", "boxed").split()[1:], "--dsn", settings.dsn())
    assert moved.returncode == 0, moved
    assert store.get(name, "a").state == "boxed"
    [after] = json.loads(pyfsm("install", "--dsn", settings.dsn(), renamed, "--json").stdout)
    assert (after["older_instances"], after["upgrade"]) == (0, None)
    assert (
        pyfsm("install", "--dsn", settings.dsn(), renamed).stdout == f"{name}: version 2 (unchanged) from {renamed}\n"
    )

    # a version every older state still has: the plain `pyfsm upgrade NAME` moves them
    store.create(name, "d")  # on version 2 too, beside the three moved there
    back = pyfsm(
        "install", "--dsn", settings.dsn(), version(tmp_path / "v3.json", ["new", "paid", "boxed", "shipped", "lost"])
    )
    assert back.stdout.splitlines()[1] == (
        f"  4 instances stay on older versions (version 2: 4): `pyfsm upgrade {name}` moves them to version 3 "
        "(add --dry-run to see where each goes first)"
    ), back.stdout
