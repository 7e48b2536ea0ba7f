"""Least privilege: the app account only EXECUTEs procedures, the reporting account only reads views
(and calls the few reporting procedures that read what they show)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pymysql
import pytest
from helpers.common import admin, granted_accounts, order_machine
from helpers.engine_fixtures import checkout

from pyfsm import AccessDenied, Relay, Store, Worker
from pyfsm.db import Settings
from pyfsm.schema.grants import REPORTING_PROCEDURES, Account, exists, grant, recorded


@pytest.fixture
def accounts(server: Settings, make_database) -> Iterator[dict[str, Any]]:  # type: ignore[no-untyped-def]
    """A migrated database with one machine, and three accounts granted on it (dropped afterwards)."""
    settings = make_database()
    with Store(settings.dsn()) as store:
        store.migrate()
        store.define(order_machine("order"))
        store.create("order", "o-1", lookup_key="acct-1")
    with granted_accounts(server, settings, ("app", "reporting", "relay"), "pyfsm_") as made:
        yield {"settings": settings, **made}


def errno_of(settings: Settings, sql: str) -> int | None:
    """Run one statement as ``settings``' account: None if it worked, else the server's error number."""
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            cur.fetchall()
            while cur.nextset():
                pass
        return None
    except pymysql.err.MySQLError as exc:
        return int(exc.args[0])
    finally:
        conn.close()


def objects(settings: Settings) -> dict[str, list[str]]:
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT table_name, table_type FROM information_schema.tables WHERE table_schema = DATABASE()")
            rows = cur.fetchall()
            cur.execute(
                "SELECT r.routine_name, r.security_type, COUNT(p.parameter_name) FROM information_schema.routines r "
                "LEFT JOIN information_schema.parameters p ON p.specific_schema = r.routine_schema "
                "AND p.specific_name = r.routine_name AND p.parameter_mode IS NOT NULL "
                "WHERE r.routine_schema = DATABASE() AND r.routine_type = 'PROCEDURE' "
                "GROUP BY r.routine_name, r.security_type"
            )
            routines = cur.fetchall()
    finally:
        conn.close()
    # a CALL with the right number of arguments: the answer is then about rights (1370), not arity (1318)
    calls = {n: f"CALL `{n}`({', '.join(['NULL'] * int(k))})" for n, _, k in routines}
    return {
        "tables": sorted(n for n, t in rows if t == "BASE TABLE"),
        "views": sorted(n for n, t in rows if t == "VIEW"),
        "public": sorted(calls[n] for n, s, _ in routines if s == "DEFINER"),
        "internal": sorted(calls[n] for n, s, _ in routines if s == "INVOKER"),
        "define": sorted(calls[n] for n, s, _ in routines if n.startswith("fsm_define_")),
    }


def test_app_account_transitions_but_cannot_touch_a_table(accounts) -> None:  # type: ignore[no-untyped-def]
    app, owner = accounts["app"], accounts["settings"]
    with Store(app.dsn()) as store:  # the whole facade through EXECUTE alone
        store.create("order", "o-2", lookup_key="acct-2", data={"n": 1})
        assert store.send("order", "o-2", "pay").to_state == "paid"
        assert store.get("order", "o-2").version == 2 and len(store.history("order", "o-2")) == 2
        assert store.counts("order") == {"new": 1, "paid": 1}
        assert [i.key for i in store.in_state("order", "paid")] == ["o-2"]
        assert store.pause("order", "o-1").status == "paused" and store.resume("order", "o-1").status == "running"
        assert store.locks() == [] and store.errors("order", "o-1") == [] and store.run_info("order", "o-1") is None
        assert [s.machine for s in store.stats()] == ["order"]
        assert store.state_at("order", "o-2", store.history("order", "o-2")[-1].created_at).state == "paid"  # type: ignore[union-attr]
        with pytest.raises(AccessDenied):  # definitions and DDL are the owner's
            store.define(order_machine("refund"))
    found = objects(owner)
    assert "fsm_order" in found["tables"] and "fsm_outbox" in found["tables"] and len(found["tables"]) >= 14
    for table in found["tables"]:
        for sql in (f"UPDATE `{table}` SET machine = machine", f"DELETE FROM `{table}`", f"SELECT * FROM `{table}`"):
            assert errno_of(app, sql) == 1142, sql
    for view in found["views"]:
        assert errno_of(app, f"SELECT * FROM `{view}`") == 1142, view
    for call in found["internal"] + found["define"]:  # the INVOKER helpers and definitions are the owner's
        assert errno_of(app, call) == 1370, call
    assert errno_of(app, "CALL fsm_update_instance_v1('order', 1, 'pay', NULL, NULL, NULL, NULL, NULL)") == 1370
    # fsm_attach_v1 is the schema owner's or a DBA's (pyfsm.schema.grants): INVOKER, granted to no role
    assert "CALL `fsm_attach_v1`(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)" in found["internal"]
    assert errno_of(app, "CALL fsm_attach_v1('order', 't', 'id', 's', NULL, NULL, 'refuse', 1)") == 1370
    granted = [c for c in found["public"] if c not in found["define"]]
    assert len(granted) > 30 and all(errno_of(app, c) != 1370 for c in granted)  # every other public one is granted
    process = checkout("shipping")  # the handler engine too: claims, steps, heartbeats, all procedures
    with Store(owner.dsn()) as store:
        store.define(process.machine)  # the owner installs the type (DDL) ...
    with Store(app.dsn()) as store:  # ... the application runs it
        process.start(store, "s-1", data={"items": 2})
        Worker(store, [process], idle_min=0.01, idle_max=0.05).run(handle_signals=False, until_idle=0.3)
        assert (store.get("shipping", "s-1").status, store.get("shipping", "s-1").data["charged"]) == ("completed", 20)
    with Store(owner.dsn()) as store:  # nothing the refused statements tried happened
        assert [h.to_state for h in store.history("order", "o-2")] == ["new", "paid"]
        assert store.counts("order") == {"new": 1, "paid": 1}


def test_reporting_account_reads_the_views_and_nothing_else(accounts) -> None:  # type: ignore[no-untyped-def]
    reporting, owner = accounts["reporting"], accounts["settings"]
    found = objects(owner)
    assert {
        "fsm_v_order",
        "fsm_v_order_transitions",
        "fsm_v_instances",
        "fsm_v_history",
        "fsm_v_state_counts",
        "fsm_v_failed",
        "fsm_v_funnel",
        "fsm_v_stuck",
        "fsm_held_locks_v1",
    } <= set(found["views"])
    for view in found["views"]:
        assert errno_of(reporting, f"SELECT * FROM `{view}`") is None, view
    conn = pymysql.connect(**reporting.connect_kwargs())
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT instance_key, current_state FROM fsm_v_order")
            assert cur.fetchall() == (("o-1", "new"),)
    finally:
        conn.close()
    for table in found["tables"]:
        assert errno_of(reporting, f"SELECT * FROM `{table}`") == 1142, table
    assert errno_of(reporting, "UPDATE fsm_v_order SET current_state = 'paid'") == 1142  # views are read-only to it
    for call in found["public"]:  # every procedure but the reporting ones (those a schema has) is refused
        granted = any(call.startswith(f"CALL `{name}`(") for name in REPORTING_PROCEDURES)
        assert (errno_of(reporting, call) != 1370) == granted, call
    assert "CALL `fsm_schema_version_v1`()" in found["public"]  # what a Store asks first


def test_relay_account_publishes_from_the_outbox_only(accounts) -> None:  # type: ignore[no-untyped-def]
    relay_settings = accounts["relay"]
    relay = Relay(relay_settings.dsn(), kafka=None)
    try:
        assert relay.lag().unpublished == 0
        assert relay.leadership.ensure() and relay.is_leader  # fsm_relay_lead_v1 is granted
    finally:
        relay.close()  # and fsm_relay_resign_v1: the row was resigned
    assert errno_of(relay_settings, "SELECT 1 FROM fsm_relay_leaders") == 1142
    assert errno_of(relay_settings, "SELECT COUNT(*) FROM fsm_outbox") is None
    assert errno_of(relay_settings, "SELECT * FROM fsm_order") == 1142
    assert (
        errno_of(relay_settings, "CALL fsm_send_v1('order', 'o-1', 'pay', NULL, NULL, NULL, NULL, NULL, NULL)") == 1370
    )


def test_types_defined_later_are_granted_to_the_recorded_accounts(accounts) -> None:  # type: ignore[no-untyped-def]
    owner, app, reporting = accounts["settings"], accounts["app"], accounts["reporting"]
    conn = pymysql.connect(**owner.connect_kwargs())
    try:
        assert {a.role for a in recorded(conn)} == {"app", "reporting", "relay"}
    finally:
        conn.close()
    with Store(owner.dsn()) as store:
        store.define(order_machine("refund"))
    with Store(app.dsn()) as store:
        assert store.send("refund", "r-1", "pay").to_state == "paid"  # its procedures were granted by sync
    assert errno_of(reporting, "SELECT * FROM fsm_v_refund_transitions") is None
    assert errno_of(reporting, "SELECT COUNT(*) FROM fsm_v_history WHERE machine = 'refund'") is None
    with Store(owner.dsn()) as store:
        store.migrate()  # a no-op migration re-grants without error
    conn = pymysql.connect(**owner.connect_kwargs())
    try:  # every public procedure of the head revision, and only those, is granted to the app account
        with conn.cursor() as cur:
            cur.execute(
                "SELECT ROUTINE_NAME FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() "
                "AND ROUTINE_TYPE = 'PROCEDURE' AND SECURITY_TYPE = 'DEFINER' "
                "AND ROUTINE_NAME LIKE 'fsm\\_%%' AND ROUTINE_NAME NOT LIKE 'fsm\\_define\\_%%'"
            )
            public = {name for (name,) in cur.fetchall()}
            cur.execute("SELECT Routine_name FROM mysql.procs_priv WHERE Db = DATABASE() AND User = %s", (app.user,))
            granted = {name for (name,) in cur.fetchall()}
    finally:
        conn.close()
    assert "fsm_release_claims_v1" in public and "fsm_define_v5" not in granted and "fsm_define_v4" not in granted
    assert granted == public, (public - granted, granted - public)


def test_bad_account_names_are_refused() -> None:
    from pyfsm import InvalidArgument

    for bad in ("x'; DROP USER root; --", "", "a" * 33, "app@host'name", "app@"):
        if bad == "app@":  # an empty host means any host
            assert Account.parse(bad, "app").host == "%"
            continue
        with pytest.raises(InvalidArgument):
            Account.parse(bad, "app")
    with pytest.raises(InvalidArgument):
        Account.parse("app", "root")


def test_dropped_accounts_are_forgotten_and_existing_passwords_kept(server, accounts) -> None:  # type: ignore[no-untyped-def]
    owner, app = accounts["settings"], accounts["app"]
    conn = admin(server)
    try:
        conn.cursor().execute(f"DROP USER '{app.user}'@'%'")
    finally:
        conn.close()
    with Store(owner.dsn()) as store:
        store.define(order_machine("later"))  # grants the recorded accounts the new type's objects
    conn = pymysql.connect(**owner.connect_kwargs())
    try:
        assert not exists(conn, Account(app.user, "%", "app"))  # not re-created (without a password) by a GRANT
        assert app.user not in {a.user for a in recorded(conn)}
        reporting = Account(accounts["reporting"].user, "%", "reporting")
        _, created = grant(conn, [reporting], passwords={f"{reporting.user}@%": "another-password"})
        assert created == []  # it existed: its password is left alone
    finally:
        conn.close()
    assert errno_of(accounts["reporting"], "SELECT COUNT(*) FROM fsm_v_later") is None  # the old password still works


def test_pyfsm_check_works_for_every_role(accounts) -> None:  # type: ignore[no-untyped-def]
    """`pyfsm check` reads only what every account may read: the revision through
    fsm_schema_version_v1 and the deprecated procedures from information_schema (each account
    sees the routines it may call: the app account the deprecated ones, the others none)."""
    import json

    from helpers.cli import pyfsm

    for role in ("app", "reporting", "relay"):
        result = pyfsm("check", "--dsn", accounts[role].dsn(), "--json")
        assert result.returncode == 0, (role, result.stderr)
        names = {d["name"] for d in json.loads(result.stdout)["deprecated"]}
        assert ("fsm_send_v1" in names and "fsm_order_send_v1" in names) == (role == "app"), role
