"""The README's demo command runs end to end (smaller than the default)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_demo_runs_end_to_end(make_database) -> None:  # type: ignore[no-untyped-def]
    dsn = make_database("pyfsm_demo_t").dsn()
    result = subprocess.run(
        [sys.executable, "-m", "pyfsm", "demo", "--dsn", dsn, "--orders", "30", "--workers", "2"],
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


def test_demo_works_in_the_database_of_PYFSM_DSN(make_database, server) -> None:  # type: ignore[no-untyped-def]
    """Without --dsn the demo uses $PYFSM_DSN, as its --help says (creating the database,
    which migrate does), and nothing goes to its own default database."""
    from helpers.common import missing_database

    from pyfsm.db import parse_dsn
    from pyfsm.demo.run import DEFAULT_DSN

    settings = missing_database(make_database, server)
    default = parse_dsn(DEFAULT_DSN).database
    before = _orders_in(server, default)
    env = {**os.environ, "PYFSM_DSN": settings.dsn(), "PYFSM_KAFKA": "127.0.0.1:1"}
    result = subprocess.run(
        [sys.executable, "-m", "pyfsm", "demo", "--orders", "3", "--workers", "1"],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=Path(__file__).resolve().parents[1],
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert f"demo database: `{settings.database}` at {settings.host}:{settings.port}" in result.stdout
    assert f"created database `{settings.database}`" in result.stdout and "created 3 orders" in result.stdout
    assert _orders_in(server, settings.database) == 3
    assert _orders_in(server, default) == before
