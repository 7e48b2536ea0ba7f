"""Arguments of the wrong type get a pyfsm error naming them, never a TypeError, an
AttributeError or an OverflowError from deep inside, and never after SQL ran.

Most tests use a Store whose server does not exist (port 1): a call that got as far as
SQL would raise DatabaseUnavailable instead of the error expected. The last one runs a
handler on the real server.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from helpers.common import unique

from pyfsm import Context, InvalidArgument, InvalidData, InvalidDefinition, Machine, Outcome, Process, Store
from pyfsm.db.jsondata import dump_object
from pyfsm.definition import Transition
from pyfsm.schema.grants import Account

pytestmark = pytest.mark.filterwarnings("ignore::pyfsm.UnreachableStateWarning")


@pytest.fixture(scope="module")
def offline() -> Iterator[Store]:
    store = Store("mysql://root@127.0.0.1:1/nowhere")
    yield store
    store.close()


# --- Machine -------------------------------------------------------------------------------


def machine(**overrides: Any) -> Machine:
    spec: dict[str, Any] = {
        "name": "m",
        "states": ["a", "b"],
        "start": ["a"],
        "final": ["b"],
        "transitions": [("go", "a", "b")],
        **overrides,
    }
    return Machine(**spec)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"name": None}, "name"),
        ({"name": ["m"]}, "name"),
        ({"states": "ab"}, "states"),
        ({"states": {"a", "b"}}, "states"),
        ({"states": [["a"]]}, "states"),
        ({"start": None}, "start"),
        ({"start": "a"}, "start"),
        ({"start": [{}]}, "start"),
        ({"final": None}, "final"),
        ({"final": [["b"]]}, "final"),
        ({"transitions": None}, "transitions"),
        ({"transitions": "go"}, "transitions"),
        ({"transitions": {"go": ("a", "b")}}, "transitions"),
        ({"transitions": [("go", "a", "b", "c")]}, "transitions"),
        ({"transitions": [None]}, "transitions"),
        ({"transitions": [(["go"], "a", "b")]}, "transitions"),
        ({"transitions": [("go", "a", ["b"])]}, "transitions"),
        ({"transitions": [("go", None, "b")]}, "transitions"),
        ({"transitions": [("go", [["a"]], "b")]}, "transitions"),
        ({"transitions": [Transition("go", ("a",), {})]}, "transitions"),  # type: ignore[arg-type]
        ({"topic": ["t"]}, "topic"),
        ({"lock_lease_seconds": "60"}, "lock_lease_seconds"),
        ({"uses_global_lock": None}, "uses_global_lock"),
        ({"event_data": 1}, "event_data"),
    ],
)
def test_machine_names_the_argument_of_the_wrong_type(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidDefinition) as info:
        machine(**overrides)
    assert info.value.fields["field"] == field, info.value


def test_machine_takes_tuples_and_transitions_with_one_source() -> None:
    m = machine(states=("a", "b"), start=("a",), final=("b",), transitions=(Transition("go", "a", "b"),))  # type: ignore[arg-type]
    assert m.edges == (Transition("go", ("a",), "b"),) and m.states == ("a", "b")


def test_machine_takes_any_ordered_iterable() -> None:
    """Generators, dict keys and map objects are lists of names too (a set is not: no order)."""
    states = {"a": 1, "b": 2}.keys()
    m = machine(
        states=states,
        start=(s for s in ["a"]),
        final=iter(["b"]),  # type: ignore[arg-type]
        transitions=map(tuple, [["go", ["a"], "b"]]),
    )  # type: ignore[arg-type]
    assert m.states == ("a", "b") and m.start == ("a",) and m.edges == (Transition("go", ("a",), "b"),)
    assert machine(transitions=[("go", iter(["a"]), "b")]).edges == (Transition("go", ("a",), "b"),)


@pytest.mark.parametrize("owner", ["", "a b", "x" * 56, 5, ["w"]])
def test_worker_refuses_a_bad_owner(offline: Store, owner: Any) -> None:
    from pyfsm import Worker

    with pytest.raises(InvalidArgument):
        Worker(offline, [linear()], owner=owner)


def test_a_worker_owner_gets_a_unique_suffix(offline: Store) -> None:
    from pyfsm import Worker

    first, second = (Worker(offline, [linear()], owner="billing-1") for _ in range(2))
    assert first.owner.startswith("billing-1:") and first.owner != second.owner  # never two workers on one token


def test_machine_target_of_unhashable_names_is_none() -> None:
    m = machine()
    assert m.target("a", ["go"]) is None and m.target({}, "go") is None  # type: ignore[arg-type]


# --- data and metadata ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        {1: "a", "1": "b"},
        {None: 1},
        {True: 1},
        {1.5: 1},
        {"a": {"b": {2: 1}}},
        {"a": [1, {"b": [{3: 1}]}]},
        {"a": (0, {4: 1})},
        {"x": math.nan},
        {"x": math.inf},
        {"x": [-math.inf]},
    ],
)
@pytest.mark.parametrize("where", ["data", "metadata"])
def test_send_and_create_refuse_what_json_cannot_hold_before_any_sql(
    offline: Store, where: str, value: dict[Any, Any]
) -> None:
    with pytest.raises(InvalidData):
        offline.send("m", "k", "go", **{where: value})
    with pytest.raises(InvalidData):
        offline.create("m", "k", **{where: value})


def test_a_non_string_key_is_named_with_its_path() -> None:
    with pytest.raises(InvalidData, match=r"data\['a'\]\[1\]\['b'\] has the key 7 \(int\)"):
        dump_object("data", {"a": [0, {"b": {7: 1}}]})
    assert dump_object("data", {"a": [0, {"b": {"7": 1}}], "é": None}) == '{"a":[0,{"b":{"7":1}}],"é":null}'


# --- Store ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "args", "kwargs"),
    [
        ("send", ("m", "k", "go"), {"lease": "my-lease"}),
        ("send", ("m", "k", "go"), {"lease": object()}),
        ("send", ("m", "k", "go"), {"expected_version": True}),
        ("send", ("m", "k", "go"), {"expected_version": -1}),
        ("send", ("m", "k", "go"), {"expected_version": 1.0}),
        ("send", ("m", "k", "go"), {"expected_version": "1"}),
        ("send", ("m", ["k"], "go"), {}),
        ("send", ("m", "k", None), {}),
        ("create", (["m"], "k"), {}),
        ("create", ("m", b"k"), {}),
        ("get", ("m", None), {}),
        ("history", ({"m": 1}, "k"), {}),
        ("in_state", ("m", "a"), {"limit": None}),
        ("in_state", ("m", "a"), {"after_id": 1.5}),
        ("in_state", ("m", ("a",)), {}),
        ("counts", (None,), {}),
        ("failed", ("m",), {"limit": True}),
        ("definition", ("m", "1"), {}),
        ("enqueue", ("m", "k"), {"delay_seconds": math.nan}),
        ("enqueue", ("m", "k"), {"run_immediately": "yes"}),
        ("pause", ("m", 5), {}),
        ("resume", ("m", ["k"]), {}),
        ("set_locking", ("m", "k"), {"global_lock": 1}),
        ("lock", ("m", "k"), {"heartbeat": "yes"}),
        ("locks", (), {"lookup_key": 5}),
        ("force_unlock", ("acct",), {"reason": None}),
        ("force_unlock", ("acct",), {"reason": "r", "scope": ["*"]}),
        ("state_at", ("m", "k", "2024-01-01"), {}),
        ("state_at", ("m", "k", datetime.max.replace(tzinfo=timezone(-timedelta(hours=5)))), {}),
        ("state_at", ("m", "k", datetime.min.replace(tzinfo=timezone(timedelta(hours=5)))), {}),
        ("define", ({"name": "m"},), {}),
    ],
)
def test_store_refuses_arguments_of_the_wrong_type_before_any_sql(
    offline: Store, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    with pytest.raises(InvalidArgument):
        getattr(offline, method)(*args, **kwargs)


# --- Account -------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [None, 5, b"app", ["app"]])
def test_account_parse_refuses_non_strings(text: Any) -> None:
    with pytest.raises(InvalidArgument):
        Account.parse(text, "app")


# --- Process and Context -------------------------------------------------------------------


def linear() -> Process:
    return Process.linear("p", ["a", "b"])


@pytest.mark.parametrize(
    "settings",
    [{"run_immediately": "yes"}, {"run_immediately": None}, {"failure_event": 5}, {"failure_event": ["back"]}],
)
def test_process_settings_of_the_wrong_type(settings: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument):
        Process(linear().machine, **settings)


@pytest.mark.parametrize(
    ("steps", "options"),
    [
        ("ab", None),
        (None, None),
        (5, None),
        (["a"], 5),
        (["a"], {"name": "x"}),
        (["a"], {"bogus": 1}),
        (["a", ["b"]], None),
    ],
)
def test_linear_refuses_steps_and_options_of_the_wrong_type(steps: Any, options: Any) -> None:
    with pytest.raises(InvalidDefinition):
        Process.linear("p", steps, machine_options=options)


def test_linear_takes_machine_options() -> None:
    assert Process.linear("p", ("a",), machine_options={"uses_local_lock": True}).machine.uses_local_lock


def test_register_refuses_an_unhashable_failure_event() -> None:
    with pytest.raises(InvalidDefinition):
        linear().register("a", lambda ctx: ctx.next(), failure_event=["back"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("store", "key", "options"),
    [
        ("not a store", "k", {}),
        (None, "k", {}),
        ("offline", 5, {}),
        ("offline", "k", {"run_immediately": "yes"}),
    ],
)
def test_run_and_start_refuse_arguments_of_the_wrong_type(
    offline: Store, store: Any, key: Any, options: dict[str, Any]
) -> None:
    store = offline if store == "offline" else store
    process = linear()
    with pytest.raises(InvalidArgument):
        process.start(store, key, **options)
    if not options:
        with pytest.raises(InvalidArgument):
            process.run(store, key)


@pytest.mark.parametrize("outcome", ["fire", "pause", "complete", "wait"])
@pytest.mark.parametrize("data", [{1: "x"}, {"a": {None: 1}}, {"x": math.nan}, {"s": {1, 2}}])
def test_context_refuses_data_json_cannot_hold(outcome: str, data: dict[Any, Any]) -> None:
    ctx = Context(machine="p", key="k", lookup_key=None, state="a", data=data, attempt=1, version=1)
    with pytest.raises(InvalidData):
        getattr(ctx, outcome)(*(["next"] if outcome == "fire" else []))
    ctx.data = {"ok": [1.5, None]}
    assert getattr(ctx, outcome)(*(["next"] if outcome == "fire" else [])).kind == outcome
    assert ctx.fail("no").kind == "fail"  # a failure writes no data: not checked


def _non_string_key(ctx: Context) -> Outcome:
    ctx.data[1] = "one"  # type: ignore[index]
    return ctx.next()


def _unhashable_event(ctx: Context) -> Outcome:
    return ctx.fire(["next"])  # type: ignore[arg-type]


def _non_string_key_then_none(ctx: Context) -> None:
    ctx.data[1] = "one"  # type: ignore[index]


@pytest.mark.parametrize(
    ("handler", "error"),
    [
        (_non_string_key, "InvalidData"),
        (_unhashable_event, "HandlerBug"),
        (_non_string_key_then_none, "InvalidData"),
    ],
)
def test_a_handler_result_of_the_wrong_type_fails_its_step_at_once(store: Store, handler: Any, error: str) -> None:
    process = Process.linear(unique("types"), ["a", "b"], max_attempts=3, backoff=0)
    process.register("a", handler)
    store.define(process.machine)
    result = process.start(store, "k-1", data={"1": "kept"})
    assert (result.state, result.status, result.steps) == ("a", "failed", 0), result
    assert store.get(process.name, "k-1").data == {"1": "kept"}
    [row] = store.errors(process.name, "k-1")  # not retried: it would fail the same way every time
    assert row.attempt == 1 and row.error_type is not None and row.error_type.endswith(error), row
