"""`pyfsm send-many`: many events from a file or stdin, in chunks (Store.send_many)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import IO, Any

from ..bulk import MAX_CHUNK
from ..errors import InvalidArgument, InvalidEncoding
from ..models import TransitionResult
from ..store import Store
from .common import Add, Progress, emit, progress_flag, whole


def parse_line(line: str, number: int, event: str | None) -> dict[str, Any]:
    """One input line as an item: a JSON object, ``key<TAB>event``, or a key alone with --event."""
    if line.startswith("{"):
        try:
            item = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise InvalidArgument(f"line {number}: not valid JSON: {exc}") from None
        if not isinstance(item, dict):
            raise InvalidArgument(f"line {number}: a JSON line must be an object")
        if event is not None:
            item.setdefault("event", event)
        return item
    key, tab, given = line.partition("\t")
    if tab:
        return {"key": key, "event": given}
    if event is None:
        raise InvalidArgument(f"line {number}: no event (give key<TAB>event, a JSON object, or --event)")
    return {"key": key, "event": event}


def read_chunks(stream: IO[str], size: int, event: str | None) -> Iterator[list[dict[str, Any]]]:
    """Chunks of ``size`` items from the lines of ``stream`` (blank lines are skipped), read
    as they are needed, so a file of any length is never held whole. Input that is not UTF-8
    is InvalidEncoding when the block holding it is read."""
    chunk: list[dict[str, Any]] = []
    try:
        for number, raw in enumerate(stream, start=1):
            line = raw.rstrip("\r\n")
            if not line.strip():
                continue
            chunk.append(parse_line(line, number, event))
            if len(chunk) == size:
                yield chunk
                chunk = []
    except UnicodeDecodeError as exc:
        raise InvalidEncoding(f"the input is not valid UTF-8 (byte {exc.start} of a block of it)") from None
    if chunk:
        yield chunk


def _count_lines(path: str) -> int:
    try:
        with open(path, encoding="utf-8") as f:
            return sum(1 for line in f if line.strip())
    except UnicodeDecodeError:
        return 0  # reported when the line is reached, after the lines before it were sent
    except OSError as exc:
        raise InvalidArgument(f"cannot read {path}: {exc.strerror}") from None


def cmd_send_many(args: argparse.Namespace) -> None:
    from_stdin = args.file in (None, "-")
    total = 0 if from_stdin else _count_lines(args.file)
    bar = Progress(total, f"send-many {args.machine}", enabled=args.progress)
    applied = replayed = 0
    refusals: list[dict[str, Any]] = []
    stream = sys.stdin if from_stdin else open(args.file, encoding="utf-8")  # closed below
    finished = False
    try:
        with Store(args.dsn) as store:
            for chunk in read_chunks(stream, args.chunk, args.event):
                for item, result in zip(
                    chunk, store.send_many(args.machine, chunk, chunk_size=args.chunk), strict=True
                ):
                    if isinstance(result, TransitionResult):
                        applied += 1
                        replayed += result.replayed
                        continue
                    refusal = {
                        "key": item["key"],
                        "event": item["event"],
                        "error": type(result).__name__,
                        "errno": result.errno,
                        "message": str(result),
                    }
                    refusals.append(refusal)
                    if not args.json:
                        print(
                            f"refused {item['key']} {item['event']}: {refusal['error']} ({result.errno}): "
                            f"{' '.join(str(result).splitlines())}"
                        )
                bar.update(bar.done + len(chunk))
        finished = True
    finally:
        bar.close()
        if not from_stdin:
            stream.close()
        if not finished:  # what was committed before the failure stays committed: say how far it got
            print(
                f"pyfsm: send-many stopped after {applied + len(refusals)} items: {applied} applied, "
                f"{len(refusals)} refused; the items after them were not sent",
                file=sys.stderr,
            )
    summary = f"{applied + len(refusals)} items: {applied} applied ({replayed} replayed), {len(refusals)} refused"
    emit(args, {"applied": applied, "replayed": replayed, "refused": len(refusals), "refusals": refusals}, summary)
    if refusals:
        args.exit_code = 1


def register(add: Add) -> None:
    p = add(
        "send-many",
        cmd_send_many,
        "apply many events from a file or stdin, in chunks of one transaction each (each item checked and "
        "refused alone); exit status 1 if any was refused",
        "cut -f1 paid.tsv | pyfsm send-many order --event ship --progress",
    )
    p.add_argument("machine", help="machine type")
    p.add_argument(
        "file",
        nargs="?",
        help="lines of key<TAB>event, a key alone (with --event), or a JSON object "
        "with key, event, data or data_patch, metadata, ... (default: stdin)",
    )
    p.add_argument("--event", help="the event for lines that name none")
    p.add_argument(
        "--chunk",
        type=whole(1, MAX_CHUNK),
        default=100,
        help=f"items per call and transaction (1-{MAX_CHUNK}, default 100)",
    )
    progress_flag(p)
