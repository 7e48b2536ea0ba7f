-- The statements pyfsm/db/ runs on its connections: the session setup, the cluster checks,
-- clearing a transition context, creating a missing database. Also the upgrade run's
-- progress read (pyfsm/versions.py), which reads session variables the same way.

-- name: session_time_zone
-- Run first on every new connection: UTC, so that times read and written mean one thing
-- whatever the server's zone.
-- Parameters: none.
-- Used by: db.connecting (SESSION_SETUP), schema.ddl.ddl_session (before pyfsm's DDL).
SET time_zone = '+00:00'

-- name: session_read_committed
-- Run second on every new connection: READ COMMITTED, whatever the server's default.
-- Parameters: none.
-- Used by: db.connecting (SESSION_SETUP).
SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED

-- name: session_snapshot_isolation_off
-- Run after session_read_committed on a MariaDB server: InnoDB's snapshot isolation off for
-- this session, as 10.11 and MySQL behave. MariaDB 11.6+ turns it on by default, and then even
-- a READ COMMITTED statement fails with 1020 (and its whole transaction is rolled back) when a
-- trigger of it read something and it then writes a row another transaction committed since,
-- as pyfsm's triggers do with the state counters; pyfsm's procedures handle 1213 and 1205
-- inside their batches, not 1020. pyfsm's guarantees rest on row locks, not on that check.
-- A MariaDB without the variable (before 10.6.18) refuses it with 1193, which is ignored.
-- @pyfsm_snapshot_isolation_off is fsm_begin_v1's note that the session has it off: set in the
-- same statement, so that the procedures do not turn it off a second time.
-- Parameters: none.
-- Used by: db.connecting (SNAPSHOT_ISOLATION_OFF).
SET SESSION innodb_snapshot_isolation = OFF, @pyfsm_snapshot_isolation_off = 1

-- name: session_ready_probe
-- Run after the setup: a Galera node that is not ready (joining, or cut off from the primary
-- component) refuses it with 1047, a server shutting down with 1053; elsewhere it does nothing.
-- Parameters: none.
-- Used by: db.connecting (READY_PROBE).
DO 0

-- name: session_clear_context
-- Clear the transition context on a connection that must be kept (a lock holder's) after a
-- failure: the session variables pyfsm's procedures and triggers set around a transition
-- (pyfsm.db.pool.CONTEXT_VARIABLES names the same ones; a unit test keeps them equal).
-- Parameters: none.
-- Used by: db.pool (CLEAR_CONTEXT_SQL).
SET @fsm_event = NULL, @fsm_metadata = NULL, @fsm_handler = NULL, @fsm_request_id = NULL,
  @fsm_source = NULL, @fsm_count_later = NULL, @fsm_guard = NULL, @fsm_upgrade = NULL

-- name: cluster_mariadb_wsrep
-- On a new connection to MariaDB: whether it is a Galera node.
-- Parameters: none.
-- Result: (Variable_name, Value), no row without the Galera provider.
-- Used by: db.cluster.refuse_unless_writer.
SHOW VARIABLES LIKE 'wsrep_on'

-- name: cluster_mysql_variables
-- On a new connection to MySQL (and its builds): whether it is a Galera node (wsrep_on), a
-- Group Replication member (group_replication_group_name, set only where the plugin is
-- loaded), and super_read_only; any account may run it.
-- Parameters: none.
-- Result: (Variable_name, Value) rows.
-- Used by: db.cluster.refuse_unless_writer.
SHOW VARIABLES WHERE Variable_name IN ('wsrep_on', 'super_read_only', 'group_replication_group_name')

-- name: cluster_group_primary
-- Whether a Group Replication member is its group's writable primary: super_read_only, whether
-- its own row says ONLINE and PRIMARY, how many members it sees ONLINE, and how many it sees.
-- Parameters: none.
-- Result: one row of four numbers.
-- Errors: 1142 for an account that may not read performance_schema (cluster_super_read_only then).
-- Used by: db.cluster.
SELECT @@GLOBAL.super_read_only,
  COALESCE(MAX(MEMBER_ID = @@GLOBAL.server_uuid AND MEMBER_STATE = 'ONLINE' AND MEMBER_ROLE = 'PRIMARY'), 0),
  COALESCE(SUM(MEMBER_STATE = 'ONLINE'), 0), COUNT(*) FROM performance_schema.replication_group_members

-- name: cluster_super_read_only
-- A Group Replication member's super_read_only, for an account that may not read performance_schema.
-- Parameters: none.
-- Used by: db.cluster.
SELECT @@GLOBAL.super_read_only

-- name: cluster_wsrep_local_index
-- A Galera node's index in its cluster (the node pyfsm writes through is the one of index 0).
-- Parameters: none.
-- Used by: db.cluster.
SHOW STATUS LIKE 'wsrep_local_index'

-- name: create_database
-- The DSN's database, as pyfsm wants it: utf8mb4 and utf8mb4_bin.
-- Parameters: none ({database}: the name, checked by db.connecting.DATABASE_NAME).
-- Used by: db.connecting.create_database (`pyfsm migrate` on a server without the database).
CREATE DATABASE IF NOT EXISTS `{database}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin

-- name: show_warnings
-- The warnings of the statement before: 1007 after create_database says the database existed.
-- Parameters: none.
-- Used by: db.connecting.create_database.
SHOW WARNINGS

-- name: upgrade_batch_progress
-- What an upgrade batch that failed part way had done: its last id and counts, which
-- fsm_{type}_upgrade_v1 keeps in session variables.
-- Parameters: none.
-- Used by: pyfsm/versions.py.
SELECT @fsm_u_last, @fsm_u_groups
