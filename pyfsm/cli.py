"""The `pyfsm` command line.

Every command takes --dsn (default: $PYFSM_DSN), exits 0 on success and non-zero with a
one-line error on stderr otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Sequence
from typing import NoReturn, TextIO

from . import __version__
from .commands import attachments, bulk, graph, instances, machines, operations, upgrade, web
from .commands import metrics as metrics_commands
from .commands import schema as schema_commands
from .commands import timers as timers_commands
from .commands.common import Handler
from .db import translate
from .errors import FsmError

#: The exit status when stdout was closed before the output was written (`pyfsm list ... | head`):
#: a shell's for a command that SIGPIPE ended (128 + 13), as 130 is Ctrl-C's (128 + SIGINT).
STDOUT_CLOSED = 141

#: Commands that only talk to a person: the demo narrates what it does, the console serves pages.
TEXT_ONLY = frozenset({"demo", "web"})
_TEXT_ONLY_NAMES = " and ".join(sorted(TEXT_ONLY))  # named by the help's epilog

EPILOG = f"""examples:
  pyfsm migrate --dsn mysql://root@127.0.0.1:3306/app
  pyfsm install examples/order.yaml
  pyfsm send order o-1001 pay && pyfsm show order o-1001 --json
  cut -f1 paid.tsv | pyfsm send-many order --event ship --progress
  pyfsm history order o-1001
  pyfsm list order paid --limit 20
  pyfsm counts order
  pyfsm graph order --counts
  pyfsm types
  pyfsm stats
  pyfsm upgrade order --dry-run && pyfsm upgrade order --map shipped=sent
  pyfsm attach order --table orders --key id --state status --dry-run
  pyfsm grant --app shop_app --reporting analyst --create
  pyfsm worker myapp.processes:checkout
  pyfsm timers schedule order o-1001 cancel --after 30m && pyfsm timers run --until-idle
  pyfsm relay --kafka localhost:9092
  pyfsm metrics --serve --port 9464
every command takes --dsn (default $PYFSM_DSN) and --help; all but {_TEXT_ONLY_NAMES} (text only) take --json
exit 0 on success; 1 on an error, with one line on stderr (pyfsm: Class (errno): what is wrong, what to do);
2 on a usage error, a number out of its range too (send-many: 1 also when an item was refused, each refusal listed;
upgrade: 1 also when instances were left behind, attach and adopt when rows were, the summary says why;
check: 1 also when an attached type no longer fits its table);
141 when stdout is closed before all is written (`| head`), nothing said; 130 on Ctrl-C
"""


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors as one line on stderr like every other pyfsm error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"pyfsm: usage: {self.prog}: {_one_line(message)} (see {self.prog} --help)\n")


def _one_line(text: object) -> str:
    """An error message on one line: what a user typed may hold newlines."""
    return " ".join(str(text).splitlines()) or type(text).__name__


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="pyfsm",
        description="Persistent state machines enforced by MySQL.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version", action="version", version=f"pyfsm {__version__}", help="print the version and exit"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    def add(
        name: str, func: Handler, help_text: str, example: str, aliases: Sequence[str] = ()
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(
            name,
            help=help_text,
            description=help_text,
            epilog=f"example:\n  {example}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
            aliases=list(aliases),
        )
        p.add_argument("--dsn", default=None, help="mysql://user:password@host:port/db (default: $PYFSM_DSN)")
        if name not in TEXT_ONLY:
            p.add_argument("--json", action="store_true", help="print JSON (for scripts)")
        p.set_defaults(json=False)
        p.set_defaults(func=func)
        return p

    for module in (
        schema_commands,
        instances,
        machines,
        upgrade,
        attachments,
        bulk,
        graph,
        operations,
        timers_commands,
        web,
    ):
        module.register(add)
    metrics_commands.register(add)
    return parser


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """A warning as one line on stderr, as errors are: pyfsm's own (an unreachable state) say
    everything in their message; another's is named by its category. No file, no source line."""
    del filename, lineno, line
    own = category.__module__.split(".")[0] == "pyfsm"
    text = _one_line(message) if own else f"{category.__name__}: {_one_line(message)}"
    print(f"pyfsm: warning: {text}", file=file or sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        try:
            return _run(argv)
        finally:  # what is still buffered goes now, where a closed stdout is caught, not at exit
            sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (`pyfsm list ... | head`): stop quietly
        _stdout_to_devnull()
        return STDOUT_CLOSED


def _run(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with warnings.catch_warnings():  # restores the warnings machinery on the way out
            if not os.environ.get("PYFSM_DEBUG"):
                warnings.showwarning = _show_warning
            args.func(args)
        return int(getattr(args, "exit_code", 0))
    except KeyboardInterrupt:
        print("pyfsm: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        raise  # stdout closed: main ends quietly, this is no error to report
    except Exception as exc:  # one line for users; PYFSM_DEBUG=1 shows the traceback of what is not pyfsm's
        if os.environ.get("PYFSM_DEBUG") and not isinstance(exc, FsmError):
            raise
        print(error_line(exc), file=sys.stderr)
        return 1


def _stdout_to_devnull() -> None:
    """Point stdout's descriptor at /dev/null, so that the interpreter's last flush of what the
    closed pipe refused finds somewhere to go instead of printing a BrokenPipeError at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # not a file (a test's StringIO): nothing is left to flush
        pass


def error_line(exc: BaseException) -> str:
    """The one line every command (`pyfsm demo` and `pyfsm web` too) prints for an error:
    ``pyfsm: Class (errno): message``, a driver's error translated to pyfsm's first."""
    err = translate(exc)
    name = type(err).__name__
    errno = getattr(err, "errno", None) or (exc.args[0] if exc.args and isinstance(exc.args[0], int) else "")
    text = _one_line(err)
    return f"pyfsm: {name} ({errno}): {text}" if errno != "" else f"pyfsm: {name}: {text}"


if __name__ == "__main__":
    sys.exit(main())
