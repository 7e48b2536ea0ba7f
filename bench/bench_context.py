"""What handing a transition's context to the trigger costs, by way of handing it (issue 49, item 4).

Issue 49 asks to move the writers that pass more than an event (send with options,
send_many, the engine's steps, the timers) onto the common call's one-variable context. A
first version of that (revision 0030, on the branch issue49-item4-packed-context) packed the
whole context into one variable and unpacked it in the trigger: the statements per
transition fell by 12 to 21, and the cost did not (callgrind: +2.4% for a send with
options). This benchmark shows why, without the rest of a transition around it: each way of
handing the context over (set by the procedure, taken and cleared by the trigger, the result
handed back and read) runs ``--iterations`` times in a loop inside one procedure, on each
server, and so does each kind of assignment alone:

* ``user variables (send_v5 and bu_v13)``: five context variables set, read into locals and
  cleared (six), the guard cleared and six result variables set, the result read back;
* ``one packed variable (0030)``: the context packed with its lengths into ``@fsm_source``,
  copied and cleared, unpacked into locals by SUBSTRING_INDEX and SUBSTRING, the result in one
  variable and unpacked by the procedure;
* ``the event alone (fire_v2 and bu_v13)``: ``'fire/<event>'``, what the common call does;
* ten assignments of one kind: a local INT, a local VARCHAR from a constant, a user
  variable, a local VARCHAR from SUBSTRING of a user variable.

Times are wall time per iteration less the empty loop's, medians of ``--rounds`` rounds, the
ways interleaved; the INSERT+COMMIT ceiling of the same run (one row, autocommit, a client
round trip) gives the scale.

    .venv/bin/python bench/bench_context.py --dsn mysql://root@127.0.0.1:3306/test --dsn mysql://root@127.0.0.1:3307/test
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid

import pymysql

from pyfsm.db import parse_dsn

ARGS = (
    "IN p_event TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, IN p_metadata LONGTEXT CHARACTER SET utf8mb4, "
    "IN p_handler TEXT CHARACTER SET utf8mb4"
)
LOCALS = """  DECLARE i INT DEFAULT 0;
  DECLARE v_event VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_metadata LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_handler, v_request_id, v_source TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_count_later, v_fire TINYINT DEFAULT 0;
  DECLARE v_tid, v_iid, v_version BIGINT UNSIGNED;
  DECLARE v_status VARCHAR(16);
  DECLARE v_from, v_to VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
"""
#: the result a transition hands back, as bu_v13 sets it
RESULTS_OLD = """    SET @fsm_guard = NULL, @fsm_last_transition_id = 1001, @fsm_last_status = 'running',
        @fsm_last_instance_id = 7, @fsm_last_from = 'a', @fsm_last_to = 'b', @fsm_last_version = 12;
    SET v_tid = @fsm_last_transition_id, v_iid = @fsm_last_instance_id, v_from = @fsm_last_from,
        v_to = @fsm_last_to, v_version = @fsm_last_version, v_status = @fsm_last_status;
"""
RESULTS_ONE = """    SET @fsm_guard = NULL, @fsm_last_transition_id = 1001, @fsm_last_status = 'running',
        @fsm_last = CONCAT_WS('/', 1001, 7, 12, 'running', 'a', 'b');
    SET v_tid = SUBSTRING_INDEX(@fsm_last, '/', 1),
        v_iid = SUBSTRING_INDEX(SUBSTRING_INDEX(@fsm_last, '/', 2), '/', -1),
        v_version = SUBSTRING_INDEX(SUBSTRING_INDEX(@fsm_last, '/', 3), '/', -1),
        v_status = SUBSTRING_INDEX(SUBSTRING_INDEX(@fsm_last, '/', 4), '/', -1),
        v_from = SUBSTRING_INDEX(SUBSTRING_INDEX(@fsm_last, '/', 5), '/', -1),
        v_to = SUBSTRING_INDEX(@fsm_last, '/', -1);
"""
PROCEDURES = {
    "empty loop": "ctx_empty",
    "user variables (send_v5 and bu_v13)": "ctx_user_variables",
    "one packed variable (0030)": "ctx_packed",
    "the event alone (fire_v2 and bu_v13)": "ctx_fire",
    "10 x a local INT": "ctx_int",
    "10 x a local VARCHAR from a constant": "ctx_varchar",
    "10 x a user variable": "ctx_user",
    "10 x a local VARCHAR from SUBSTRING(@v)": "ctx_substring",
}


def loop(name: str, body: str, declarations: str = LOCALS) -> str:
    """A procedure that runs ``body`` (statements, each line indented by four) n times."""
    return f"""CREATE PROCEDURE {name}(IN n INT, {ARGS})
BEGIN
{declarations}  WHILE i < n DO
{body}    SET i = i + 1;
  END WHILE;
END"""


DDL = [
    loop("ctx_empty", ""),
    loop(
        "ctx_user_variables",
        """    SET @fsm_event = p_event, @fsm_metadata = p_metadata, @fsm_handler = p_handler, @fsm_request_id = NULL,
        @fsm_source = 'procedure';
    SET v_event = @fsm_event, v_metadata = @fsm_metadata, v_handler = @fsm_handler,
        v_request_id = @fsm_request_id, v_source = @fsm_source;
    SET v_count_later = COALESCE(@fsm_count_later, 0) = 1;
    SET @fsm_event = NULL, @fsm_metadata = NULL, @fsm_handler = NULL, @fsm_request_id = NULL,
        @fsm_source = NULL, @fsm_count_later = NULL;
"""
        + RESULTS_OLD,
    ),
    loop(
        "ctx_packed",
        """    SET @fsm_source = CONCAT('ctx/p0/', CHAR_LENGTH(p_event), '/',
                             COALESCE(CHAR_LENGTH(p_handler), ''), '//',
                             COALESCE(CHAR_LENGTH(p_metadata), ''), '/', p_event,
                             COALESCE(p_handler, '') COLLATE utf8mb4_bin, COALESCE(p_metadata, '') COLLATE utf8mb4_bin);
    BEGIN
      DECLARE v_ctx LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
      DECLARE v_head VARCHAR(64) CHARACTER SET utf8mb4;
      DECLARE v_at, v_len INT;
      SET v_ctx = @fsm_source, @fsm_source = NULL;
      SET v_head = SUBSTRING_INDEX(v_ctx, '/', 6), v_fire = 1,
          v_source = IF(SUBSTRING(v_ctx, 5, 1) = 'e', 'engine', 'procedure'),
          v_count_later = SUBSTRING(v_ctx, 6, 1) = '1';
      SET v_at = CHAR_LENGTH(v_head) + 2,
          v_len = NULLIF(SUBSTRING_INDEX(SUBSTRING_INDEX(v_head, '/', 3), '/', -1), '');
      SET v_event = SUBSTRING(v_ctx, v_at, v_len), v_at = v_at + COALESCE(v_len, 0),
          v_len = NULLIF(SUBSTRING_INDEX(SUBSTRING_INDEX(v_head, '/', 4), '/', -1), '');
      SET v_handler = SUBSTRING(v_ctx, v_at, v_len), v_at = v_at + COALESCE(v_len, 0),
          v_len = NULLIF(SUBSTRING_INDEX(SUBSTRING_INDEX(v_head, '/', 5), '/', -1), '');
      SET v_request_id = SUBSTRING(v_ctx, v_at, v_len), v_at = v_at + COALESCE(v_len, 0),
          v_metadata = IF(SUBSTRING_INDEX(v_head, '/', -1) = '', NULL, SUBSTRING(v_ctx, v_at));
    END;
"""
        + RESULTS_ONE,
    ),
    loop(
        "ctx_fire",
        """    SET @fsm_source = CONCAT('fire/', p_event);
    SET v_event = SUBSTRING(@fsm_source, 6), v_source = 'procedure', v_fire = 1, @fsm_source = NULL;
"""
        + RESULTS_ONE,
    ),
]
# ten assignments of one kind: to ten locals of the kind, or to ten user variables
VARCHAR = "VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
for name, kind, value, targets in (
    ("ctx_int", "INT", "1", "a"),
    ("ctx_varchar", VARCHAR, "'x'", "a"),
    ("ctx_user", VARCHAR, "'x'", "@u"),
    ("ctx_substring", VARCHAR, "SUBSTRING(@fsm_probe, 5, 3)", "a"),
):
    declarations = f"""  DECLARE i INT DEFAULT 0;
  DECLARE {", ".join(f"a{k}" for k in range(10))} {kind};
  SET @fsm_probe = 'ctx/p0/3/5//15/paybench';
"""
    assignments = ", ".join(f"{targets}{k} = {value}" for k in range(10))
    DDL.append(loop(name, f"    SET {assignments};\n", declarations))


def measure(dsn: str, iterations: int, rounds: int) -> tuple[str, dict[str, float], float]:
    """(server version, us per iteration by way less the empty loop's, the ceiling's us per commit)."""
    settings = parse_dsn(dsn)
    database = f"pyfsm_ctx_{uuid.uuid4().hex[:8]}"
    admin = pymysql.connect(**{**settings.connect_kwargs(database=False), "autocommit": True})
    try:
        with admin.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{database}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
            cur.execute(f"USE `{database}`")
            cur.execute("SELECT VERSION()")
            version = str((cur.fetchone() or ("?",))[0])
            for ddl in DDL:
                cur.execute(ddl)
            cur.execute("CREATE TABLE ctx_ceiling (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB")
        times: dict[str, list[float]] = {name: [] for name in PROCEDURES}
        ceiling: list[float] = []
        with admin.cursor() as cur:
            for r in range(rounds):
                print(f"{version}: round {r + 1} of {rounds}", file=sys.stderr, flush=True)
                for name in list(PROCEDURES) if r % 2 == 0 else list(reversed(PROCEDURES)):
                    started = time.perf_counter()
                    cur.execute(
                        f"CALL {PROCEDURES[name]}(%s, 'pay', %s, 'bench')", (iterations, '{"by": "bench", "n": 42}')
                    )
                    while cur.nextset():
                        pass
                    times[name].append((time.perf_counter() - started) * 1e6 / iterations)
                started = time.perf_counter()
                for n in range(500):
                    cur.execute("INSERT INTO ctx_ceiling (v) VALUES (%s)", (n,))
                ceiling.append((time.perf_counter() - started) * 1e6 / 500)
            cur.execute(f"DROP DATABASE `{database}`")
    finally:
        admin.close()
    empty = statistics.median(times["empty loop"])
    per = {name: statistics.median(t) - empty for name, t in times.items() if name != "empty loop"}
    return version, per, statistics.median(ceiling)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", action="append", help="a server to measure (repeat for more)")
    parser.add_argument("--iterations", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results = [measure(dsn, args.iterations, args.rounds) for dsn in args.dsn or ["mysql://root@127.0.0.1:3306/test"]]
    print("| way | " + " | ".join(f"{v}: us per iteration | vs user variables" for v, _, _ in results) + " |")
    print("|---|" + "---:|---:|" * len(results))
    for name in PROCEDURES:
        if name == "empty loop":
            continue
        cells = []
        for _, per, _ in results:
            base = per["user variables (send_v5 and bu_v13)"]
            cells.append(
                f"{per[name]:.2f} | {per[name] / base:.2f}x" if not name.startswith("10 x") else f"{per[name]:.2f} |"
            )
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("| INSERT+COMMIT ceiling, us per commit | " + " | ".join(f"{c:.0f} |" for _, _, c in results) + " |")


if __name__ == "__main__":
    main()
