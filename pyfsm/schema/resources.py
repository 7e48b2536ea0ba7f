"""Where pyfsm's SQL and migrations live, and how per-type SQL is rendered.

``sql/`` holds the current schema, one file per object, named after it (sql/README.md): what
a fresh install creates (``sql/machine/`` per machine type, the type written ``{type}`` in the
text and the file names: ``fsm_{type}_send_v4.sql`` creates ``fsm_{type}_send_v4``). The
revisions in ``migrations/`` apply SQL frozen as it was when each landed, in
``migrations/sql/`` (``0001-0010/``: the shared tree of the first ten revisions, every file
named by its version; then one folder per revision). In a built
wheel both are inside the package (``pyfsm/sql``, ``pyfsm/migrations``); in a source
checkout they are the top-level folders.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from ..db.queries import package_folder, sql_dir
from ..errors import InvalidArgument
from ..limits import MACHINE_NAME_CHARS

MACHINE_NAME = re.compile(rf"[a-z][a-z0-9_]{{0,{MACHINE_NAME_CHARS - 1}}}")
#: How every per-type file of sql/ writes the machine type, in its text and its file name
#: (``machine/procedures/fsm_{type}_send_v4.sql`` creates ``fsm_{type}_send_v4``), as the docs,
#: the routine registry (pyfsm.schema.routines) and the runtime queries (pyfsm.db.queries) do.
PLACEHOLDER = "{type}"
#: How the copies frozen under migrations/sql before 0.4 write it: they stay as they landed.
FROZEN_PLACEHOLDER = "__M__"

#: Names that would collide with pyfsm's own tables (fsm_<name>) now or in later releases.
#: The database refuses the same ones for a new type (sql/functions/fsm_reserved_name_v2.sql,
#: called by fsm_define_v8; tests/server/test_reserved_names.py keeps the lists equal): a revision
#: that adds a table adds its name to both.
RESERVED_MACHINE_NAMES = frozenset(
    {
        "machines",
        "definitions",
        "states",
        "rules",
        "outbox",
        "locks",
        "lock_log",
        "queue",
        "workers",
        "relay",
        "archive",
        "settings",
        "errors",
        "schema",
        "alembic_version",
        # revision 0004 (fsm_define_v3): tables and views added since, and the reporting views fsm_v_<name>
        "runs",
        "accounts",
        "state_counts",
        "held_locks_v1",
        "instances",
        "history",
        "failed",
        "funnel",
        "stuck",
        # later revisions' tables (0012, 0013); 0013's views fsm_v_runs, fsm_v_errors, fsm_v_outbox and
        # fsm_v_operator_log are covered by the names above
        "relay_leaders",
        "operator_log",
        # revision 0019 (fsm_define_v6, fsm_reserved_name_v2): the timers' tables
        "timers",
        "timer_log",
        # revision 0027 (fsm_reserved_name_v2 replaced in place): fsm_attachments
        "attachments",
    }
)

#: Names a new type may not take because one of its procedures would have a global
#: procedure's name (fsm_<account>_history_v1 is fsm_account_history_v1). Unlike the names
#: above, a type defined before one was reserved keeps working under it (only its history
#: procedure was never created): fsm_define_v8 refuses these for new types only.
RESERVED_FOR_NEW_TYPES = frozenset({"account"})


@cache
def migrations_dir() -> Path:
    return package_folder("migrations")


#: The frozen tree of revisions 0001 to 0010 under migrations/sql.
FIRST_REVISIONS = "0001-0010"


def read_sql(relative: str) -> str:
    """The text of one current SQL file, e.g. ``procedures/fsm_send_v4.sql``."""
    return (sql_dir() / relative).read_text(encoding="utf-8")


def read_frozen(relative: str, revisions: str = FIRST_REVISIONS) -> str:
    """The text of one SQL file as a revision applies it: ``migrations/sql/<revisions>/<relative>``."""
    return (migrations_dir() / "sql" / revisions / relative).read_text(encoding="utf-8")


def check_machine_name(name: object) -> str:
    """Return ``name`` if it is a valid, unreserved machine name, else raise InvalidArgument."""
    if not isinstance(name, str) or not MACHINE_NAME.fullmatch(name):
        raise InvalidArgument(
            f"machine name must match [a-z][a-z0-9_]* and have at most {MACHINE_NAME_CHARS} characters, "
            f"got {name!r:.80}",
            machine=None,
        )
    if name in RESERVED_MACHINE_NAMES or name.startswith("v_") or name.endswith("_transitions"):
        raise InvalidArgument(f"machine name {name!r} is reserved", machine=name)
    return name


def render(template: str, machine: str) -> str:
    """Render a per-type SQL file for one machine type.

    ``template``: a current file, by its path under ``sql/`` (``machine/triggers/fsm_{type}_bu_v13.sql``), or
    a frozen template by its name (``trigger_bu_v6``, in ``migrations/sql/0001-0010/templates``
    or a later revision's ``templates/``: template_revisions; the landed migrations and the
    upgrade of types an older pyfsm installed use those). The machine name is validated first: it is the only
    thing ever spliced into SQL text.
    """
    if "/" in template:
        text = read_sql(template)
    else:
        text = read_frozen(f"templates/{template}.sql", template_revisions(template))
    return fill_type(text, machine)


def fill_type(text: str, machine: str) -> str:
    """``text`` (a per-type file, current or frozen) for machine type ``machine``, checked first:
    the only thing ever spliced into SQL text."""
    name = check_machine_name(machine)
    return text.replace(PLACEHOLDER, name).replace(FROZEN_PLACEHOLDER, name)


@cache
def template_revisions(template: str) -> str:
    """The folder of migrations/sql that holds a frozen per-type template: revisions 0001 to
    0010 share one tree; a later revision that adds a version (``trigger_hbu_v5``, 0017) keeps
    it in its own folder's ``templates/``. A versioned name is frozen exactly once."""
    found = sorted(p.parent.parent.name for p in (migrations_dir() / "sql").glob(f"*/templates/{template}.sql"))
    if len(found) != 1:
        raise FileNotFoundError(f"per-type template {template!r} is frozen in {len(found)} revision folders, not one")
    return found[0]
