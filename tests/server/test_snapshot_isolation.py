"""MariaDB 11.8's snapshot isolation, met by racing processes: who gets error 1020 and what
happens then.

Since MariaDB 11.6.2 ``innodb_snapshot_isolation`` is on by default (11.8 is the LTS a current
distribution installs). A REPEATABLE READ transaction that writes, or reads with a lock, a row
another transaction changed after its snapshot fails with 1020 ("Record has changed since last
read") and the server rolls the WHOLE transaction back. So does a READ COMMITTED one, within
one statement: a statement whose trigger read something (its read view) and then writes a row
another transaction committed since, as pyfsm's triggers read the rules and then move the
state counters. MariaDB 10.11 and MySQL wait and go on from the row's newest version. What
each server may answer:

* pyfsm's own calls: nothing new anywhere. Its sessions run READ COMMITTED and, on MariaDB,
  with snapshot isolation off (the issue's soak feeder, create then enqueue, races here).
* A call of pyfsm's pool whose transaction the server ended with 1020 all the same is made
  again like a deadlock (up to 3 times in all), and one that still fails raises ``Deadlock``
  with errno 1020; shown with a procedure that turns snapshot isolation on and runs
  REPEATABLE READ on purpose.
* A raw writer (an application's UPDATE of ``current_state``, a DBA's session), whose triggers
  do pyfsm's work inside its transaction: on 11.8, 1020 when another transition moved a state
  counter row its trigger then moves, and nothing of the transaction is left; on 10.11 and
  MySQL it goes on. pyfsm cannot retry a transaction it does not own: the writer must run it
  again, as after a deadlock, or turn snapshot isolation off for its session
  (docs/errors.md#deadlock). Racing raw writers that do so end with every invariant kept.
"""

from __future__ import annotations

import json
import threading
import traceback
from collections import Counter
from typing import Any

import pymysql
from helpers.common import fetch, is_mariadb, order_machine
from helpers.histories import check_invariants
from helpers.processes import run_processes
from helpers.relay import query

from pyfsm import Deadlock, Store, retry
from pyfsm.db import Database, parse_dsn
from pyfsm.errors import from_mysql_error

PROCESSES = 6
SNAPSHOT_CHANGED = 1020
DEADLOCK = 1213


def snapshot_isolation(conn: pymysql.connections.Connection) -> bool:
    """Whether the server fails a REPEATABLE READ write of a row changed after the snapshot
    (MariaDB 11.6+ with innodb_snapshot_isolation, 11.8's default); MySQL has no such variable."""
    rows = fetch(conn, "SHOW GLOBAL VARIABLES LIKE 'innodb_snapshot_isolation'")
    return bool(rows) and rows[0]["Value"] == "ON"


def has_snapshot_isolation(conn: pymysql.connections.Connection) -> bool:
    """Whether the server has the variable at all (MariaDB 10.6.18+, off by default before 11.6.2)."""
    return bool(fetch(conn, "SHOW GLOBAL VARIABLES LIKE 'innodb_snapshot_isolation'"))


def connect(dsn: str, *, isolation: str = "REPEATABLE READ") -> pymysql.connections.Connection:
    """A raw writer's connection: the application's own, at the isolation it chose."""
    conn = pymysql.connect(**{**parse_dsn(dsn).connect_kwargs(), "autocommit": True})
    conn.cursor().execute(f"SET SESSION TRANSACTION ISOLATION LEVEL {isolation}")
    return conn


def same_shard_keys(store: Store, machine: str, n: int) -> list[str]:
    """``n`` new instances whose state counter rows are the same (their ids equal modulo 16,
    the counters' shards), so that moving one moves the row the others' moves need."""
    keys = [f"k{i}" for i in range(16 * (n - 1) + 1)]
    for key in keys:
        store.create(machine, key)
    return keys[::16]


def test_pyfsm_calls_from_racing_processes_never_meet_1020(dsn: str) -> None:
    """The issue's soak feeder (create, then enqueue) beside senders, every process on its own
    keys of one type (so all of them move the same counter rows), the server's default
    isolation REPEATABLE READ and, on 11.8, snapshot isolation on: every call succeeds on every
    server. pyfsm's sessions are READ COMMITTED with snapshot isolation off (on MariaDB)."""
    database = Database(parse_dsn(dsn), pool_size=1)
    try:
        if is_mariadb(dsn):
            [row] = database.run(
                "SELECT @@session.innodb_snapshot_isolation AS s", (), retry_connection=True, writes=False
            )
            assert row["s"] == 0
    finally:
        database.close()
    machine = order_machine()
    with Store(dsn) as store:
        store.define(machine)
    reports = run_processes(_pyfsm_writer, lambda w: (dsn, machine.name, w), PROCESSES)
    failures = Counter(f for r in reports for f in r["failures"])
    assert failures == Counter(), failures
    assert sum(r["calls"] for r in reports) == PROCESSES * 25 * 4
    check_invariants(parse_dsn(dsn), machine)


def _pyfsm_writer(dsn: str, machine: str, worker: int, barrier: Any, out: Any) -> None:
    report: dict[str, Any] = {"calls": 0, "failures": [], "error": None}
    try:
        with Store(dsn, pool_size=1) as store:
            store.counts(machine)
            barrier.wait(timeout=60)
            for i in range(25):
                key = f"w{worker}-{i}"
                for call, *event in (
                    (store.create,),
                    (store.enqueue,),
                    (store.send, "pay"),
                    (store.send, "ship"),
                ):
                    try:
                        call(machine, key, *event)
                        report["calls"] += 1
                    except Deadlock as exc:  # after the pool's retries
                        report["failures"].append(exc.errno)
    except Exception:
        report["error"] = traceback.format_exc()
    out.put(report)


def test_a_raw_writer_in_repeatable_read_meets_1020_on_a_counter_row_another_moved(dsn: str) -> None:
    machine = order_machine()
    notes = f"notes_{machine.name}"  # the application's own table, written in the same transaction
    with Store(dsn) as store:
        store.define(machine)
        mine, theirs = same_shard_keys(store, machine.name, 2)
        writer = connect(dsn)
        try:
            cur = writer.cursor()
            cur.execute(f"CREATE TABLE `{notes}` (note VARCHAR(64) NOT NULL) ENGINE=InnoDB")
            transaction = (
                "START TRANSACTION",
                f"INSERT INTO `{notes}` VALUES ('mine')",
                f"SELECT COUNT(*) FROM `fsm_{machine.name}`",  # a read: the transaction's snapshot
            )
            update = f"UPDATE `fsm_{machine.name}` SET current_state = 'paid' WHERE instance_key = '{mine}'"
            for statement in transaction:
                cur.execute(statement)
            # another transition commits, moving the counter rows (new, paid) of that shard
            store.send(machine.name, theirs, "pay")
            try:
                cur.execute(update)
                cur.execute("COMMIT")
                met = None
            except pymysql.err.OperationalError as exc:
                met = exc
            if snapshot_isolation(writer):
                assert met is not None and met.args[0] == SNAPSHOT_CHANGED, met
                assert "fsm_state_counts" in met.args[1]
                # the whole transaction was rolled back: the note went with the transition
                assert fetch(writer, "SELECT @@in_transaction AS open")[0]["open"] == 0
                assert fetch(writer, f"SELECT COUNT(*) AS n FROM `{notes}`")[0]["n"] == 0
                assert (store.get(machine.name, mine).state, store.history(machine.name, mine)[-1].to_state) == (
                    "new",
                    "new",
                )
                err = from_mysql_error(met)
                assert isinstance(err, Deadlock) and err.retryable and err.errno == SNAPSHOT_CHANGED
                # made again, as after a deadlock: it applies
                for statement in (*transaction, update, "COMMIT"):
                    cur.execute(statement)
            else:  # MariaDB 10.11, MySQL: the writer goes on from the counter row's newest version
                assert met is None, met
            assert fetch(writer, f"SELECT COUNT(*) AS n FROM `{notes}`")[0]["n"] == 1
        finally:
            writer.close()
        assert store.get(machine.name, mine).state == "paid"
    check_invariants(parse_dsn(dsn), machine)


def test_racing_raw_writers_that_run_a_failed_transaction_again_keep_every_invariant(dsn: str) -> None:
    """Raw writers in REPEATABLE READ transactions, several processes on keys of one type, each
    making the transaction again after 1020 or 1213 as the docs say (half with a loop of their
    own, half with pyfsm.retry over from_mysql_error): every move applied once,
    histories unbroken, the counters equal to a GROUP BY. The errors each server may answer:
    1213 anywhere; 1020 only with snapshot isolation on."""
    machine = order_machine()
    with Store(dsn) as store:
        store.define(machine)
        for w in range(PROCESSES):
            for i in range(15):
                store.create(machine, f"w{w}-{i}")
        conn = connect(dsn)
        try:
            allowed = {DEADLOCK, SNAPSHOT_CHANGED} if snapshot_isolation(conn) else {DEADLOCK}
        finally:
            conn.close()
        reports = run_processes(_raw_writer, lambda w: (dsn, machine.name, w), PROCESSES)
        met = Counter(e for r in reports for e in r["errors"])
        print(f"raw writers' errors, each followed by the transaction made again: {dict(met)}")
        assert set(met) <= allowed, met
        assert store.counts(machine) == {"shipped": PROCESSES * 15}
    rows = check_invariants(parse_dsn(dsn), machine)
    assert {len(history) for history in rows.values()} == {3}  # created, paid, shipped: once each


def _raw_writer(dsn: str, machine: str, worker: int, barrier: Any, out: Any) -> None:
    """Odd workers make a failed transaction again with a loop of their own; even ones with
    pyfsm.retry over from_mysql_error (which makes 1020 and 1213 a retryable Deadlock)."""
    report: dict[str, Any] = {"errors": [], "error": None}
    try:
        conn = connect(dsn)
        cur = conn.cursor()

        def move(key: str, state: str) -> None:
            try:
                cur.execute("START TRANSACTION")
                cur.execute(f"SELECT COUNT(*) FROM `fsm_{machine}` WHERE current_state = 'new'")
                cur.execute(f"UPDATE `fsm_{machine}` SET current_state = %s WHERE instance_key = %s", (state, key))
                cur.execute("COMMIT")
            except pymysql.err.OperationalError as exc:
                cur.execute("ROLLBACK")  # nothing is left open (the server rolled back already)
                if exc.args[0] not in (DEADLOCK, SNAPSHOT_CHANGED):
                    raise
                report["errors"].append(exc.args[0])
                raise from_mysql_error(exc) or exc from exc

        barrier.wait(timeout=60)
        for i in range(15):
            for state in ("paid", "shipped"):
                key = f"w{worker}-{i}"
                if worker % 2 == 0:
                    retry(lambda k=key, s=state: move(k, s), attempts=50, base_delay=0.001, max_delay=0.02)
                    continue
                for _attempt in range(50):
                    try:
                        move(key, state)
                        break
                    except Deadlock:
                        continue
                else:
                    raise AssertionError(f"{key} -> {state}: 50 attempts failed")
        conn.close()
    except Exception:
        report["error"] = traceback.format_exc()
    out.put(report)


PROCEDURE = """
CREATE PROCEDURE snapshot_bump()
BEGIN
  -- REPEATABLE READ on purpose (pyfsm's own procedures run READ COMMITTED): a snapshot, a
  -- pause in which another call commits a change of the row, then a write of that row
  DECLARE v_seen BIGINT;{snapshot_isolation_on}
  SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
  START TRANSACTION;
  INSERT INTO snapshot_attempts (connection_id) VALUES (CONNECTION_ID());
  SELECT n INTO v_seen FROM snapshot_box WHERE id = 1;
  DO SLEEP(0.01);
  UPDATE snapshot_box SET n = n + 1 WHERE id = 1;
  COMMIT;
  SELECT v_seen AS seen;
END
"""


def test_the_pool_makes_a_call_that_met_1020_again_and_raises_deadlock_after_the_last(
    make_database: Any,
) -> None:
    """Processes bump one row through pyfsm's pool (pyfsm.db.Database.run, the path of every
    Store call), each call a REPEATABLE READ transaction that reads, pauses and writes. The
    attempts are logged in a MyISAM table, which a rollback does not undo. Every server: the
    row counts exactly the calls that succeeded (none applied twice, none lost); a call that
    failed raised Deadlock. With snapshot isolation (the procedure turns it on where the
    server has it: MariaDB 10.11 and 11.8): 1020 came, and the pool made calls again (more
    attempts than calls)."""
    settings = make_database("pyfsm_snap")
    conn = pymysql.connect(**{**settings.connect_kwargs(), "autocommit": True})
    try:
        cur = conn.cursor()
        cur.execute("CREATE TABLE snapshot_box (id INT PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB")
        cur.execute("INSERT INTO snapshot_box VALUES (1, 0)")
        cur.execute("CREATE TABLE snapshot_attempts (connection_id BIGINT NOT NULL) ENGINE=MyISAM")
        # pyfsm's sessions turn it off: the procedure turns it on again where the server has it
        # (both MariaDBs; MySQL has no such variable and would refuse the procedure naming it)
        isolated = has_snapshot_isolation(conn)
        on = "\n  SET SESSION innodb_snapshot_isolation = ON;" if isolated else ""
        cur.execute(PROCEDURE.format(snapshot_isolation_on=on))
    finally:
        conn.close()
    reports = run_processes(_bumper, lambda w: (settings.dsn(), w), PROCESSES)
    succeeded = sum(r["succeeded"] for r in reports)
    failed = Counter(e for r in reports for e in r["failed"])
    [box] = [r["n"] for r in query(settings, "SELECT n FROM snapshot_box WHERE id = 1")]
    [attempts] = [r["n"] for r in query(settings, "SELECT COUNT(*) AS n FROM snapshot_attempts")]
    print(f"calls {PROCESSES * 20}: succeeded {succeeded}, failed {dict(failed)}, attempts {attempts}")
    assert box == succeeded and succeeded + sum(failed.values()) == PROCESSES * 20
    if isolated:
        assert set(failed) <= {SNAPSHOT_CHANGED, DEADLOCK}, failed
        assert attempts > PROCESSES * 20, "no call met 1020: the race did not happen"
        # a call that failed was made three times: its attempts are counted with the rest
        assert attempts >= succeeded + 3 * sum(failed.values())
    else:
        assert set(failed) <= {DEADLOCK}, failed


def _bumper(dsn: str, worker: int, barrier: Any, out: Any) -> None:
    report: dict[str, Any] = {"succeeded": 0, "failed": [], "error": None}
    try:
        database = Database(parse_dsn(dsn), pool_size=1)
        database.run("SELECT 1", (), retry_connection=True, writes=False)
        barrier.wait(timeout=60)
        for _ in range(20):
            try:
                database.run("CALL snapshot_bump()", (), retry_connection=False, writes=True)
                report["succeeded"] += 1
            except Deadlock as exc:
                report["failed"].append(exc.errno)
        database.close()
    except Exception:
        report["error"] = traceback.format_exc()
    out.put(report)


TRIGGERED = (
    "CREATE TABLE hot (id INT PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB",
    "INSERT INTO hot VALUES (1, 0)",
    "CREATE TABLE rules (id INT PRIMARY KEY) ENGINE=InnoDB",
    "INSERT INTO rules VALUES (1)",
    "CREATE TABLE moved (id INT PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB",
    "INSERT INTO moved VALUES (1, 0)",
    # pyfsm's triggers' shape: read something (the statement's read view), then move a row that
    # other transactions move too (a state counter); the pause lets one of them commit between
    """CREATE TRIGGER moved_bu BEFORE UPDATE ON moved FOR EACH ROW BEGIN
         DECLARE v_rules INT;
         SELECT COUNT(*) INTO v_rules FROM rules;
         DO SLEEP(0.6);
         UPDATE hot SET n = n + 1 WHERE id = 1;
       END""",
)


def test_one_read_committed_statement_meets_1020_and_pyfsms_sessions_do_not(make_database: Any) -> None:
    """On MariaDB 11.8 READ COMMITTED is no shelter: one statement whose trigger read something
    and then writes a row another transaction committed since fails with 1020, rolled back
    whole. pyfsm's sessions turn innodb_snapshot_isolation off (on MariaDB), so does
    fsm_begin_v1 for a DBA's session that calls one of pyfsm's procedures, and so does a
    session that sets it: all go on, as every statement does on 10.11 and MySQL."""
    settings = make_database("pyfsm_snap")
    conn = pymysql.connect(**{**settings.connect_kwargs(), "autocommit": True})
    try:
        for statement in TRIGGERED:
            conn.cursor().execute(statement)
        isolated = snapshot_isolation(conn)
    finally:
        conn.close()
    update = "UPDATE moved SET n = n + 1 WHERE id = 1"

    def race(run: Any) -> int | None:
        """Run ``update`` with ``run`` while another connection moves the hot row mid-statement."""
        other = pymysql.connect(**{**settings.connect_kwargs(), "autocommit": True})
        try:
            timer = threading.Timer(0.2, lambda: other.cursor().execute("UPDATE hot SET n = n + 100 WHERE id = 1"))
            timer.start()
            try:
                run(update)
                return None
            except (pymysql.err.OperationalError, Deadlock) as exc:
                return int(exc.errno if isinstance(exc, Deadlock) else exc.args[0])
            finally:
                timer.join()
        finally:
            other.close()

    # the same statement in a transaction begun by pyfsm's fsm_begin_v1, as every procedure of
    # pyfsm that commits on its own begins one (revision 0026)
    with Store(settings.dsn()) as store:
        store.migrate()
    conn = pymysql.connect(**{**settings.connect_kwargs(), "autocommit": True})
    try:
        conn.cursor().execute(
            f"CREATE PROCEDURE moved_by_a_procedure() BEGIN CALL fsm_begin_v1(); {update}; COMMIT; END"
        )
    finally:
        conn.close()

    raw = connect(settings.dsn(), isolation="READ COMMITTED")
    dba = connect(settings.dsn())
    pool = Database(settings, pool_size=1)
    try:
        if isolated:
            dba.cursor().execute("SET SESSION innodb_snapshot_isolation = ON")
        met_raw = race(raw.cursor().execute)
        met_pool = race(lambda sql: pool.run(sql, (), retry_connection=False, writes=True))
        met_procedure = race(lambda _sql: dba.cursor().execute("CALL moved_by_a_procedure()"))
        if isolated:
            assert fetch(dba, "SELECT @@session.innodb_snapshot_isolation AS s")[0]["s"] == 0
            raw.cursor().execute("SET SESSION innodb_snapshot_isolation = OFF")
        met_raw_off = race(raw.cursor().execute)
    finally:
        raw.close()
        dba.close()
        pool.close()
    met = (met_raw, met_pool, met_procedure, met_raw_off)
    assert met == ((SNAPSHOT_CHANGED if isolated else None), None, None, None)
    [moved] = [r["n"] for r in query(settings, "SELECT n FROM moved WHERE id = 1")]
    [hot] = [r["n"] for r in query(settings, "SELECT n FROM hot WHERE id = 1")]
    applied = 3 if isolated else 4  # the statement that met 1020 left nothing, its trigger's move neither
    assert (moved, hot) == (applied, applied + 400)


def test_a_dbas_batches_from_sessions_with_snapshot_isolation_on_apply_every_item(dsn: str) -> None:
    """DBAs' sessions with snapshot isolation on (where the server has it) call
    fsm_{type}_send_many_v3 from racing processes, batches of one type's keys (so they move the
    same counter rows). fsm_begin_v1 turns the check off for the calling session (revision
    0026), so no 1020 reaches a batch, whose in-batch handling ends it on 1213 and 1205 only:
    every item applied once (or the whole call refused with 1213 and made again), every
    invariant kept, and the session's check off afterwards on MariaDB."""
    machine = order_machine()
    with Store(dsn) as store:
        store.define(machine)
        for w in range(PROCESSES):
            for i in range(20):
                store.create(machine, f"w{w}-{i}")
        reports = run_processes(_dba_batches, lambda w: (dsn, machine.name, w), PROCESSES)
        assert {r["snapshot_isolation_after"] for r in reports} <= {0, None}
        refused = Counter(e for r in reports for e in r["refused_items"])
        assert refused == Counter(), refused
        print(f"whole calls refused and made again: {dict(Counter(e for r in reports for e in r['calls_refused']))}")
        assert store.counts(machine) == {"shipped": PROCESSES * 20}
    rows = check_invariants(parse_dsn(dsn), machine)
    assert {len(history) for history in rows.values()} == {3}


def _dba_batches(dsn: str, machine: str, worker: int, barrier: Any, out: Any) -> None:
    report: dict[str, Any] = {"refused_items": [], "calls_refused": [], "snapshot_isolation_after": None, "error": None}
    try:
        conn = connect(dsn)
        has = has_snapshot_isolation(conn)
        if has:
            conn.cursor().execute("SET SESSION innodb_snapshot_isolation = ON")
        barrier.wait(timeout=60)
        for event in ("pay", "ship"):
            items = [{"key": f"w{worker}-{i}", "event": event} for i in range(20)]
            for _attempt in range(20):
                try:
                    rows = fetch(conn, f"CALL `fsm_{machine}_send_many_v3`(%s)", (json.dumps(items),))
                    break
                except pymysql.err.OperationalError as exc:
                    if exc.args[0] != DEADLOCK:  # the whole call rolled back: made again
                        raise
                    report["calls_refused"].append(exc.args[0])
            else:
                raise AssertionError(f"{worker} {event}: 20 calls refused")
            report["refused_items"] += [r["errno"] for r in rows if r["errno"] is not None]
        if has:
            report["snapshot_isolation_after"] = fetch(conn, "SELECT @@session.innodb_snapshot_isolation AS s")[0]["s"]
        conn.close()
    except Exception:
        report["error"] = traceback.format_exc()
    out.put(report)
