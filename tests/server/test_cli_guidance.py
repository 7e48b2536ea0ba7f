"""Errors and notes that say what to do (issue 34): a worker of a type that is not installed,
a server that cannot be reached, the deprecated procedures `pyfsm check` lists, `pyfsm types`,
and a top-level --help that tells the truth. Run as a user would: the CLI in a subprocess."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pymysql
import pytest
from helpers.cli import in_process, pyfsm
from helpers.common import granted_accounts

from pyfsm import Machine, Store, UnknownMachine, Worker
from pyfsm.cli import TEXT_ONLY
from pyfsm.db import Settings, parse_dsn
from pyfsm.errors import DatabaseUnavailable, from_mysql_error
from pyfsm.schema import install as schema

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "order.yaml"
#: `pyfsm worker helpers.engine_fixtures:CLI_CHECKOUT`: a process of type cli_checkout.
SPEC = "helpers.engine_fixtures:CLI_CHECKOUT"


def one_line(result: object) -> str:
    """The one `pyfsm:` line a failed command printed on stderr (exit 1)."""
    assert result.returncode == 1, (result.stdout, result.stderr)  # type: ignore[attr-defined]
    lines = result.stderr.splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 1 and lines[0].startswith("pyfsm: "), result.stderr  # type: ignore[attr-defined]
    return lines[0]


# -- 1. a worker of a type that is not installed ------------------------------------------------


def test_a_worker_of_a_type_not_installed_fails_before_it_starts(make_database) -> None:  # type: ignore[no-untyped-def]
    """`pyfsm worker SPEC --until-idle` for a type never installed: one line naming the
    `pyfsm install` of that very process, exit 1, before its loop (no banner, no claims
    logged again and again); once installed, the same command works."""
    dsn = make_database("pyfsm_guide").dsn()
    assert pyfsm("migrate", "--dsn", dsn).returncode == 0
    assert pyfsm("install", "--dsn", dsn, str(EXAMPLE)).returncode == 0  # another type: order

    result = pyfsm("worker", "--dsn", dsn, SPEC, "--until-idle", "5")
    assert one_line(result) == (
        "pyfsm: UnknownMachine (31002): machine type 'cli_checkout' is not installed in this database "
        f"(installed: order), so a worker of process '{SPEC}' would claim nothing: run `pyfsm install {SPEC}` "
        "as the owner of pyfsm's schema, then start the worker again"
    )
    assert result.stdout == ""

    # a type a DBA defined in SQL, without its tables (no `pyfsm sync` yet): said so
    conn = pymysql.connect(**parse_dsn(dsn).connect_kwargs())
    try:
        from helpers.engine_fixtures import CLI_CHECKOUT

        conn.cursor().execute("CALL fsm_define_v6('cli_checkout', %s)", (CLI_CHECKOUT.machine.to_json(),))
    finally:
        conn.close()
    defined = one_line(pyfsm("worker", "--dsn", dsn, SPEC, "--until-idle", "5"))
    assert defined.startswith(
        "pyfsm: UnknownMachine (31002): machine type 'cli_checkout' is defined but its "
        "tables are not installed, so a worker of process"
    ), defined
    assert f"run `pyfsm install {SPEC}`" in defined

    installed = pyfsm("install", "--dsn", dsn, SPEC)  # what the message says to run
    assert installed.returncode == 0, installed.stderr
    worked = pyfsm("worker", "--dsn", dsn, SPEC, "--until-idle", "0.3", "--json")
    assert worked.returncode == 0, worked.stderr
    assert json.loads(worked.stdout)["errors"] == 0


def test_a_worker_in_python_fails_clearly_too(make_database) -> None:  # type: ignore[no-untyped-def]
    """Worker.run() raises UnknownMachine saying how to install the type, before it claims;
    so does run_once() when the claim finds no such type, instead of logging it for ever."""
    from helpers.engine_fixtures import checkout

    settings = make_database("pyfsm_guide")
    process = checkout("never_installed")
    with Store(settings.dsn()) as store:
        store.migrate()
        worker = Worker(store, [process], idle_min=0.01, idle_max=0.05)
        with pytest.raises(UnknownMachine) as info:
            worker.run(handle_signals=False, until_idle=5)
        err = info.value
        assert (err.errno, err.machine, err.fields["installed"]) == (31002, "never_installed", [])
        assert str(err) == (
            "machine type 'never_installed' is not installed in this database (installed: none), so a worker of "
            "process 'never_installed' would claim nothing: install it as the owner of pyfsm's schema "
            "(store.define(process.machine), or `pyfsm install module.path:attribute` naming the process), then "
            "start the worker again"
        )
        once = Worker(store, [process])
        try:
            with pytest.raises(UnknownMachine) as again:
                once.run_once()
        finally:
            once.close()
        assert str(again.value) == str(err) and once.stats.errors == 1
        store.define(process.machine)
        process.start(store, "c-1", run_immediately=False)
        stats = Worker(store, [process], idle_min=0.01, idle_max=0.05).run(handle_signals=False, until_idle=0.3)
        assert stats.errors == 0 and store.get(process.machine, "c-1").status == "completed"


# -- 2. a server that cannot be reached ---------------------------------------------------------


def closed_port() -> int:
    """A local TCP port nothing listens on (just freed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


ADVICE = (
    "check that a MySQL server runs at {at} and that this host can reach it, or point the DSN (--dsn or "
    "$PYFSM_DSN) at one that does (in pyfsm's own repository, `make mysql` starts the project's MySQL 9.7 "
    "on 127.0.0.1:3307)"
)


def test_an_unreachable_server_is_one_line_saying_what_to_try() -> None:
    """Every command, `pyfsm demo` too, prints the same one line: the server, what the driver
    saw, and what to try; exit 1."""
    port = closed_port()
    dsn = f"mysql://root@127.0.0.1:{port}/pyfsm_nowhere"
    lines = {
        command: one_line(pyfsm(*command, "--dsn", dsn))
        for command in (
            ("stats",),
            ("check",),
            ("migrate",),
            ("show", "order", "o-1"),
            ("types",),
            ("demo", "--orders", "1"),
        )
    }
    expected = (
        f"pyfsm: DatabaseUnavailable (2003): the MySQL server at 127.0.0.1:{port} is unavailable: Can't "
        "connect to MySQL server on '127.0.0.1' ([Errno 111] Connection refused): "
        + ADVICE.format(at=f"127.0.0.1:{port}")
    )
    assert lines == dict.fromkeys(lines, expected)

    unknown = one_line(pyfsm("stats", "--dsn", "mysql://root@pyfsm-no-such-host.invalid:3306/x"))
    assert unknown.startswith(
        "pyfsm: DatabaseUnavailable (2003): the MySQL server at pyfsm-no-such-host.invalid:3306 is unavailable: "
    ), unknown
    assert unknown.endswith(ADVICE.format(at="pyfsm-no-such-host.invalid:3306")), unknown


def test_cannot_connect_and_unknown_host_are_database_unavailable_by_number() -> None:
    """2003 (PyMySQL's for both) and 2005 (a C client's unknown host) map by number, whatever the text."""
    for errno in (2003, 2005):
        err = from_mysql_error(pymysql.err.OperationalError(errno, "anything at all"))
        assert type(err) is DatabaseUnavailable and err.errno == errno and err.retryable


def test_several_servers_none_reachable_say_so_once(make_database) -> None:  # type: ignore[no-untyped-def]
    first, second = closed_port(), closed_port()
    line = one_line(pyfsm("check", "--dsn", f"mysql://root@127.0.0.1:{first},127.0.0.1:{second}/x"))
    assert line.startswith(
        f"pyfsm: DatabaseUnavailable (2003): none of the MySQL servers 127.0.0.1:{first}, 127.0.0.1:{second} answered"
    ), line
    assert line.endswith(ADVICE.format(at=f"one of 127.0.0.1:{first}, 127.0.0.1:{second}")), line


# -- 3. pyfsm check: deprecated procedures are information ------------------------------------


def test_check_on_a_fresh_database_calls_its_deprecated_procedures_information(make_database) -> None:  # type: ignore[no-untyped-def]
    dsn = make_database("pyfsm_guide").dsn()
    assert pyfsm("migrate", "--dsn", dsn).returncode == 0
    text = pyfsm("check", "--dsn", dsn)
    assert text.returncode == 0 and text.stderr == "", text.stderr
    count = len(schema.DEPRECATED_FILES)  # no type yet: the global ones
    lines = text.stdout.splitlines()
    assert lines[0] == f"pyfsm schema is at {schema.HEAD_REVISION}, as this pyfsm needs"
    assert lines[1].startswith(
        f"info: {count} deprecated procedures are installed for compatibility (in every "
        "database, fresh or migrated, until pyfsm 0.4.0 removes them); nothing to do unless "
        "your own code or SQL calls them: then call the replacement instead"
    ), lines[1]
    assert len(lines) == 2 + count and "warning" not in text.stdout.lower() and "move their callers" not in text.stdout

    data = json.loads(pyfsm("check", "--dsn", dsn, "--json").stdout)
    assert data["ok"] is True and data["revision"] == schema.HEAD_REVISION
    [note] = data["notes"]
    assert (note["level"], note["kind"], note["count"]) == ("info", "deprecated_procedures", count)
    assert lines[1] == f"info: {note['message']}:"
    assert len(data["deprecated"]) == count and {d["level"] for d in data["deprecated"]} == {"info"}
    assert {"name", "replaced_by", "deprecated_in", "removed_in"} <= set(data["deprecated"][0])


# -- 4. pyfsm types (ls) ------------------------------------------------------------------------


DOOR = Machine(
    "door", states=["shut", "open"], start=["shut"], transitions=[("open", "shut", "open"), ("close", "open", "shut")]
)


def test_types_lists_each_type_with_its_version_states_instances_and_tables(make_database, server) -> None:  # type: ignore[no-untyped-def]
    settings: Settings = make_database("pyfsm_guide")
    dsn = settings.dsn()
    assert pyfsm("migrate", "--dsn", dsn).returncode == 0
    empty = pyfsm("types", "--dsn", dsn)
    assert (empty.returncode, empty.stdout) == (
        0,
        "no machine types defined: `pyfsm install FILE|module.path:attribute` defines one\n",
    ), empty.stderr
    assert json.loads(pyfsm("types", "--dsn", dsn, "--json").stdout) == []

    assert pyfsm("install", "--dsn", dsn, str(EXAMPLE)).returncode == 0
    with Store(dsn) as store:
        store.define(DOOR)
        store.define(
            Machine(
                "door",
                states=[*DOOR.states, "locked"],
                start=["shut"],
                transitions=[*DOOR.transitions, ("lock", "shut", "locked")],
            )
        )  # version 2, 3 states
        for key in ("o-1", "o-2", "o-3"):
            store.create("order", key)
        store.send("order", "o-1", "pay")
        store.create("door", "d-1")
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        with conn.cursor() as cur:  # a DBA's: bare has no tables yet; door's version 3 has a timeout, no triggers
            cur.execute(
                "CALL fsm_define_v6('bare', %s)",
                (Machine("bare", states=["a", "b"], start=["a"], transitions=[("go", "a", "b")]).to_json(),),
            )
            timed = Machine(
                "door",
                states=["shut", "open", "locked"],
                start=["shut"],
                transitions=[*DOOR.transitions, ("lock", "shut", "locked")],
                timeouts={"open": {"after": 60, "event": "close"}},
            )
            cur.execute("CALL fsm_define_v6('door', %s)", (timed.to_json(),))
    finally:
        conn.close()

    expected = [
        {"machine": "bare", "current_version": 1, "states": 2, "instances": 0, "tables_ready": False},
        {"machine": "door", "current_version": 3, "states": 3, "instances": 1, "tables_ready": False},
        {"machine": "order", "current_version": 1, "states": 6, "instances": 3, "tables_ready": True},
    ]
    assert json.loads(pyfsm("types", "--dsn", dsn, "--json").stdout) == expected
    assert json.loads(pyfsm("ls", "--dsn", dsn, "--json").stdout) == expected  # the alias
    text = pyfsm("types", "--dsn", dsn)
    assert text.returncode == 0, text.stderr
    assert re.split(r"\s{2,}", text.stdout.splitlines()[0]) == ["machine", "version", "states", "instances", "tables"]
    rows = [re.split(r"\s{2,}", line) for line in text.stdout.splitlines()[1:]]
    assert rows == [
        ["bare", "1", "2", "0", "not ready: run `pyfsm sync bare`"],
        ["door", "3", "3", "1", "not ready: run `pyfsm sync door`"],
        ["order", "1", "6", "3", "ready"],
    ]

    # a reporting account reads the views only: whether the tables are installed (not the timer triggers)
    with granted_accounts(server, settings, ["reporting"], "pyfsm_gd") as accounts:
        seen = pyfsm("types", "--dsn", accounts["reporting"].dsn(), "--json")
        assert seen.returncode == 0, seen.stderr
        assert json.loads(seen.stdout) == [{**t, "tables_ready": t["machine"] != "bare"} for t in expected]

    assert pyfsm("sync", "--dsn", dsn, "bare").returncode == 0  # what the lines say to run
    assert pyfsm("sync", "--dsn", dsn, "door").returncode == 0
    assert [t["tables_ready"] for t in json.loads(pyfsm("types", "--dsn", dsn, "--json").stdout)] == [True] * 3


# -- 6. the top-level help ----------------------------------------------------------------------


def test_the_top_level_help_says_which_commands_take_json() -> None:
    """It names the commands without --json, and those are exactly the ones whose help lacks it."""
    top = in_process("--help")
    assert top.returncode == 0
    [line] = [x for x in top.stdout.splitlines() if x.startswith("every command takes")]
    named = set(re.search(r"; all but (.+) \(text only\) take --json$", line).group(1).split(" and "))  # type: ignore[union-attr]
    from helpers.docs_names import known_commands

    from pyfsm.cli import build_parser

    without = {c for c, options in known_commands(build_parser()).items() if "--json" not in options}
    assert named == without == set(TEXT_ONLY) == {"demo", "web"}


def test_the_stored_docstrings_say_what_state_at_returns() -> None:
    from pyfsm import Store as S

    doc = S.state_at.__doc__ or ""
    assert "StatePeriod" in doc and "dict" not in doc
    assert "TypeStats" in (S.stats.__doc__ or "") and "dict" not in (S.stats.__doc__ or "")
