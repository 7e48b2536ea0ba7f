"""The sizes pyfsm's tables and procedures accept, defined once for the Python side.

The SQL declares the same numbers (column and parameter types, the procedures' range checks);
``tests/server/test_limits.py`` reads them from a fresh install and compares. Python checks
first so that bad input fails before any SQL runs, with a message naming the limit.
"""

#: Instance keys and lookup keys: VARCHAR(191), the longest utf8mb4 key InnoDB indexes in
#: 767 bytes (191 x 4), the limit of the oldest row format pyfsm supports.
KEY_CHARS = 191
#: Machine type, state and event names: VARCHAR(64), MySQL's identifier length (a type's
#: name becomes part of its tables' and procedures' names).
NAME_CHARS = 64
#: Machine type names: VARCHAR(48), so that ``fsm_{type}_send_many_v2`` and the type's other
#: objects stay within MySQL's 64-character identifiers.
MACHINE_NAME_CHARS = 48
#: Request ids (idempotency keys): VARCHAR(64), room for a UUID or a hash in hex.
REQUEST_ID_CHARS = 64
#: Handler names recorded in history: VARCHAR(128).
HANDLER_CHARS = 128
#: A force-unlock's reason, kept in fsm_lock_log: VARCHAR(255).
REASON_CHARS = 255
#: The largest page a listing procedure returns (``limit``): one call, bounded memory.
PAGE_ROWS = 10000
#: An instance's data (JSON), serialized.
MAX_DATA_BYTES = 1024 * 1024
#: A transition's metadata (JSON), serialized.
MAX_METADATA_BYTES = 64 * 1024
#: BIGINT's largest value (ids, versions).
MAX_BIGINT = 2**63 - 1
#: fsm_enqueue_v1 takes DECIMAL(12,3) seconds: at most about 31 years.
MAX_DELAY_SECONDS = 999_999_999
#: A state's timeout (Machine ``timeouts``, its ``after``): the same bound as a delay, about 31 years.
MAX_TIMEOUT_SECONDS = MAX_DELAY_SECONDS
#: Guards (pyfsm.guards): a guard's name, used in errors, listings and diagrams.
GUARD_NAME_CHARS = 64
#: The conditions in one guard (tests, all, any and not), and how deep they nest.
GUARD_NODES = 64
GUARD_DEPTH = 8
#: The literals an ``in`` test lists, and a guard holds in all (each is rendered into the
#: trigger: the bound keeps a type's trigger text far below max_allowed_packet), a literal
#: string's characters, a path's parts.
GUARD_LIST_ITEMS = 64
GUARD_LITERALS = 64
GUARD_STRING_CHARS = 255
GUARD_PATH_SEGMENTS = 16
#: Numbers in guards are within +/- 2**53: every integer there is exact as a 64-bit float,
#: which is how guards compare numbers on both servers.
GUARD_NUMBER_LIMIT = 2**53
