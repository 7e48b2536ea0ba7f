"""The `pyfsm` command line.

Every command takes --dsn (default: $PYFSM_DSN), exits 0 on success and non-zero with a
one-line error on stderr otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .commands import graph, instances, operations
from .commands import schema as schema_commands
from .commands.common import Handler
from .db import translate
from .errors import FsmError

EPILOG = """examples:
  pyfsm migrate --dsn mysql://root@127.0.0.1:3306/app
  pyfsm install examples/order.yaml
  pyfsm send order o-1001 pay && pyfsm show order o-1001 --json
  pyfsm history order o-1001
  pyfsm list order paid --limit 20
  pyfsm counts order
  pyfsm graph order --counts
  pyfsm stats
  pyfsm grant --app shop_app --reporting analyst --create
  pyfsm worker myapp.processes:checkout
  pyfsm relay --kafka localhost:9092
every command: --dsn (default $PYFSM_DSN), --json, --help; exit 0 on success, else 1 and one line on stderr
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pyfsm", description="Persistent state machines enforced by MySQL.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, func: Handler, help_text: str, example: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text, epilog=f"example:\n  {example}",
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("--dsn", default=None, help="mysql://user:password@host:port/db (default: $PYFSM_DSN)")
        p.add_argument("--json", action="store_true", help="print JSON (for scripts)")
        p.set_defaults(func=func)
        return p

    for module in (schema_commands, instances, graph, operations):
        module.register(add)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except FsmError as exc:
        print(f"pyfsm: {type(exc).__name__} ({exc.errno}): {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("pyfsm: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # one line for users; PYFSM_DEBUG=1 shows the traceback
        if os.environ.get("PYFSM_DEBUG"):
            raise
        err = translate(exc)
        name = type(err).__name__
        errno = getattr(err, "errno", None) or (exc.args[0] if exc.args and isinstance(exc.args[0], int) else "")
        print(f"pyfsm: {name} ({errno}): {err}" if errno != "" else f"pyfsm: {name}: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
