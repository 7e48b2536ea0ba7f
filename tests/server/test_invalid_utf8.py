"""Text that is not valid UTF-8 is refused, and reading it never breaks the pool (issue 19, part 2).

MariaDB's utf8mb4 refuses most invalid byte sequences (FF FE, C0 AF, a lone 80: error 1366)
but lets encoded surrogates through (ED A0 80 ... ED BF BF, "CESU"), which no UTF-8 decoder
accepts: PyMySQL raised UnicodeDecodeError in the middle of a result, and the connection
went back to the pool with the rest of the reply unread. The triggers of object set v7
refuse such text (31024, InvalidEncoding) wherever pyfsm stores text, and a reply that
cannot be decoded closes its connection and raises InvalidEncoding.

The SQL tests send the bytes as PyMySQL sends ``bytes`` arguments (``_binary'...'``), as a
client in another language would send them as text.

MySQL's utf8mb4 refuses encoded surrogates itself (1366; 3144 for a JSON column given the bytes
as binary) before pyfsm's triggers see them: the same calls are refused there with those
numbers, and text that cannot be stored cannot be read back (those tests are MariaDB's).
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers.common import errno_of, fetch, is_mariadb

from pyfsm import InvalidArgument, InvalidData, InvalidEncoding, Machine, Store
from pyfsm.errors import error_for
from pyfsm.schema import install as schema
from pyfsm.schema.ddl import execute_ddl, object_name
from pyfsm.schema.resources import render

SURROGATE = b"\xed\xa0\x80"  # U+D800 encoded in UTF-8: not UTF-8, yet MariaDB's utf8mb4 takes it
HANGUL = "\ud55c"  # 한, ED 95 9C: valid UTF-8 that starts with the same byte ED


def table_sums(raw: Any, machine: str) -> list[Any]:
    """What a refused call must leave unchanged."""
    rows = fetch(raw, f"CHECKSUM TABLE `fsm_{machine}`, `fsm_{machine}_transitions`, fsm_state_counts, fsm_outbox")
    return [r["Checksum"] for r in rows]


def assert_refused(raw: Any, errno: int | None, on_mysql: int) -> None:
    """``errno`` is the server's refusal of an encoded surrogate, and a pyfsm error for bad input:
    on MariaDB pyfsm's own (31024, InvalidEncoding); on MySQL its utf8mb4's, ``on_mysql``
    (1366 from a text column or parameter, InvalidArgument; 3144 from a JSON column)."""
    if is_mariadb(raw):
        assert errno == 31024
        assert type(error_for(errno, "")) is InvalidEncoding
    else:
        assert errno == on_mysql
        assert isinstance(
            error_for(on_mysql, ""), InvalidArgument if on_mysql == 1366 else (InvalidArgument, InvalidData)
        )


NO_BAD_TEXT_ON_MYSQL = "MySQL's utf8mb4 refuses the bytes: such text cannot be stored there"


@pytest.fixture
def seeded(store: Store, order: Machine) -> Machine:
    store.create(order, "u-1", lookup_key="acct-1")
    return order


SEND = "CALL `fsm_{m}_send_v2`(%s, %s, %s, %s, NULL, %s, %s, %s)"


@pytest.mark.parametrize("where", ["new key", "lookup_key", "data", "metadata", "request_id", "handler"])
def test_send_v2_refuses_encoded_surrogates(seeded: Machine, raw: Any, where: str) -> None:
    args: dict[str, Any] = {
        "key": "u-1",
        "event": "pay",
        "data": None,
        "metadata": None,
        "request_id": None,
        "handler": None,
        "lookup_key": None,
    }
    if where == "new key":
        args["key"] = b"u-" + SURROGATE
    elif where == "lookup_key":  # used only when the call creates the instance
        args["key"], args["lookup_key"] = "u-new", b"acct-" + SURROGATE
    elif where in ("data", "metadata"):
        args[where] = b'{"s": "' + SURROGATE + b'"}'
    else:
        args[where] = b"x" + SURROGATE
    before = table_sums(raw, seeded.name)
    assert_refused(raw, errno_of(raw, SEND.format(m=seeded.name), tuple(args.values())), 1366)
    assert table_sums(raw, seeded.name) == before
    left = fetch(
        raw,
        "SELECT @fsm_event AS e, @fsm_metadata AS m, @fsm_handler AS h, @fsm_request_id AS r, "
        "@fsm_source AS s, @fsm_guard AS g",
    )
    assert left == [dict.fromkeys("emhrsg")]


def test_every_other_door_refuses_them(seeded: Machine, raw: Any) -> None:
    m = seeded.name
    bad_data = b'{"s": "' + SURROGATE + b'"}'
    before = table_sums(raw, m)
    assert_refused(raw, errno_of(raw, "CALL fsm_create_v1(%s, 'u-2', NULL, %s, NULL, NULL, NULL)", (m, bad_data)), 1366)
    assert_refused(raw, errno_of(raw, f"INSERT INTO `fsm_{m}` (instance_key) VALUES (%s)", (b"u-" + SURROGATE,)), 1366)
    assert_refused(raw, errno_of(raw, f"UPDATE `fsm_{m}` SET data = %s WHERE instance_key = 'u-1'", (bad_data,)), 3144)
    assert_refused(
        raw, errno_of(raw, f"UPDATE `fsm_{m}` SET lookup_key = %s WHERE instance_key = 'u-1'", (SURROGATE,)), 1366
    )
    raw.cursor().execute("SET @fsm_event = 'pay', @fsm_metadata = %s", (bad_data,))
    assert_refused(raw, errno_of(raw, f"UPDATE `fsm_{m}` SET data = data WHERE instance_key = 'u-1'"), 1366)
    raw.cursor().execute("SET @fsm_event = NULL, @fsm_metadata = NULL")
    assert table_sums(raw, m) == before


def test_valid_text_with_the_same_lead_byte_is_kept(store: Store, seeded: Machine) -> None:
    """ED also starts U+D000-U+D7FF (Hangul): only the surrogate range is refused."""
    key = f"u-{HANGUL}"
    sent = store.send(
        seeded,
        key,
        "pay",
        data={"name": HANGUL * 3},
        metadata={"by": HANGUL},
        request_id=f"r-{HANGUL}",
        handler=HANGUL,
        lookup_key=HANGUL,
    )
    assert sent.to_state == "paid"
    got = store.get(seeded, key)
    assert (got.key, got.data, got.lookup_key) == (key, {"name": HANGUL * 3}, HANGUL)
    last = store.history(seeded, key)[-1]
    assert (last.metadata, last.request_id, last.handler) == ({"by": HANGUL}, f"r-{HANGUL}", HANGUL)


def test_python_refuses_lone_surrogates_before_any_sql(seeded: Machine, dsn: str) -> None:
    with Store(dsn, pool_size=1) as one:
        for call in (
            lambda: one.send(seeded, "u-\ud800", "pay"),
            lambda: one.send(seeded, "u-1", "pay", request_id="r\udfff"),
            lambda: one.send(seeded, "u-1", "pay", data={"s": "\ud800"}),
            lambda: one.send(seeded, "u-1", "pay", metadata={"s": SURROGATE.decode("utf-8", "surrogateescape")}),
        ):
            with pytest.raises(InvalidEncoding) as info:
                call()
            assert info.value.errno == 31024 and isinstance(info.value, InvalidArgument)
        # the last one carries the bytes ED A0 80 as surrogate escapes: refused in Python too
        assert one.get(seeded, "u-1").state == "new"


def store_bad_bytes(raw: Any, machine: str, key: str) -> None:
    """Write an encoded surrogate into an instance the way pyfsm before v7 let it in: with the
    transition trigger out of the way (it is put back at once). MariaDB only."""
    if not is_mariadb(raw):
        pytest.skip(NO_BAD_TEXT_ON_MYSQL)
    bu = schema.current_template("trigger_bu")
    raw.cursor().execute(f"DROP TRIGGER `{object_name(bu, machine)}`")
    try:
        raw.cursor().execute(
            f"UPDATE `fsm_{machine}` SET data = %s, lookup_key = %s WHERE instance_key = %s",
            (b'{"s": "' + SURROGATE + b'"}', b"acct-" + SURROGATE, key),
        )
    finally:
        execute_ddl(raw, [render(bu, machine)])


@pytest.mark.parametrize("read", ["get", "in_state", "instances_of_account"])
def test_reading_stored_bad_text_fails_cleanly_and_the_pool_keeps_working(
    store: Store, seeded: Machine, raw: Any, dsn: str, read: str
) -> None:
    store.create(seeded, "u-ok")
    store_bad_bytes(raw, seeded.name, "u-1")
    with Store(dsn, pool_size=1) as one:  # one connection: a broken one would be handed out next
        ids = set()
        for _ in range(3):
            with pytest.raises(InvalidEncoding, match="not valid UTF-8"):
                if read == "get":
                    one.get(seeded, "u-1")
                elif read == "in_state":
                    one.in_state(seeded, "new")
                else:
                    one.gateway.primary.on_connection(
                        lambda conn: fetch(conn, f"SELECT * FROM `fsm_{seeded.name}` WHERE lookup_key LIKE 'acct-%'")
                    )
            assert one.get(seeded, "u-ok").state == "new"  # the next, unrelated read works
            ids.add(one.gateway.primary.on_connection(lambda conn: fetch(conn, "SELECT CONNECTION_ID() AS c"))[0]["c"])
        assert len(ids) == 3  # each failure closed its connection
        assert one.send(seeded, "u-ok", "pay").to_state == "paid"


def test_the_cli_reports_stored_bad_text_in_one_line(seeded: Machine, raw: Any, dsn: str) -> None:
    import subprocess
    import sys

    store_bad_bytes(raw, seeded.name, "u-1")
    done = subprocess.run(
        [sys.executable, "-m", "pyfsm", "show", seeded.name, "u-1", "--dsn", dsn],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "not valid UTF-8" in done.stderr
