"""The `pyfsm` command: exit codes and one-line errors, run as a user would."""

from __future__ import annotations

import json

from helpers.cli import in_process, pyfsm


def test_migrate_check_and_define(make_database) -> None:  # type: ignore[no-untyped-def]
    dsn = make_database("pyfsm_cli").dsn()
    before = pyfsm("check", "--dsn", dsn)
    assert before.returncode == 1 and "pyfsm migrate" in before.stderr and len(before.stderr.splitlines()) == 1
    assert pyfsm("migrate", "--dsn", dsn).returncode == 0
    assert pyfsm("check", "--dsn", dsn).returncode == 0
    defined = pyfsm("define", "--dsn", dsn, "pyfsm.demo:ORDER")
    assert defined.returncode == 0, defined.stderr
    assert json.loads(defined.stdout) == {"machine": "demo_order", "version": 1, "changed": True}
    again = pyfsm("define", "--dsn", dsn, "pyfsm.demo:ORDER")
    assert json.loads(again.stdout)["changed"] is False


def test_check_lists_the_deprecated_procedures(make_database) -> None:  # type: ignore[no-untyped-def]
    """Procedures newer versions replace stay in every database until the release that
    removes them: `pyfsm check` names each with its replacement and passes."""
    from helpers.common import order_machine
    from helpers.schemas import install_type_as_of

    from pyfsm.schema import install as schema

    upgraded = make_database("pyfsm_cli")
    schema.migrate(upgraded, revision="0010")
    install_type_as_of(upgraded, order_machine("order_line"), "v9")
    schema.migrate(upgraded)
    result = pyfsm("check", "--dsn", upgraded.dsn(), "--json")
    assert result.returncode == 0, result.stderr
    found = {d["name"]: (d["replaced_by"], d["removed_in"]) for d in json.loads(result.stdout)["deprecated"]}
    assert found == {
        "fsm_define_v1": ("fsm_define_v8", "0.4.0"),
        "fsm_define_v2": ("fsm_define_v8", "0.4.0"),
        "fsm_define_v3": ("fsm_define_v8", "0.4.0"),
        "fsm_define_v4": ("fsm_define_v8", "0.4.0"),
        "fsm_counts_v1": ("fsm_counts_v2", "0.4.0"),
        "fsm_force_unlock_v1": ("fsm_force_unlock_v2", "0.4.0"),
        "fsm_send_v1": ("fsm_send_v4", "0.4.0"),
        "fsm_order_line_send_v1": ("fsm_order_line_send_v5", "0.4.0"),
        "fsm_step_v1": ("fsm_{type}_step_v2", "0.4.0"),
        "fsm_stats_v1": ("fsm_stats_v3", "0.4.0"),
        "fsm_lock_v1": ("fsm_lock_v2", "0.4.0"),
        "fsm_order_line_send_many_v1": ("fsm_order_line_send_many_v3", "0.4.0"),
        "fsm_define_v5": ("fsm_define_v8", "0.4.0"),
        "fsm_resume_v1": ("fsm_resume_v2", "0.4.0"),
        "fsm_operator_action_v1": ("fsm_operator_action_v3", "0.4.0"),
        "fsm_enqueue_v1": ("fsm_enqueue_v2", "0.4.0"),
        "fsm_send_v2": ("fsm_send_v4", "0.4.0"),
        "fsm_order_line_send_v2": ("fsm_order_line_send_v5", "0.4.0"),
        "fsm_send_at_v1": ("fsm_send_at_v2", "0.4.0"),
        "fsm_define_v6": ("fsm_define_v8", "0.4.0"),
        "fsm_send_v3": ("fsm_send_v4", "0.4.0"),
        "fsm_order_line_send_v3": ("fsm_order_line_send_v5", "0.4.0"),
        "fsm_define_v7": ("fsm_define_v8", "0.4.0"),
        "fsm_fire_timers_v1": ("fsm_fire_timers_v3", "0.4.0"),
        # revision 0025's
        "fsm_order_line_send_v4": ("fsm_order_line_send_v5", "0.4.0"),
        "fsm_order_line_send_many_v2": ("fsm_order_line_send_many_v3", "0.4.0"),
        "fsm_stats_v2": ("fsm_stats_v3", "0.4.0"),
        "fsm_fire_timers_v2": ("fsm_fire_timers_v3", "0.4.0"),
        "fsm_operator_action_v2": ("fsm_operator_action_v3", "0.4.0"),
        # revision 0028's
        "fsm_order_line_fire_v1": ("fsm_order_line_fire_v2", "0.4.0"),
    }
    text = pyfsm("check", "--dsn", upgraded.dsn()).stdout
    assert "30 deprecated procedures" in text and "fsm_order_line_send_v1: use fsm_order_line_send_v5" in text


def test_errors_are_one_line_with_a_nonzero_exit() -> None:
    for args in (
        ("check", "--dsn", "mysql://root@127.0.0.1:3306"),  # no database in the DSN
        ("check", "--dsn", "postgres://x@y/z"),  # not a MySQL DSN
        ("define", "--dsn", "mysql://root@127.0.0.1:3306/x", "no_such_module:thing"),
    ):
        result = pyfsm(*args)
        assert result.returncode == 1, args
        assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("pyfsm: "), result.stderr


def test_migrate_creates_a_missing_database_and_says_so(make_database, server) -> None:  # type: ignore[no-untyped-def]
    from helpers.common import missing_database

    settings = missing_database(make_database, server)
    created = pyfsm("migrate", "--dsn", settings.dsn())
    assert created.returncode == 0, created.stderr
    assert created.stdout.splitlines()[0] == (
        f"created database `{settings.database}` (CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)"
    )
    again = pyfsm("migrate", "--dsn", settings.dsn(), "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["database_created"] is False
    assert pyfsm("check", "--dsn", settings.dsn()).returncode == 0


def test_refusals_of_the_dsn_are_one_line_saying_what_to_fix(make_database, server, dsn: str) -> None:  # type: ignore[no-untyped-def]
    """A wrong password, an unknown database, and a migration whose account may not create
    the database: exit 1, one `pyfsm:` line naming the class, its number and the fix."""
    from dataclasses import replace

    from helpers.common import granted_accounts, missing_database

    from pyfsm.db import parse_dsn

    def refused(*args: str) -> str:
        result = pyfsm(*args)
        assert result.returncode == 1 and len(result.stderr.splitlines()) == 1, result.stderr
        assert not result.stdout and result.stderr.startswith("pyfsm: "), result.stderr
        return result.stderr

    missing = missing_database(make_database, server)
    unknown = refused("check", "--dsn", missing.dsn())
    assert unknown.startswith("pyfsm: UnknownDatabase (1049): ") and "`pyfsm migrate`" in unknown
    with granted_accounts(server, parse_dsn(dsn), ["app"], "pyfsm_clipw") as accounts:
        app = accounts["app"]
        login = refused("counts", "--dsn", replace(app, password="not-" + app.password).dsn(), "order")
        assert login.startswith("pyfsm: LoginFailed (1045): the MySQL server at ")
        assert "check the user name and password" in login
        denied = refused("migrate", "--dsn", replace(app, database=missing.database).dsn())
        assert denied.startswith("pyfsm: AccessDenied (1044): ")
        assert f"CREATE DATABASE IF NOT EXISTS `{missing.database}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin" in denied


def test_help_shows_an_example() -> None:
    for command in (
        "migrate",
        "check",
        "define",
        "sync",
        "demo",
        "locks",
        "unlock",
        "worker",
        "pause",
        "resume",
        "retry",
        "failed",
    ):
        result = in_process(command, "--help")
        assert result.returncode == 0 and "example:" in result.stdout, command


def test_locks_and_unlock(make_database) -> None:  # type: ignore[no-untyped-def]
    from pyfsm import Machine, Store

    dsn = make_database("pyfsm_cli").dsn()
    assert pyfsm("migrate", "--dsn", dsn).returncode == 0
    with Store(dsn) as store:
        store.define(
            Machine("job", states=["a", "b"], start=["a"], transitions=[("go", "a", "b")], uses_global_lock=True)
        )
        store.create("job", "j-1", lookup_key="acct-1")
        lease = store.lock("job", "j-1", owner="cli-test:1", heartbeat=False)
        listed = pyfsm("locks", "--dsn", dsn, "--json")
        assert listed.returncode == 0, listed.stderr
        [row] = json.loads(listed.stdout)
        assert (row["kind"], row["lookup_key"], row["owner"], row["instance_key"]) == (
            "global",
            "acct-1",
            "cli-test:1",
            "j-1",
        )
        assert "cli-test:1" in pyfsm("locks", "--dsn", dsn).stdout
        missing = pyfsm("unlock", "--dsn", dsn, "acct-1")  # a reason is required
        assert missing.returncode != 0 and "--reason" in missing.stderr
        done = pyfsm("unlock", "--dsn", dsn, "acct-1", "--reason", "test")
        assert done.returncode == 0 and "released the global lock of acct-1 held by cli-test:1" in done.stdout
        assert json.loads(pyfsm("locks", "--dsn", dsn, "--json").stdout) == []
        assert lease.release() is False  # it had been taken away


def test_worker_pause_resume_retry_failed(make_database) -> None:  # type: ignore[no-untyped-def]
    from pyfsm import Store

    dsn = make_database("pyfsm_cli").dsn()
    assert pyfsm("migrate", "--dsn", dsn).returncode == 0
    with Store(dsn) as store:
        from helpers.engine_fixtures import CLI_CHECKOUT

        store.define(CLI_CHECKOUT.machine)
        for key in ("a", "b"):
            store.create("cli_checkout", key, data={"items": 1})
            store.enqueue("cli_checkout", key)
        paused = pyfsm("pause", "--dsn", dsn, "cli_checkout", "b", "--json")
        assert paused.returncode == 0 and json.loads(paused.stdout)["status"] == "paused"
        worked = pyfsm("worker", "--dsn", dsn, "helpers.engine_fixtures:CLI_CHECKOUT", "--until-idle", "0.5", "--json")
        assert worked.returncode == 0, worked.stderr
        assert json.loads(worked.stdout)["runs"] == 1  # b is paused: not picked up
        assert store.get("cli_checkout", "a").status == "completed"
        assert "running" in pyfsm("resume", "--dsn", dsn, "cli_checkout", "b").stdout
        again = pyfsm("resume", "--dsn", dsn, "cli_checkout", "b")
        assert again.returncode == 1 and "InvalidStatus (31022)" in again.stderr
        assert "no failed cli_checkout instances" in pyfsm("failed", "--dsn", dsn, "cli_checkout").stdout
        not_failed = pyfsm("retry", "--dsn", dsn, "cli_checkout", "b")
        assert not_failed.returncode == 1 and "not failed" in not_failed.stderr
    assert pyfsm("worker", "--dsn", dsn, "helpers.engine_fixtures:NOPE").returncode == 1
