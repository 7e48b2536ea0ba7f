"""Many transitions per call: Store.send_many over ``fsm_{type}_send_many_v3``.

Items are checked in Python first (the same checks as :meth:`Store.send`), so malformed
input raises before anything is sent. They then go to the server in chunks: one CALL, one
transaction and one commit per chunk, which is most of what a transition costs the server.
The procedure applies each item in its own savepoint and reports a refusal per item, so a
chunk is never half-applied: each item is either applied or refused alone. A chunk the
server rolled back as a whole (a deadlock that persisted after pyfsm's retries) reports
that error for each of its items; nothing of it was applied.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .errors import Deadlock, FsmError, InvalidArgument, error_for
from .models import TransitionResult
from .schema import routines

if TYPE_CHECKING:
    from .gateway import Gateway

#: At most this many items per call (the procedure's own limit).
MAX_CHUNK = 1000
#: A chunk is cut before its JSON would pass this many bytes (an item alone may be larger):
#: well below max_allowed_packet (16 MiB on MariaDB, 64 MiB on MySQL 8 by default).
CHUNK_BYTES = 1024 * 1024
ITEM_FIELDS = (
    "key",
    "event",
    "data",
    "data_patch",
    "metadata",
    "expected_version",
    "request_id",
    "handler",
    "lookup_key",
)

Outcome = TransitionResult | FsmError


def check_items(items: Iterable[Any], check: Any) -> list[dict[str, Any]]:
    """Each item as the procedure's JSON object; InvalidArgument naming the first bad one.

    An item is ``(key, event)`` or a mapping with ``key`` and ``event`` and any of data,
    metadata, expected_version, request_id, handler, lookup_key. ``check(position, item)``
    validates the values as Store.send does and returns them.
    """
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise InvalidArgument(
            f"items must be an iterable of (key, event) pairs or mappings, got {type(items).__name__}"
        )
    checked = []
    for position, item in enumerate(items):
        if isinstance(item, Mapping):
            unknown = set(item) - set(ITEM_FIELDS)
            if unknown:
                raise InvalidArgument(f"item {position}: unknown fields {sorted(map(str, unknown))}")
            fields = dict(item)
        elif isinstance(item, Sequence) and not isinstance(item, (str, bytes)) and len(item) == 2:
            fields = {"key": item[0], "event": item[1]}
        else:
            raise InvalidArgument(f"item {position} must be a (key, event) pair or a mapping, got {item!r:.80}")
        if "key" not in fields or "event" not in fields:
            raise InvalidArgument(f"item {position} needs a key and an event")
        checked.append({k: v for k, v in check(position, fields).items() if v is not None})
    return checked


def chunks(items: list[dict[str, Any]], size: int) -> Iterator[tuple[int, str]]:
    """(how many items, their JSON array) for runs of at most ``size`` items and, unless one
    item alone is larger, at most CHUNK_BYTES of JSON."""
    part: list[str] = []
    length = 2
    for item in items:
        text = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
        size_of = len(text.encode()) + 1
        if part and (len(part) == size or length + size_of > CHUNK_BYTES):
            yield len(part), "[" + ",".join(part) + "]"
            part, length = [], 2
        part.append(text)
        length += size_of
    if part:
        yield len(part), "[" + ",".join(part) + "]"


def outcome(row: dict[str, Any], item: dict[str, Any], machine: str) -> Outcome:
    """One row of send_many_v1's result as a TransitionResult, or the error it reports."""
    if row["errno"] is None:
        return TransitionResult.from_send_row(row, item["key"], item["event"])
    errno, message = int(row["errno"]), str(row["message"])
    context = {"machine": machine, "key": item["key"], "event": item["event"]}
    return error_for(errno, message, **context) or FsmError(message, errno=errno, **context)


def send_many(gateway: Gateway, machine: str, items: list[dict[str, Any]], chunk_size: int) -> list[Outcome]:
    """Send checked items (see :func:`check_items`) in chunks; one outcome per item, in order.

    A chunk whose every item carries a request id is repeated after a lost connection (the
    repeat replays what was applied); otherwise a lost connection raises DatabaseUnavailable
    with ``fields["outcomes"]``: the outcomes of the chunks committed before it.
    """
    outcomes: list[Outcome] = []
    gateway.ensure_schema()
    for count, text in chunks(items, chunk_size):
        batch = items[len(outcomes) : len(outcomes) + count]
        try:
            rows = gateway.call(
                routines.SEND_MANY,
                (text,),
                writes=True,
                machine=machine,
                retry_connection=all("request_id" in i for i in batch),
            )
        except Deadlock as err:  # rolled back whole after the retries: nothing of it was applied
            outcomes += [err] * len(batch)
            continue
        except FsmError as err:
            err.fields["outcomes"] = list(outcomes)
            raise
        if len(rows) != len(batch):
            raise FsmError(f"send_many_v3 returned {len(rows)} rows for {len(batch)} items", machine=machine)
        outcomes += [outcome(row, item, machine) for row, item in zip(rows, batch, strict=True)]
    return outcomes
