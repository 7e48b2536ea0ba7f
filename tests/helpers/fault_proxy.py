"""A TCP proxy between pyfsm and the database server that breaks connections on command.

The proxy listens on 127.0.0.1 (a free port) and forwards every connection to the server.
One thread runs a ``selectors`` loop for all connections; the commands below run inside
that loop and return once they took effect, so a test can call them from any thread.
Clients in other processes simply connect to :attr:`FaultProxy.port` (``proxy.dsn(...)``).

Faults:

* :meth:`drop_all` closes both sides of every live connection (FIN); :meth:`reset_all` does
  it with an RST (``SO_LINGER`` 0), which also discards what the peer had not read yet.
* :meth:`stall` / :meth:`unstall` stop and resume forwarding bytes, in both directions, on
  every connection (new ones too), without closing anything: a client waits for a reply
  that does not come. ``stall(seconds)`` ends by itself.
* :meth:`refuse` makes new connections fail (accepted and reset at once: the client sees
  a connection error before any byte of the server's greeting; listening stays up, so the
  port is never lost), until ``refuse(False)`` or for the next ``count`` connections. Live
  connections go on.
* :meth:`drop_after` cuts the connection that carries the ``n``-th next byte in a direction
  (``"up"``: client to server, ``"down"``: server to client), after forwarding exactly
  ``n`` bytes.
* :meth:`drop_on_next_query` watches the client's MySQL packets and cuts the connection of
  the next ``COM_QUERY`` whose text contains ``match``, at a chosen moment:

  ``before_request``
      the query never reaches the server (nothing can have happened);
  ``mid_request``
      half the packet reaches the server, which discards it;
  ``after_request``
      the whole packet was written to the server and the connection is cut at once: the
      server may or may not run it (the "unknown outcome" case);
  ``before_reply``
      the whole packet reaches the server and the connection is cut when the first byte of
      the reply arrives, which is not forwarded: the server ran the statement to the end
      (pyfsm's procedures COMMIT before their final SELECT), and the client never learns it;
  ``stall_reply``
      the query reaches the server and its connection stops forwarding (that connection
      only) until :meth:`unstall`.
  ``garble_reply``
      the whole packet reaches the server and, when its reply arrives, the client gets
      instead the start of a result set whose column packet is cut short (a length that
      announces 8 bytes, with 4 left), then the connection is cut: a reply the driver
      cannot parse (MariaDB Galera sent such a reply when its applier aborted a call).

  ``and_refuse=True`` (or a number of connections) starts refusing new connections at the
  same moment, inside the proxy's loop, so that no retry slips in before the test says so.

:meth:`watch_query` breaks nothing: its event is set when a matching query passes. Every
fault is one-shot; :meth:`disarm` forgets those that have not fired, :meth:`heal` ends
everything (disarm, unstall, accept). The query-aware faults read the plain MySQL protocol:
they need connections without TLS or compression (what the tests use). Counters:
:attr:`accepted`, :attr:`refused`, :attr:`dropped` (connections cut by a fault),
:attr:`queries` (``COM_QUERY`` packets seen), :attr:`live`; :attr:`recent_queries` holds the
last 50. The ``proxy`` fixture (import ``proxy_fixture`` into a test module) runs one in front
of the test server and fails the test if the proxy's loop itself hit an error.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from pyfsm.db import Settings

WHEN = ("before_request", "mid_request", "after_request", "before_reply", "stall_reply", "garble_reply")
DIRECTIONS = ("up", "down")
COM_QUERY = 0x03
#: A result set's first two packets: "1 column" (sequence 1), then a column descriptor of 5
#: bytes whose first field's length is 0xFE (8 more bytes follow), with only 4 (sequence 2).
GARBLED_REPLY = b"\x01\x00\x00\x01\x01" + b"\x05\x00\x00\x02\xfe\x00\x00\x00\x00"
BUFFER_LIMIT = 1 << 20  # bytes held per direction before the proxy stops reading that side
CHUNK = 65536


@dataclass
class Fault:
    """An armed one-shot fault. ``fired`` is set when it took effect; ``query`` is the text
    of the query it cut (the first 2,000 characters), ``link`` the number of the connection."""

    kind: str
    when: str = ""
    match: str | None = None
    remaining: int = 0
    reset: bool = False
    and_refuse: bool | int = False
    fired: threading.Event = field(default_factory=threading.Event)
    query: str | None = None
    link: int | None = None

    def wait(self, timeout: float) -> bool:
        return self.fired.wait(timeout)


class _Link:
    """One proxied connection: the client's socket, the server's, and what is in flight."""

    def __init__(self, number: int, client: socket.socket, server: socket.socket) -> None:
        self.number = number
        self.client = client
        self.server = server
        self.up_raw = bytearray()  # from the client, not yet split into packets
        self.up = bytearray()  # to the server
        self.down = bytearray()  # to the client
        self.closing = False  # read nothing more; cut once both buffers are flushed
        self.reset = False  # cut with an RST
        self.cut_on_reply: Fault | None = None
        self.hold_reply = False  # stall_reply: this connection forwards nothing from the server
        self.dead = False
        self.masks: dict[socket.socket, int] = {}


class FaultProxy:
    """See the module documentation. ``FaultProxy((host, port))`` then :meth:`start` (or ``with``)."""

    def __init__(self, target: tuple[str, int], *, host: str = "127.0.0.1") -> None:
        self.target = target
        self.host = host
        self.port = 0
        self.accepted = 0
        self.refused = 0
        self.dropped = 0
        self.queries = 0
        self.recent_queries: collections.deque[str] = collections.deque(maxlen=50)
        self._links: dict[int, _Link] = {}
        self._numbers = 0
        self._stalled = False
        self._stall_until: float | None = None
        self._refusing = False
        self._refuse_left: int | None = None  # refuse only this many more connections
        self._query_faults: list[Fault] = []
        self._watches: list[Fault] = []
        self._byte_faults: dict[str, list[Fault]] = {d: [] for d in DIRECTIONS}
        self._commands: collections.deque[tuple[Callable[[], Any], list[Any], threading.Event]] = collections.deque()
        self._sel = selectors.DefaultSelector()
        self._listener: socket.socket | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        self._thread: threading.Thread | None = None
        self._closing = False
        self.errors: list[str] = []  # what went wrong inside the loop (a bug of the proxy)

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> FaultProxy:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, 0))
        listener.listen(128)
        listener.setblocking(False)
        self._listener = listener
        self.port = int(listener.getsockname()[1])
        self._wake_r.setblocking(False)
        self._sel.register(listener, selectors.EVENT_READ, ("listen", None))
        self._sel.register(self._wake_r, selectors.EVENT_READ, ("wake", None))
        self._thread = threading.Thread(target=self._loop, name=f"fault-proxy-{self.port}", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        if self._thread is None:
            return
        self._closing = True
        self._wake()
        self._thread.join(10)
        self._thread = None
        for link in list(self._links.values()):
            self._cut(link, reset=False, counted=False)
        if self._listener is not None:
            self._listener.close()
        self._sel.close()
        self._wake_r.close()
        self._wake_w.close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    def settings(self, settings: Settings) -> Settings:
        """``settings`` pointed at the proxy."""
        return dataclasses.replace(settings, host=self.host, port=self.port)

    def dsn(self, settings: Settings) -> str:
        """The DSN of ``settings``' database through the proxy."""
        return self.settings(settings).dsn()

    @property
    def live(self) -> int:
        return len(self._links)

    # -- commands -------------------------------------------------------------------------

    def drop_all(self) -> int:
        """Close both sides of every live connection (FIN); returns how many."""
        return self._command(lambda: self._cut_all(reset=False))

    def reset_all(self) -> int:
        """Reset both sides of every live connection (RST via SO_LINGER 0); returns how many."""
        return self._command(lambda: self._cut_all(reset=True))

    def stall(self, seconds: float | None = None) -> None:
        """Stop forwarding bytes on every connection (for ``seconds``, or until :meth:`unstall`)."""

        def do() -> None:
            self._stalled = True
            self._stall_until = None if seconds is None else time.monotonic() + seconds

        self._command(do)

    def unstall(self) -> None:
        """Forward again, on every connection (also those held by a ``stall_reply`` fault)."""

        def do() -> None:
            self._stalled, self._stall_until = False, None
            for link in self._links.values():
                link.hold_reply = False

        self._command(do)

    @property
    def stalled(self) -> bool:
        return self._stalled

    def refuse(self, on: bool = True, *, count: int | None = None) -> None:
        """Refuse new connections (reset as soon as accepted), or accept them again.
        ``count``: refuse only the next ``count`` connections, then accept again."""

        def do() -> None:
            self._set_refusing(on, count)

        self._command(do)

    def _set_refusing(self, on: bool, count: int | None) -> None:
        if count is not None and count < 1:
            raise ValueError("count must be at least 1")
        self._refusing = bool(on)
        self._refuse_left = count if on else None

    def drop_after(self, n_bytes: int, direction: str = "down", *, reset: bool = False) -> Fault:
        """Cut the connection carrying the ``n_bytes``-th next byte in ``direction`` ("up" or
        "down"), after forwarding exactly ``n_bytes`` bytes that way (counted over all connections)."""
        if direction not in DIRECTIONS or n_bytes < 0:
            raise ValueError(f"direction must be one of {DIRECTIONS} and n_bytes >= 0")
        fault = Fault("bytes", when=direction, remaining=n_bytes, reset=reset)
        self._command(lambda: self._byte_faults[direction].append(fault))
        return fault

    def drop_on_next_query(
        self,
        match: str | None = None,
        *,
        when: str = "before_reply",
        reset: bool = False,
        and_refuse: bool | int = False,
    ) -> Fault:
        """Cut the connection of the next COM_QUERY containing ``match`` (any query if None),
        at the moment ``when`` names (see the module documentation). ``and_refuse``: from
        that moment on, refuse new connections too: True until ``refuse(False)``, a number
        for that many connections; so that no retry on a new connection slips in first."""
        if when not in WHEN:
            raise ValueError(f"when must be one of {WHEN}")
        if not isinstance(and_refuse, bool) and and_refuse < 1:
            raise ValueError("and_refuse must be True, False or a number of connections >= 1")
        fault = Fault("query", when=when, match=match, reset=reset, and_refuse=and_refuse)
        self._command(lambda: self._query_faults.append(fault))
        return fault

    def watch_query(self, match: str | None = None) -> Fault:
        """No fault: ``fired`` is set when the next COM_QUERY containing ``match`` passes."""
        fault = Fault("watch", match=match)
        self._command(lambda: self._watches.append(fault))
        return fault

    def disarm(self) -> None:
        """Forget every armed fault that has not fired."""

        def do() -> None:
            self._query_faults.clear()
            self._watches.clear()
            for faults in self._byte_faults.values():
                faults.clear()

        self._command(do)

    def heal(self) -> None:
        """End every fault: disarm, unstall, accept connections again."""
        self.disarm()
        self.unstall()
        self.refuse(False)

    # -- the loop -------------------------------------------------------------------------

    def _command(self, fn: Callable[[], Any]) -> Any:
        if threading.current_thread() is self._thread:
            return fn()
        if self._thread is None:
            raise RuntimeError("the proxy is not running")
        box: list[Any] = []
        done = threading.Event()
        self._commands.append((fn, box, done))
        self._wake()
        if not done.wait(10):
            raise RuntimeError("the proxy's loop did not answer within 10 s")
        if box and isinstance(box[0], BaseException):
            raise box[0]
        return box[0] if box else None

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def _loop(self) -> None:
        while not self._closing:
            self._update_interest()
            timeout = None
            if self._stall_until is not None:
                timeout = max(0.0, self._stall_until - time.monotonic())
            for key, mask in self._sel.select(timeout):
                kind, link = key.data
                try:
                    if kind == "listen":
                        self._accept()
                    elif kind == "wake":
                        self._run_commands()
                    elif not link.dead:
                        self._io(link, key.fileobj, mask)
                except Exception as exc:  # keep serving; the fixture reports it
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                    if link is not None:
                        self._cut(link, reset=True, counted=False)
            if self._stall_until is not None and time.monotonic() >= self._stall_until:
                self._stalled, self._stall_until = False, None

    def _run_commands(self) -> None:
        with contextlib.suppress(OSError):
            while self._wake_r.recv(4096):
                pass
        while self._commands:
            fn, box, done = self._commands.popleft()
            try:
                box.append(fn())
            except BaseException as exc:  # handed to the caller
                box.append(exc)
            done.set()

    def _update_interest(self) -> None:
        for link in list(self._links.values()):
            try:
                self._interest(link)
            except Exception as exc:  # keep serving; the fixture reports it
                self.errors.append(f"{type(exc).__name__}: {exc}")
                self._cut(link, reset=True, counted=False)

    def _interest(self, link: _Link) -> None:
        stalled = self._stalled
        if link.closing and not link.up and not link.down:
            self._cut(link, reset=link.reset)
            return
        reading = not stalled and not link.closing and not link.hold_reply
        want = {
            link.client: (selectors.EVENT_READ if reading and len(link.up) < BUFFER_LIMIT else 0)
            | (selectors.EVENT_WRITE if not stalled and link.down else 0),
            link.server: (selectors.EVENT_READ if reading and len(link.down) < BUFFER_LIMIT else 0)
            | (selectors.EVENT_WRITE if not stalled and link.up else 0),
        }
        for sock, mask in want.items():
            old = link.masks.get(sock, 0)
            if mask == old:
                continue
            if old and mask:
                self._sel.modify(sock, mask, ("io", link))
            elif mask:
                self._sel.register(sock, mask, ("io", link))
            else:
                self._sel.unregister(sock)
            link.masks[sock] = mask

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                client, _addr = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            self.accepted += 1
            if self._refusing:
                self.refused += 1
                _close(client, reset=True)
                if self._refuse_left is not None:
                    self._refuse_left -= 1
                    if self._refuse_left <= 0:
                        self._set_refusing(False, None)
                continue
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                _close(client, reset=True)
                continue
            for sock in (client, server):
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._numbers += 1
            self._links[self._numbers] = _Link(self._numbers, client, server)

    def _io(self, link: _Link, sock: Any, mask: int) -> None:
        from_client = sock is link.client
        if mask & selectors.EVENT_WRITE:
            buffer = link.down if from_client else link.up
            try:
                sent = sock.send(buffer)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                self._cut(link, reset=False, counted=False)
                return
            del buffer[:sent]
        if not mask & selectors.EVENT_READ or link.dead or link.closing:
            return
        try:
            data = sock.recv(CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # that side closed: hand over what is pending, best effort, then close both
            other, pending = (link.server, link.up) if from_client else (link.client, link.down)
            with contextlib.suppress(OSError):
                other.send(pending)
            self._cut(link, reset=False, counted=False)
            return
        if from_client:
            self._from_client(link, data)
        elif link.cut_on_reply is not None:
            fault, link.cut_on_reply = link.cut_on_reply, None
            # set before the client gets anything: it may look as soon as it reads the garbled
            # reply or sees the cut (set after the send, a client that raised at once found
            # the fault not yet fired)
            fault.fired.set()
            if fault.when == "garble_reply":  # one column announced, its descriptor cut short
                with contextlib.suppress(OSError):
                    link.client.send(GARBLED_REPLY)
            self._cut(link, reset=fault.reset)
        else:
            self._forward(link, "down", data)

    def _from_client(self, link: _Link, data: bytes) -> None:
        raw = link.up_raw
        raw += data
        while len(raw) >= 4 and not link.closing and not link.dead:
            total = 4 + int.from_bytes(raw[:3], "little")
            if len(raw) < total:
                return
            packet = bytes(raw[:total])
            del raw[:total]
            if packet[3] == 0 and total > 4 and packet[4] == COM_QUERY:
                self.queries += 1
                text = packet[5:2005].decode("utf-8", "replace")
                self.recent_queries.append(text)
                for watch in [w for w in self._watches if w.match is None or w.match in text]:
                    self._watches.remove(watch)
                    watch.query, watch.link = text, link.number
                    watch.fired.set()
                fault = next((f for f in self._query_faults if f.match is None or f.match in text), None)
                if fault is not None:
                    self._query_faults.remove(fault)
                    fault.query, fault.link = text, link.number
                    self._query_fault(link, fault, packet)
                    raw.clear()
                    return
            self._forward(link, "up", packet)

    def _query_fault(self, link: _Link, fault: Fault, packet: bytes) -> None:
        link.reset = fault.reset
        if fault.and_refuse is not False:
            self._set_refusing(True, None if fault.and_refuse is True else int(fault.and_refuse))
        if fault.when == "before_request":
            fault.fired.set()
            self._cut(link, reset=fault.reset)
            return
        if fault.when == "mid_request":
            link.up += packet[: max(1, len(packet) // 2)]
            link.closing = True
            fault.fired.set()
        elif fault.when == "after_request":
            link.up += packet
            link.closing = True
            fault.fired.set()
        elif fault.when in ("before_reply", "garble_reply"):
            link.up += packet
            link.cut_on_reply = fault  # fired when the reply arrives
        else:  # stall_reply
            link.up += packet
            link.hold_reply = True
            fault.fired.set()

    def _forward(self, link: _Link, direction: str, data: bytes) -> None:
        buffer = link.up if direction == "up" else link.down
        faults = self._byte_faults[direction]
        if faults:
            fault = faults[0]
            if len(data) >= fault.remaining:
                faults.pop(0)
                buffer += data[: fault.remaining]
                link.closing, link.reset, fault.link = True, fault.reset, link.number
                link.up_raw.clear()
                fault.fired.set()
                return
            fault.remaining -= len(data)
        buffer += data

    def _cut_all(self, *, reset: bool) -> int:
        links = list(self._links.values())
        for link in links:
            self._cut(link, reset=reset)
        return len(links)

    def _cut(self, link: _Link, *, reset: bool, counted: bool = True) -> None:
        if link.dead:
            return
        link.dead = True
        self._links.pop(link.number, None)
        for sock, mask in link.masks.items():
            if mask:
                with contextlib.suppress(KeyError, ValueError, OSError):
                    self._sel.unregister(sock)
        for sock in (link.client, link.server):
            _close(sock, reset=reset)
        if counted:
            self.dropped += 1


def _close(sock: socket.socket, *, reset: bool) -> None:
    with contextlib.suppress(OSError):
        if reset:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()


@pytest.fixture(name="proxy")
def proxy_fixture(server: Settings) -> Iterator[FaultProxy]:
    """A running FaultProxy in front of the test server (use ``proxy.dsn(settings)``)."""
    with FaultProxy((server.host, server.port)) as running:
        yield running
    assert not running.errors, f"the proxy failed: {running.errors}"
