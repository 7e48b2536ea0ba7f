"""The README's demo command runs end to end (smaller than the default)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_demo_runs_end_to_end(make_database) -> None:  # type: ignore[no-untyped-def]
    dsn = make_database("pyfsm_demo_t").dsn()
    result = subprocess.run([sys.executable, "-m", "pyfsm", "demo", "--dsn", dsn, "--orders", "30", "--workers", "2"],
                            capture_output=True, text=True, timeout=180, cwd=Path(__file__).resolve().parent)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "created 30 orders" in out and "refused by the database" in out and "orders per state" in out
    assert "fulfilment with handlers: 10 orders" in out and "[########################################] 10/10" in out
    assert "recovered by retry" in out and "ship --next--> done" in out and "resuming" in out


def test_demo_prints_its_events_when_a_broker_answers(make_database, kafka) -> None:  # type: ignore[no-untyped-def]
    import json

    dsn = make_database("pyfsm_demo_k").dsn()
    result = subprocess.run([sys.executable, "-m", "pyfsm", "demo", "--dsn", dsn, "--orders", "12", "--workers", "1",
                             "--kafka", kafka.bootstrap],
                            capture_output=True, text=True, timeout=180, cwd=Path(__file__).resolve().parent)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"Kafka at {kafka.bootstrap}: the relay published" in out
    events = [json.loads(line) for line in out.splitlines() if line.startswith('  {"schema_version"')]
    assert events and [e["sort_key"] for e in events] == sorted(e["sort_key"] for e in events)
    assert {e["instance_key"] for e in events} == {events[0]["instance_key"]} and events[0]["event"] is None
