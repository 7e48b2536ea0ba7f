"""Processes the engine tests run, importable by spawned worker processes too.

``checkout(name)``: a linear order process reserve -> charge -> ship -> done whose handlers
pass data along. ``Side effects`` go to the table ``side_effects`` (created by the tests) so
that the tests can count how often each handler really ran, across processes.
"""

from __future__ import annotations

import os
import time
from typing import Any

import pymysql

from pyfsm import Context, Outcome, Process
from pyfsm.db import parse_dsn

_side: dict[int, Any] = {}


def record(ctx: Context, what: str) -> None:
    """Write a side effect of a handler run to the side_effects table (autocommitted at once)."""
    conn = _side.get(os.getpid())
    if conn is None:
        conn = _side[os.getpid()] = pymysql.connect(**parse_dsn(os.environ["PYFSM_ENGINE_DSN"]).connect_kwargs())
    conn.cursor().execute(
        "INSERT INTO side_effects (machine, instance_key, state, what, pid) VALUES (%s, %s, %s, %s, %s)",
        (ctx.machine, ctx.key, ctx.state, what, os.getpid()),
    )


def reserve(ctx: Context) -> Outcome:
    ctx.data["reserved"] = ctx.data.get("items", 1)
    ctx.data.setdefault("trail", []).append("reserve")
    return ctx.next()


def charge(ctx: Context) -> Outcome:
    ctx.data["charged"] = ctx.data["reserved"] * 10  # uses what reserve wrote
    ctx.data["trail"].append("charge")
    return ctx.next()


def ship(ctx: Context) -> Outcome:
    ctx.data["trail"].append("ship")
    return ctx.next()


def checkout(name: str, **settings: Any) -> Process:
    process = Process.linear(name, ["reserve", "charge", "ship"], **settings)
    process.register("reserve", reserve)
    process.register("charge", charge)
    process.register("ship", ship)
    return process


# -- for worker processes -----------------------------------------------------------------


def slow_charge(ctx: Context) -> Outcome:
    """Records that it started, then takes its time: a worker killed here dies mid-handler."""
    record(ctx, "charge-start")
    time.sleep(float(os.environ.get("PYFSM_SLOW_SECONDS", "0")))
    record(ctx, "charge-end")
    ctx.data["charged"] = True
    return ctx.next()


def counted(ctx: Context) -> Outcome:
    record(ctx, ctx.state)
    return ctx.next()


def build(kind: str, name: str, **settings: Any) -> Process:
    """The process a worker process runs, by kind (module-level so that spawn can import it)."""
    if kind == "slow":
        process = Process.linear(name, ["reserve", "charge", "ship"], **settings)
        process.register("reserve", counted)
        process.register("charge", slow_charge)
        process.register("ship", counted)
        return process
    if kind == "drain":
        process = Process.linear(name, ["one", "two"], **settings)
        process.register("one", counted)
        process.register("two", counted)
        return process
    raise ValueError(kind)


#: for `pyfsm worker engine_fixtures:CLI_CHECKOUT` in tests/server/test_cli.py
CLI_CHECKOUT = checkout("cli_checkout")
