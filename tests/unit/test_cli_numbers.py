"""One rule for numbers on the command line (docs/cli.md): a number out of its range, or text
that is not one, is a usage error, exit 2, one line naming the range, before anything
connects; whatever the command. The parser is walked, so a numeric option added later is
checked too (or fails here until it takes the shared type, pyfsm.commands.common.NumberRange).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest
from helpers.cli import in_process

from pyfsm.cli import build_parser
from pyfsm.commands.common import NumberRange
from pyfsm.commands.operations import database_name
from pyfsm.commands.timers import duration, utc_time

#: Typed arguments that are not plain numbers, each with its own usage error (exit 2 too).
NOT_NUMBERS = {
    utc_time: "--at: an ISO 8601 time",
    duration: "--after: seconds or a number with a unit (30m); its range is checked (exit 2 too)",
    database_name: "demo --database: a name",
}


def _typed(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], argparse.Action]]:
    """Every argument with a type, with the subcommand path that reaches it (aliases once)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    yield from _typed(sub, (*path, name))
        elif action.type is not None:
            yield path, action


TYPED = list(_typed(build_parser(), ()))
NUMERIC = [(path, action) for path, action in TYPED if action.type not in NOT_NUMBERS]


def _name(action: argparse.Action) -> str:
    return action.option_strings[0] if action.option_strings else action.dest


def _text(value: float, whole: bool) -> str:
    return str(int(value)) if whole else repr(float(value))


def _argv(path: tuple[str, ...], action: argparse.Action, value: str) -> list[str]:
    return [*path, f"{action.option_strings[0]}={value}"] if action.option_strings else [*path, value]


def test_the_walk_finds_the_numeric_options() -> None:
    names = {(" ".join(path), _name(action)) for path, action in NUMERIC}
    assert {("demo", "--orders"), ("demo", "--workers"), ("timers cancel", "timer_id"), ("web", "--port")} <= names
    assert {("list", "--limit"), ("upgrade", "--batch"), ("send-many", "--chunk"), ("enqueue", "--delay")} <= names
    assert len(names) >= 30


@pytest.mark.parametrize(
    ("path", "action"), [pytest.param(path, action, id=f"{' '.join(path)} {_name(action)}") for path, action in NUMERIC]
)
def test_a_number_out_of_range_is_a_usage_error_everywhere(path: tuple[str, ...], action: argparse.Action) -> None:
    kind = action.type
    assert isinstance(kind, NumberRange), f"{' '.join(path)} {_name(action)} takes {kind!r}, not a NumberRange"
    low, high = kind.minimum, kind.maximum
    assert kind(_text(low, kind.whole)) == low and kind(_text(high, kind.whole)) == high  # both ends are in
    if action.default is not None and action.default is not argparse.SUPPRESS:
        assert low <= action.default <= high, "the default is in the range"
    bound = f"from {_text(low, True) if float(low).is_integer() else low} to "
    bound += _text(high, True) if float(high).is_integer() else str(high)
    for bad in (_text(low - 1, kind.whole), _text(high + 1, kind.whole), "many", *(["1.5"] if kind.whole else [])):
        result = in_process(*_argv(path, action, bad))
        assert result.returncode == 2, (bad, result)
        assert result.stdout == "" and len(result.stderr.splitlines()) == 1, (bad, result)
        line = result.stderr
        assert line.startswith(f"pyfsm: usage: pyfsm {' '.join(path)}: argument {_name(action)}: "), line
        if bad == "many" or bad == "1.5":
            assert f"not {kind.noun}: '{bad}'" in line, line
        else:
            assert f"must be {kind.noun} {bound}, got {bad}" in line, line


def test_the_shared_type_refuses_what_is_not_a_number_in_range() -> None:
    orders = NumberRange(1, 10)
    for bad in ("nan", "inf", "1e3", "", " ", "0x10", "9" * 5000):
        with pytest.raises(argparse.ArgumentTypeError):
            orders(bad)
    wait = NumberRange(0.1, 60, whole=False, noun="a number of seconds")
    assert wait("0.1") == 0.1 and wait("60") == 60.0 and wait(" 2.5 ") == 2.5
    for bad in ("nan", "inf", "-inf", "0.05", "60.01"):
        with pytest.raises(argparse.ArgumentTypeError):
            wait(bad)
