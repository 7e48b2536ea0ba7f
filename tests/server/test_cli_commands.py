"""Every `pyfsm` command through a subprocess: exit codes, --json parsed, one-line errors, --help."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import in_process
from helpers.common import admin

from pyfsm import Store
from pyfsm.cli import TEXT_ONLY, build_parser
from pyfsm.schema import install as schema

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "order.yaml"


def pyfsm(*args: str, env_dsn: str | None = None) -> subprocess.CompletedProcess[str]:
    """`pyfsm ARGS` as a user runs it, with $PYFSM_DSN set to ``env_dsn`` (unset when None)."""
    env = {k: v for k, v in os.environ.items() if k != "PYFSM_DSN"}
    if env_dsn is not None:
        env["PYFSM_DSN"] = env_dsn
    return subprocess.run(
        [sys.executable, "-m", "pyfsm", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[1],
        env=env,
    )


def ok(*args: str) -> Any:
    """Run a command with --json; it must succeed; return its parsed output."""
    result = pyfsm(*args, "--json")
    assert result.returncode == 0, (args, result.stderr)
    return json.loads(result.stdout)


def fails(*args: str, errno: int | None = None) -> str:
    result = pyfsm(*args)
    assert result.returncode == 1, (args, result.stdout)
    assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("pyfsm: "), result.stderr
    if errno is not None:
        assert f"({errno})" in result.stderr, result.stderr
    return result.stderr


def test_every_command_has_help_with_an_example() -> None:
    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    required = {
        "migrate",
        "install",
        "create",
        "send",
        "show",
        "history",
        "list",
        "counts",
        "pause",
        "resume",
        "retry",
        "locks",
        "unlock",
        "worker",
        "relay",
        "graph",
        "stats",
        "grant",
    }
    assert required <= set(commands)
    assert pyfsm("--help").returncode == 0  # the entry point itself, once
    for command in commands:
        result = in_process(command, "--help")
        assert result.returncode == 0 and "example:" in result.stdout and "--dsn" in result.stdout, command
        # the demo only narrates, the console serves pages
        assert ("--json" in result.stdout) == (command not in TEXT_ONLY), command


def test_usage_errors_and_odd_input_stay_one_line(make_database) -> None:  # type: ignore[no-untyped-def]
    usage = pyfsm("send", "order")  # arguments missing
    assert usage.returncode == 2 and len(usage.stderr.splitlines()) == 1 and usage.stderr.startswith("pyfsm: usage")
    settings = make_database("pyfsm_cli")
    dsn = settings.dsn()
    ok("migrate", "--dsn", dsn)
    ok("install", "--dsn", dsn, str(EXAMPLE))
    odd = pyfsm("show", "--dsn", dsn, "order", "a\nb")  # the key is in the message: UnknownInstance
    assert odd.returncode == 1 and len(odd.stderr.splitlines()) == 1 and "(31003)" in odd.stderr, odd.stderr
    # a database without pyfsm on the test server (not a fixed address: 3306 may be another server, or none)
    no_views = pyfsm("graph", "--dsn", replace(settings, database="mysql").dsn(), "order")
    assert no_views.returncode == 1 and "SchemaVersionMismatch (31015)" in no_views.stderr, no_views.stderr


def test_instance_commands_from_a_yaml_definition(make_database, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    dsn = make_database("pyfsm_cli").dsn()
    assert ok("migrate", "--dsn", dsn) == {"revision": schema.HEAD_REVISION, "database_created": False}
    [installed] = ok("install", "--dsn", dsn, str(EXAMPLE))
    assert installed == {"machine": "order", "version": 1, "changed": True, "source": str(EXAMPLE)}
    assert ok("install", "--dsn", dsn, str(EXAMPLE))[0]["changed"] is False

    created = ok("create", "--dsn", dsn, "order", "o-1", "--data", '{"total": 42}', "--lookup-key", "c-7")
    assert (created["to_state"], created["version"], created["created"]) == ("new", 1, True)
    sent = ok("send", "--dsn", dsn, "order", "o-1", "pay", "--metadata", '{"by": "ops"}', "--request-id", "r-1")
    assert (sent["from_state"], sent["to_state"], sent["version"], sent["replayed"]) == ("new", "paid", 2, False)
    assert ok("send", "--dsn", dsn, "order", "o-1", "pay", "--request-id", "r-1")["replayed"] is True
    ok("send", "--dsn", dsn, "order", "o-2", "pay")  # creates o-2 on the way
    shown = ok("show", "--dsn", dsn, "order", "o-1")
    assert (shown["state"], shown["data"], shown["lookup_key"], shown["version"]) == ("paid", {"total": 42}, "c-7", 2)
    history = ok("history", "--dsn", dsn, "order", "o-1")
    assert [(h["event"], h["to_state"], h["metadata"]) for h in history] == [
        (None, "new", {}),
        ("pay", "paid", {"by": "ops"}),
    ]
    assert [i["key"] for i in ok("list", "--dsn", dsn, "order", "paid")] == ["o-1", "o-2"]
    assert [i["key"] for i in ok("list", "--dsn", dsn, "order", "paid", "--after-id", "1", "--limit", "1")] == ["o-2"]
    assert ok("counts", "--dsn", dsn, "order") == {"paid": 2}
    [stats] = ok("stats", "--dsn", dsn)
    # no handler runs them: idle, not running (docs/reporting.md's words)
    assert (stats["machine"], stats["instances"], stats["running"], stats["idle"]) == ("order", 2, 0, 2)

    text = pyfsm("history", "--dsn", dsn, "order", "o-1")  # the human form: a table
    assert text.returncode == 0 and re.search(r"^2\s+pay\s+new\s+paid\s", text.stdout, re.M), text.stdout
    assert "paid" in pyfsm("counts", "--dsn", dsn, "order").stdout

    # errors: one line, the error's class and number, exit 1, nothing changed
    fails("send", "--dsn", dsn, "order", "o-1", "deliver", errno=31005)
    fails("send", "--dsn", dsn, "order", "o-1", "ship", "--expected-version", "1", errno=31007)
    fails("send", "--dsn", dsn, "order", "o-1", "ship", "--data", "[1, 2]", errno=31008)
    fails("send", "--dsn", dsn, "order", "o-1", "ship", "--data", "{nope", errno=31008)
    fails("show", "--dsn", dsn, "order", "o-404", errno=31003)
    fails("counts", "--dsn", dsn, "nosuch", errno=31002)
    zero = pyfsm("list", "--dsn", dsn, "order", "paid", "--limit", "0")  # out of range: a usage error, as every number
    assert zero.returncode == 2 and zero.stderr.startswith("pyfsm: usage: ") and len(zero.stderr.splitlines()) == 1
    assert ok("show", "--dsn", dsn, "order", "o-1")["version"] == 2

    bad = tmp_path / "bad.yaml"
    bad.write_text(EXAMPLE.read_text().replace("to: shipped}", "to: shiped}"))
    assert "transitions[2].to" in fails("install", "--dsn", dsn, str(bad), errno=31001)
    fails("install", "--dsn", dsn, "no_such_module:thing", errno=31009)
    missing = pyfsm("show", "order", "o-1")
    assert missing.returncode == 1 and "PYFSM_DSN" in missing.stderr
    assert json.loads(pyfsm("show", "order", "o-1", "--json", env_dsn=dsn).stdout)["state"] == "paid"


def test_graph_mermaid_dot_counts_and_path(make_database, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from pyfsm.definition_file import load_machines
    from pyfsm.reporting.diagram import edges

    dsn = make_database("pyfsm_cli").dsn()
    ok("migrate", "--dsn", dsn)
    ok("install", "--dsn", dsn, str(EXAMPLE))
    [machine] = load_machines(EXAMPLE)
    with Store(dsn) as store:
        for key, events in {"a": ["pay", "ship", "deliver"], "b": ["pay", "unpay", "cancel"], "c": ["pay"]}.items():
            for event in events:
                store.send("order", key, event)
    mermaid = ok("graph", "--dsn", dsn, "order")["text"]
    assert mermaid.startswith("stateDiagram-v2")
    for state in machine.states:
        assert re.search(rf"\bs_{state}\b", mermaid), state
    for source, event, target in edges(machine):
        assert re.search(rf"^\s*s_{source} --> s_{target}\s*:\s*{event}\b", mermaid, re.M), (source, event)

    dot = ok("graph", "--dsn", dsn, "order", "--format", "dot", "--counts", "--instance", "b")["text"]
    assert dot.startswith("digraph")
    for source, event, target in edges(machine):
        assert re.search(rf'"state_{source}" -> "state_{target}" \[[^\]]*label="{event}', dot), (source, event)
    assert re.search(r'"state_paid" \[label="paid\\n\(1\)"', dot), dot  # c is the one instance in paid
    assert re.search(r'"state_new" -> "state_paid" \[label="pay \(3\)', dot), dot  # a, b and c paid once each
    for source, target in (("new", "paid"), ("paid", "new"), ("new", "cancelled")):  # b's path is drawn bold
        assert re.search(rf'"state_{source}" -> "state_{target}" \[[^\]]*penwidth', dot), (source, target)
    assert not re.search(r'"state_paid" -> "state_shipped" \[[^\]]*penwidth', dot)

    written = tmp_path / "order.mmd"
    assert ok("graph", "--dsn", dsn, "order", "--output", str(written))["written"] == str(written)
    assert written.read_text().strip() == mermaid
    assert ok("graph", str(EXAMPLE))["text"] == mermaid  # from the file, no database
    if shutil.which("dot") is None:  # without Graphviz: its own error, nothing written
        no_dot = fails("graph", "--dsn", dsn, "order", "--output", str(tmp_path / "order.svg"), errno=31023)
        assert "Graphviz" in no_dot and not (tmp_path / "order.svg").exists()
    else:
        ok("graph", "--dsn", dsn, "order", "--output", str(tmp_path / "order.svg"))
        assert "<svg" in (tmp_path / "order.svg").read_text()
    fails("graph", "--dsn", dsn, "order", "--instance", "zzz", errno=31003)
    fails("graph", "--dsn", dsn, "order", "--output", str(tmp_path / "x.pdf"), errno=31009)


def test_grant_creates_accounts_the_cli_can_use(server, make_database) -> None:  # type: ignore[no-untyped-def]
    settings = make_database("pyfsm_cli")
    dsn = settings.dsn()
    ok("migrate", "--dsn", dsn)
    ok("install", "--dsn", dsn, str(EXAMPLE))
    tag = uuid.uuid4().hex[:8]
    app, analyst = f"cli_app_{tag}", f"cli_rep_{tag}"
    alone = pyfsm("grant", "--dsn", dsn, "--app", app, "--print")  # no such account yet: printed all the same
    assert alone.returncode == 0 and f"CREATE USER '{app}'@'%' IDENTIFIED BY '***';" in alone.stdout, alone
    printed = pyfsm("grant", "--dsn", dsn, "--app", app, "--create", "--print")
    assert printed.returncode == 0 and printed.stdout.startswith(f"CREATE USER '{app}'@'%' IDENTIFIED BY '***';")
    assert f"GRANT EXECUTE ON PROCEDURE `{settings.database}`.`fsm_send_v1`" in printed.stdout
    assert "fsm_define_v3" not in printed.stdout  # definitions are the owner's
    try:
        granted = ok("grant", "--dsn", dsn, "--app", app, "--reporting", f"{analyst}@%", "--create")
        passwords = {a["user"]: a["password"] for a in granted["accounts"]}
        again = ok("grant", "--dsn", dsn, "--app", app, "--create")  # picks up new objects, keeps the password
        assert again["accounts"][0]["created"] is False and "password" not in again["accounts"][0]
        assert set(passwords) == {app, analyst} and all(len(p) >= 20 for p in passwords.values())
        app_dsn = f"mysql://{app}:{passwords[app]}@{settings.host}:{settings.port}/{settings.database}"
        report_dsn = f"mysql://{analyst}:{passwords[analyst]}@{settings.host}:{settings.port}/{settings.database}"
        assert ok("send", "--dsn", app_dsn, "order", "g-1", "pay")["to_state"] == "paid"
        assert ok("counts", "--dsn", app_dsn, "order") == {"paid": 1}
        fails("graph", "--dsn", app_dsn, "order", errno=1142)  # the app account reads no views
        assert "s_paid" in ok("graph", "--dsn", report_dsn, "order", "--counts")["text"]  # the analyst does
        fails("send", "--dsn", report_dsn, "order", "g-1", "ship", errno=1370)  # the analyst may call no procedure
        fails("grant", "--dsn", dsn, "--app", "x'; DROP", errno=31009)
    finally:
        conn = admin(server)
        try:
            for user in (app, analyst):
                conn.cursor().execute(f"DROP USER IF EXISTS '{user}'@'%'")
        finally:
            conn.close()


def test_worker_drains_the_queue_with_a_progress_bar(make_database) -> None:  # type: ignore[no-untyped-def]
    from helpers.engine_fixtures import CLI_CHECKOUT

    dsn = make_database("pyfsm_cli").dsn()
    ok("migrate", "--dsn", dsn)
    with Store(dsn) as store:
        store.define(CLI_CHECKOUT.machine)
        for n in range(12):
            store.create("cli_checkout", f"w-{n}", data={"items": 1})
            store.enqueue("cli_checkout", f"w-{n}")
    result = pyfsm(
        "worker", "--dsn", dsn, "helpers.engine_fixtures:CLI_CHECKOUT", "--until-idle", "0.5", "--progress", "--json"
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["runs"] == 12
    assert "queue [" in result.stderr and "12/12" in result.stderr
    with Store(dsn) as store:
        assert store.counts("cli_checkout") == {"done": 12}


@pytest.mark.parametrize("bad", ["--dsn=postgres://x@y/z", "--dsn=mysql://root@127.0.0.1:1/x"])
def test_bad_dsn_is_one_line(bad: str) -> None:
    fails("counts", bad, "order")
