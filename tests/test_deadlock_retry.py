"""A deadlock rolls a send back whole; the Store makes the call again and it succeeds once."""

from __future__ import annotations

import threading
import time
from typing import Any

import pymysql

from pyfsm import Machine, Store
from pyfsm.db import parse_dsn


def test_send_chosen_as_deadlock_victim_is_retried(dsn: str, store: Store, order: Machine) -> None:
    store.create(order, "dl")
    instance_id = store.get(order, "dl").id
    holder = pymysql.connect(**parse_dsn(dsn).connect_kwargs())
    cur = holder.cursor()
    cur.execute("CREATE TEMPORARY TABLE ballast (id INT PRIMARY KEY, v INT) ENGINE=InnoDB")
    cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
    cur.execute("START TRANSACTION")
    # 1. the holder locks the history row that send's trigger must flip ...
    cur.execute(f"SELECT id FROM `fsm_{order.name}_transitions` WHERE instance_id = %s AND most_recent = 1 FOR UPDATE",
                (instance_id,))
    # ... and writes enough rows that InnoDB picks the send as the cheaper victim
    cur.execute("INSERT INTO ballast SELECT seq, 0 FROM (SELECT 1 + a.n + 10 * b.n + 100 * c.n AS seq FROM "
                "(SELECT 0 n UNION SELECT 1 UNION SELECT 2 UNION SELECT 3 UNION SELECT 4 UNION SELECT 5 UNION "
                "SELECT 6 UNION SELECT 7 UNION SELECT 8 UNION SELECT 9) a, (SELECT 0 n UNION SELECT 1 UNION SELECT 2 "
                "UNION SELECT 3 UNION SELECT 4 UNION SELECT 5 UNION SELECT 6 UNION SELECT 7 UNION SELECT 8 UNION "
                "SELECT 9) b, (SELECT 0 n UNION SELECT 1 UNION SELECT 2) c) s")
    outcome: dict[str, Any] = {}

    def send() -> None:
        try:
            outcome["result"] = store.send(order, "dl", "pay")
        except Exception as exc:  # reported below, with its class
            outcome["error"] = exc

    sender = threading.Thread(target=send)
    sender.start()
    time.sleep(0.5)  # 2. send holds the instance row and waits for the history row
    # 3. the holder now wants the instance row: a cycle, and the send is the victim
    cur.execute(f"SELECT id FROM `fsm_{order.name}` WHERE id = %s FOR UPDATE", (instance_id,))
    holder.rollback()
    holder.close()
    sender.join(timeout=30)
    assert "error" not in outcome, f"the deadlock reached the caller: {outcome.get('error')!r}"
    assert outcome["result"].to_state == "paid"
    history = store.history(order, "dl")
    assert [(h.event, h.to_state) for h in history] == [(None, "new"), ("pay", "paid")]
