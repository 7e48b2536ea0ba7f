"""pyfsm.guards without a server: the language checked, described, evaluated, and rendered
as SQL that no text in a guard can change (tests/server/test_guards.py runs it on both servers)."""

from __future__ import annotations

import json
import re

import pytest

from pyfsm import InvalidDefinition, Machine, data, transition
from pyfsm.definition_file import dump_machines, parse_machines
from pyfsm.guards import Guard, all_of, any_of, describe, holds, not_, parse, to_json
from pyfsm.reporting.diagram import dot, mermaid
from pyfsm.schema.guard_sql import condition_sql, hex_bytes


def test_the_python_form_is_the_json_form() -> None:
    cond = all_of(data("total") >= 100, any_of(data("$.country").is_in(["FR", "DE"]), not_(data("vip").missing())))
    assert to_json(cond) == {
        "all": [
            {"path": "$.total", "op": ">=", "value": 100},
            {
                "any": [
                    {"path": "$.country", "op": "in", "value": ["FR", "DE"]},
                    {"not": {"path": "$.vip", "op": "missing"}},
                ]
            },
        ]
    }
    assert parse(to_json(cond)) == parse(cond) == cond
    assert (data("a") == 1) & (data("b") == 2) == all_of(data("a") == 1, data("b") == 2)
    assert ~(data("a") == 1) | data("b").is_null() == any_of(not_(data("a") == 1), data("b").is_null())
    assert describe(cond) == 'total >= 100 and (country in ["FR", "DE"] or not (vip missing))'
    assert Guard(data("items[0].sku") == "x").label == 'items[0].sku == "x"'
    assert len(Guard(data("s").is_in(["x" * 30] * 3)).label) == 64  # cut short, with "..."


@pytest.mark.parametrize(
    ("guard", "problem"),
    [
        ({"path": "$.a'; DROP TABLE t; --", "op": "exists"}, "path"),
        ({"path": "$", "op": "exists"}, "path"),
        ({"path": "$.a", "op": "~="}, "unknown op"),
        ({"path": "$.a", "op": "==", "value": [1]}, "literal"),
        ({"path": "$.a", "op": "<", "value": False}, "compares numbers or strings"),
        ({"path": "$.a", "op": "==", "value": float("nan")}, "2**53"),
        ({"path": "$.a", "op": "in", "value": []}, "1 to 64"),
        ({"all": []}, "non-empty"),
        (
            {"not": {"not": {"not": {"not": {"not": {"not": {"not": {"not": {"path": "$.a", "op": "exists"}}}}}}}}},
            "8 deep",
        ),
        ({"any": [{"path": "$.a", "op": "exists"}] * 64}, "64 conditions"),
        ("$.a exists", "an object"),
    ],
)
def test_every_problem_is_refused_with_what_it_is(guard: object, problem: str) -> None:
    with pytest.raises(InvalidDefinition, match=re.escape(problem)) as refused:
        parse(guard)
    assert refused.value.errno == 31001 and refused.value.fields["part"] == "guard"


def test_rendered_sql_carries_no_text_of_the_guard() -> None:
    hostile = "x'); DROP TABLE fsm_rules; -- \\ \" */"
    sql = condition_sql(parse(data("name").is_in([hostile, "é", 1.5, None, True])))
    assert hostile not in sql and "é" not in sql and hex_bytes(hostile) in sql
    # every quoted text is the checked path or one of pyfsm's own words; strings are X'...' bytes
    quoted = set(re.findall(r"'([^']*)'", re.sub(r"X'[0-9a-f]*'", "", sql)))
    assert quoted == {"$.name", "STRING", "INTEGER", "UNSIGNED INTEGER", "DOUBLE", "DECIMAL", "NULL", "BOOLEAN", "true"}
    with pytest.raises(ValueError):  # a Test built by hand, around the checks, never reaches SQL
        from pyfsm.guards import Test

        condition_sql(Test("$.a' OR 1=1 --", "exists"))


def test_machines_branch_in_order_with_the_default_last() -> None:
    m = Machine(
        name="claim",
        states=["new", "review", "paid", "held"],
        start=["new"],
        final=["paid"],
        transitions=[
            transition("settle", "new", "review", guard=data("amount") >= 1000),
            transition("settle", "new", "paid", guard=data("iban").exists(), guard_name="iban"),
            ("settle", "new", "held"),
            ("approve", "review", "paid"),
            ("pay", "held", "paid"),
        ],
    )
    assert [m.target("new", "settle", d) for d in ({"amount": 1000}, {"iban": "x"}, {})] == ["review", "paid", "held"]
    assert m.target("new", "settle") is None and m.allows("new", "settle") and m.has_guards
    assert [t.target for t in m.rules("new", "settle")] == ["review", "paid", "held"]
    with pytest.raises(InvalidDefinition, match="the default comes last") as refused:
        Machine(
            name="m",
            states=["a", "b"],
            start=["a"],
            transitions=[("go", "a", "b"), transition("go", "a", "a", guard=data("x") == 1)],
        )
    assert refused.value.fields["field"] == "transitions"
    with pytest.raises(InvalidDefinition, match="guard_name without a guard"):
        transition("go", "a", "b", guard_name="x")


def test_definition_files_round_trip_guards_and_point_at_the_problem() -> None:
    m = Machine(
        name="order",
        states=["paid", "shipped", "held"],
        start=["paid"],
        final=["shipped"],
        transitions=[
            transition("ship", "paid", "shipped", guard=data("address").exists(), guard_name="address set"),
            transition("ship", "paid", "held", guard=(data("total") >= 1000) | (data("x") != "y")),
            ("release", "held", "paid"),
        ],
    )
    for fmt in ("json", "yaml"):
        assert parse_machines(dump_machines([m], fmt), fmt=fmt) == [m]
    body = json.loads(m.to_json())
    body["transitions"][1]["guard"] = {"any": [{"path": "$.total", "op": ">=", "value": "1000", "x": 1}]}
    with pytest.raises(InvalidDefinition) as refused:
        parse_machines(json.dumps({"name": "order", **body}), fmt="json", source="order.json")
    assert str(refused.value).startswith("order.json: transitions[1].guard: op >= takes op, path, value")
    unguarded = Machine(name="door", states=["a", "b"], start=["a"], transitions=[("go", "a", "b")])
    assert "guard" not in unguarded.to_json()  # a definition without guards keeps its body


def test_diagrams_draw_the_guard_on_its_edge() -> None:
    m = Machine(
        name="order",
        states=["paid", "shipped"],
        start=["paid"],
        final=["shipped"],
        transitions=[transition("ship", "paid", "shipped", guard=data("address").exists(), guard_name="address set")],
    )
    assert '"state_paid" -> "state_shipped" [label="ship [address set]"];' in dot(m)
    assert "s_paid --> s_shipped: ship #91;address set#93;" in mermaid(m)


def test_holds_reads_json_as_both_servers_do() -> None:
    doc = {"n": 1, "f": 1.0, "s": "1", "b": True, "z": None, "l": ["a"], "o": {"k": "v"}, "t": "x"}
    assert holds(parse(data("n") == 1.0), doc) and holds(parse(data("f") == 1), doc)
    assert not holds(parse(data("s") == 1), doc) and not holds(parse(data("b") == 1), doc)
    assert holds(parse(data("z").is_null()), doc) and not holds(parse(data("missing").is_null()), doc)
    assert holds(parse(data("missing") != 1), doc) and not holds(parse(data("missing") < 1), doc)
    assert holds(parse(data("l[0]") == "a"), doc) and holds(parse(data("t[0]") == "x"), doc)
    assert not holds(parse(data("t[1]").exists()), doc) and holds(parse(data("o.k") == "v"), doc)


def test_the_sql_checks_the_limits_python_checks() -> None:
    """fsm_check_guard_v1 and fsm_define_v8 write pyfsm.limits' numbers as literals: the same ones."""
    from pyfsm import limits
    from pyfsm.schema.resources import read_sql

    check = read_sql("internal/fsm_check_guard_v1.sql")
    for text in (
        f"v_k > {limits.GUARD_NODES}",
        f"v_depth > {limits.GUARD_DEPTH}",
        f"NOT BETWEEN 1 AND {limits.GUARD_LIST_ITEMS}",
        f"> {limits.GUARD_STRING_CHARS} THEN",
        f"> {limits.GUARD_PATH_SEGMENTS} THEN",
        f"> {limits.GUARD_NUMBER_LIMIT}e0",
    ):
        assert text in check, text
    assert f"NOT BETWEEN 1 AND {limits.GUARD_NAME_CHARS} OR" in read_sql("procedures/fsm_define_v8.sql")
