"""Server instructions per transition, counted with callgrind: what each part of a pyfsm transition costs.

CPU time per transition (bench_transitions.py) moves by ±20% between runs on a shared
2-core machine, too much to tell a 5% change from noise. Instructions do not: this script
starts a server of its own under ``valgrind --tool=callgrind`` (own datadir, port and socket
in a temporary directory, durable commits off: fsync is not CPU, binlog off; see
callgrind_servers.py), and counts the instructions the whole server process (every thread,
InnoDB's background work included) runs while one client makes ``--calls`` transitions of
one variant. Two runs of the same variant agree within a few percent. ``--server`` picks
MariaDB 10.11 (``mariadb``: the system's mariadbd), MariaDB 11.8 (``mariadb-11.8``: the
private tree of scripts/mariadb-server), MySQL 9.7 (``mysql``: the private tree of
scripts/mysql-server; trees are fetched on first use) or all three, one after the other
(default): the same variants on each, one table per server, every variant set against the
``bare CALL`` floor measured on the same server in the same run (counts of different servers
are not comparable with each other beyond that: different code, and MySQL keeps its default
performance_schema on).

Variants (all on the two-state machine of bench_transitions, one CALL per transition):

* ``ceiling``: INSERT + COMMIT of one row, the yardstick of bench_transitions.
* ``bare CALL``: bench_transitions' floor: the six statements of a transition in one
  procedure (row lock, rule lookup, most_recent flip, history insert, instance update,
  commit), no trigger, no checks.
* ``bare CALL, in a trigger``: the same statements moved into a BEFORE UPDATE trigger that
  the procedure's one UPDATE fires, as pyfsm does: what the trigger in itself costs.
* ``pyfsm``: ``Store.send()`` (fire_v1 and the current triggers: the call with no option).
* ``pyfsm, send_v4 (bu_v11)``: the same call through send_v4, as Store.send() makes it when it
  has an option to pass (data, metadata, a request id ...), on the current trigger.
* ``pyfsm, revision 0023 (fire_v1, bu_v10)``: a CALL of fire_v1 (Store.send()'s call then) on
  the trigger revision 0023 left (bu_v10, rendered for the type): what a type without guards
  cost before revision 0024.
* ``pyfsm, revision 0027 (fire_v1, bu_v11)``: a CALL of fire_v1 on bu_v11 (revisions 0024 to
  0027): Store.send()'s path before revision 0028.
* ``pyfsm, three guards (two refuse, the third holds)``: Store.send() on a type whose every
  event has three guarded rules, the first two refusing (a number, a list), the third
  holding (a boolean): the most three guards cost a transition (guards.md).
* ``pyfsm, revision 0022``: Store.send()'s path as revision 0022 left it (send_v4 on bu_v9,
  rendered for the type), and ``revision 0021`` (send_v3 on bu_v8).
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

    .venv/bin/python bench/bench_instructions.py                   # make instructions; all three servers
    .venv/bin/python bench/bench_instructions.py --server mariadb-11.8  # one server

Needs valgrind, and for MariaDB 10.11 mariadb-install-db (Debian: valgrind, mariadb-server); a
server that cannot be had (a tree not fetchable, MariaDB not installed) is skipped with one
line saying why.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pymysql

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_transitions as bt
import design_floor as floor
from callgrind_servers import (
    ServerUnavailable,
    callgrind_mariadb,
    callgrind_mariadb_root,
    callgrind_mysql,
    check_mariadb,
    debian_runner,
    instructions,
)

from pyfsm import Machine, Store, db
from pyfsm.db import Settings
from pyfsm.schema import install as schema
from pyfsm.schema.ddl import object_name
from pyfsm.schema.rendering import read_rules, render_transition_trigger
from pyfsm.schema.resources import read_sql, render

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

SEND_V3 = "CALL fsm_{}_send_v3(%s, %s, NULL, NULL, NULL, NULL, NULL, NULL)"
SEND_V4 = "CALL fsm_{}_send_v4(%s, %s, NULL, NULL, NULL, NULL, NULL, NULL)"
#: types of 16 states whose a and b each have 15 events: go and back, sorted last, and 14 more
WIDE_NAMES = ("wide", "widegen")


def wide_machine(name: str) -> Machine:
    """The two-state flip among 14 more states, each of a and b with 14 more events, named so
    that go and back come last in the rendered CASE (rules are rendered in name order)."""
    others = [f"x{i:02d}" for i in range(1, 15)]
    rules = [("go", "a", "b"), ("back", "b", "a")]
    rules += [(f"a{i:02d}", "a", x) for i, x in enumerate(others, 1)]
    rules += [(f"b{i:02d}", "b", x) for i, x in enumerate(others, 1)]
    return Machine(name=name, states=["a", "b", *others], start=["a"], transitions=rules)


#: the types of the variants, each of the same two-state definition
NAMES = (
    "bench",
    "old",
    "prev",
    "r0022",
    "r0023",
    "r0027",
    "opts",
    "sendv3",
    "generic",
    "rawup",
    "nocount",
    "nohist",
    "unchecked",
    "nolock",
    "floor",
)


def without_lock_and_outbox_tests(trigger: str) -> str:
    """The rendered trigger without the lock test and the outbox of a transition: what
    rendering them out for a type that uses neither would save (an ablation: locks and topics
    are per instance and may be switched on at any time, so pyfsm renders both)."""
    lock = "OLD.status = 'paused' OR ((OLD.uses_global_lock OR OLD.uses_local_lock) AND OLD.lookup_key IS NOT NULL)"
    assert trigger.count(lock) == 1
    trigger = trigger.replace(lock, "OLD.status = 'paused'")
    start = trigger.index("IF NEW.kafka_topic IS NOT NULL THEN", trigger.index("@fsm_guard lets"))
    return trigger[:start] + trigger[trigger.index("  ELSEIF NOT", start) :]


def setup(settings: Settings) -> dict[str, Callable[[int], None]]:
    """Create every variant's objects; return variant -> a function making n transitions."""
    admin = pymysql.connect(**{**settings.connect_kwargs(database=False), "autocommit": True})
    admin.cursor().execute("CREATE DATABASE bench")
    admin.close()
    store = Store(settings.dsn(), pool_size=1)
    store.migrate()
    two_states: dict[str, Any] = {
        "states": ["a", "b"],
        "start": ["a"],
        "transitions": [("go", "a", "b"), ("back", "b", "a")],
    }
    for name in NAMES:
        store.define(Machine(name=name, **two_states))
    for name in WIDE_NAMES:
        store.define(wide_machine(name))
    store.define(bt.guarded_machine("guarded"))
    raw = db.connect(settings)
    cur = raw.cursor()
    for statement in bt.TABLES[1:] + BARE_IN_TRIGGER:
        if "same_" in statement or "bare_send" in statement or "trig_" in statement:
            cur.execute(statement)
    bu = schema.current_template("trigger_bu")

    def rendered(name: str) -> str:  # the type's trigger as define installed it (rules inline)
        return render_transition_trigger(read_sql(bu), read_rules(raw, name))

    schema.replace_machine_triggers(raw, "old", bt.TRIGGERS_0009, "v8", also_lock=("fsm_old_transitions",))
    schema.replace_machine_triggers(raw, "prev", bt.TRIGGERS_0021, "v13", also_lock=("fsm_prev_transitions",))
    schema.replace_machine_triggers(
        raw,
        "r0022",
        bt.TRIGGERS_0022,
        "v14",
        also_lock=("fsm_r0022_transitions",),
        texts={"trigger_bu_v9": bt.rendered_0022(raw, "r0022")},
    )
    schema.replace_machine_triggers(
        raw,
        "r0023",
        bt.TRIGGERS_0023,
        "v15",
        also_lock=("fsm_r0023_transitions",),
        texts={"trigger_bu_v10": bt.rendered_0023(raw, "r0023")},
    )
    schema.replace_machine_triggers(
        raw,
        "r0027",
        bt.TRIGGERS_0027,
        "v17",
        also_lock=("fsm_r0027_transitions",),
        texts={"trigger_bu_v11": bt.rendered_0027(raw, "r0027")},
    )
    floor.replace_transition_trigger(raw, "generic", render(bu, "generic"))  # the template as it stands
    floor.replace_transition_trigger(raw, "widegen", render(bu, "widegen"))
    floor.replace_transition_trigger(raw, "nocount", floor.without_counters(rendered("nocount")))
    floor.replace_transition_trigger(raw, "unchecked", floor.unchecked_trigger(rendered("unchecked")))
    floor.replace_transition_trigger(raw, "nolock", without_lock_and_outbox_tests(rendered("nolock")))
    floor.install_floor(raw, "floor")
    for family in ("trigger_hbi", "trigger_hbu"):
        cur.execute(f"DROP TRIGGER `{object_name(schema.current_template(family), 'nohist')}`")
    for table in ("same", "trig"):
        bt.seed_same_rows(cur.execute, table, [f"k{k}" for k in range(8)])
    for name in NAMES + WIDE_NAMES:
        for k in range(8):
            store.create(name, f"k{k}")
    for k in range(8):
        store.create("guarded", f"k{k}", data=bt.GUARDED_DATA)
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

    def raw_updates(variant: str, machine: str) -> Callable[[int], None]:
        state = states.setdefault(variant, {f"k{k}": "a" for k in range(8)})

        def run(n: int) -> None:  # a DBA's UPDATE of the state, autocommitted: the trigger finds the event
            for i in range(n):
                key = f"k{i % 8}"
                cur.execute(
                    f"UPDATE `fsm_{machine}` SET current_state = %s WHERE instance_key = %s", (FLIP[state[key]], key)
                )
                state[key] = FLIP[state[key]]

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
        "pyfsm, revision 0021 (send_v3, bu_v8)": calls("pyfsm, revision 0021 (send_v3, bu_v8)", SEND_V3.format("prev")),
        "pyfsm, revision 0022 (send_v4, bu_v9)": calls(
            "pyfsm, revision 0022 (send_v4, bu_v9)", SEND_V4.format("r0022")
        ),
        "pyfsm, revision 0023 (fire_v1, bu_v10)": calls(
            "pyfsm, revision 0023 (fire_v1, bu_v10)", "CALL fsm_r0023_fire_v1(%s, %s)"
        ),
        "pyfsm, revision 0027 (fire_v1, bu_v11)": calls(
            "pyfsm, revision 0027 (fire_v1, bu_v11)", "CALL fsm_r0027_fire_v1(%s, %s)"
        ),
        "pyfsm, three guards (two refuse, the third holds)": sends(
            "pyfsm, three guards (two refuse, the third holds)", "guarded"
        ),
        "pyfsm, send_v4 (bu_v11)": calls("pyfsm, send_v4 (bu_v11)", SEND_V4.format("opts")),
        "pyfsm, send_v3 (bu_v11)": calls("pyfsm, send_v3 (bu_v11)", SEND_V3.format("sendv3")),
        "pyfsm, rules from fsm_rules (bu_v11 as the template stands)": sends(
            "pyfsm, rules from fsm_rules (bu_v11 as the template stands)", "generic"
        ),
        "raw UPDATE through the same trigger": raw_updates("raw UPDATE through the same trigger", "rawup"),
        "pyfsm, 15 events from each state (the one sent last in its CASE)": sends(
            "pyfsm, 15 events from each state (the one sent last in its CASE)", "wide"
        ),
        "pyfsm, 15 events from each state, rules from fsm_rules": sends(
            "pyfsm, 15 events from each state, rules from fsm_rules", "widegen"
        ),
        "pyfsm, no lock and outbox tests": sends("pyfsm, no lock and outbox tests", "nolock"),
        "pyfsm, 0009 triggers": sends("pyfsm, 0009 triggers", "old"),
        "pyfsm, no counters": sends("pyfsm, no counters", "nocount"),
        "pyfsm, no history triggers": sends("pyfsm, no history triggers", "nohist"),
        "pyfsm, trigger without checks": sends("pyfsm, trigger without checks", "unchecked"),
        "trigger design floor": calls("trigger design floor", "CALL fsm_floor_send_floor(%s, %s)"),
    }


#: --server's choices, in the order "all" counts them
SERVERS: dict[str, Callable[[argparse.Namespace], AbstractContextManager[tuple[Settings, int, Path]]]] = {
    "mariadb": lambda args: callgrind_mariadb(args.mariadbd),
    "mariadb-11.8": lambda args: callgrind_mariadb_root(),
    "mysql": lambda args: callgrind_mysql(),
}
#: the script of scripts/ whose tree a server runs from (the system's MariaDB has none)
TREES = {"mariadb-11.8": "mariadb-server", "mysql": "mysql-server"}


def check(server: str, args: argparse.Namespace) -> None:
    """Raise ServerUnavailable if ``server`` cannot be started here (a tree's: fetches it if missing)."""
    if server in TREES:
        debian_runner(TREES[server])
    else:
        check_mariadb(args.mariadbd)


def measure(server: str, args: argparse.Namespace) -> tuple[str, dict[str, list[float]]]:
    """On a fresh ``server`` under callgrind: its version and every variant's instructions per transition."""
    counted: dict[str, list[float]] = {}
    with SERVERS[server](args) as (settings, pid, work):
        probe = pymysql.connect(**settings.connect_kwargs(database=False))
        with probe.cursor() as cur:
            cur.execute("SELECT VERSION()")
            version = str(cur.fetchone()[0])
        version = f"MariaDB {version.split('-')[0]}" if "mariadb" in version.lower() else f"MySQL {version}"
        probe.close()
        variants = setup(settings)
        if args.only:  # the bare CALL always: every ratio is against it
            wanted = {"bare CALL", *(w.strip() for w in args.only.split(";"))}
            variants = {name: run for name, run in variants.items() if name in wanted}
        for run in variants.values():
            run(20)  # warm: caches, the routines' first parse
        for _ in range(args.rounds):
            for name, run in variants.items():
                print(f"{server}: counting {name}...", file=sys.stderr)
                count = instructions(pid, work, functools.partial(run, args.calls))
                counted.setdefault(name, []).append(count / args.calls)
    return version, counted


def table(version: str, counted: dict[str, list[float]], args: argparse.Namespace) -> str:
    floor = statistics.median(counted["bare CALL"])
    lines = [
        f"{version}: server instructions per transition (callgrind, {args.calls} transitions per "
        f"measurement, median of {args.rounds}; one client, durable commits off)",
        "",
        "| variant | instructions per transition | vs bare CALL | measurements |",
        "|---|---:|---:|---|",
    ]
    for name, values in counted.items():
        median = statistics.median(values)
        lines.append(
            f"| {name} | {median / 1e3:,.0f} k | {median / floor:.2f}x | "
            + ", ".join(f"{v / 1e3:,.0f} k" for v in values)
            + " |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument(
        "--server",
        choices=(*SERVERS, "all"),
        default="all",
        help="which server to count on (all: MariaDB 10.11, then MariaDB 11.8, then MySQL 9.7; one table each)",
    )
    parser.add_argument("--calls", type=int, default=200, help="transitions per measurement")
    parser.add_argument("--rounds", type=int, default=2, help="measurements per variant (the median is shown)")
    parser.add_argument("--mariadbd", default="/usr/sbin/mariadbd")
    parser.add_argument("--only", help="variants to count, separated by ; (the bare CALL always is)")
    args = parser.parse_args(argv)
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            print(f"{tool} is not installed (Debian: apt-get install valgrind)", file=sys.stderr)
            return 2
    servers = []
    for server in SERVERS if args.server == "all" else (args.server,):
        try:  # before any counting: a server that cannot be had is said at once, not after the other's minutes
            check(server, args)
            servers.append(server)
        except ServerUnavailable as e:
            print(f"{server}: skipped: {e}", file=sys.stderr)
    if not servers:
        return 2
    for n, server in enumerate(servers):
        began = time.monotonic()
        version, counted = measure(server, args)
        print(("\n" if n else "") + table(version, counted, args), flush=True)
        print(f"{server}: {time.monotonic() - began:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
