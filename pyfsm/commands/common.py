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


def port_number(text: str) -> int:
    """An argparse type: a TCP port (0: any free one)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, got {port}")
    return port


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value <= 10**8:  # NaN fails this too
        raise argparse.ArgumentTypeError(f"seconds must be from 0 to 100000000, got {text}")
    return value
