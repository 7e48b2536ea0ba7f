"""Gateway.explained without a server: which failures become UnknownMachine naming the installed
types, and which stay as they are. The gateway's pool is replaced by an in-memory one that
answers the reads explained() makes (the defined types; for an app account the definition and
the stats procedures), as procrastinate's unit tests do with an in-memory connector."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from pyfsm import db
from pyfsm.errors import AccessDenied, DatabaseUnavailable, FsmError, TransitionNotAllowed, UnknownMachine
from pyfsm.gateway import Gateway
from pyfsm.schema import routines


class Cursor:
    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self.rows: list[dict[str, Any]] = []

    def __enter__(self) -> Cursor:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def execute(self, sql: str, args: Sequence[Any] = ()) -> None:
        self.memory.seen.append(sql)
        if self.memory.reporting_denied:  # an app account: EXECUTE only, no SELECT on the views
            raise AccessDenied("SELECT command denied", errno=1142)
        assert sql == db.queries.sql("types_defined")
        self.rows = [{"machine": m, "installed": int(i)} for m, i in sorted(self.memory.types.items())]

    def fetchall(self) -> list[dict[str, Any]]:
        return self.rows


class Memory:
    """The pool: ``types`` the defined types and whether each is installed."""

    def __init__(self, types: dict[str, bool], *, reporting_denied: bool = False, down: bool = False) -> None:
        self.types = types
        self.reporting_denied = reporting_denied
        self.down = down
        self.seen: list[str] = []

    def cursor(self, *_: Any) -> Cursor:
        return Cursor(self)

    def on_connection(self, fn: Callable[[Any], Any]) -> Any:
        if self.down:
            raise DatabaseUnavailable("the MySQL server at db-1:3306 is unavailable", errno=2003)
        return fn(self)

    def run(self, sql: str, args: Sequence[Any], **_: Any) -> list[dict[str, Any]]:
        self.seen.append(sql)
        if sql == routines.DEFINITION.call_sql():
            if args[0] not in self.types:
                raise UnknownMachine(f"fsm: no machine type {args[0]}", machine=args[0])
            return [{"machine": args[0]}]
        assert sql == routines.STATS.call_sql()
        return [{"machine": m} for m, installed in sorted(self.types.items()) if installed]


def gateway(memory: Memory) -> Gateway:
    g = Gateway(db.parse_dsn("mysql://app@127.0.0.1:1/shop"), None, pool_size=1)  # never connects
    g.primary.close()
    g.primary = memory  # type: ignore[assignment]
    return g


SEND = routines.SEND


def test_a_type_that_is_not_defined_names_the_installed_ones() -> None:
    memory = Memory({"order": True, "door": True, "parcel": False})
    err = UnknownMachine("fsm: no machine type ordr", machine="ordr", key="o-1", event="pay")
    found = gateway(memory).explained(err, SEND)
    assert isinstance(found, UnknownMachine) and found is not err
    assert found.message == "no machine type 'ordr'; installed: door, order"
    assert found.fields["installed"] == ["door", "order"] and (found.key, found.event) == ("o-1", "pay")


def test_a_defined_type_keeps_its_error_which_says_to_sync() -> None:
    memory = Memory({"order": False})
    err = UnknownMachine("fsm: order's objects are missing: run `pyfsm sync order`", machine="order")
    assert gateway(memory).explained(err, SEND) is err


def test_execute_denied_on_a_missing_per_type_routine_is_a_missing_type() -> None:
    # 1370 on fsm_ordr_send_v4: an app account has no right on a routine that does not exist
    memory = Memory({"order": True}, reporting_denied=True)
    denied = AccessDenied("execute command denied to user 'app'", errno=1370, machine="ordr")
    found = gateway(memory).explained(denied, SEND)
    assert isinstance(found, UnknownMachine) and found.fields["installed"] == ["order"]
    assert memory.seen == [db.queries.sql("types_defined"), routines.DEFINITION.call_sql(), routines.STATS.call_sql()]


def test_a_defined_type_not_installed_says_to_sync_it() -> None:
    memory = Memory({"order": False}, reporting_denied=True)
    denied = AccessDenied("execute command denied to user 'app'", errno=1370, machine="order")
    found = gateway(memory).explained(denied, SEND)
    assert isinstance(found, UnknownMachine)
    assert "defined but not installed: run `pyfsm sync order`" in found.message


@pytest.mark.parametrize(
    "err, routine",
    [
        (AccessDenied("execute command denied", errno=1370, machine="ordr"), routines.DEFINE),  # not per type
        (AccessDenied("SELECT command denied", errno=1142, machine="ordr"), SEND),  # not 1370
        (TransitionNotAllowed("fsm: no pay from paid", machine="order"), SEND),  # a defined type's refusal
        (UnknownMachine("fsm: no machine type", machine=None), SEND),  # no name to look up
    ],
    ids=["another-routine", "another-denial", "a-defined-types-refusal", "no-name"],
)
def test_what_is_not_about_a_missing_type_stays_as_it_is(err: FsmError, routine: routines.Routine) -> None:
    memory = Memory({"order": True})
    found = gateway(memory).explained(err, routine)
    assert found is err
    if isinstance(err, UnknownMachine) or routine is routines.DEFINE or err.errno == 1142:
        assert memory.seen == []  # decided without a read


def test_a_failure_to_read_keeps_the_error() -> None:
    err = UnknownMachine("fsm: no machine type ordr", machine="ordr")
    assert gateway(Memory({}, down=True)).explained(err, SEND) is err
    named = UnknownMachine("no machine type 'ordr'; installed: order", machine="ordr", installed=["order"])
    assert gateway(Memory({"order": True})).explained(named, SEND) is named  # explained once
