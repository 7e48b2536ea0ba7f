"""What every `pyfsm` command shares: registration, output (text or --json), loading objects,
JSON arguments and progress bars."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Protocol, TypeVar

from ..errors import InvalidArgument, InvalidData
from ..limits import MAX_BIGINT, PAGE_ROWS

T = TypeVar("T")
Handler = Callable[[argparse.Namespace], None]


class Add(Protocol):
    """Adds one subcommand: ``add(name, handler, help, example, aliases=())`` returns its
    parser, which already has --dsn and --json; each alias is another name of the command."""

    def __call__(
        self, name: str, func: Handler, help_text: str, example: str, aliases: Sequence[str] = ()
    ) -> argparse.ArgumentParser: ...


def add_read_dsn(parser: argparse.ArgumentParser) -> None:
    """--read-dsn, for the commands whose reads may come from a replica (Store(read_dsn=...))."""
    parser.add_argument(
        "--read-dsn",
        default=None,
        help="a read replica to read from (default: $PYFSM_READ_DSN); it may lag the primary",
    )


def read_dsn(args: argparse.Namespace) -> str | None:
    """The replica a command reads from: --read-dsn, else $PYFSM_READ_DSN, else none (the primary)."""
    return getattr(args, "read_dsn", None) or os.environ.get("PYFSM_READ_DSN") or None


def plain(value: Any) -> Any:
    """A value as JSON can hold it: dataclasses as objects, datetimes in ISO 8601 (UTC)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def emit(args: argparse.Namespace, data: Any, text: str | Iterable[str] | None = None) -> None:
    """Print ``data`` as JSON with --json, else ``text`` (lines), else ``data`` as JSON anyway."""
    if args.json or text is None:
        print(json.dumps(plain(data), ensure_ascii=False, sort_keys=False))
        return
    print(text if isinstance(text, str) else "\n".join(text))


def table(rows: list[dict[str, Any]], columns: list[str]) -> list[str]:
    """Rows as aligned text columns, a header line first."""
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    return lines


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return f"{value:%Y-%m-%d %H:%M:%S.%f}"[:23]
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(plain(value))


def json_object(what: str, text: str | None) -> dict[str, Any] | None:
    """A --data / --metadata argument: a JSON object, or None when not given."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidData(f"--{what} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidData(f"--{what} must be a JSON object, got {type(value).__name__}")
    return value


def load(path: str, *kinds: type) -> Any:
    """The object at ``module.path:attribute``, which must be one of ``kinds``.

    The current directory is searched first, as uvicorn, gunicorn and celery do (and
    ``python -m``): ``pyfsm worker myapp.processes:checkout`` run where ``myapp`` is needs no
    PYTHONPATH.
    """
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise InvalidArgument(f"expected module.path:attribute, got {path!r}")
    _search_current_directory()
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise InvalidArgument(f"cannot load {path}: {exc}") from None
    if not isinstance(obj, kinds):
        names = " or ".join(f"pyfsm.{k.__name__}" for k in kinds)
        raise InvalidArgument(f"{path} is a {type(obj).__name__}, not a {names}")
    return obj


def _search_current_directory() -> None:
    """Put the current directory first on sys.path, unless it is there already."""
    try:
        cwd = os.getcwd()
    except OSError:  # removed since: nothing to import from
        return
    if not any(os.path.abspath(entry or os.curdir) == cwd for entry in sys.path):
        sys.path.insert(0, cwd)


class Progress:
    """A one-line progress bar on stderr, drawn only where someone watches (a terminal, or
    --progress); stdout stays clean for --json."""

    def __init__(self, total: int, label: str, *, enabled: bool | None = None, width: int = 30) -> None:
        self.total, self.label, self.width, self.done = max(total, 0), label, width, 0
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._shown = ""

    def update(self, done: int) -> None:
        self.done = min(max(done, 0), self.total) if self.total else done
        if not self.enabled:
            return
        filled = self.width * self.done // self.total if self.total else self.width
        count = f"{self.done}/{self.total}" if self.total else f"{self.done}"  # total 0: not known (stdin)
        line = f"\r{self.label} [{'#' * filled}{'.' * (self.width - filled)}] {count}"
        if line != self._shown:
            sys.stderr.write(line)
            sys.stderr.flush()
            self._shown = line

    def close(self) -> None:
        if self.enabled and self._shown:
            sys.stderr.write("\n")
            sys.stderr.flush()


def progress_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="draw a progress bar on stderr (default: when stderr is a terminal)",
    )


def env_password(variable: str | None) -> str | None:
    if variable is None:
        return None
    value = os.environ.get(variable)
    if not value:
        raise InvalidArgument(f"--password-env names {variable}, which is not set or empty")
    return value


@dataclasses.dataclass(frozen=True)
class NumberRange:
    """An argparse type: a number from ``minimum`` to ``maximum`` (``whole``: an integer).

    Every numeric option and argument of every command takes one, so that the rule docs/cli.md
    states holds everywhere alike: a number out of its range, or text that is not one, is a
    usage error (exit 2, one line naming the range) before anything connects, not a pyfsm
    error from the layer below (exit 1). ``noun`` names what is wanted in that line.
    tests/unit/test_cli_numbers.py finds every numeric option and checks both ends.
    """

    minimum: float
    maximum: float
    whole: bool = True
    noun: str = "a whole number"

    def __call__(self, text: str) -> Any:
        try:
            value: float = int(text) if self.whole else float(text)
        except ValueError:  # int() also refuses more than 4300 digits with a ValueError
            raise argparse.ArgumentTypeError(f"not {self.noun}: {text!r:.40}") from None
        if not self.minimum <= value <= self.maximum:  # NaN fails this too
            raise argparse.ArgumentTypeError(
                f"must be {self.noun} from {_bound(self.minimum)} to {_bound(self.maximum)}, got {text:.40}"
            )
        return value


def _bound(value: float) -> str:
    """A range's end as a person writes it: 86400, not 86400.0; 0.1 stays 0.1."""
    return str(int(value)) if float(value).is_integer() else str(value)


def whole(minimum: int, maximum: int = MAX_BIGINT) -> NumberRange:
    """An argparse type: an integer from ``minimum`` to ``maximum`` (default: BIGINT's largest)."""
    return NumberRange(minimum, maximum)


def seconds_between(minimum: float, maximum: float) -> NumberRange:
    """An argparse type: a number of seconds (a fraction allowed) from ``minimum`` to ``maximum``."""
    return NumberRange(minimum, maximum, whole=False, noun="a number of seconds")


#: A TCP port (0: any free one).
port_number = NumberRange(0, 65535, noun="a port number")
#: Seconds, from 0 to 100000000 (about three years).
seconds = seconds_between(0, 10**8)
#: A listing's --limit: 1 to pyfsm.limits.PAGE_ROWS, what one call returns.
page_limit = whole(1, PAGE_ROWS)
#: A listing's --after-id: 0 (the first page) or the last id of the previous page.
after_id = whole(0)
#: An id that names a row (a timer, an outbox row): 1 or more.
row_id = whole(1)
