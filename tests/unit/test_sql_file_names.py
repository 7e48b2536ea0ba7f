"""Every file of sql/ is named after the object it creates (sql/README.md), and the installer
lists every file. No server needed: the files are parsed.

The rule: ``<folder>/<object name>.sql``, version included; a per-type template writes the
type ``{type}`` in its text and in its file name alike (``machine/triggers/fsm_{type}_bu_v8.sql``
creates ``fsm_{type}_bu_v8``).
"""

from __future__ import annotations

import re

import pytest

from pyfsm.schema.attached import ALL_OBJECTS as ATTACHED_OBJECTS
from pyfsm.schema.ddl import object_name
from pyfsm.schema.install import CURRENT_OBJECTS, CURRENT_TRIGGERS, MACHINE_OBJECTS, MACHINE_TIMER_OBJECTS, _family
from pyfsm.schema.resources import PLACEHOLDER, sql_dir, template_revisions
from pyfsm.schema.views import DEPENDENT_VIEWS, UNION_VIEWS

#: How a per-type template's file name writes the type (the docs write fsm_{type}_...).
TYPE_IN_FILE_NAMES = "{type}"
#: The CREATE line: its kind of object and the object's name, the first backticked name on it.
CREATE = re.compile(
    r"^CREATE (?:OR REPLACE )?(?:ALGORITHM = \w+ )?(?:SQL SECURITY \w+ )?"
    r"(TABLE|FUNCTION|PROCEDURE|TRIGGER|VIEW) (?:IF NOT EXISTS )?`([^`]+)`",
    re.M,
)
#: The kind of object each folder holds.
KINDS = {
    "tables": "TABLE",
    "functions": "FUNCTION",
    "internal": "PROCEDURE",
    "procedures": "PROCEDURE",
    "views": "VIEW",
    "triggers": "TRIGGER",
    "machine/tables": "TABLE",
    "machine/triggers": "TRIGGER",
    "machine/internal": "PROCEDURE",
    "machine/procedures": "PROCEDURE",
    "machine/views": "VIEW",
    # an attached type's objects, rendered for its table (pyfsm.schema.attached)
    "machine/attached/triggers": "TRIGGER",
    "machine/attached/procedures": "PROCEDURE",
}
# the files of objects; sql/queries/ holds the runtime queries (tests/unit/test_queries.py)
SQL_FILES = sorted(
    p.relative_to(sql_dir()).as_posix() for p in sql_dir().rglob("*.sql") if p.parent != sql_dir() / "queries"
)


def created(relative: str) -> tuple[str, str]:
    """(kind, name) of the one object a file of sql/ creates."""
    found = CREATE.findall((sql_dir() / relative).read_text(encoding="utf-8"))
    assert len(found) == 1, f"{relative}: {len(found)} CREATE statements, not one"
    return found[0]


def file_name_for(relative: str, name: str) -> str:
    """The file name the rule gives the object ``name`` created by the file ``relative``."""
    if relative.startswith("machine/"):
        assert PLACEHOLDER in name, f"{relative} is a per-type template but creates {name!r}, no type's object"
        return name.replace(PLACEHOLDER, TYPE_IN_FILE_NAMES) + ".sql"
    assert PLACEHOLDER not in name, f"{relative} creates the per-type {name!r} outside sql/machine"
    return name + ".sql"


def test_the_sql_folder_has_its_files_and_states_the_rule() -> None:
    assert len(SQL_FILES) > 50
    assert "named after the object it creates" in (sql_dir() / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("relative", SQL_FILES)
def test_every_file_is_named_after_the_object_it_creates(relative: str) -> None:
    folder, file_name = relative.rsplit("/", 1)
    kind, name = created(relative)
    assert folder in KINDS, f"{relative}: sql/{folder} is no folder of the layout (sql/README.md)"
    assert kind == KINDS[folder], f"{relative} creates a {kind}, sql/{folder} holds {KINDS[folder]}s"
    assert file_name == file_name_for(relative, name), (
        f"{relative} creates {name}: name it {file_name_for(relative, name)}"
    )
    if folder == "machine/triggers":  # stale_triggers' reading of the name agrees
        sample = object_name(relative, "sample")  # rendered for a type called sample
        assert sample.replace("_sample_", f"_{TYPE_IN_FILE_NAMES}_", 1) + ".sql" == file_name


def test_a_versioned_object_has_its_version_in_the_file_name() -> None:
    for relative in SQL_FILES:
        _, name = created(relative)
        version = re.search(r"_v\d+$", name)
        assert version is None or relative.endswith(version.group(0) + ".sql"), relative


def test_no_two_files_create_one_object() -> None:
    names = [created(relative)[1] for relative in SQL_FILES]
    assert sorted(set(names)) == sorted(names)


def test_every_file_is_listed_by_the_installer() -> None:
    """CURRENT_OBJECTS (global), MACHINE_OBJECTS and MACHINE_TIMER_OBJECTS (per type), an
    attached type's objects (pyfsm.schema.attached.ALL_OBJECTS) and the views rebuilt over every
    type (UNION_VIEWS, DEPENDENT_VIEWS) name every file of sql/, each once, and no other."""
    listed = [
        *CURRENT_OBJECTS,
        *MACHINE_OBJECTS,
        *MACHINE_TIMER_OBJECTS,
        *ATTACHED_OBJECTS,
        *UNION_VIEWS,
        *DEPENDENT_VIEWS,
    ]
    assert len(listed) == len(set(listed)), "a file listed twice"
    assert sorted(listed) == SQL_FILES
    assert all(name.startswith("machine/") for name in (*MACHINE_OBJECTS, *MACHINE_TIMER_OBJECTS))
    assert all(name.startswith("machine/attached/") for name in ATTACHED_OBJECTS)
    assert not any(name.startswith("machine/") for name in (*CURRENT_OBJECTS, *UNION_VIEWS, *DEPENDENT_VIEWS))


def test_each_trigger_family_names_its_current_file() -> None:
    """CURRENT_TRIGGERS maps the frozen templates' families (trigger_bu_v2 -> trigger_bu) to the
    current files; stale_triggers swaps an older version for the entry of its family. Each
    entry's file creates a version of that family, frozen in migrations/sql as
    templates/trigger_<family>_v<N>.sql (put back if a later swap fails), and every current
    trigger is one entry."""
    triggers = [name for name in MACHINE_OBJECTS if name.startswith("machine/triggers/")]
    assert sorted(CURRENT_TRIGGERS.values()) == sorted(triggers)
    prefix = f"fsm_{TYPE_IN_FILE_NAMES}_"
    for family, relative in CURRENT_TRIGGERS.items():
        stem = relative.rsplit("/", 1)[1].removesuffix(".sql")
        assert stem.startswith(prefix), relative
        frozen = "trigger_" + stem.removeprefix(prefix)  # fsm_{type}_bu_v8 -> trigger_bu_v8
        assert re.fullmatch(r"trigger_[a-z]+_v\d+", frozen), relative
        assert _family(frozen) == family, f"{relative} is of family {_family(frozen)}, listed as {family}"
        template_revisions(frozen)  # frozen in exactly one revision folder, or FileNotFoundError
