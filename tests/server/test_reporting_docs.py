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
    [history] = [r for b, r in by_text.items() if "FROM fsm_v_order_transitions\n WHERE instance_key" in b]
    assert [row[:4] for row in history] == [
        (1, None, None, "new"),
        (2, "pay", "new", "paid"),
        (3, "ship", "paid", "shipped"),
    ]
    counts = {row[0]: row[1] for row in results[3]}
    assert counts["shipped"] == 1 and counts["cancelled"] == 1 and counts["new"] == 1 and counts["paid"] == 0
