"""`pyfsm attach`, `pyfsm adopt`, `pyfsm detach`, the attach section of a definition file,
`pyfsm check` on attached types, and AsyncStore's attach methods (issue 48, items 1 and 6):
what each command prints and its exit status, checked against fsm_attachments,
information_schema and the instance tables; a dry run writes nothing; `pyfsm check` names
each way the application's DDL can break an attachment after the test broke it so.

The module has a database of its own (`module_db`); the `pyfsm check` tests one each
(`fresh`): check lists every attachment of a database."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pymysql
import pytest
from helpers.cli import pyfsm
from helpers.common import fetch, granted_accounts, unique

from pyfsm import Machine, StateColumnUnsupported
from pyfsm.aio import AsyncStore
from pyfsm.attach import AdoptionReport
from pyfsm.db import Settings, parse_dsn

ENUM = "ENUM('new','paid','shipped','weird')"


def order(name: str, *more: str) -> Machine:
    """new -> paid -> shipped, and for each state of ``more`` a final one, mark_<state> from new."""
    return Machine(
        name=name,
        states=["new", "paid", "shipped", *more],
        start=["new"],
        final=["shipped", *more],
        transitions=[("pay", "new", "paid"), ("ship", "paid", "shipped"), *((f"mark_{s}", "new", s) for s in more)],
    )


def connect(settings: Settings) -> pymysql.connections.Connection:
    return pymysql.connect(**parse_dsn(settings.dsn()).connect_kwargs())


def make_table(
    conn: pymysql.connections.Connection, name: str, rows: list[tuple[int, str | None]], state: str = ENUM
) -> None:
    """A table of the application's: id, its state column status, total and customer."""
    conn.cursor().execute(
        f"CREATE TABLE `{name}` (id INT PRIMARY KEY, status {state} NULL, total INT NOT NULL, customer INT NOT NULL)"
    )
    for key, value in rows:
        conn.cursor().execute(f"INSERT INTO `{name}` VALUES (%s, %s, %s, %s)", (key, value, key * 10, key % 2))


def run(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return pyfsm(*args, "--dsn", settings.dsn())


def attach_args(machine: str, table: str, *more: str) -> list[str]:
    return ["attach", machine, "--table", table, "--key", "id", "--state", "status", *more]


def cells(line: str) -> list[str]:
    """A text table's line split into its cells (two spaces or more between them)."""
    return re.split(r"\s{2,}", line.strip())


def footprint(conn: pymysql.connections.Connection, machine: str, table: str) -> dict[str, Any]:
    """What attaching writes: its fsm_attachments row, triggers, adoption procedure, instances."""
    return {
        "attachments": fetch(conn, "SELECT * FROM fsm_attachments WHERE machine = %s", (machine,)),
        "triggers": fetch(
            conn,
            "SELECT TRIGGER_NAME, EVENT_OBJECT_TABLE FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE() "
            "AND (EVENT_OBJECT_TABLE IN (%s, %s) OR TRIGGER_NAME LIKE %s) ORDER BY TRIGGER_NAME",
            (table, f"fsm_{machine}", f"fsm\\_{machine}\\_%"),
        ),
        "procedures": fetch(
            conn,
            "SELECT ROUTINE_NAME FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME = %s",
            (f"fsm_{machine}_adopt_v1",),
        ),
        "instances": fetch(conn, f"SELECT instance_key, current_state FROM `fsm_{machine}` ORDER BY instance_key"),
        "rows": fetch(conn, f"SELECT * FROM `{table}` ORDER BY id"),
    }


def instances(conn: pymysql.connections.Connection, machine: str) -> dict[str, str]:
    rows = fetch(conn, f"SELECT instance_key, current_state FROM `fsm_{machine}`")
    return {r["instance_key"]: r["current_state"] for r in rows}


# -- attach --dry-run ----------------------------------------------------------------------


def test_a_dry_run_counts_each_state_value_marks_the_unknown_ones_and_writes_nothing(module_db, module_dba) -> None:  # type: ignore[no-untyped-def]
    settings, store = module_db
    name = unique("att")
    store.define(order(name))
    make_table(module_dba, f"{name}_t", [(1, "new"), (2, "paid"), (3, "weird"), (4, None), (5, "new")])
    before = footprint(module_dba, name, f"{name}_t")

    text = run(settings, *attach_args(name, f"{name}_t", "--column", "total", "--lookup", "customer", "--dry-run"))
    assert (text.returncode, text.stderr) == (0, ""), text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == (
        f"{name} on `{name}_t` (key `id`, state `status`, lookup `customer`, copied `total`, on delete refuse) "
        "(dry run: nothing is written)"
    )
    assert [cells(line) for line in lines[1:-1]] == [
        ["state", "rows", f"state of {name}"],
        ["NULL", "1", "no: not adopted"],
        ["new", "2", "yes"],
        ["paid", "1", "yes"],
        ["weird", "1", "no: not adopted"],
    ]
    assert lines[-1].startswith(
        f"5 rows: 3 in states of {name}, 2 in values that are no state of {name} (NULL, 'weird')"
    )

    data = json.loads(run(settings, *attach_args(name, f"{name}_t", "--dry-run", "--json")).stdout)
    assert data["dry_run"] is True and data["rows"] == 5
    assert data["values"] == [
        {"state": None, "rows": 1, "known": False},
        {"state": "new", "rows": 2, "known": True},
        {"state": "paid", "rows": 1, "known": True},
        {"state": "weird", "rows": 1, "known": False},
    ]
    assert [v["state"] for v in data["unknown"]] == [None, "weird"]
    assert (data["attachment"]["table"], data["attachment"]["installed"]) == (f"{name}_t", False)
    assert footprint(module_dba, name, f"{name}_t") == before  # nothing recorded, created nor adopted


# -- attach, adopt -------------------------------------------------------------------------


def test_attach_adopts_every_row_and_exits_0(module_db, module_dba) -> None:  # type: ignore[no-untyped-def]
    settings, store = module_db
    name = unique("att")
    store.define(order(name))
    make_table(module_dba, f"{name}_t", [(1, "new"), (2, "paid"), (3, "paid")])

    done = run(settings, *attach_args(name, f"{name}_t", "--column", "total", "--lookup", "customer", "--batch", "2"))
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout.splitlines() == [
        f"{name} on `{name}_t` (key `id`, state `status`, lookup `customer`, copied `total`, on delete refuse): "
        f"attached; every write of `status` now follows {name}'s rules",
        f"adopted 3 of 3 rows of `{name}_t` in 2 batches; moved 0, left 0 in no state of {name}, refused 0",
    ]
    assert instances(module_dba, name) == {"1": "new", "2": "paid", "3": "paid"}
    adopted = store.get(name, "2")
    assert (adopted.data, adopted.lookup_key) == ({"total": 20}, "0")
    assert store.attachment(name) is not None and store.attachment(name).adopted  # type: ignore[union-attr]

    again = run(settings, "adopt", name, "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == {
        "machine": name,
        "seen": 3,
        "adopted": 0,
        "unknown": 0,
        "first_unknown": None,
        "moved": 0,
        "refused": 0,
        "first_refused": None,
        "batches": 1,
        "done": True,
    }
    # the triggers are there: a move the rules refuse is refused whoever writes it
    with pytest.raises(pymysql.err.OperationalError) as refused:
        module_dba.cursor().execute(f"UPDATE `{name}_t` SET status = 'shipped' WHERE id = 1")
    assert refused.value.args[0] == 31005


def test_rows_in_no_state_are_left_exit_1_and_the_advice_given_works(module_db, module_dba) -> None:  # type: ignore[no-untyped-def]
    settings, store = module_db
    name = unique("att")
    table = f"{name}_t"
    store.define(order(name))
    make_table(module_dba, table, [(1, "new"), (2, "weird"), (3, None)])

    attached = run(settings, *attach_args(name, table, "--no-adopt"))
    assert (attached.returncode, attached.stderr) == (0, ""), attached.stderr
    assert (
        attached.stdout.splitlines()[1] == f"existing rows not adopted (--no-adopt): `pyfsm adopt {name}` adopts them"
    )
    assert instances(module_dba, name) == {}

    adopted = run(settings, "adopt", name)
    assert (adopted.returncode, adopted.stderr) == (1, ""), adopted.stderr
    first, advice = adopted.stdout.splitlines()
    assert first == f"adopted 1 of 3 rows of `{table}` in 1 batch; moved 0, left 2 in no state of {name}, refused 0"
    assert advice.startswith(f"  2 rows are in a value of `status` that is no state of {name} (the first: key 2): ")
    assert "UnknownStateValue, 31038" in advice and f"`pyfsm adopt {name}`" in advice
    report = json.loads(run(settings, "adopt", name, "--json").stdout)
    assert (report["adopted"], report["unknown"], report["first_unknown"]) == (0, 2, "2")

    # what the advice says: such a row given another value the machine lacks is refused ...
    with pytest.raises(pymysql.err.OperationalError) as refused:
        module_dba.cursor().execute(f"UPDATE `{table}` SET status = 'weird' WHERE id = 3")
    assert refused.value.args[0] == 31038
    # ... given a state of the machine, it is adopted there, its old value in the history row ...
    module_dba.cursor().execute(f"UPDATE `{table}` SET status = 'new' WHERE id = 3")
    assert instances(module_dba, name) == {"1": "new", "3": "new"}
    # ... and a new definition version with the state lets `pyfsm adopt` take the rest: exit 0
    store.define(order(name, "weird"))
    more = run(settings, "adopt", name)
    assert more.returncode == 0, more.stdout + more.stderr
    assert more.stdout.splitlines()[0] == (
        f"adopted 1 of 3 rows of `{table}` in 1 batch; moved 0, left 0 in no state of {name}, refused 0"
    )
    assert instances(module_dba, name) == {"1": "new", "2": "weird", "3": "new"}


def test_detach_and_what_adopt_and_detach_say_of_a_type_not_attached(module_db, module_dba) -> None:  # type: ignore[no-untyped-def]
    settings, store = module_db
    name, other = unique("att"), unique("att")
    table = f"{name}_t"
    store.define(order(name))
    store.define(order(other))
    make_table(module_dba, table, [(1, "new"), (2, "paid")])
    assert run(settings, *attach_args(name, table, "--on-delete", "allow")).returncode == 0

    detached = run(settings, "detach", name)
    assert (detached.returncode, detached.stderr) == (0, ""), detached.stderr
    assert detached.stdout.strip() == (
        f"{name} on `{table}` (key `id`, state `status`, on delete allow): detached; the rows, {name}'s instances "
        "and their history stay (attaching again continues the history)"
    )
    left = footprint(module_dba, name, table)
    assert [t for t in left["triggers"] if t["EVENT_OBJECT_TABLE"] == table] == [] and left["procedures"] == []
    assert instances(module_dba, name) == {"1": "new", "2": "paid"}
    again = run(settings, "detach", name, "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["attachment"]["installed"] is False
    assert run(settings, "detach", name).stdout.strip().endswith(": not installed; nothing to remove")

    refused = run(settings, "adopt", name)
    assert refused.returncode == 1 and refused.stderr.startswith("pyfsm: NotAttached (31040): "), refused.stderr
    # the command it names attaches the type again as it was
    assert f"`pyfsm attach {name} --table {table} --key id --state status --on-delete allow` installs it again" in (
        refused.stderr
    )
    assert run(settings, *attach_args(name, table, "--on-delete", "allow")).returncode == 0

    never = run(settings, "adopt", other)
    assert never.returncode == 1 and f"(31040): {other} is not attached to a table" in never.stderr, never.stderr
    nothing = run(settings, "detach", other)
    assert (nothing.returncode, nothing.stdout.strip()) == (0, f"{other} is not attached to a table: nothing to detach")
    for command in ("detach", "adopt"):
        unknown = run(settings, command, f"{name}_nosuch")
        assert unknown.returncode == 1 and "UnknownMachine (31002)" in unknown.stderr, unknown.stderr


def test_attach_refusals_and_usage_errors(module_db, module_dba) -> None:  # type: ignore[no-untyped-def]
    settings, store = module_db
    name = unique("att")
    store.define(order(name))
    make_table(module_dba, f"{name}_t", [(1, "new")], state="VARCHAR(4)")
    before = footprint(module_dba, name, f"{name}_t")
    for args, errno in (
        (attach_args(name, f"{name}_nosuch"), "TableUnsupported (31034)"),
        (["attach", name, "--table", f"{name}_t", "--key", "total", "--state", "status"], "KeyUnsupported (31035)"),
        (attach_args(name, f"{name}_t"), "StateColumnUnsupported (31036)"),  # 'shipped' is 7 characters
        (attach_args(name, f"{name}_t", "--dry-run"), "StateColumnUnsupported (31036)"),
    ):
        refused = run(settings, *args)
        assert refused.returncode == 1 and refused.stdout == "", (args, refused.stdout)
        assert len(refused.stderr.splitlines()) == 1 and refused.stderr.startswith(f"pyfsm: {errno}: "), refused.stderr
    for args in (
        attach_args(name, f"{name}_t", "--on-delete", "keep"),
        attach_args(name, f"{name}_t", "--batch", "0"),
        ["adopt", name, "--batch", "10001"],
        ["attach", name, "--key", "id", "--state", "status"],
    ):
        usage = run(settings, *args)
        assert usage.returncode == 2 and usage.stderr.startswith("pyfsm: usage: "), (args, usage.stderr)
    assert footprint(module_dba, name, f"{name}_t") == before


# -- definition files ------------------------------------------------------------------------


def write(path: Path, name: str, attach: str) -> Path:
    path.write_text(
        f"name: {name}\nstates: [new, paid, shipped]\nstart: [new]\nfinal: [shipped]\ntransitions:\n"
        "  - {event: pay, from: new, to: paid}\n  - {event: ship, from: paid, to: shipped}\n" + attach
    )
    return path


def test_a_definition_files_attach_section_attaches_and_adopts(module_db, module_dba, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    settings, store = module_db
    name = unique("att")
    table = f"{name}_t"
    make_table(module_dba, table, [(1, "new"), (2, "paid")])
    path = write(
        tmp_path / f"{name}.yaml",
        name,
        f"attach:\n  table: {table}\n  key: id\n  state: status\n  lookup: customer\n  columns: [total]\n",
    )
    [installed] = json.loads(run(settings, "install", str(path), "--json").stdout)
    assert (installed["machine"], installed["changed"], installed["attachment"]["installed"]) == (name, True, True)
    assert (installed["attachment"]["lookup"], installed["attachment"]["columns"]) == ("customer", ["total"])
    assert (installed["adoption"]["seen"], installed["adoption"]["adopted"], installed["adoption"]["done"]) == (
        2,
        2,
        True,
    )
    assert instances(module_dba, name) == {"1": "new", "2": "paid"}
    assert store.get(name, "1").data == {"total": 10}

    again = run(settings, "install", str(path))  # attached so already: nothing changes, nothing is read again
    assert (again.returncode, again.stderr) == (0, ""), again.stderr
    assert again.stdout.splitlines() == [
        f"{name}: version 1 (unchanged) from {path}",
        f"  {name} on `{table}` (key `id`, state `status`, lookup `customer`, copied `total`, on delete refuse): "
        "attached",
        "  attached so already, every row adopted: nothing to adopt",
    ]


def test_a_definition_files_attach_section_without_adoption_and_with_rows_left(
    module_db, module_dba, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    settings, _store = module_db
    lazy, left = unique("att"), unique("att")
    make_table(module_dba, f"{lazy}_t", [(1, "new")])
    make_table(module_dba, f"{left}_t", [(1, "new"), (2, "weird")])
    quiet = run(
        settings,
        "install",
        str(
            write(tmp_path / "lazy.yaml", lazy, f"attach: {{table: {lazy}_t, key: id, state: status, adopt: false}}\n")
        ),
    )
    assert quiet.returncode == 0 and quiet.stdout.splitlines()[-1] == (
        f"  existing rows not adopted (adopt: false): `pyfsm adopt {lazy}` adopts them"
    )
    assert instances(module_dba, lazy) == {}

    rows_left = run(
        settings,
        "install",
        str(
            write(
                tmp_path / "left.yaml", left, f"attach: {{table: {left}_t, key: id, state: status, on_delete: allow}}\n"
            )
        ),
    )
    assert (rows_left.returncode, rows_left.stderr) == (1, ""), rows_left.stderr
    lines = rows_left.stdout.splitlines()
    assert lines[1].endswith("on delete allow): attached")
    assert (
        lines[2] == f"  adopted 1 of 2 rows of `{left}_t` in 1 batch; moved 0, left 1 in no state of {left}, refused 0"
    )
    assert lines[3].startswith(f"    1 row is in a value of `status` that is no state of {left} (the first: key 2)")


def test_a_bad_attach_section_stores_nothing_and_a_refused_table_is_said(module_db, module_dba, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    settings, store = module_db
    name = unique("att")
    path = write(tmp_path / "bad.yaml", name, "attach:\n  table: t\n  key: id\n  state: status\n  on_delete: keep\n")
    bad = run(settings, "install", str(path))
    assert bad.returncode == 1 and bad.stdout == "", bad.stdout
    assert bad.stderr.strip() == (
        f"pyfsm: InvalidDefinition (31001): {path}: attach.on_delete: must be 'refuse' or 'allow', got string 'keep' "
        "(line 12)"
    )
    assert fetch(module_dba, "SELECT machine FROM fsm_machines WHERE machine = %s", (name,)) == []

    # the file is valid, the table cannot hold the states: the type is stored, the attachment
    # refused with its number; installing again once the table is fixed attaches it
    make_table(module_dba, f"{name}_t", [(1, "new")], state="VARCHAR(4)")
    path = write(tmp_path / "short.yaml", name, f"attach: {{table: {name}_t, key: id, state: status}}\n")
    short = run(settings, "install", str(path))
    assert short.returncode == 1 and short.stderr.startswith("pyfsm: StateColumnUnsupported (31036): "), short.stderr
    assert store.attachment(name) is None and store.definition(name).version == 1
    module_dba.cursor().execute(f"ALTER TABLE `{name}_t` MODIFY status VARCHAR(16)")
    fixed = run(settings, "install", str(path))
    assert fixed.returncode == 0, fixed.stderr
    assert fixed.stdout.splitlines()[0] == f"{name}: version 1 (unchanged) from {path}"
    assert instances(module_dba, name) == {"1": "new"}


# -- pyfsm check ---------------------------------------------------------------------------


def test_check_names_each_way_an_attachment_stops_fitting_its_table(fresh, server) -> None:  # type: ignore[no-untyped-def]
    settings, store = fresh
    dba = connect(settings)
    dba.autocommit(True)
    names = {k: unique(k) for k in ("enum", "short", "renamed", "dropped", "moved", "recorded")}
    for kind, name in names.items():
        store.define(order(name))
        make_table(dba, f"{name}_t", [(1, "new"), (2, "paid")], state="VARCHAR(8)" if kind == "short" else ENUM)
        if kind != "recorded":
            store.attach(name, table=f"{name}_t", key="id", state="status", lookup="customer", columns=["total"])
            store.adopt(name)
    ok = run(settings, "check")
    assert (ok.returncode, ok.stderr) == (0, ""), ok.stderr
    e = names["enum"]
    assert (
        f"attached: {e} on `{e}_t` (key `id`, state `status`, lookup `customer`, copied `total`, on delete refuse): "
        "installed, every row adopted: ok"
    ) in ok.stdout.splitlines()
    assert {
        a["machine"]: a["problems"] for a in json.loads(run(settings, "check", "--json").stdout)["attachments"]
    } == {n: [] for k, n in names.items() if k != "recorded"}

    # a trigger of the application's ordered after pyfsm's BEFORE UPDATE trigger (and one before it, which is fine)
    dba.cursor().execute(
        f"CREATE TRIGGER `{e}_audit` BEFORE UPDATE ON `{e}_t` FOR EACH ROW FOLLOWS `fsm_{e}_sbu_v1` SET NEW.total = NEW.total"
    )
    dba.cursor().execute(
        f"CREATE TRIGGER `{e}_first` BEFORE UPDATE ON `{e}_t` FOR EACH ROW PRECEDES `fsm_{e}_sbu_v1` SET NEW.total = NEW.total"
    )
    warned = run(settings, "check")
    assert warned.returncode == 0, warned.stdout  # a warning: the trigger may never touch the state
    assert (
        f"warning: {e}: trigger `{e}_audit` (BEFORE UPDATE on `{e}_t`) runs after pyfsm's fsm_{e}_sbu_v1: a change it "
        f"makes to `status` escapes {e}'s rules and history; if it may set that column, create it again with "
        f"PRECEDES fsm_{e}_sbu_v1"
    ) in warned.stdout.splitlines()
    assert f"`{e}_first`" not in warned.stdout

    # new definition versions with a state the ENUM lacks, and one the VARCHAR(8) is too short for
    # (Store.define refuses them, nothing stored; a DBA's fsm_define_v8 stores them)
    with pytest.raises(StateColumnUnsupported):
        store.define(order(e, "lost"))
    dba.cursor().execute("CALL fsm_define_v8(%s, %s)", (e, order(e, "lost").to_json()))
    s = names["short"]
    store.define(order(s, "returned"))  # 8 characters: fits
    with pytest.raises(StateColumnUnsupported):
        store.define(order(s, "returned", "undeliverable"))
    dba.cursor().execute("CALL fsm_define_v8(%s, %s)", (s, order(s, "returned", "undeliverable").to_json()))
    # the application's DDL: a copied column and a state column renamed, a trigger and the
    # adoption procedure dropped, a table renamed
    dba.cursor().execute(f"ALTER TABLE `{e}_t` RENAME COLUMN total TO amount")
    dba.cursor().execute(f"ALTER TABLE `{names['renamed']}_t` RENAME COLUMN status TO state")
    d = names["dropped"]
    dba.cursor().execute(f"DROP TRIGGER `fsm_{d}_sbu_v1`")
    dba.cursor().execute(f"DROP TRIGGER `fsm_{d}_au_subject_v1`")
    dba.cursor().execute(f"DROP PROCEDURE `fsm_{d}_adopt_v1`")
    m = names["moved"]
    dba.cursor().execute(f"RENAME TABLE `{m}_t` TO `{m}_elsewhere`")
    # a DBA's attachment, recorded and awaiting `pyfsm sync`
    r = names["recorded"]
    fetch(dba, "CALL fsm_attach_v1(%s, %s, 'id', 'status', NULL, NULL, 'refuse', 0)", (r, f"{r}_t"))

    broken = run(settings, "check")
    assert (broken.returncode, broken.stderr) == (1, ""), broken.stderr
    data = json.loads(run(settings, "check", "--json").stdout)
    assert data["ok"] is False
    found = {a["machine"]: [(p["level"], p["kind"]) for p in a["problems"]] for a in data["attachments"]}
    assert found == {
        e: [("error", "column_missing"), ("error", "state_column"), ("warning", "trigger_order")],
        s: [("error", "state_column")],
        names["renamed"]: [("error", "column_missing")],
        d: [("error", "trigger_missing"), ("error", "trigger_missing"), ("error", "procedure_missing")],
        m: [("error", "table_missing")],
        r: [("warning", "not_installed")],
    }
    status = {a["machine"]: (a["status"], a["ok"]) for a in data["attachments"]}
    assert status[r] == ("recorded", True) and status[e] == ("installed", False)
    lines = broken.stdout.splitlines()
    expected = [
        f"error: {e}: `{e}_t` has no copied column `total` any more (renamed or dropped): pyfsm's triggers name it, "
        f"so writes of `{e}_t` and transitions of {e} fail (1054); rename it back (ALTER TABLE `{e}_t` RENAME COLUMN "
        f"... TO `total`), or `pyfsm detach {e}` and attach it again with the new name",
        f"error: {e}: state column `status` of `{e}_t` (enum('new','paid','shipped','weird')) lacks lost (version 2): "
        "a transition into it fails; add it to the ENUM (ALTER TABLE ... MODIFY)",
        f"error: {s}: state column `status` of `{s}_t` (varchar(8)) is too short for undeliverable (version 3): "
        "a transition into it fails; make it longer (ALTER TABLE ... MODIFY)",
        f"error: {names['renamed']}: `{names['renamed']}_t` has no state column `status` any more (renamed or "
        f"dropped): pyfsm's triggers name it, so writes of `{names['renamed']}_t` and transitions of "
        f"{names['renamed']} fail (1054); rename it back (ALTER TABLE `{names['renamed']}_t` RENAME COLUMN ... TO "
        f"`status`), or `pyfsm detach {names['renamed']}` and attach it again with the new name",
        f"error: {d}: trigger fsm_{d}_sbu_v1 on `{d}_t` is missing: changes of the state column are no longer "
        f"checked by the rules nor recorded; run `pyfsm sync {d}` as the schema owner to create it again",
        f"error: {d}: trigger fsm_{d}_au_subject_v1 on `fsm_{d}` is missing: pyfsm's transitions (Store.send, "
        f"workers, timers) no longer move the state column; run `pyfsm sync {d}` as the schema owner to create it again",
        f"error: {d}: procedure fsm_{d}_adopt_v1 is missing: `pyfsm adopt {d}` fails; run `pyfsm sync {d}` as the "
        "schema owner to create it again",
        f"error: {m}: table `{m}_t` is gone (renamed or dropped); its triggers are on `{m}_elsewhere` now: every "
        f"transition of {m} fails writing its state column; rename the table back, or `pyfsm detach {m}` and "
        "attach the table by its new name",
        f"warning: {r} is recorded on `{r}_t` (fsm_attach_v1) but its triggers are not installed yet: the table's "
        f"writes are not checked; run `pyfsm sync {r}` as the schema owner",
        f"attached: {r} on `{r}_t` (key `id`, state `status`, on delete refuse): recorded, not installed",
    ]
    assert [line for line in expected if line not in lines] == []
    # what the messages say fails, fails
    with pytest.raises(pymysql.err.OperationalError) as unknown_column:
        dba.cursor().execute(f"UPDATE `{names['renamed']}_t` SET total = 1 WHERE id = 1")
    assert unknown_column.value.args[0] == 1054

    # an account that may not read fsm_attachments: not checked, said so, exit 0
    with granted_accounts(server, settings, ("app",), "pyfsm_att") as accounts:
        app = pyfsm("check", "--dsn", accounts["app"].dsn(), "--json")
        assert app.returncode == 0, app.stderr
        seen = json.loads(app.stdout)
        assert seen["attachments"] is None and seen["ok"] is True
        assert next(n["kind"] for n in seen["notes"]) == "attachments_not_checked"

    # the fixes the messages name
    for name in (d, r):
        assert run(settings, "sync", name).returncode == 0
    dba.cursor().execute(f"ALTER TABLE `{e}_t` RENAME COLUMN amount TO total")
    dba.cursor().execute(f"ALTER TABLE `{e}_t` MODIFY status ENUM('new','paid','shipped','weird','lost') NULL")
    fixed = json.loads(run(settings, "check", "--json").stdout)
    problems = {a["machine"]: [p["kind"] for p in a["problems"]] for a in fixed["attachments"]}
    assert (problems[d], problems[r], problems[e]) == ([], [], ["trigger_order"])
    dba.close()


# -- AsyncStore ----------------------------------------------------------------------------


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_async_store_mirrors_the_attach_methods(module_db, module_dba) -> None:  # type: ignore[no-untyped-def]
    settings, sync_store = module_db
    name = unique("att")
    table = f"{name}_t"
    sync_store.define(order(name))
    make_table(module_dba, table, [(1, "new"), (2, "paid"), (3, "weird")])
    seen: list[AdoptionReport] = []
    async with AsyncStore(settings.dsn(), pool_size=2) as store:
        plan = await store.attach_plan(name, table=table, key="id", state="status")
        assert [(v.state, v.rows, v.known) for v in plan.values] == [
            ("new", 1, True),
            ("paid", 1, True),
            ("weird", 1, False),
        ]
        assert await store.attachment(name) is None
        attachment = await store.attach(name, table=table, key="id", state="status", columns=["total"])
        assert (attachment.table, attachment.installed, attachment.columns) == (table, True, ("total",))
        report = await store.adopt(name, batch=2, progress=seen.append)
        assert (report.seen, report.adopted, report.unknown, report.first_unknown, report.batches) == (3, 2, 1, "3", 2)
        assert [r.seen for r in seen] == [2, 3]
        assert await store.attachment(name) == attachment
        detached = await store.detach(name)
        assert detached is not None and detached.installed is False
    assert instances(module_dba, name) == {"1": "new", "2": "paid"}
