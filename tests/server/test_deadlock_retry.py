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
    watcher = pymysql.connect(**parse_dsn(dsn).connect_kwargs())
    sender: threading.Thread | None = None
    outcome: dict[str, Any] = {}
    try:
        cur = holder.cursor()
        cur.execute("CREATE TEMPORARY TABLE ballast (id INT PRIMARY KEY, v INT) ENGINE=InnoDB")
        cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        cur.execute("START TRANSACTION")
        # 1. the holder locks the history row that send's trigger must flip ...
        cur.execute(
            f"SELECT id FROM `fsm_{order.name}_transitions` WHERE instance_id = %s AND most_recent = 1 FOR UPDATE",
            (instance_id,),
        )
        # ... and writes enough rows that InnoDB picks the send as the cheaper victim
        cur.execute(
            "INSERT INTO ballast SELECT seq, 0 FROM (SELECT 1 + a.n + 10 * b.n + 100 * c.n AS seq FROM "
            "(SELECT 0 n UNION SELECT 1 UNION SELECT 2 UNION SELECT 3 UNION SELECT 4 UNION SELECT 5 UNION "
            "SELECT 6 UNION SELECT 7 UNION SELECT 8 UNION SELECT 9) a, (SELECT 0 n UNION SELECT 1 UNION SELECT 2 "
            "UNION SELECT 3 UNION SELECT 4 UNION SELECT 5 UNION SELECT 6 UNION SELECT 7 UNION SELECT 8 UNION "
            "SELECT 9) b, (SELECT 0 n UNION SELECT 1 UNION SELECT 2) c) s"
        )

        def send() -> None:
            try:
                outcome["result"] = store.send(order, "dl", "pay")
            except Exception as exc:  # reported below, with its class
                outcome["error"] = exc

        sender = threading.Thread(target=send)
        sender.start()
        # 2. send holds the instance row and waits for the history row (INNODB_TRX: MySQL and MariaDB)
        deadline = time.monotonic() + 20
        while True:
            with watcher.cursor() as wc:
                # either view may lag (MariaDB caches INNODB_TRX), so take whichever shows it first;
                # the trigger's flip names its index between the table and SET (bu_v13)
                wc.execute(
                    "SELECT (SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT')"
                    " + (SELECT COUNT(*) FROM information_schema.PROCESSLIST"
                    "    WHERE info LIKE 'UPDATE `fsm\\_%\\_transitions` %SET most\\_recent = NULL%')"
                )
                if wc.fetchone()[0] >= 1:
                    break
            if time.monotonic() > deadline:
                with watcher.cursor() as wc:
                    wc.execute(
                        "SELECT id, command, time, state, LEFT(info, 90) FROM information_schema.PROCESSLIST "
                        "WHERE db = DATABASE()"
                    )
                    seen = wc.fetchall()
                raise AssertionError(f"the send never waited for the history row lock: {outcome} {seen}")
            time.sleep(0.02)
        # 3. the holder now wants the instance row: a cycle, and the send is the victim
        cur.execute(f"SELECT id FROM `fsm_{order.name}` WHERE id = %s FOR UPDATE", (instance_id,))
        holder.rollback()
    finally:  # closing rolls back and frees the locks, so nothing is left waiting
        holder.close()
        watcher.close()
        if sender is not None:
            sender.join(timeout=60)
    assert "error" not in outcome, f"the deadlock reached the caller: {outcome.get('error')!r}"
    assert outcome["result"].to_state == "paid"
    history = store.history(order, "dl")
    assert [(h.event, h.to_state) for h in history] == [(None, "new"), ("pay", "paid")]
