"""The README's demo command runs end to end (smaller than the default)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.common import admin


def test_demo_runs_end_to_end(make_database) -> None:  # type: ignore[no-untyped-def]
    dsn = make_database("pyfsm_demo_t").dsn()
    result = subprocess.run(
        [sys.executable, "-m", "pyfsm", "demo", "--dsn", dsn, "--here", "--orders", "30", "--workers", "2"],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "created 30 orders" in out and "refused by the database" in out and "orders per state" in out
    assert "fulfilment with handlers: 10 orders" in out and "[########################################] 10/10" in out
    assert "recovered by retry" in out and "ship --next--> done" in out and "resuming" in out
    assert "fired 20, dropped 0: 11 ordered, 19 abandoned by their timeout, 0 open" in out
    assert "open --order--> ordered by timer" in out and "(scheduled, request id fsm:timer:" in out


def test_demo_prints_its_events_when_a_broker_answers(make_database, kafka) -> None:  # type: ignore[no-untyped-def]
    import json

    dsn = make_database("pyfsm_demo_k").dsn()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pyfsm",
            "demo",
            "--dsn",
            dsn,
            "--here",
            "--orders",
            "12",
            "--workers",
            "1",
            "--kafka",
            kafka.bootstrap,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"Kafka at {kafka.bootstrap}: the relay published" in out
    events = [json.loads(line) for line in out.splitlines() if line.startswith('  {"schema_version"')]
    assert events and [e["sort_key"] for e in events] == sorted(e["sort_key"] for e in events)
    assert {e["instance_key"] for e in events} == {events[0]["instance_key"]} and events[0]["event"] is None


def _orders_in(server, database: str) -> int | None:  # type: ignore[no-untyped-def]
    """How many orders the demo's table in ``database`` holds (None: no such table)."""
    from helpers.common import admin

    conn = admin(server)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND table_name = 'fsm_demo_order'",
                (database,),
            )
            if cur.fetchone() is None:
                return None
            cur.execute(f"SELECT COUNT(*) FROM `{database}`.fsm_demo_order")
            return int(cur.fetchone()[0])
    finally:
        conn.close()


def _demo(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pyfsm", "demo", "--orders", "3", "--workers", "1", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=Path(__file__).resolve().parents[1],
        env={**os.environ, "PYFSM_KAFKA": "127.0.0.1:1", **env},
    )


def test_demo_works_in_the_database_of_PYFSM_DSN_with_here(make_database, server) -> None:  # type: ignore[no-untyped-def]
    """--here: the database $PYFSM_DSN names (created, as migrate does), and nothing goes to
    the demo's own database."""
    from helpers.common import missing_database

    from pyfsm.demo.run import DEMO_DATABASE

    settings = missing_database(make_database, server)
    before = _orders_in(server, DEMO_DATABASE)
    result = _demo("--here", env={"PYFSM_DSN": settings.dsn()})
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0]
    assert first == (
        f"demo database: `{settings.database}` at {settings.host}:{settings.port}, the one $PYFSM_DSN names (--here)"
    )
    assert f"created database `{settings.database}`" in result.stdout and "created 3 orders" in result.stdout
    assert _orders_in(server, settings.database) == 3
    assert _orders_in(server, DEMO_DATABASE) == before


def test_demo_keeps_out_of_the_application_database_PYFSM_DSN_names(
    make_database, server, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """With an application's DSN exported, the demo works in a database of its own on that
    server (pyfsm_demo; here a test database in its place, through the same default) and says
    so in its first line; the application's database gets nothing."""
    from helpers.cli import in_process

    from pyfsm import Store

    run = importlib.import_module("pyfsm.demo.run")  # pyfsm.demo.run is also the function's name
    app = make_database("pyfsm_app")
    with Store(app.dsn()) as store:
        store.migrate()
    own = make_database("pyfsm_demo_own")
    monkeypatch.setattr(run, "DEMO_DATABASE", own.database)  # the default, without touching the real pyfsm_demo
    monkeypatch.setenv("PYFSM_DSN", app.dsn())
    monkeypatch.setenv("PYFSM_KAFKA", "127.0.0.1:1")
    result = in_process("demo", "--orders", "3", "--workers", "1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == (
        f"demo database: `{own.database}` at {app.host}:{app.port}, the demo's own, "
        f"not `{app.database}` that $PYFSM_DSN names (--here works there)"
    )
    assert _orders_in(server, own.database) == 3
    assert _orders_in(server, app.database) is None  # no demo type in the application's database
    with Store(app.dsn()) as store:
        assert store.stats() == []  # no type at all


def test_demo_database_names_another_database_on_the_server(make_database, server) -> None:  # type: ignore[no-untyped-def]
    """--database NAME: that database on the DSN's server, created if missing."""
    from helpers.common import missing_database

    app = make_database("pyfsm_app")
    target = missing_database(make_database, server)
    result = _demo("--database", target.database, "--dsn", app.dsn(), env={})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == (
        f"demo database: `{target.database}` at {app.host}:{app.port}, named by --database"
    )
    assert _orders_in(server, target.database) == 3 and _orders_in(server, app.database) is None


def test_demo_refuses_numbers_out_of_range_before_connecting(make_database, server) -> None:  # type: ignore[no-untyped-def]
    """`--orders -1 --workers 0` printed "created -1 orders ... (-608643 per second)" and exited
    0; now a usage error, exit 2, and no database is created."""
    from helpers.common import missing_database

    target = missing_database(make_database, server)
    for args, wrong in (
        (("--orders", "-1", "--workers", "0"), "argument --orders: must be a whole number from 1 to 1000000, got -1"),
        (("--orders", "0"), "argument --orders: must be a whole number from 1 to 1000000, got 0"),
        (("--workers", "0"), "argument --workers: must be a whole number from 1 to 32, got 0"),
        (("--orders", "many"), "argument --orders: not a whole number: 'many'"),
    ):
        result = _demo("--here", *args, env={"PYFSM_DSN": target.dsn()})
        assert result.returncode == 2 and result.stdout == "", result
        assert result.stderr == f"pyfsm: usage: pyfsm demo: {wrong} (see pyfsm demo --help)\n", result.stderr
    assert _orders_in(server, target.database) is None
    conn = admin(server)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW DATABASES LIKE %s", (target.database,))
            assert cur.fetchall() == ()  # not even created
    finally:
        conn.close()
