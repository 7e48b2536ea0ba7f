"""`pyfsm timers` through a subprocess, as a user runs it: list, schedule, cancel and run
(--until-idle for cron, and until SIGTERM).

Timers are global to a database (`run` fires every type's), so this module has a database of
its own, and each test a machine type of its own. The types are defined in SQL
(fsm_define_v6 with a state timeout) and installed with Store.sync.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pymysql
import pytest
from helpers.cli import TESTS, in_process, pyfsm
from helpers.common import fetch, unique

from pyfsm import Store
from pyfsm.db import Settings, parse_dsn

#: new --pay--> paid; cancel from new and paid; an hour in new cancels (the tests make it due).
DEFINITION = {
    "states": ["new", "paid", "cancelled"],
    "start": ["new"],
    "final": ["cancelled"],
    "transitions": [
        {"event": "pay", "from": ["new"], "to": "paid"},
        {"event": "cancel", "from": ["new", "paid"], "to": "cancelled"},
    ],
    "timeouts": {"new": {"after": 3600, "event": "cancel"}},
}


@pytest.fixture(scope="module")
def settings(make_database) -> Settings:  # type: ignore[no-untyped-def]
    return make_database("pyfsm_cli_timers")


@pytest.fixture(scope="module")
def store(settings: Settings) -> Iterator[Store]:
    s = Store(settings.dsn())
    s.migrate()
    yield s
    s.close()


@pytest.fixture
def dba(settings: Settings, store: Store) -> Iterator[pymysql.connections.Connection]:
    conn = pymysql.connect(**parse_dsn(settings.dsn()).connect_kwargs())  # autocommit
    yield conn
    conn.close()


@pytest.fixture
def machine(store: Store, dba: pymysql.connections.Connection) -> str:
    """A type of this test's own, with a timeout in 'new', defined in SQL and synced."""
    name = unique("ct")
    fetch(dba, "CALL fsm_define_v6(%s, %s)", (name, json.dumps(DEFINITION)))
    store.sync(name)
    return name


def cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    """`pyfsm timers ARGS --dsn <the module's database>`."""
    return pyfsm("timers", *args, "--dsn", settings.dsn())


def ok(settings: Settings, *args: str) -> Any:
    result = cli(settings, *args, "--json")
    assert result.returncode == 0, (args, result.stderr)
    return json.loads(result.stdout)


def fails(settings: Settings, *args: str, errno: int) -> str:
    """The command exits 1 with one `pyfsm: Class (errno): ...` line on stderr."""
    result = cli(settings, *args)
    assert result.returncode == 1, (args, result.stdout, result.stderr)
    assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("pyfsm: "), result.stderr
    assert f"({errno})" in result.stderr, result.stderr
    return result.stderr


def armed(conn: pymysql.connections.Connection, machine: str) -> list[dict[str, Any]]:
    return fetch(conn, "SELECT * FROM fsm_timers WHERE machine = %s ORDER BY id", (machine,))


def due_now(conn: pymysql.connections.Connection, timer_id: int) -> None:
    """Make a timer due (the test stands in for the clock)."""
    with conn.cursor() as cur:
        cur.execute(
            "UPDATE fsm_timers SET due_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, "
            "fire_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE id = %s",
            (timer_id,),
        )


def server_now(conn: pymysql.connections.Connection) -> datetime:
    [row] = fetch(conn, "SELECT UTC_TIMESTAMP(6) AS now")
    now: datetime = row["now"]
    return now.replace(tzinfo=UTC)


def utc(text: str) -> datetime:
    """A time in --json output as an aware UTC datetime."""
    value = datetime.fromisoformat(text)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def test_list_shows_the_armed_timeout_and_a_scheduled_event(
    settings: Settings, store: Store, machine: str, dba: pymysql.connections.Connection
) -> None:
    store.create(machine, "o-1")
    scheduled = ok(settings, "schedule", machine, "o-1", "pay", "--after", "2h")
    listed = ok(settings, "list", machine)
    assert [(t["kind"], t["state"], t["event"], t["instance_key"]) for t in listed] == [
        ("timeout", "new", "cancel", "o-1"),
        ("scheduled", None, "pay", "o-1"),
    ]
    assert listed[1]["timer_id"] == scheduled["timer_id"] and listed[0]["overdue_seconds"] == 0

    text = cli(settings, "list", machine, "o-1")
    assert text.returncode == 0, text.stderr
    header, *rows = text.stdout.splitlines()
    assert header.split("  ")[0] == "id" and "due (UTC)" in header and "overdue s" in header and "last error" in header
    assert len(rows) == 2 and "timeout" in rows[0] and "cancel" in rows[0] and "scheduled" in rows[1]

    assert ok(settings, "list", machine, "--overdue") == []
    assert cli(settings, "list", machine, "--overdue").stdout.strip() == "no armed timers"
    assert ok(settings, "list", machine, "o-2") == []  # one instance's: another has none
    due_now(dba, listed[0]["timer_id"])
    [overdue] = ok(settings, "list", machine, "--overdue")
    assert overdue["timer_id"] == listed[0]["timer_id"] and overdue["overdue_seconds"] >= 1
    store.cancel_timer(overdue["timer_id"])  # not for this module's `run` to fire

    store.create(machine, "o-2")  # a page at a time
    first = cli(settings, "list", machine, "--limit", "1")
    assert first.returncode == 0 and f"(more: --after-id {scheduled['timer_id']})" in first.stdout, first.stdout
    [second] = ok(settings, "list", machine, "--after-id", str(scheduled["timer_id"]), "--limit", "1")
    assert (second["instance_key"], second["kind"]) == ("o-2", "timeout")
    # --dsn and --json before the subcommand are kept
    before = pyfsm("timers", "--dsn", settings.dsn(), "--json", "list", machine)
    assert before.returncode == 0 and len(json.loads(before.stdout)) == 2, before.stderr


def test_schedule_after_a_duration_or_at_a_time(
    settings: Settings, store: Store, machine: str, dba: pymysql.connections.Connection
) -> None:
    store.create(machine, "o-1")
    start = server_now(dba)
    later = ok(settings, "schedule", machine, "o-1", "pay", "--after", "30m", "--metadata", '{"by": "ops"}')
    assert (later["machine"], later["instance_key"], later["kind"], later["event"], later["replayed"]) == (
        machine,
        "o-1",
        "scheduled",
        "pay",
        False,
    )
    due = utc(later["due_at"])
    assert start + timedelta(minutes=30) <= due <= server_now(dba) + timedelta(minutes=30)
    soon = ok(settings, "schedule", machine, "o-1", "pay", "--after", "1.5")
    assert timedelta(seconds=1.5) <= utc(soon["due_at"]) - start < timedelta(seconds=60)
    store.cancel_timer(soon["timer_id"])  # due in a moment: not for this module's `run` to fire

    offset = ok(settings, "schedule", machine, "o-1", "pay", "--at", "2030-01-02T03:04:05+02:00")
    assert utc(offset["due_at"]) == datetime(2030, 1, 2, 1, 4, 5, tzinfo=UTC)  # converted to UTC
    naive = cli(settings, "schedule", machine, "o-1", "cancel", "--at", "2030-01-02T03:04:05.25")
    assert naive.returncode == 0, naive.stderr
    assert naive.stdout.startswith("timer ") and naive.stdout.strip().endswith(
        f": cancel for {machine} o-1, due 2030-01-02 03:04:05.250000 UTC"
    ), naive.stdout

    by_id = {t["timer_id"]: t for t in ok(settings, "list", machine, "o-1")}
    assert by_id[later["timer_id"]]["metadata"] == {"by": "ops"}
    assert len(by_id) == 4  # the timeout and three scheduled

    once = ok(settings, "schedule", machine, "o-1", "pay", "--after", "1d", "--request-id", "r-1")
    again = ok(settings, "schedule", machine, "o-1", "pay", "--after", "1d", "--request-id", "r-1")
    assert again["timer_id"] == once["timer_id"] and (once["replayed"], again["replayed"]) == (False, True)
    assert len(armed(dba, machine)) == 5


@pytest.mark.parametrize(
    ("when", "message"),
    [
        (["--at", "2030-01-02T03:04:05", "--after", "1h"], "not allowed with argument"),
        ([], "one of the arguments --at --after is required"),
        (["--after", "3x"], "not a duration"),
        (["--after", "-5"], "not a duration"),
        (["--after", "nan"], "not a duration"),
        (["--after", "1e3"], "not a duration"),
        (["--after", "1h30m"], "not a duration"),
        (["--after", "99999999999"], "at most 999999999 seconds"),
        (["--at", "tomorrow"], "not an ISO 8601 time"),
        (["--at", "2030-13-01T00:00:00"], "not an ISO 8601 time"),
    ],
)
def test_a_bad_time_is_a_usage_error_before_anything_connects(when: list[str], message: str) -> None:
    # a DSN no server answers: a usage error never gets as far as connecting
    result = in_process("timers", "schedule", "--dsn", "mysql://root@127.0.0.1:1/none", "order", "o-1", "pay", *when)
    assert result.returncode == 2, result
    assert result.stderr.startswith("pyfsm: usage: pyfsm timers schedule: ") and message in result.stderr, result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_bad_input_arms_nothing(
    settings: Settings, store: Store, machine: str, dba: pymysql.connections.Connection
) -> None:
    store.create(machine, "o-1")
    before = armed(dba, machine)
    assert [t["kind"] for t in before] == ["timeout"]
    usage = cli(settings, "schedule", machine, "o-1", "pay", "--at", "2030-01-02T03:04:05", "--after", "1h")
    assert usage.returncode == 2 and "not allowed with argument" in usage.stderr, usage.stderr
    assert cli(settings, "schedule", machine, "o-1", "pay", "--after", "soon").returncode == 2
    assert "not valid JSON" in fails(
        settings, "schedule", machine, "o-1", "pay", "--after", "1h", "--metadata", "{bad", errno=31008
    )
    assert "must be a JSON object" in fails(
        settings, "schedule", machine, "o-1", "pay", "--after", "1h", "--metadata", "[1]", errno=31008
    )
    fails(settings, "schedule", machine, "o-1", "ship", "--after", "1h", errno=31028)  # not an event of the type
    fails(settings, "schedule", machine, "o-404", "pay", "--after", "1h", errno=31003)  # no such instance
    fails(settings, "schedule", "nosuchtype", "o-1", "pay", "--after", "1h", errno=31002)
    assert armed(dba, machine) == before


def test_cancel_and_cancel_twice(
    settings: Settings, store: Store, machine: str, dba: pymysql.connections.Connection
) -> None:
    store.create(machine, "o-1")
    [timeout] = armed(dba, machine)
    scheduled = ok(settings, "schedule", machine, "o-1", "pay", "--after", "1h")
    cancelled = ok(settings, "cancel", str(scheduled["timer_id"]), "--reason", "paid by phone")
    assert (cancelled["timer_id"], cancelled["kind"], cancelled["event"]) == (scheduled["timer_id"], "scheduled", "pay")
    [logged] = fetch(dba, "SELECT outcome, reason FROM fsm_timer_log WHERE id = %s", (scheduled["timer_id"],))
    assert logged == {"outcome": "cancelled", "reason": "paid by phone"}

    twice = fails(settings, "cancel", str(scheduled["timer_id"]), errno=31029)
    assert twice.startswith("pyfsm: UnknownTimer (31029): ") and "cancelled" in twice, twice
    assert "no armed timer" in fails(settings, "cancel", "999999999", errno=31029)

    text = cli(settings, "cancel", str(timeout["id"]))  # a state timeout: the instance stays in its state
    assert text.returncode == 0, text.stderr
    assert text.stdout.strip().startswith(f"cancelled timer {timeout['id']}: timeout cancel for {machine} o-1, due ")
    assert armed(dba, machine) == [] and store.get(machine, "o-1").state == "new"
    assert cli(settings, "list", machine).stdout.strip() == "no armed timers"


def test_run_until_idle_fires_due_timers_and_drops_one_no_longer_allowed(
    settings: Settings, store: Store, machine: str, dba: pymysql.connections.Connection
) -> None:
    for key in ("late", "gone", "payer", "waiting"):
        store.create(machine, key)
    [late_timeout] = [t for t in armed(dba, machine) if t["instance_key"] == "late"]
    due_now(dba, late_timeout["id"])  # 'late' sat in new too long: cancelled
    pay = ok(settings, "schedule", machine, "payer", "pay", "--at", "2000-01-01T00:00:00")  # due at once
    doomed = ok(settings, "schedule", machine, "gone", "pay", "--after", "0")
    store.send(machine, "gone", "cancel")  # pay is no longer allowed when it comes due: dropped

    run = cli(settings, "run", "--until-idle", "--owner", "cli-test", "--json")
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert {k: summary[k] for k in ("fired", "dropped", "held")} == {"fired": 2, "dropped": 1, "held": 0}
    [dropped] = summary["not_fired"]  # each timer not fired, as data (the text lines: test_cli_commands_second_hour)
    assert (dropped["timer_id"], dropped["outcome"], dropped["errno"]) == (doomed["timer_id"], "dropped", 31005)
    assert dropped["error"] == "TransitionNotAllowed" and run.stderr == "", run.stderr

    assert store.get(machine, "late").state == "cancelled" and store.get(machine, "payer").state == "paid"
    assert store.history(machine, "late")[-1].request_id == f"fsm:timer:{late_timeout['id']}"
    assert store.history(machine, "payer")[-1].request_id == f"fsm:timer:{pay['timer_id']}"
    log = {
        r["id"]: r
        for r in fetch(dba, "SELECT id, outcome, errno, done_by FROM fsm_timer_log WHERE machine = %s", (machine,))
    }
    assert log[doomed["timer_id"]]["outcome"] == "dropped" and log[doomed["timer_id"]]["errno"] == 31005
    assert (log[pay["timer_id"]]["outcome"], log[pay["timer_id"]]["done_by"]) == ("fired", "cli-test")
    assert [(t["instance_key"], t["kind"]) for t in armed(dba, machine)] == [("waiting", "timeout")]  # not due

    idle = cli(settings, "run", "--until-idle")  # nothing due: a cron job's quiet run
    assert idle.returncode == 0 and idle.stdout == "timers: fired 0, dropped 0, held 0\n" and idle.stderr == "", idle


def test_run_refuses_bad_arguments_and_a_database_without_pyfsm(settings: Settings) -> None:
    for numbers in (["--limit", "0"], ["--limit", "1001"], ["--claim-seconds", "0"]):  # out of range: usage errors
        result = cli(settings, "run", "--until-idle", *numbers)
        assert result.returncode == 2 and result.stderr.startswith("pyfsm: usage: pyfsm timers run: "), result
    fails(settings, "run", "--owner", "two words", errno=31009)  # not --until-idle: must not loop on it
    # a database without pyfsm fails at once, not in every batch of a loop that never ends
    result = pyfsm("timers", "run", "--dsn", "mysql://root@" + f"{settings.host}:{settings.port}/mysql")
    assert result.returncode == 1 and "SchemaVersionMismatch (31015)" in result.stderr, result.stderr


def test_run_fires_while_running_and_stops_on_sigterm(
    settings: Settings, store: Store, machine: str, dba: pymysql.connections.Connection
) -> None:
    store.create(machine, "o-1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pyfsm", "timers", "run", "--dsn", settings.dsn(), "--poll", "0.2", "--json"],
        cwd=TESTS,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if k != "PYFSM_READ_DSN"},
    )
    try:
        assert proc.stderr is not None
        banner = proc.stderr.readline()
        assert "firing due timers" in banner and "SIGTERM" in banner, banner
        ok(settings, "schedule", machine, "o-1", "pay", "--after", "0")
        deadline = time.monotonic() + 15
        while store.get(machine, "o-1").state != "paid":
            assert time.monotonic() < deadline, "the running loop did not fire the scheduled event"
            time.sleep(0.1)
        stopping = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert time.monotonic() - stopping < 5
    assert proc.returncode == 0, err
    assert json.loads(out)["fired"] >= 1
