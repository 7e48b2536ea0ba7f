"""The soak (bench/soak.py) for a short, bounded time: every component at once, then the invariants.

Senders, lock users, a feeder, two workers and a relay run as separate processes against
one fresh database and the tansu broker for PYFSM_SOAK_SECONDS (12 by default; the whole
test takes about 20 s). The checks, what each process did and its RSS are printed (``-s``
shows them); the test fails on any broken invariant, unexpected error, RSS growth after the
warm-up beyond max(20%, 8 MiB), or a connection left open. For a longer run:

    PYFSM_SOAK_SECONDS=600 PYFSM_TEST_DSN=... .venv/bin/pytest tests/server/test_soak.py -s
    .venv/bin/python bench/soak.py --seconds 180 --processes 2
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import soak  # bench/soak.py; the spawned processes import it the same way

SECONDS = float(os.environ.get("PYFSM_SOAK_SECONDS", "12"))


def test_soak_transitions_handlers_locks_and_relay_at_once(make_database: Any, kafka: Any) -> None:
    settings = make_database("pyfsm_soak")
    report = soak.run(settings, kafka, soak.Config(seconds=SECONDS))
    summary = report.summary()
    print(summary)
    ops = report.total("ops")
    # every component did real work, or the checks would prove little
    assert ops["transitions"] > 0 and ops["lease send"] > 0 and ops["steps"] > 0 and ops["published"] > 0, summary
    assert ops["replay"] > 0, summary
    assert report.memory and all(len(t.rss) >= 2 for t in report.tallies), summary
    assert not report.problems, summary
