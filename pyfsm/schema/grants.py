"""Least-privilege accounts: `pyfsm grant` and the SQL behind it.

pyfsm's routines, triggers and views run as their definer (the account that ran the
migrations), so the accounts applications and analysts use need no rights on any table:

* ``app``: EXECUTE on every public procedure (each SQL SECURITY DEFINER routine named
  ``fsm_%``; the internal helpers are SQL SECURITY INVOKER and are not granted). It can
  create, transition, pause, lock and run handlers, and cannot UPDATE, DELETE or even
  SELECT any table.
* ``reporting``: SELECT on the reporting views (``fsm_v_%`` and ``fsm_held_locks_v1``) and
  EXECUTE on ``REPORTING_PROCEDURES``: the cross-type listings, which read what those views
  show, only faster (docs/reporting.md), and the schema revision a Store checks first (so
  that ``Store.instances_in_state`` and ``Store.account_history`` work for it); nothing else.
* ``relay``: the Kafka relay's outbox rows (SELECT, UPDATE, DELETE on fsm_outbox) and the
  procedures it calls (lag, schema revision, leadership).

No role gets ``fsm_attach_v1`` (issue 48): it is SQL SECURITY INVOKER, so it reads the
application's table and records the attachment in ``fsm_attachments`` with the caller's own
rights; it is for the schema owner or a DBA, who holds those rights, and granting it to ``app``
would let an application account attach machines to tables it may not even read. The per-type
``fsm_<type>_adopt_v1`` is SQL SECURITY DEFINER like the other public procedures and goes to
``app`` by the same rule (adoption only applies the machine's rules to rows already there).

The accounts are recorded in ``fsm_accounts``; objects created later (a new machine type's
procedures and views, a new revision's routines) are granted to them by ``pyfsm sync`` /
``Store.define`` / ``pyfsm migrate`` through :func:`grant_recorded`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..db import queries
from ..db.driver import errors as pymysql_errors
from ..errors import InvalidArgument
from . import routines

log = logging.getLogger("pyfsm.grants")

ROLES = ("app", "reporting", "relay")
USER = re.compile(r"[A-Za-z0-9_.-]{1,32}")
HOST = re.compile(r"[A-Za-z0-9_.%:-]{1,255}")
#: The relay's own rights: it reads and marks outbox rows with plain SQL (and releases parked
#: ones with fsm_unpark_v1, from revision 0013).
RELAY_TABLE_PRIVILEGES = "SELECT, UPDATE, DELETE"
#: Granted where the schema has them (the leadership procedures came with revision 0012).
RELAY_PROCEDURES = tuple(
    r.name
    for r in (routines.OUTBOX_LAG, routines.SCHEMA_VERSION, routines.RELAY_LEAD, routines.RELAY_RESIGN, routines.UNPARK)
)
#: The procedures a reporting account may call: read-only, and nothing in their results that
#: the reporting views do not show (or, for the schema revision, that pyfsm does not print
#: anyway): the stats and the relay's lag are counts over fsm_v_instances, fsm_v_runs and
#: fsm_v_outbox, the armed timers are fsm_v_timers' rows, which the web console and `pyfsm metrics`
#: read, the instances per definition version (fsm_instances_per_version_v1, from revision 0021) a count
#: over fsm_v_instances that `pyfsm stats` shows. Granted where the schema has them.
#: fsm_stats_v1 and fsm_stats_v2 are deprecated (pyfsm.schema.DEPRECATED) and kept granted until they are removed.
REPORTING_PROCEDURES = (
    *(r.name for r in (routines.SCHEMA_VERSION, routines.INSTANCES_IN_STATE, routines.ACCOUNT_HISTORY, routines.STATS)),
    "fsm_stats_v1",
    "fsm_stats_v2",
    routines.OUTBOX_LAG.name,
    routines.TIMERS.name,
    routines.VERSION_COUNTS.name,
)


@dataclass(frozen=True)
class Account:
    """``user@host`` and the role it gets."""

    user: str
    host: str
    role: str

    @classmethod
    def parse(cls, text: str, role: str) -> Account:
        """``'name'`` or ``'name@host'`` (host defaults to ``%``: any host)."""
        if role not in ROLES:
            raise InvalidArgument(f"role must be one of {', '.join(ROLES)}, got {role!r:.40}")
        if not isinstance(text, str):
            raise InvalidArgument(f"account must be a string 'name' or 'name@host', got {text!r:.80}")
        user, _, host = text.partition("@")
        host = host or "%"
        if not USER.fullmatch(user):
            raise InvalidArgument(f"account user must be 1-32 characters of [A-Za-z0-9_.-], got {user!r:.80}")
        if not HOST.fullmatch(host):
            raise InvalidArgument(f"account host must be 1-255 characters of [A-Za-z0-9_.%:-], got {host!r:.80}")
        return cls(user, host, role)

    @property
    def sql(self) -> str:
        # validated above: only these characters ever reach the statement
        return f"'{self.user}'@'{self.host}'"


def exists(conn: Any, account: Account) -> bool:
    """Whether the account exists (SHOW CREATE USER fails with 1133 on MariaDB, 1396 on MySQL, when not)."""
    with conn.cursor() as cur:
        try:
            # the driver quotes user and host as account.sql does ('user'@'host'): the same text
            cur.execute(queries.sql("schema_account_exists"), (account.user, account.host))
            cur.fetchall()
            return True
        except pymysql_errors.MySQLError as exc:
            if exc.args and exc.args[0] in (1133, 1396):  # MariaDB, MySQL: no such account
                return False
            raise


def statements(conn: Any, account: Account) -> list[str]:
    """The GRANT statements that give ``account`` its role on the current database, now.

    The app role gets every public procedure but the fsm_define_* ones: definitions, like
    the tables they lead to, are the schema owner's.
    """
    with conn.cursor() as cur:
        cur.execute(queries.sql("schema_current_database"))
        database = str(cur.fetchone()[0]).replace("`", "``")
        if account.role == "app":
            cur.execute(queries.sql("schema_app_procedures"))  # no arguments: its % are LIKE's
            return [f"GRANT EXECUTE ON PROCEDURE `{database}`.`{name}` TO {account.sql}" for (name,) in cur.fetchall()]
        if account.role == "reporting":
            cur.execute(queries.sql("schema_reporting_views"))  # no arguments: its % is LIKE's
            views = [f"GRANT SELECT ON `{database}`.`{name}` TO {account.sql}" for (name,) in cur.fetchall()]
            cur.execute(queries.sql("schema_procedures_named"), (REPORTING_PROCEDURES,))
            return views + [
                f"GRANT EXECUTE ON PROCEDURE `{database}`.`{name}` TO {account.sql}" for (name,) in cur.fetchall()
            ]
        cur.execute(queries.sql("schema_procedures_named"), (RELAY_PROCEDURES,))
        procedures = [name for (name,) in cur.fetchall()]
    return [
        f"GRANT {RELAY_TABLE_PRIVILEGES} ON `{database}`.`fsm_outbox` TO {account.sql}",
        *(f"GRANT EXECUTE ON PROCEDURE `{database}`.`{name}` TO {account.sql}" for name in procedures),
    ]


def grant(
    conn: Any,
    accounts: Sequence[Account],
    *,
    passwords: dict[str, str] | None = None,
    set_existing: bool = False,
    dry_run: bool = False,
) -> tuple[list[str], list[Account]]:
    """Create missing accounts and grant each its role; record them in fsm_accounts.

    ``passwords`` maps ``user@host`` to a password: a missing account is created with it (a
    missing account without one is refused, before anything is done); an existing account
    keeps its password unless ``set_existing``. The account is never created by a GRANT (some
    sql_modes let MariaDB do that, without a password). Returns the statements (passwords
    shown as ``'***'``) and the accounts created; with ``dry_run`` nothing is executed.
    """
    passwords = passwords or {}
    present = {a: exists(conn, a) for a in accounts}
    for account in accounts:
        key = f"{account.user}@{account.host}"
        if not present[account] and key not in passwords:
            raise InvalidArgument(f"account {key} does not exist: give it a password to create it", account=key)
    shown: list[str] = []
    created: list[Account] = []
    with conn.cursor() as cur:
        for account in accounts:
            password = passwords.get(f"{account.user}@{account.host}")
            verb = (
                None
                if password is None
                else "CREATE USER"
                if not present[account] and account not in created
                else "ALTER USER"
                if set_existing
                else None
            )
            if verb is not None:
                shown.append(f"{verb} {account.sql} IDENTIFIED BY '***'")
                if not dry_run:
                    # with arguments PyMySQL formats the text: the host's % must be doubled
                    cur.execute(f"{verb} {account.sql.replace('%', '%%')} IDENTIFIED BY %s", (password,))
                if verb == "CREATE USER":
                    created.append(account)
            for statement in statements(conn, account):
                shown.append(statement)
                if not dry_run:
                    cur.execute(statement)
            record = (account.user, account.host, account.role)
            # shown with its values quoted (each checked by Account.parse: nothing to escape)
            shown.append(queries.sql("schema_record_account") % tuple(f"'{value}'" for value in record))
            if not dry_run:
                cur.execute(queries.sql("schema_record_account"), record)
    return shown, created


def recorded(conn: Any) -> list[Account]:
    """The accounts `pyfsm grant` recorded (none before revision 0004)."""
    with conn.cursor() as cur:
        try:
            cur.execute(queries.sql("schema_recorded_accounts"))
        except pymysql_errors.ProgrammingError as exc:
            if exc.args and exc.args[0] == 1146:  # no such table: an older schema
                return []
            raise
        return [Account(user, host, role) for user, host, role in cur.fetchall()]


def grant_recorded(conn: Any) -> None:
    """Grant the recorded accounts what their roles cover now (new procedures and views).

    An account dropped since is forgotten (its fsm_accounts rows deleted), never re-created.
    """
    with conn.cursor() as cur:
        for account in recorded(conn):
            if not exists(conn, account):
                log.warning(
                    "pyfsm: account %s@%s recorded in fsm_accounts no longer exists; forgotten",
                    account.user,
                    account.host,
                )
                cur.execute(queries.sql("schema_forget_account"), (account.user, account.host))
                continue
            for statement in statements(conn, account):
                cur.execute(statement)
