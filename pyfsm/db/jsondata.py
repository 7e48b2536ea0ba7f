"""Instance data and metadata as JSON text: one serializer for every door.

``json.dumps`` quietly turns keys that are not strings into strings (``{1: "a", "1": "b"}``
becomes ``{"1": "a", "1": "b"}``, read back as ``{"1": "b"}``) and writes NaN and Infinity,
which are not JSON. :func:`dump_object` refuses both, and anything else JSON cannot hold,
with InvalidData before any SQL runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..errors import InvalidData, InvalidEncoding


def dump_object(what: str, value: object, limit: int | None = None) -> str:
    """``value`` (a JSON object: a dict) as compact UTF-8 JSON text, at most ``limit`` bytes."""
    if not isinstance(value, Mapping):
        raise InvalidData(f"{what} must be a JSON object (a dict), got {type(value).__name__}")
    try:
        text = json.dumps(value, allow_nan=False, separators=(",", ":"), ensure_ascii=False)
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:  # a lone surrogate: the same error the triggers give stored bytes
        raise InvalidEncoding(
            f"{what} is not valid Unicode text (a lone surrogate at position {exc.start} of its JSON)"
        ) from None
    except (TypeError, ValueError, RecursionError) as exc:
        hint = " (NaN and Infinity are not JSON)" if "float" in str(exc) else ""
        raise InvalidData(f"{what} cannot be serialized as JSON: {exc}{hint}") from None
    if limit is not None and size > limit:
        raise InvalidData(f"{what} is {size} bytes, more than the limit of {limit}")
    _check_keys(what, value)  # after json.dumps: no cycle, and no more nodes than the text has
    return text


def _check_keys(what: str, value: Any) -> None:
    """Refuse a key that is not a string, at any depth (json.dumps would have str()-ed it)."""
    # each entry: a node and its path as a linked list (parent path, key), O(1) per node
    stack: list[tuple[Any, Any]] = [(value, None)]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            items: Any = node.items()
        elif isinstance(node, list | tuple):
            items = enumerate(node)
        else:
            continue
        for key, item in items:
            if isinstance(node, dict) and not isinstance(key, str):
                keys = []
                while path is not None:
                    path, step = path
                    keys.append(step)
                where = what + "".join(f"[{k!r}]" for k in reversed(keys))
                raise InvalidData(
                    f"{where} has the key {key!r:.80} ({type(key).__name__}): JSON object keys are "
                    "strings, and json.dumps would turn it into one (losing data on a clash)"
                )
            if isinstance(item, dict | list | tuple):
                stack.append((item, (path, key)))
