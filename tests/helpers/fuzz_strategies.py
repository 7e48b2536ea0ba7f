"""Hypothesis strategies for tests/server/test_fuzz.py: hostile identifiers, JSON and numbers.

Each strategy mixes valid values (so that some calls succeed and the invariants get
checked) with values just past a limit and values no caller should ever send.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from types import MappingProxyType
from typing import Any

from hypothesis import strategies as st

#: The documented length limits (docs/sql-api.md, "Names and keys").
MACHINE_MAX = 48
NAME_MAX = 64
KEY_MAX = 191
REQUEST_ID_MAX = 64
HANDLER_MAX = 128
OWNER_MAX = 64
REASON_MAX = 255
DATA_MAX = 1024 * 1024
METADATA_MAX = 64 * 1024

#: What SQL injection, quoting, comments and Unicode confusion are made of.
FRAGMENTS = (
    "'",
    '"',
    "`",
    "\\",
    ";",
    "--",
    "-- ",
    "/*",
    "*/",
    "/* x */",
    "#",
    "\x00",
    "\n",
    "\r",
    "\r\n",
    "\t",
    " ",
    "%",
    "_",
    "?",
    "%s",
    "@",
    "@@version",
    "0x41",
    "NULL",
    "null",
    "true",
    "\\'",
    "''",
    "\\0",
    "\u00a0",
    "\u200b",
    "\ufeff",
    "\u2028",
    "\x85",  # invisible and exotic line breaks
    "🙂",
    "\U0001d518",
    "\U0010ffff",
    "👩\u200d👩\u200d👧",  # outside the BMP, joiners
    # compatibility forms (fi ligature, fullwidth), case traps (Kelvin sign, long s, dotted and dotless i)
    "\ufb01",
    "\uff53\uff45\uff4c\uff45\uff43\uff54",
    "\u212a",
    "\u017f",
    "\u0130",
    "\u0131",
    "é",
    "e\u0301",
    "\ud800",
    "\udfff",  # lone surrogates
    "x`; DROP TABLE fsm_machines; --",
    "'; DELETE FROM fsm_state_counts; --",
    '"); DROP DATABASE x; #',
    "' OR '1'='1",
    "`fsm_machines`",
    "CHAR(39)",
    "*/ DROP TABLE fsm_rules /*",
)

#: Payloads that, spliced into SQL, would drop or empty something.
INJECTIONS = (
    "x`; DROP TABLE fsm_machines; --",
    "fz`; DROP TABLE fsm_machines; --",
    "a'; DROP TABLE fsm_rules; --",
    "fz'); DELETE FROM fsm_state_counts; -- ",
    'x"; DROP TABLE fsm_outbox; #',
    "fz/**/;DROP/**/TABLE/**/fsm_locks",
    "fz`(?, ?); DROP TABLE fuzz_canary; CALL `fsm_fz_get_v1",
    "fz\n; DROP TABLE fuzz_canary",
    "'; SHUTDOWN; --",
    "\\'; DROP TABLE fuzz_canary; -- ",
)

#: Python values no identifier should be: each must be refused, never str()-ed into SQL.
NON_STRINGS: tuple[Any, ...] = (
    None,
    0,
    1,
    -1,
    2**64,
    1.5,
    math.nan,
    True,
    False,
    b"fz",
    b"\xff\xfe",
    bytearray(b"k"),
    ["fz"],
    ("fz",),
    {"fz": 1},
    {"fz"},
    object(),
    Decimal("1"),
    date(2024, 1, 1),
    1j,
)


def texts(max_size: int = 6) -> st.SearchStrategy[str]:
    """Hostile text: fragments and arbitrary characters glued together."""
    piece = st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=4))
    return st.lists(piece, max_size=max_size).map("".join)


def overlong(limit: int) -> st.SearchStrategy[str]:
    """Strings at, just under and just over ``limit`` characters, in 1- to 4-byte characters."""
    return st.builds(
        lambda n, ch: ch * n,
        st.sampled_from([limit - 1, limit, limit + 1, 4 * limit + 3]),
        st.sampled_from(["a", "é", "🙂", "'", "_", "k "]),
    )


def near_names(valid: Sequence[str]) -> st.SearchStrategy[str]:
    """A valid name, slightly wrong: case, padding, a stray character, a look-alike."""

    def mutate(name: str, how: str) -> str:
        return {
            "upper": name.upper(),
            "title": name.title(),
            "space": name + " ",
            "lead": " " + name,
            "newline": name + "\n",
            "nul": name + "\x00",
            "digit": "1" + name,
            "under": "_" + name,
            "dash": name + "-x",
            "accent": name + "é",
            "kelvin": name.replace("k", "\u212a") + "\u212a",
            "fullwidth": "".join(chr(ord(c) + 0xFEE0) if c.isalpha() else c for c in name),
            "zwsp": name[:1] + "\u200b" + name[1:],
            "quote": name + "'",
            "tick": name + "`",
            "semi": name + ";",
            "comment": name + "--",
            "hash": name + "#",
            "long": name + "a" * NAME_MAX,
        }[how]

    return st.builds(
        mutate,
        st.sampled_from(list(valid)),
        st.sampled_from(
            [
                "upper",
                "title",
                "space",
                "lead",
                "newline",
                "nul",
                "digit",
                "under",
                "dash",
                "accent",
                "kelvin",
                "fullwidth",
                "zwsp",
                "quote",
                "tick",
                "semi",
                "comment",
                "hash",
                "long",
            ]
        ),
    )


def names(valid: Sequence[str], limit: int = NAME_MAX) -> st.SearchStrategy[Any]:
    """Machine, state or event names: valid ones, near misses, injections, junk."""
    return st.one_of(
        st.sampled_from(list(valid)),
        near_names(valid),
        st.sampled_from(INJECTIONS),
        texts(),
        overlong(limit),
        st.sampled_from(NON_STRINGS),
        st.sampled_from(["", "a" * limit]),
    )


def keys(existing: Sequence[str], limit: int = KEY_MAX) -> st.SearchStrategy[Any]:
    """Instance keys, lookup keys, request ids and the like: free text of 1..limit characters
    not ending in a space, so many hostile strings are valid (and must be stored as data)."""
    return st.one_of(
        st.sampled_from(list(existing)),
        st.sampled_from(INJECTIONS),
        texts(),
        overlong(limit),
        st.sampled_from(NON_STRINGS),
        st.sampled_from(["", " ", "k ", "k\t", "k\ud800", "%", "_", "*"]),
    )


def owners() -> st.SearchStrategy[Any]:
    """Lock owners: 1..64 of [A-Za-z0-9._:-], or not."""
    valid = st.text(alphabet="ABCxyz019._:-", min_size=1, max_size=OWNER_MAX)
    return st.one_of(
        valid,
        texts(),
        overlong(OWNER_MAX),
        st.sampled_from(NON_STRINGS),
        st.sampled_from(["", "a b", "a\n", "o:1\x00", "ö", "a" * OWNER_MAX]),
    )


# --- numbers ------------------------------------------------------------------------------

EDGE_INTS = (
    0,
    1,
    -1,
    2,
    100,
    10_000,
    10_001,
    86_400,
    86_401,
    2**31 - 1,
    2**31,
    2**32,
    2**63 - 1,
    2**63,
    2**64,
    10**30,
    -(2**63),
    -(2**63) - 1,
    -(10**30),
)


def numbers() -> st.SearchStrategy[Any]:
    """Where an int (or a number of seconds) is expected: edges, floats, bools, look-alikes."""
    return st.one_of(
        st.sampled_from(EDGE_INTS),
        st.integers(min_value=-(2**66), max_value=2**66),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from([0.1, 0.0999, 0.05, 1e-300, 86400.0, 86400.5, 31622400.5, 1e12, -0.0]),
        st.booleans(),
        st.none(),
        st.sampled_from(["1", "0", "", "1; DROP TABLE fsm_machines", Decimal("1"), Decimal("NaN"), 1j, b"1", [1]]),
    )


def cli_ints() -> st.SearchStrategy[str]:
    """Text argparse's int() accepts: edges, signs, underscores, non-ASCII digits."""
    return st.one_of(
        st.sampled_from([str(n) for n in EDGE_INTS]),
        st.sampled_from([" 7 ", "+3", "-0", "1_000", "\u0663", "\uff10", "0" * 50 + "1", "9" * 40]),
    )


# --- JSON ---------------------------------------------------------------------------------

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    texts(3),
)
json_values = st.recursive(
    _scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts(2), inner, max_size=3), max_leaves=8
)
#: Valid data: JSON objects (keys are strings, no NaN); texts() may add lone surrogates.
objects = st.dictionaries(texts(3), json_values, max_size=4)


def nested(depth: int, kind: str = "object") -> Any:
    """An object ``depth`` levels deep, built without recursion."""
    doc: Any = {}
    for _ in range(depth):
        doc = {"x": doc} if kind == "object" else {"x": [doc]}
    return doc


class NotJson:
    """Something json.dumps cannot write."""


def hostile_objects() -> st.SearchStrategy[Any]:
    """Data and metadata no JSON object column should get (Python values)."""
    return st.one_of(
        st.lists(json_values, max_size=3),
        st.integers(),
        st.text(max_size=5),
        st.booleans(),
        st.floats(),
        st.builds(lambda k, v: {k: v}, texts(2), st.sampled_from([math.nan, math.inf, -math.inf])),
        st.builds(
            lambda k, v: {k: v},
            texts(2),
            st.sampled_from([NotJson(), {1, 2}, b"x", 1j, Decimal("1.5"), datetime(2024, 1, 1), date(2024, 1, 1), ...]),
        ),
        st.sampled_from(
            [
                {(1, 2): 1},
                {frozenset(): 1},
                {"\ud800": 1},
                {"k": "\udfff"},
                {"k": ["\ud800"]},
                MappingProxyType({"a": NotJson()}),
            ]
        ),
        # keys json.dumps would turn into strings: 1, 1.5, True, None; a clash; nested in an object or a list
        st.builds(lambda k, v: {k: v}, st.sampled_from([1, -1, 1.5, True, False, None, 2**64]), json_values),
        st.sampled_from([{1: "a", "1": "b"}, {"k": {2: "x"}}, {"k": [{"a": 1}, {None: 1}]}, {"k": {"j": {0.5: 1}}}]),
        st.builds(nested, st.sampled_from([31, 32, 33, 100, 999, 10_000]), st.sampled_from(["object", "array"])),
        st.builds(
            sized,
            st.sampled_from([DATA_MAX, METADATA_MAX]),
            st.sampled_from([1, 2, 4]),
            st.sampled_from(["a", "é", "🙂"]),
        ),  # one to four bytes over
    )


def sized(limit: int, delta: int, fill: str) -> dict[str, str]:
    """An object whose compact UTF-8 JSON is ``limit + delta`` bytes (``fill``: 1-4 byte characters)."""
    target = limit + delta
    width = len(fill.encode())
    body = target - len(json.dumps({"x": ""}, separators=(",", ":")).encode())
    doc = {"x": fill * (body // width) + "a" * (body % width)}
    assert len(json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()) == target
    return doc


def json_texts(*, huge: bool = True) -> st.SearchStrategy[str]:
    """JSON text for the SQL API and the CLI: invalid, not an object, deep, odd numbers, and (with
    ``huge``; an argv element holds at most 128 KiB) one byte over each size limit."""
    over = (
        [json.dumps(sized(DATA_MAX, 1, "a")), json.dumps(sized(DATA_MAX, 1, "🙂"), ensure_ascii=False)] if huge else []
    )
    return st.one_of(
        st.builds(lambda v: json.dumps(v, ensure_ascii=False), objects),
        st.sampled_from(
            [
                "",
                " ",
                "{",
                "}",
                "{oops",
                "{'a': 1}",
                '{"a": 1,}',
                '{"a": 1} x',
                '{"a": 1}{"b": 2}',
                "[1]",
                "[]",
                "1",
                '"text"',
                "null",
                "true",
                "NaN",
                '{"a": NaN}',
                '{"a": Infinity}',
                '{"a": -Infinity}',
                '{"a": 1e999}',
                '{"a": 0x10}',
                '{"a": 01}',
                '{"a": .5}',
                '{"a": "\\ud800"}',
                '{"a": "\\u0000"}',
                '{"a\u0000": 1}',
                '{"a": 1, "a": 2}',
                "\ufeff{}",
                "{}\x00",
                '{"a": "\x01"}',
                "/* c */ {}",
                "{} -- c",
                '{"a": tru}',
                json.dumps(sized(METADATA_MAX, 0, "a")),
                json.dumps(sized(METADATA_MAX, 1, "é"), ensure_ascii=False),
                *over,
            ]
        ),
        st.builds(
            lambda n, k: ("[" * n + "]" * n) if k == "array" else ('{"a":' * n + "1" + "}" * n),
            st.sampled_from([31, 32, 33, 100, 10_000]),
            st.sampled_from(["array", "object"]),
        ),
        texts(),
    )


# --- time ---------------------------------------------------------------------------------


def moments() -> st.SearchStrategy[Any]:
    """Datetimes across the whole range, naive and with any UTC offset, and things that are not."""
    zones = st.one_of(
        st.none(),
        st.just(UTC),
        st.builds(
            timezone,
            st.timedeltas(min_value=-timedelta(hours=23, minutes=59), max_value=timedelta(hours=23, minutes=59)),
        ),
    )
    return st.one_of(
        st.datetimes(timezones=zones),
        st.sampled_from(
            [
                datetime.min,
                datetime.max,
                datetime(1000, 1, 1),
                datetime(9999, 12, 31),
                date(2024, 1, 1),
                "2024-01-01",
                0,
                1.5,
                None,
                "now",
                b"2024-01-01",
            ]
        ),
    )


# --- valid values, and mixing them with hostile ones -----------------------------------------


def encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def is_valid_key(value: Any, limit: int = KEY_MAX) -> bool:
    """What pyfsm accepts as a key: 1..limit characters of valid Unicode, not ending in a space."""
    return isinstance(value, str) and 1 <= len(value) <= limit and not value.endswith(" ") and encodable(value)


def valid_keys(existing: Sequence[str], limit: int = KEY_MAX) -> st.SearchStrategy[str]:
    """Keys pyfsm must accept, hostile-looking ones included: they are data, never SQL."""
    return st.one_of(
        st.sampled_from(list(existing)),
        st.one_of(texts(), st.sampled_from(INJECTIONS), st.sampled_from(FRAGMENTS)).filter(
            lambda s: is_valid_key(s, limit)
        ),
        st.builds(lambda ch, n: ch * n, st.sampled_from(["k", "é", "🙂", "'"]), st.sampled_from([1, limit])),
    )


def json_safe(value: Any) -> bool:
    """A JSON object pyfsm must accept as data: serialisable and valid UTF-8."""
    try:
        return encodable(json.dumps(value, allow_nan=False, ensure_ascii=False))
    except (TypeError, ValueError):
        return False


valid_objects = objects.filter(json_safe)


@st.composite
def mixed(
    draw: Any, valid: Sequence[st.SearchStrategy[Any]], hostile: Sequence[st.SearchStrategy[Any]], most: int = 2
) -> tuple[list[Any], frozenset[int]]:
    """Arguments that are valid but for up to ``most`` hostile ones (none at all, now and then),
    so that each hostile value meets the checks behind the first one, and the database."""
    bad = draw(st.sets(st.sampled_from(range(len(valid))), max_size=most)) if valid else set()
    return [draw(hostile[i] if i in bad else valid[i]) for i in range(len(valid))], frozenset(bad)


# --- definition documents: a valid one, then a field or two broken ----------------------------

#: A valid definition (the JSON fsm_define_v3 takes; a definition file adds "name").
BASE_DOCUMENT: dict[str, Any] = {
    "states": ["a", "b", "c"],
    "start": ["a"],
    "final": ["c"],
    "transitions": [{"event": "go", "from": ["a"], "to": "b"}, {"event": "end", "from": ["a", "b"], "to": "c"}],
    "topic": None,
    "options": {"lock_lease_seconds": 60},
}
JSON_LITERALS = (None, True, False)
#: Where a name goes: valid, near misses, too long, injections, and JSON values of other types.
json_names = st.one_of(
    st.sampled_from(["a", "b", "c", "true", "null", "false"]),
    near_names(["a", "b"]),
    overlong(NAME_MAX),
    st.sampled_from(INJECTIONS),
    st.sampled_from([*JSON_LITERALS, 1, 1.5, -0.0, 2**64, [], {}, ["a"], {"a": 1}, ""]),
)
json_junk = st.one_of(
    json_names,
    st.lists(json_names, max_size=3),
    st.dictionaries(st.sampled_from(["a", "event"]), json_names, max_size=2),
)
option_values = st.one_of(
    st.booleans(), st.none(), st.sampled_from([0, 1, 60, 86400, 86401, -1, 1.0, 60.5, 2**64, "true", "60", [], {}])
)


@st.composite
def documents(draw: Any) -> dict[str, Any]:
    """BASE_DOCUMENT with up to three changes: a name replaced, an entry added or removed, a
    field given another type, an option changed or made up, a field dropped."""
    doc = json.loads(json.dumps(BASE_DOCUMENT))
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        where = draw(
            st.sampled_from(
                [
                    "states",
                    "start",
                    "final",
                    "event",
                    "from",
                    "to",
                    "topic",
                    "option",
                    "field",
                    "add_state",
                    "add_edge",
                    "drop",
                ]
            )
        )
        edges = doc.get("transitions") if isinstance(doc.get("transitions"), list) else []
        edge = edges[draw(st.integers(0, len(edges) - 1))] if edges else None
        edge = edge if isinstance(edge, dict) else None
        if where in ("states", "start", "final") and isinstance(doc.get(where), list) and doc[where]:
            doc[where][draw(st.integers(0, len(doc[where]) - 1))] = draw(json_names)
        elif where in ("event", "to") and edge is not None:
            edge[where] = draw(json_names)
        elif where == "from" and edge is not None:
            edge["from"] = draw(st.one_of(st.lists(json_names, max_size=3), json_junk))
        elif where == "topic":
            doc["topic"] = draw(st.one_of(texts(), overlong(249), st.sampled_from(["t.1", "a" * 249, 5, True, []])))
        elif where == "option":
            doc["options"] = {
                **(doc.get("options") if isinstance(doc.get("options"), dict) else {}),
                draw(
                    st.sampled_from(
                        [
                            "save_after_step",
                            "uses_global_lock",
                            "uses_local_lock",
                            "lock_lease_seconds",
                            "event_data",
                            "bogus",
                            "",
                        ]
                    )
                ): draw(option_values),
            }
        elif where == "field":
            doc[draw(st.sampled_from(sorted(BASE_DOCUMENT)))] = draw(json_junk)
        elif where == "add_state" and isinstance(doc.get("states"), list):
            doc["states"].append(draw(json_names))
        elif where == "add_edge" and isinstance(doc.get("transitions"), list):
            doc["transitions"].append({"event": draw(json_names), "from": [draw(json_names)], "to": draw(json_names)})
        elif where == "drop":
            doc.pop(draw(st.sampled_from(sorted(BASE_DOCUMENT))), None)
    return doc
