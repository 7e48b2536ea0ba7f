"""Racing processes on an attached table (issue 48 item 3): spawned processes write the same
rows for a few seconds (each until it has made three moves: on a loaded machine the ORM
writers start late), each by another path — a Django model's QuerySet.update, SQLAlchemy
Core's update, a raw UPDATE and Store.send — and each records the moves it believes
succeeded. Afterwards the raw tables must agree: every history chain valid (sort_key 1..n,
each row from the previous row's state, every move a rule, one most_recent row), the
table's state column equal to the instance's current_state and the last history row,
the acknowledged moves exactly the history's moves (none lost, none without its write),
fsm_state_counts equal to GROUP BY. A deadlock (1213), a lock wait timeout (1205) or on
MariaDB 11.8 a snapshot conflict (1020) a writer meets is an allowed outcome for that write
(rolled back, not acknowledged); they are counted and printed per server.
"""

from __future__ import annotations

import random
import time
import traceback
from collections import Counter
from typing import Any

import pymysql
import pytest
from helpers.common import unique
from helpers.histories import check_chains
from helpers.processes import run_processes

import pyfsm
from pyfsm import Machine, Store
from pyfsm.db import parse_dsn
from pyfsm.db.driver import install_as_mysqldb

ROWS = 6
SECONDS = 6.0
#: each writer goes on past SECONDS until it has made this many moves (the slowest kinds, Django
#: and SQLAlchemy, start late and lose most races on a loaded machine), up to MAX_SECONDS
MIN_MOVES = 3
MAX_SECONDS = 90.0
KINDS = ("django", "sqlalchemy", "raw", "send")
#: a raw writer's transaction rolled back whole (not acknowledged): on MariaDB 11.6+, whose
#: snapshot isolation is on by default, also 1020 (docs/errors.md#deadlock)
ALLOWED_ERRNOS = {1213: "deadlock", 1205: "lock_wait", 1020: "snapshot"}


def ring(name: str) -> Machine:
    """A machine without a final state, so that rows keep moving; one rule per (from, to), so a
    raw write's event is inferred."""
    return Machine(
        name=name,
        states=["a", "b", "c"],
        start=["a"],
        transitions=[("ab", "a", "b"), ("bc", "b", "c"), ("ca", "c", "a"), ("ba", "b", "a")],
    )


RULES = {"a": [("ab", "b")], "b": [("bc", "c"), ("ba", "a")], "c": [("ca", "a")]}


def errno_of(exc: BaseException) -> int | None:
    current: BaseException | None = exc
    while current is not None:
        # the driver's error, or an ORM's wrapper of it carrying the same args (Django)
        if current.args and isinstance(current.args[0], int):
            return int(current.args[0])
        orig = getattr(current, "orig", None)
        current = orig if isinstance(orig, BaseException) else current.__cause__
    return None


def writer(kind: str, dsn: str, name: str, table: str, seed: int, barrier: Any, out: Any) -> None:
    report: dict[str, Any] = {"kind": kind, "acks": [], "errors": Counter(), "error": ""}
    try:
        rng = random.Random(seed)
        s = parse_dsn(dsn)
        raw = pymysql.connect(**{**s.connect_kwargs(), "autocommit": True})
        move: Any
        if kind == "django":
            install_as_mysqldb()  # PyMySQL as MySQLdb, submodules included (no second pymysql.err)
            import django
            from django.conf import settings
            from django.db import models

            settings.configure(
                DATABASES={
                    "default": {
                        "ENGINE": "django.db.backends.mysql",
                        "NAME": s.database,
                        "USER": s.user,
                        "PASSWORD": s.password or "",
                        "HOST": s.host,
                        "PORT": str(s.port),
                    }
                },
                INSTALLED_APPS=[],
            )
            django.setup()
            meta = type("Meta", (), {"app_label": "pyfsm_race", "managed": False, "db_table": table})
            order = type(
                "RaceOrder",
                (models.Model,),
                {"__module__": __name__, "status": models.CharField(max_length=32, null=True), "Meta": meta},
            )

            def move(key: int, frm: str, event: str, to: str) -> bool:
                return bool(order.objects.filter(pk=key, status=frm).update(status=to) == 1)

        elif kind == "sqlalchemy":
            from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, update

            engine = create_engine(f"mysql+pymysql://{s.user}:{s.password or ''}@{s.host}:{s.port}/{s.database}")
            t = Table(table, MetaData(), Column("id", Integer, primary_key=True), Column("status", String(32)))

            def move(key: int, frm: str, event: str, to: str) -> bool:
                with engine.begin() as conn:
                    stmt = update(t).where(t.c.id == key, t.c.status == frm).values(status=to)
                    return bool(conn.execute(stmt).rowcount == 1)

        elif kind == "raw":

            def move(key: int, frm: str, event: str, to: str) -> bool:
                with raw.cursor() as cur:
                    return bool(
                        cur.execute(f"UPDATE `{table}` SET status = %s WHERE id = %s AND status = %s", (to, key, frm))
                        == 1
                    )

        else:
            store = Store(dsn)

            def move(key: int, frm: str, event: str, to: str) -> bool:
                result = store.send(name, str(key), event)
                # the send moved from the state the instance was in, which may differ from what we read
                report["acks"].append((key, result.from_state, result.to_state))
                return False

        barrier.wait()
        start = time.monotonic()
        while (time.monotonic() - start < SECONDS or len(report["acks"]) < MIN_MOVES) and (
            time.monotonic() - start < MAX_SECONDS
        ):
            key = rng.randint(1, ROWS)
            with raw.cursor() as cur:
                cur.execute(f"SELECT status FROM `{table}` WHERE id = %s", (key,))
                frm = cur.fetchone()[0]
            event, to = rng.choice(RULES[frm])
            try:
                if move(key, frm, event, to):
                    report["acks"].append((key, frm, to))
                else:
                    report["errors"]["stale"] += 1
            except Exception as exc:
                number = errno_of(exc)
                err = pyfsm.from_database_error(exc)
                if number in ALLOWED_ERRNOS:
                    report["errors"][ALLOWED_ERRNOS[number]] += 1
                elif kind == "send" and isinstance(err, pyfsm.TransitionNotAllowed):
                    report["errors"]["refused"] += 1  # the row moved since we read it
                else:
                    raise
        if kind == "send":
            report["errors"].pop("stale", None)
        raw.close()
    except Exception:
        report["error"] = f"{kind}: {traceback.format_exc()}"
    report["errors"] = dict(report["errors"])
    out.put(report)


def attached_ring(store: Store, raw: Any, prefix: str) -> tuple[Machine, str]:
    """A ring type attached to a new table of ROWS rows (NULL: the start state); the machine and table."""
    name, table = unique(prefix), unique(f"{prefix}_orders")
    machine = ring(name)
    store.define(machine)
    with raw.cursor() as cur:
        cur.execute(
            f"CREATE TABLE `{table}` (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, status VARCHAR(32) NULL) "
            "ENGINE=InnoDB"
        )
    raw.commit()
    store.attach(name, table=table, key="id", state="status")
    with raw.cursor() as cur:
        cur.executemany(f"INSERT INTO `{table}` (status) VALUES (%s)", [(None,)] * ROWS)
    raw.commit()
    return machine, table


def check_the_tables_agree(dsn: str, raw: Any, machine: Machine, table: str, reports: list[dict[str, Any]]) -> None:
    """Every history chain valid; each row's state column = its instance's state = its last
    history row; the acknowledged moves exactly the history's (none lost, none without its write)."""
    name = machine.name
    moves = check_chains(parse_dsn(dsn), machine)
    assert len(moves) == ROWS
    raw.commit()
    with raw.cursor() as cur:
        cur.execute(
            f"SELECT t.id, t.status, i.current_state, h.to_state FROM `{table}` t "
            f"JOIN `fsm_{name}` i ON i.instance_key = CAST(t.id AS CHAR) "
            f"JOIN `fsm_{name}_transitions` h ON h.instance_id = i.id AND h.most_recent = 1"
        )
        ends = cur.fetchall()
        cur.execute(
            f"SELECT CAST(i.instance_key AS SIGNED), h.from_state, h.to_state FROM `fsm_{name}_transitions` h "
            f"JOIN `fsm_{name}` i ON i.id = h.instance_id WHERE h.from_state IS NOT NULL"
        )
        history_moves = Counter((int(k), f, t) for k, f, t in cur.fetchall())
    assert len(ends) == ROWS
    assert all(status == current == last for _, status, current, last in ends), ends
    acked = Counter(tuple(a) for r in reports for a in r["acks"])
    # every acknowledged move is in history, and every history move was acknowledged by its writer
    assert acked == history_moves


def test_racing_writers_keep_every_history_valid(store: Store, dsn: str, raw: Any) -> None:
    machine, table = attached_ring(store, raw, "race")
    n = 8
    reports = run_processes(writer, lambda w: (KINDS[w % len(KINDS)], dsn, machine.name, table, w), n=n)
    check_the_tables_agree(dsn, raw, machine, table, reports)
    by_kind: dict[str, Counter[str]] = {}
    for r in reports:
        by_kind.setdefault(r["kind"], Counter()).update(r["errors"])
        by_kind[r["kind"]]["acked"] += len(r["acks"])
    assert all(by_kind[k]["acked"] > 0 for k in KINDS), by_kind
    print(f"\nracing writers on {'MariaDB' if 'MariaDB' in str(raw.get_server_info()) else 'MySQL'}:", by_kind)


pytestmark = pytest.mark.filterwarnings("ignore")


def test_the_update_trigger_replaced_under_racing_writers_lets_no_write_through_unchecked(
    store: Store, dsn: str, raw: Any
) -> None:
    """Adoption finished, pyfsm creates the table's update trigger again without its adoption
    part (pyfsm.schema.attached.replace_trigger: DROP and CREATE while the session holds the
    table's write lock). Raw UPDATEs and Store.send race while the trigger is replaced back and
    forth as often as it can be: afterwards every history chain is valid and every row's state
    column equals its instance's state and its last history row, so no write ran between the
    DROP and the CREATE unchecked, and the acknowledged moves are exactly the history's."""
    import dataclasses
    import threading

    from pyfsm.schema import attached

    machine, table = attached_ring(store, raw, "swap")
    name = machine.name
    assert store.adopt(name).unknown == 0

    swapped: list[bool] = []
    stop = threading.Event()
    failures: list[BaseException] = []

    def swap() -> None:
        conn = pymysql.connect(**parse_dsn(dsn).connect_kwargs())
        try:
            facts = attached.recorded(conn, name)
            assert facts is not None
            adopting = True
            while not stop.is_set():
                attached.install(conn, dataclasses.replace(facts, adopting=adopting))
                swapped.append(adopting)
                adopting = not adopting
        except BaseException as exc:  # reported below
            failures.append(exc)
        finally:
            conn.close()

    swapper = threading.Thread(target=swap)
    swapper.start()
    try:
        reports = run_processes(writer, lambda w: (("raw", "send")[w % 2], dsn, name, table, w), n=6)
    finally:
        stop.set()
        swapper.join(60)
    assert not failures, failures
    assert len(swapped) >= 10, swapped  # replaced again and again while they wrote

    check_the_tables_agree(dsn, raw, machine, table, reports)
    assert all(r["acks"] for r in reports), [r["errors"] for r in reports]
