"""Clusters: the member of a Galera cluster or a Group Replication group pyfsm writes through.

pyfsm writes through one server of a cluster at a time (docs/scaling.md): a new connection
to any other member is refused (:func:`refuse_unless_writer`, run by
:func:`pyfsm.db.connecting.open_connection` after the session setup), so that the next of the
DSN's servers is tried; a pooled connection checks every few seconds that its server still
is the writer (:func:`is_writer`, from :func:`pyfsm.db.pool.is_alive`). The DSN option
``galera_writes=any`` turns the check off.
"""

from __future__ import annotations

from typing import Any

from ..errors import NotWriterNode
from . import queries
from .driver import errors as pymysql_errors
from .driver import is_mariadb
from .marks import mark_cluster, read_cluster

#: Run on a new connection to a server whose greeting does not say MariaDB (MySQL and its
#: builds): whether it is a Galera node (wsrep_on) or configured as a Group Replication member
#: (group_replication_group_name, set only where the plugin is loaded), and super_read_only;
#: any account may run it. MariaDB is asked ``SHOW VARIABLES LIKE 'wsrep_on'`` alone (a
#: cheaper scan there; MariaDB has no Group Replication).
MYSQL_CLUSTER_VARIABLES = queries.sql("cluster_mysql_variables")
#: Whether a Group Replication member is its group's writable primary: super_read_only (ON on
#: secondaries, on a new primary until it applied its backlog, on a member that left the
#: group), whether its own row says ONLINE and PRIMARY, and how many of the members it sees
#: are ONLINE (a primary cut off from the majority of its group cannot commit).
GROUP_PRIMARY_SQL = queries.sql("cluster_group_primary")
#: SELECT denied on a table: an account that may not read performance_schema.
_TABLE_ACCESS_DENIED = 1142


def refuse_unless_writer(cur: Any) -> bool:
    """On a member of a cluster that is not the member pyfsm writes through, raise 31025
    (NotWriterNode); whether the server is a member of a cluster (and so its writer).

    pyfsm writes through one server of a cluster at a time (docs/scaling.md). It knows two:

    * **Galera** (``wsrep_on`` ON): the writer is the node Galera lists first in the current
      view, ``wsrep_local_index`` 0 (through several nodes at once, locks and workers
      stalled the cluster). Every node of the primary component agrees on it, and when the
      membership changes (a node died or came back) there is a new one.
    * **MySQL Group Replication** (InnoDB Cluster; ``group_replication_group_name`` set): the
      writer is the group's primary, the member whose row of
      performance_schema.replication_group_members says ONLINE and PRIMARY, that sees a
      majority of its group ONLINE, and whose super_read_only is OFF (:data:`GROUP_PRIMARY_SQL`).
      A secondary, a member recovering or in error, and one configured for a group but not
      in it are passed over; a member with super_read_only ON is, without a second query. An
      account that may not read performance_schema (1142) is judged by super_read_only alone.

    Raised as a driver error, so that a new connection passes over this server to the next
    of the DSN's servers like over one not ready (1047). One query on any other server
    (MySQL and MariaDB without either answer wsrep_on OFF or nothing, and no group name); a
    second on a Galera node or a Group Replication member with super_read_only OFF. Which
    kind the server is stays on the connection (:func:`pyfsm.db.marks.mark_cluster`) for
    :func:`is_writer`.
    """
    conn = cur.connection
    if is_mariadb(conn):
        cur.execute(queries.sql("cluster_mariadb_wsrep"))
    else:
        cur.execute(MYSQL_CLUSTER_VARIABLES)
    variables = {str(name).lower(): str(value or "") for name, value in cur.fetchall()}
    if variables.get("wsrep_on", "").upper() == "ON":
        mark_cluster(conn, "galera")
        if not is_writer(cur):
            raise pymysql_errors.OperationalError(
                NotWriterNode.errno,
                "this Galera node is not the cluster's writer node (wsrep_local_index 0): "
                "pyfsm writes through one node at a time; list every node in the DSN, or add "
                "galera_writes=any to write through any",
            )
        return True
    if variables.get("group_replication_group_name"):
        mark_cluster(conn, "group")
        if variables.get("super_read_only", "").upper() == "ON" or not is_writer(cur):
            raise pymysql_errors.OperationalError(
                NotWriterNode.errno,
                "this MySQL Group Replication member is not its group's primary (ONLINE, "
                "PRIMARY, super_read_only OFF): pyfsm writes through the primary; list every "
                "member in the DSN, or connect through MySQL Router's read-write port",
            )
        return True
    return False


def is_writer(cur: Any) -> bool:
    """Whether this server is still the writer of its cluster (see :func:`refuse_unless_writer`):
    a Galera node's ``wsrep_local_index`` 0, or a Group Replication member's being its group's
    primary. A connection not marked by refuse_unless_writer is taken for a Galera node's."""
    if read_cluster(cur.connection) == "group":
        try:
            cur.execute(GROUP_PRIMARY_SQL)
        except pymysql_errors.MySQLError as exc:
            if not exc.args or exc.args[0] != _TABLE_ACCESS_DENIED:
                raise
            cur.execute(queries.sql("cluster_super_read_only"))  # the account may not read performance_schema
            return not int(cur.fetchone()[0] or 0)
        read_only, primary, online, members = (int(v or 0) for v in cur.fetchone())
        return not read_only and primary == 1 and 2 * online > members
    cur.execute(queries.sql("cluster_wsrep_local_index"))
    row = cur.fetchone()
    return row is not None and str(row[1]) == "0"
