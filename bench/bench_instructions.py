"""Server instructions per transition, counted with callgrind: what each part of a pyfsm transition costs.

CPU time per transition (bench_transitions.py) moves by ±20% between runs on a shared
2-core machine, too much to tell a 5% change from noise. Instructions do not: this script
starts a MariaDB server of its own under ``valgrind --tool=callgrind`` (own datadir, port
and socket in a temporary directory, durable commits off: fsync is not CPU), and counts the
instructions the whole server process (every thread, InnoDB's background work included)
runs while one client makes ``--calls`` transitions of one variant. Two runs of the same
variant agree within a few percent. Every variant is set against the ``bare CALL`` floor
measured in the same run.

Variants (all on the two-state machine of bench_transitions, one CALL per transition):

* ``ceiling``: INSERT + COMMIT of one row, the yardstick of bench_transitions.
* ``bare CALL``: bench_transitions' floor: the six statements of a transition in one
  procedure (row lock, rule lookup, most_recent flip, history insert, instance update,
  commit), no trigger, no checks.
* ``bare CALL, in a trigger``: the same statements moved into a BEFORE UPDATE trigger that
  the procedure's one UPDATE fires, as pyfsm does: what the trigger in itself costs.
* ``pyfsm``: ``Store.send()`` (send_v2 and the current triggers).
* ``pyfsm, 0009 triggers``: the same with the transition and history update triggers that
  revision 0010 replaced (bu_v6, hbu_v3) put back on a type of its own.
* ``pyfsm, no counters`` / ``pyfsm, no history triggers``: the current triggers with the
  state counters taken out / without the history table's guard triggers: what those parts
  cost (ablations, not options of pyfsm).
* ``pyfsm, trigger without checks``: the current trigger without its checks (identity
  columns, status, data, UTF-8, pause, locks, metadata), counters and outbox kept, through
  ``Store.send()``: the most that making the checks free could save.
* ``trigger design floor``: the least a transition can cost in pyfsm's design (a trigger
  that applies it for every writer and keeps pyfsm's history; see design_floor.py): the
  current trigger without any check, counter, outbox or request id, under a procedure of
  five statements.

    .venv/bin/python bench/bench_instructions.py            # make instructions; about 5 minutes

Needs valgrind and mariadb-install-db (Debian: valgrind, mariadb-server); prints a table.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pymysql

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_transitions as bt
import design_floor as floor

from pyfsm import Machine, Store, db
from pyfsm.db import Settings
from pyfsm.schema import install as schema
from pyfsm.schema.ddl import object_name
from pyfsm.schema.resources import render

NEXT = {"a": "go", "b": "back"}
FLIP = {"a": "b", "b": "a"}

#: the bare CALL's statements in a BEFORE UPDATE trigger, under a procedure of one UPDATE
BARE_IN_TRIGGER = (
    "CREATE TABLE trig_instance LIKE same_instance",
    "CREATE TABLE trig_history LIKE same_history",
    """CREATE TRIGGER trig_instance_bu BEFORE UPDATE ON trig_instance FOR EACH ROW
    BEGIN
      DECLARE v_to VARCHAR(64);
      DECLARE v_event VARCHAR(64) DEFAULT @bare_event;
      SET @bare_event = NULL;
      SELECT to_state INTO v_to FROM fsm_rules
       WHERE machine = 'bench' AND version = 1 AND from_state = OLD.state AND event = v_event;
      UPDATE trig_history SET most_recent = NULL WHERE instance_id = OLD.id AND most_recent = 1;
      INSERT INTO trig_history (instance_id, sort_key, most_recent, event, from_state, to_state, created_at,
                                data_before, data_after, metadata, definition_version, source)
      VALUES (OLD.id, OLD.version + 1, 1, v_event, OLD.state, v_to, UTC_TIMESTAMP(6), OLD.data, NEW.data, '{}', 1,
              'bare');
      SET NEW.state = v_to, NEW.version = OLD.version + 1, NEW.updated_at = UTC_TIMESTAMP(6);
      SET @bare_tid = LAST_INSERT_ID(), @bare_id = OLD.id, @bare_from = OLD.state, @bare_to = v_to,
          @bare_version = NEW.version;
    END""",
    """CREATE PROCEDURE trig_send(IN p_key VARCHAR(191), IN p_event VARCHAR(64))
    BEGIN
      SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
      START TRANSACTION;
      SET @bare_event = p_event;
      UPDATE trig_instance SET data = data WHERE instance_key = p_key;
      COMMIT;
      SELECT @bare_tid AS transition_id, @bare_id AS instance_id, @bare_from AS from_state, @bare_to AS to_state,
             @bare_version AS version, 'running' AS status, 0 AS created, 0 AS replayed;
    END""",
)

@contextmanager
def callgrind_server(mariadbd: str) -> Iterator[tuple[Settings, int, Path]]:
    """A fresh MariaDB under callgrind on a free port; (settings, valgrind's pid, its directory)."""
    work = Path(tempfile.mkdtemp(prefix="pyfsm_callgrind_"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={work / 'data'}",
                    "--auth-root-authentication-method=normal", "--skip-test-db"],
                   check=True, capture_output=True)
    extra = ["--user=root"] if os.geteuid() == 0 else []  # mariadbd refuses to run as root without it
    help_text = subprocess.run([mariadbd, "--no-defaults", "--verbose", "--help"],
                               capture_output=True, text=True).stdout
    if "innodb-buffer-pool-size-max" in help_text:  # its default reserves more address space than valgrind gives
        extra.append("--innodb-buffer-pool-size-max=256M")
    log = (work / "server.log").open("w")
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={work}/cg.%p", "--dump-instr=no", mariadbd,
         "--no-defaults", f"--datadir={work / 'data'}", f"--port={port}", f"--socket={work / 'sock'}",
         f"--pid-file={work / 'pid'}", "--innodb-flush-log-at-trx-commit=2", "--innodb-use-native-aio=0",
         "--innodb-buffer-pool-size=128M", "--skip-log-bin", *extra],
        stdout=log, stderr=subprocess.STDOUT)
    settings = db.parse_dsn(f"mysql://root@127.0.0.1:{port}/bench")
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                pymysql.connect(**settings.connect_kwargs(database=False)).close()
                break
            except pymysql.err.OperationalError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    tail = (work / "server.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"the server under callgrind did not start:\n{tail}") from None
                time.sleep(2)
        yield settings, proc.pid, work
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        shutil.rmtree(work, ignore_errors=True)


def instructions(pid: int, work: Path, run: Callable[[], None]) -> int:
    """Instructions the server ran during ``run()``: counters zeroed before, dumped after."""
    subprocess.run(["callgrind_control", "-z", str(pid)], check=True, capture_output=True)
    run()
    before = set(work.glob("cg.*"))
    subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True)
    total = 0
    for dump in set(work.glob("cg.*")) - before:  # one file per thread that ran
        found = re.search(r"^(?:totals|summary): (\d+)", dump.read_text(errors="replace"), re.M)
        total += int(found.group(1)) if found else 0
        dump.unlink()
    return total


def setup(settings: Settings) -> dict[str, Callable[[int], None]]:
    """Create every variant's objects; return variant -> a function making n transitions."""
    admin = pymysql.connect(**{**settings.connect_kwargs(database=False), "autocommit": True})
    admin.cursor().execute("CREATE DATABASE bench")
    admin.close()
    store = Store(settings.dsn(), pool_size=1)
    store.migrate()
    two_states: dict[str, Any] = {"states": ["a", "b"], "start": ["a"],
                                  "transitions": [("go", "a", "b"), ("back", "b", "a")]}
    for name in ("bench", "old", "nocount", "nohist", "unchecked", "floor"):
        store.define(Machine(name=name, **two_states))
    raw = db.connect(settings)
    cur = raw.cursor()
    for statement in bt.TABLES[1:] + BARE_IN_TRIGGER:
        if "same_" in statement or "bare_send" in statement or "trig_" in statement:
            cur.execute(statement)
    bu = schema.current_template("trigger_bu")
    schema.replace_machine_triggers(raw, "old", bt.TRIGGERS_0009, "v8",
                                    also_lock=("fsm_old_transitions",))
    floor.replace_transition_trigger(raw, "nocount", floor.without_counters(render(bu, "nocount")))
    floor.replace_transition_trigger(raw, "unchecked", floor.unchecked_trigger(render(bu, "unchecked")))
    floor.install_floor(raw, "floor")
    for family in ("trigger_hbi", "trigger_hbu"):
        cur.execute(f"DROP TRIGGER `{object_name(schema.current_template(family), 'nohist')}`")
    for table in ("same", "trig"):
        for k in range(8):
            cur.execute(f"INSERT INTO {table}_instance (instance_key, state, version, updated_at, data) "
                        f"VALUES (%s, 'a', 1, UTC_TIMESTAMP(6), '{{}}')", (f"k{k}",))
            cur.execute(f"INSERT INTO {table}_history (instance_id, sort_key, most_recent, to_state, created_at, "
                        "data_after, metadata, definition_version, source) VALUES (LAST_INSERT_ID(), 1, 1, 'a', "
                        "UTC_TIMESTAMP(6), '{}', '{}', 1, 'bare')")
    for name in ("bench", "old", "nocount", "nohist", "unchecked", "floor"):
        for k in range(8):
            store.create(name, f"k{k}")
    states: dict[str, dict[str, str]] = {}

    def calls(variant: str, sql: str) -> Callable[[int], None]:
        state = states.setdefault(variant, {f"k{k}": "a" for k in range(8)})

        def run(n: int) -> None:
            for i in range(n):
                key = f"k{i % 8}"
                cur.execute(sql, (key, NEXT[state[key]]))
                while cur.nextset():
                    pass
                state[key] = FLIP[state[key]]
        return run

    def sends(variant: str, machine: str) -> Callable[[int], None]:
        state = states.setdefault(variant, {f"k{k}": "a" for k in range(8)})

        def run(n: int) -> None:
            for i in range(n):
                key = f"k{i % 8}"
                state[key] = store.send(machine, key, NEXT[state[key]]).to_state
        return run

    cur.execute(bt.TABLES[0])
    plain = bt.raw_connect(settings, autocommit=False)

    def ceiling(n: int) -> None:  # as bench_transitions: two statements, INSERT and COMMIT
        with plain.cursor() as c:
            for i in range(n):
                c.execute("INSERT INTO bench_ceiling (client, n, created_at) VALUES (0, %s, UTC_TIMESTAMP(6))", (i,))
                plain.commit()

    return {
        "ceiling": ceiling,
        "bare CALL": calls("bare CALL", "CALL bare_send(%s, %s)"),
        "bare CALL, in a trigger": calls("bare CALL, in a trigger", "CALL trig_send(%s, %s)"),
        "pyfsm": sends("pyfsm", "bench"),
        "pyfsm, 0009 triggers": sends("pyfsm, 0009 triggers", "old"),
        "pyfsm, no counters": sends("pyfsm, no counters", "nocount"),
        "pyfsm, no history triggers": sends("pyfsm, no history triggers", "nohist"),
        "pyfsm, trigger without checks": sends("pyfsm, trigger without checks", "unchecked"),
        "trigger design floor": calls("trigger design floor", "CALL fsm_floor_send_floor(%s, %s)"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--calls", type=int, default=200, help="transitions per measurement")
    parser.add_argument("--rounds", type=int, default=2, help="measurements per variant (the median is shown)")
    parser.add_argument("--mariadbd", default="/usr/sbin/mariadbd")
    args = parser.parse_args(argv)
    for tool in ("valgrind", "callgrind_control", "mariadb-install-db"):
        if shutil.which(tool) is None:
            print(f"{tool} is not installed (Debian: apt-get install valgrind mariadb-server)", file=sys.stderr)
            return 2
    counted: dict[str, list[float]] = {}
    with callgrind_server(args.mariadbd) as (settings, pid, work):
        variants = setup(settings)
        for run in variants.values():
            run(20)  # warm: caches, the routines' first parse
        for _ in range(args.rounds):
            for name, run in variants.items():
                print(f"counting {name}...", file=sys.stderr)
                count = instructions(pid, work, functools.partial(run, args.calls))
                counted.setdefault(name, []).append(count / args.calls)
    floor = statistics.median(counted["bare CALL"])
    print(f"Server instructions per transition (callgrind, {args.calls} transitions per measurement, median of "
          f"{args.rounds}; one client, durable commits off)\n")
    print("| variant | instructions per transition | vs bare CALL | measurements |")
    print("|---|---:|---:|---|")
    for name, values in counted.items():
        median = statistics.median(values)
        print(f"| {name} | {median / 1e3:,.0f} k | {median / floor:.2f}x | "
              + ", ".join(f"{v / 1e3:,.0f} k" for v in values) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
