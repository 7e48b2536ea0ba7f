"""A new user's mistakes, against the real server: a misspelt machine type or event gets an
answer naming what exists, the same from every Store method, the engine and the command line;
`pyfsm install` and `pyfsm worker` import ``module:attr`` from the current directory."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pymysql
import pytest
from helpers.common import granted_accounts, order_machine, unique

from pyfsm import AccessDenied, Machine, Process, Store, TransitionNotAllowed, UnknownEvent, UnknownMachine
from pyfsm.db import Settings

TESTS = Path(__file__).resolve().parents[1]
#: The console script, as a user runs it: unlike `python -m pyfsm`, its sys.path does not
#: start with the current directory.
SCRIPT = Path(sys.executable).with_name("pyfsm")
ORDER_EVENTS = "pay, ship, deliver, cancel, refund"


def pyfsm(*args: str, cwd: Path = TESTS) -> subprocess.CompletedProcess[str]:
    """The console script in a subprocess, without PYTHONPATH or a DSN from the environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYFSM_DSN", "PYFSM_READ_DSN")}
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=env)


@pytest.fixture(scope="module")
def shop(make_database) -> Iterator[Settings]:  # type: ignore[no-untyped-def]
    """A database of its own: types order and payment installed, and bare, defined in SQL
    by a DBA but not installed yet (no `pyfsm sync`)."""
    settings = make_database("pyfsm_mistakes")
    with Store(settings.dsn()) as store:
        store.migrate()
        store.define(order_machine("order"))
        store.define(
            Machine(
                "payment",
                states=["due", "paid"],
                start=["due"],
                final=["paid"],
                transitions=[("settle", "due", "paid")],
            )
        )
        store.create("order", "o-1")
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        conn.cursor().execute(
            "CALL fsm_define_v5('bare', %s)",
            ('{"states": ["a", "b"], "start": ["a"], "transitions": [{"event": "go", "from": ["a"], "to": "b"}]}',),
        )
    finally:
        conn.close()
    yield settings


UNKNOWN = "no machine type 'ordr'; installed: order, payment"


def every_call(store: Store) -> dict[str, Callable[[], object]]:
    """Each Store method that names a machine type, called on a type that is not defined."""
    at = datetime(2024, 1, 1, tzinfo=UTC)
    return {
        "send": lambda: store.send("ordr", "o-1", "pay"),
        "get": lambda: store.get("ordr", "o-1"),
        "create": lambda: store.create("ordr", "o-1"),
        "counts": lambda: store.counts("ordr"),
        "history": lambda: store.history("ordr", "o-1"),
        "in_state": lambda: store.in_state("ordr", "new"),
        "state_at": lambda: store.state_at("ordr", "o-1", at),
        "pause": lambda: store.pause("ordr", "o-1"),
        "resume": lambda: store.resume("ordr", "o-1"),
        "retry": lambda: store.retry("ordr", "o-1"),
        "enqueue": lambda: store.enqueue("ordr", "o-1"),
        "failed": lambda: store.failed("ordr"),
        "errors": lambda: store.errors("ordr", "o-1"),
        "run_info": lambda: store.run_info("ordr", "o-1"),
        "set_locking": lambda: store.set_locking("ordr", "o-1", global_lock=True),
        "lock": lambda: store.lock("ordr", "o-1", heartbeat=False),
        "send_many": lambda: store.send_many("ordr", [("o-1", "pay")]),
        "definition": lambda: store.definition("ordr"),
        "sync": lambda: store.sync("ordr"),
        "process.run": lambda: Process(order_machine("ordr")).run(store, "o-1"),
    }


def assert_unknown_type(call: Callable[[], object], what: str) -> None:
    with pytest.raises(UnknownMachine) as info:
        call()
    err = info.value
    assert (type(err), err.errno, str(err), err.machine) == (UnknownMachine, 31002, UNKNOWN, "ordr"), what
    assert err.fields["installed"] == ["order", "payment"], what


def test_a_type_that_is_not_defined_is_one_answer_naming_the_installed_types(shop: Settings) -> None:
    """Whatever the call, a misspelt type is UnknownMachine 31002 naming the installed types
    (a type defined but not installed is not one of them), never the advice to run `pyfsm
    sync`, which fails for a type that does not exist."""
    with Store(shop.dsn()) as store:
        for what, call in every_call(store).items():
            assert_unknown_type(call, what)
        # the sync advice stays for a type that is defined but whose objects are missing
        with pytest.raises(UnknownMachine) as info:
            store.send("bare", "k", "go")
        assert info.value.errno == 1305 and "run `pyfsm sync bare`" in str(info.value)
        with pytest.raises(UnknownMachine) as info:
            store.counts("bare")
        assert info.value.errno == 31002 and "pyfsm sync" in str(info.value)


def test_an_app_account_gets_the_same_answer(server: Settings, shop: Settings) -> None:
    """An EXECUTE-only account (`pyfsm grant --app`) is denied (1370) a routine that does not
    exist, and may not read fsm_v_definitions: it asks fsm_definition_v1 and fsm_stats_v2,
    and gets the same message."""
    with granted_accounts(server, shop, ["app"], "pyfsm_mis") as accounts, Store(accounts["app"].dsn()) as app:
        for what in ("send", "get", "counts", "history", "pause", "send_many", "definition"):
            assert_unknown_type(every_call(app)[what], what)
        with pytest.raises(AccessDenied) as denied:  # definitions are the owner's, whatever the type's name
            app.define(Machine("define", states=["a", "b"], start=["a"], transitions=[("go", "a", "b")]))
        assert denied.value.errno == 1370
        with pytest.raises(UnknownMachine) as info:  # no right on a routine that is not there (1370)
            app.send("bare", "k", "go")
        assert info.value.errno == 31002 and str(info.value) == (
            "machine type 'bare' is defined but not installed: run `pyfsm sync bare` (or Store.sync) as the owner "
            "of pyfsm's schema"
        )


def test_the_command_line_says_it_in_one_line(shop: Settings) -> None:
    for args in (
        ("send", "ordr", "o-1", "pay"),
        ("show", "ordr", "o-1"),
        ("counts", "ordr"),
        ("sync", "ordr"),
        ("graph", "ordr"),
    ):
        result = pyfsm(*args, "--dsn", shop.dsn())
        assert (result.returncode, result.stdout) == (1, ""), args
        assert result.stderr == f"pyfsm: UnknownMachine (31002): {UNKNOWN}\n", args


def test_a_misspelt_event_is_unknown_event_listing_the_events(store: Store, order: Machine) -> None:
    store.send(order, "e-1", "pay")
    with pytest.raises(UnknownEvent) as info:
        store.send(order, "e-1", "delivr")
    err = info.value
    assert isinstance(err, TransitionNotAllowed)  # what pyfsm raised before: callers' excepts still work
    assert (err.errno, err.machine, err.key, err.state, err.event) == (31028, order.name, "e-1", "paid", "delivr")
    assert str(err) == f"machine type {order.name!r} has no event 'delivr'; its events: {ORDER_EVENTS}"
    assert err.fields["events"] == ORDER_EVENTS.split(", ")
    with pytest.raises(TransitionNotAllowed) as info:  # an event it has, not allowed now: as before
        store.send(order, "e-1", "pay")
    assert type(info.value) is TransitionNotAllowed and info.value.state == "paid"
    outcomes = store.send_many(order, [("e-1", "delivr"), ("e-1", "pay"), ("e-1", "ship")])
    assert type(outcomes[0]) is UnknownEvent and str(outcomes[0]) == str(err)
    assert type(outcomes[1]) is TransitionNotAllowed and outcomes[2].to_state == "shipped"  # type: ignore[union-attr]


def test_an_instance_of_an_older_version_is_told_its_version(store: Store) -> None:
    v1 = order_machine()
    store.define(v1)
    store.create(v1, "old")
    store.define(
        Machine(
            name=v1.name,
            states=[*v1.states, "held"],
            start=["new"],
            final=list(v1.final),
            transitions=[*v1.transitions, ("hold", "new", "held")],
        )
    )
    with pytest.raises(UnknownEvent) as info:
        store.send(v1, "old", "hold")
    assert str(info.value) == (
        f"machine type {v1.name!r} (version 1, which old follows) has no event 'hold'; its events: {ORDER_EVENTS}"
    )
    store.create(v1, "young")
    with pytest.raises(UnknownEvent) as info:
        store.send(v1, "young", "hld")
    assert str(info.value) == f"machine type {v1.name!r} has no event 'hld'; its events: {ORDER_EVENTS}, hold"
    [outcome] = store.send_many(v1, [("old", "hld")])
    assert str(outcome) == (
        f"machine type {v1.name!r} (version 1, which old follows) has no event 'hld'; its events: {ORDER_EVENTS}"
    )


def test_the_command_line_names_the_events(shop: Settings) -> None:
    result = pyfsm("send", "order", "o-1", "delivr", "--dsn", shop.dsn())
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"pyfsm: UnknownEvent (31028): machine type 'order' has no event 'delivr'; its events: {ORDER_EVENTS}\n"
    )


def test_install_and_worker_import_from_the_current_directory(make_database, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """As uvicorn, gunicorn and celery do: ``module:attr`` is found in the current directory
    without PYTHONPATH."""
    name = unique("here")
    (tmp_path / "shop_here.py").write_text(
        textwrap.dedent(f"""
        from pyfsm import Process

        process = Process.linear({name!r}, ["pack", "send"])
        process.register("pack", lambda ctx: ctx.next())
        process.register("send", lambda ctx: ctx.next())
        machine = process.machine
    """)
    )
    dsn = make_database("pyfsm_here").dsn()
    with Store(dsn) as store:
        store.migrate()
    installed = pyfsm("install", "shop_here:machine", "--dsn", dsn, cwd=tmp_path)
    assert installed.returncode == 0 and installed.stdout.startswith(f"{name}: version 1"), installed.stderr
    with Store(dsn) as store:
        store.create(name, "p-1")
        store.enqueue(name, "p-1")
    worked = pyfsm("worker", "shop_here:process", "--until-idle", "0.3", "--dsn", dsn, cwd=tmp_path)
    assert worked.returncode == 0, worked.stderr
    with Store(dsn) as store:
        assert store.get(name, "p-1").status == "completed"
    elsewhere = pyfsm("install", "shop_here:machine", "--dsn", dsn, cwd=tmp_path.parent)
    assert elsewhere.returncode == 1 and "No module named 'shop_here'" in elsewhere.stderr


def test_an_unreachable_state_is_one_warning_line(make_database, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """`pyfsm install` prints pyfsm's warning as its errors are: one `pyfsm:` line, no file
    path or source line of pyfsm's own; a definition file is named as it was given."""
    dsn = make_database("pyfsm_lonely").dsn()
    with Store(dsn) as store:
        store.migrate()
    name = unique("lonely")
    (tmp_path / "lonely.yaml").write_text(
        f"name: {name}\nstates: [a, b, island]\nstart: [a]\ntransitions:\n  - {{event: go, from: a, to: b}}\n"
    )
    (tmp_path / "lonely_mod.py").write_text(
        f"from pyfsm import Machine\n\nmachine = Machine({name + '_py'!r}, states=['a', 'b', 'island'], start=['a'], "
        "transitions=[('go', 'a', 'b')])\n"
    )
    said = "cannot be reached from its start state 'a': no instance will ever enter it"
    for source, prefix in (
        ("lonely.yaml", f"lonely.yaml: machine '{name}'"),
        ("lonely_mod:machine", f"machine '{name}_py'"),
    ):
        result = pyfsm("install", source, "--dsn", dsn, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert result.stderr == f"pyfsm: warning: {prefix}: state 'island' {said}\n"
