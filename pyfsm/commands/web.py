"""`pyfsm web`: serve the console (pyfsm.web) with uvicorn."""

from __future__ import annotations

import argparse
import os
import socket
import sys

from ..errors import InvalidArgument
from .common import Add, NumberRange, seconds_between

#: The console's port: any but 0 (it says where it serves before it listens).
CONSOLE_PORT = NumberRange(1, 65535, noun="a port number")


def cmd_web(args: argparse.Namespace) -> None:
    try:
        import uvicorn

        from ..web import ConsoleConfig, create_app
        from ..web.security import is_loopback
    except ImportError as exc:  # the web extra is not installed
        raise InvalidArgument(
            f"pyfsm web needs the web extra: pip install 'pyfsm-mysql[web]' ({exc.name} is missing)"
        ) from None
    token = args.token or os.environ.get("PYFSM_WEB_TOKEN") or None
    if not is_loopback(args.host) and token is None:
        raise InvalidArgument(
            f"--host {args.host} lets other machines in: give --token (or $PYFSM_WEB_TOKEN), "
            "at least 16 characters, which every request must then carry"
        )
    config = ConsoleConfig(
        dsn=args.dsn,
        actions_dsn=args.actions_dsn or os.environ.get("PYFSM_ACTIONS_DSN") or None,
        allow_actions=args.allow_actions,
        token=token,
        stuck_after=args.stuck_after,
    )
    app = create_app(config)
    sock = listen(args.host, args.port)  # before saying so: a port in use is one line, exit 1
    mode = "actions on" if args.allow_actions else "read-only"
    print(f"pyfsm web: http://{args.host}:{args.port}/ ({mode}; Ctrl-C to stop)", file=sys.stderr, flush=True)
    try:
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
        server.run(sockets=[sock])
    finally:
        sock.close()


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on host:port (as uvicorn would open it), or InvalidArgument saying why not
    (the address is in use, or not this host's)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise InvalidArgument(
            f"cannot serve the console on {host}:{port}: {exc.strerror or exc}", os_errno=exc.errno
        ) from None
    sock.set_inheritable(True)
    return sock


def register(add: Add) -> None:
    web = add(
        "web",
        cmd_web,
        "serve the web console: machine types, instances, history, failures, queue, locks, "
        "outbox, /metrics; actions with --allow-actions",
        "pyfsm web --dsn mysql://analyst:...@db/shop            # read-only, on 127.0.0.1:8080\n"
        '  pyfsm web --allow-actions --actions-dsn mysql://app:...@db/shop --host 0.0.0.0 --token "$TOKEN"',
    )
    web.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; any other needs --token)"
    )
    web.add_argument("--port", type=CONSOLE_PORT, default=8080, help="port, 1 to 65535 (default 8080)")
    web.add_argument(
        "--token",
        default=None,
        help="a secret every request must carry (Bearer header, or the login page's cookie); default $PYFSM_WEB_TOKEN",
    )
    web.add_argument(
        "--allow-actions",
        action="store_true",
        help="offer retry, pause, resume, send, force-unlock and re-queue, each behind a confirmation",
    )
    web.add_argument(
        "--actions-dsn",
        default=None,
        help="the account actions run with, an app account (default $PYFSM_ACTIONS_DSN); "
        "--dsn's account only reads, and may be a reporting account",
    )
    web.add_argument(
        "--stuck-after",
        type=seconds_between(1, 86400 * 30),
        default=300.0,
        help="seconds a run may stay due before the console calls it stuck (1 to 2592000, default 300)",
    )
