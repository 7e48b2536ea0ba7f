"""Every query in docs/reporting.md runs, as a reporting account would run it, on history the test builds."""

from __future__ import annotations

import re
from pathlib import Path

import pymysql
from helpers.common import order_machine

from pyfsm import Store

DOC = Path(__file__).resolve().parents[2] / "docs" / "reporting.md"


def sql_blocks() -> list[str]:
    return re.findall(r"```sql\n(.*?)```", DOC.read_text(), re.S)


def test_every_documented_view_exists_and_every_query_runs(make_database) -> None:  # type: ignore[no-untyped-def]
    settings = make_database("pyfsm_docs")
    with Store(settings.dsn()) as store:
        store.migrate()
        store.define(order_machine("order"))
        for key, events in {"o-1": ["pay", "ship"], "o-2": ["pay", "refund", "cancel"], "o-3": []}.items():
            store.create("order", key, lookup_key=f"acct-{key}")
            for event in events:
                store.send("order", key, event)
        # o-3 handed to the engine's workers: running; o-1 (shipped, not final) stays idle
        store.enqueue("order", "o-3")
    blocks = sql_blocks()
    assert len(blocks) >= 15
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT table_name FROM information_schema.views WHERE table_schema = DATABASE()")
            views = {row[0] for row in cur.fetchall()}
            documented = set(re.findall(r"^\| `(fsm_[a-z0-9_{}]+)`", DOC.read_text(), re.M))
            assert {v.replace("{type}", "order") for v in documented} <= views
            assert {v for v in views if v.startswith("fsm_v_") and "order" not in v} <= documented
            results = []
            for block in blocks:
                cur.execute(block)
                results.append(cur.fetchall())
    finally:
        conn.close()
    assert [row[:2] for row in results[0]] == [("o-3", "new"), ("o-2", "cancelled"), ("o-1", "shipped")]
    assert results[1] and results[1][0][1] == "shipped"  # one instance, whatever its type: o-1 is shipped
    by_text = dict(zip(blocks, results, strict=True))
    [funnel] = [r for b, r in by_text.items() if "FROM fsm_v_funnel" in b and "pct_of_top" not in b]
    assert [tuple(row) for row in funnel] == [("new", 3, 4), ("paid", 2, 2), ("shipped", 1, 1), ("cancelled", 1, 1)]
    [stuck] = [r for b, r in by_text.items() if "FROM fsm_v_stuck" in b]
    assert stuck == ()  # nothing has waited an hour
    # the words of "Status": the stored running split by the engine's queue
    [status] = [r for b, r in by_text.items() if "AS status" in b and "FROM fsm_v_order i" in b]
    assert [row[:3] for row in status] == [("o-1", "shipped", "idle"), ("o-3", "new", "running")]
    assert status[0][3] is None and status[1][3] is not None  # o-3's run is due
    [stats] = [[row for row in r if row[0] == "order"] for b, r in by_text.items() if "CALL fsm_stats_v3()" in b]
    assert [stats[0][i] for i in (3, 4, 8)] == [1, 1, 1]  # running, idle, completed (o-2 cancelled)
    [history] = [r for b, r in by_text.items() if "FROM fsm_v_order_transitions\n WHERE instance_key" in b]
    assert [row[:4] for row in history] == [
        (1, None, None, "new"),
        (2, "pay", "new", "paid"),
        (3, "ship", "paid", "shipped"),
    ]
    [counted] = [r for b, r in by_text.items() if "FROM fsm_v_state_counts\n WHERE machine = 'order'" in b]
    counts = {row[0]: row[1] for row in counted}
    assert counts["shipped"] == 1 and counts["cancelled"] == 1 and counts["new"] == 1 and counts["paid"] == 0
    assert set(counts) == {"new", "paid", "shipped", "delivered", "cancelled"}  # every state of the definition


def test_stuck_lists_only_what_a_handler_runs(make_database) -> None:  # type: ignore[no-untyped-def]
    """docs/reporting.md, "Stuck instances": fsm_v_stuck has the instances with a run in the
    engine's queue that are running, waiting or paused, with their run; never an idle one."""
    settings = make_database("pyfsm_docs_stuck")
    with Store(settings.dsn()) as store:
        store.migrate()
        store.define(order_machine("order"))
        for key in ("idle", "queued", "paused", "failed"):
            store.create("order", key)
        store.enqueue("order", "queued", delay_seconds=60)
        store.enqueue("order", "paused")
        store.pause("order", "paused")
        store.enqueue("order", "failed")
        conn = pymysql.connect(**settings.connect_kwargs())
        try:
            with conn.cursor() as cur:
                cur.execute("UPDATE fsm_order SET status = 'failed' WHERE instance_key = 'failed'")
                cur.execute(
                    "SELECT instance_key, status, due_at IS NOT NULL, claimed_by, attempt FROM fsm_v_stuck "
                    "WHERE machine = 'order' ORDER BY id"
                )
                rows = cur.fetchall()
            conn.commit()
        finally:
            conn.close()
        assert rows == (("queued", "running", 1, None, 0), ("paused", "paused", 0, None, 0))
        assert {s.machine: (s.running, s.idle, s.paused, s.failed) for s in store.stats()}["order"] == (1, 1, 1, 1)
