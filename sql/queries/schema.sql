-- The statements pyfsm/schema/ runs around the objects it builds from sql/'s files: the DDL
-- session's setup, the reads of information_schema that decide what to create or grant,
-- the bookkeeping of fsm_machines, fsm_state_counts and fsm_accounts, the locks that
-- serialise installers, and the schema revision's reads. The DDL itself (CREATE, ALTER,
-- DROP, GRANT, LOCK TABLES, the rendered trigger code) is built per object and per account
-- in pyfsm/schema/ from sql/'s files and stays there.

-- name: schema_ddl_sql_mode
-- Run first on a connection before pyfsm's DDL: routines and triggers keep the sql_mode they
-- were created under, so they are created under this strict one (MySQL 8's default, which
-- MariaDB accepts too; pyfsm.db.STRICT_SQL_MODE, a unit test keeps them equal).
-- Parameters: none.
-- Used by: schema.ddl.ddl_session (execute_ddl, upgrades.replace_machine_triggers).
SET SESSION sql_mode = 'ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION'

-- name: schema_lock_wait_timeout
-- The session's lock_wait_timeout, kept to be put back after DDL that waits only briefly.
-- Parameters: none.
-- Result: (seconds).
-- Used by: schema.ddl.lock_wait (ddl_waiting_briefly, upgrades.replace_machine_triggers).
SELECT @@SESSION.lock_wait_timeout

-- name: schema_set_lock_wait_timeout
-- How long the session's DDL and LOCK TABLES wait for a metadata lock: briefly while they
-- run, then what it was before.
-- Parameters: none ({seconds}: an int).
-- Used by: schema.ddl.lock_wait (ddl_waiting_briefly, upgrades.replace_machine_triggers).
SET SESSION lock_wait_timeout = {seconds}

-- name: schema_has_column
-- Whether a table of the current database has a column (a table from before a revision
-- that added it has not).
-- Parameters: table name, column name.
-- Result: (count), 0 or 1.
-- Used by: schema.ddl.has_column.
SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE()
AND table_name = %s AND column_name = %s

-- name: schema_machine_triggers
-- The triggers on a type's instance table and history table.
-- Parameters: instance table name (fsm_{type}), history table name (fsm_{type}_transitions).
-- Result: (trigger_name).
-- Used by: schema.ddl.machine_triggers.
-- Filtered by the table's schema (a trigger's is always its table's): MariaDB looks that one
-- database up, where a filter on trigger_schema reads the triggers of every database.
SELECT trigger_name FROM information_schema.triggers WHERE event_object_schema = DATABASE()
AND event_object_table IN (%s, %s)

-- name: schema_current_database
-- The connection's database, named in the GRANT statements of `pyfsm grant`.
-- Parameters: none.
-- Result: (database).
-- Used by: schema.grants.statements.
SELECT DATABASE()

-- name: schema_account_exists
-- Whether an account exists: the server refuses it with 1133 (MariaDB) or 1396 (MySQL) when
-- not. The account is given as two parameters, user and host, sent quoted ('user'@'host').
-- Parameters: user, host.
-- Result: (the CREATE USER statement).
-- Used by: schema.grants.exists.
SHOW CREATE USER %s@%s

-- name: schema_app_procedures
-- What the app role is granted: every public procedure (SQL SECURITY DEFINER, named fsm_%)
-- but the fsm_define_* ones. Run without parameters: its % are the LIKE patterns'.
-- Parameters: none.
-- Result: (routine_name), ordered by name.
-- Used by: schema.grants.statements.
SELECT routine_name FROM information_schema.routines WHERE routine_schema = DATABASE()
AND routine_type = 'PROCEDURE' AND security_type = 'DEFINER'
AND routine_name LIKE 'fsm\_%' AND routine_name NOT LIKE 'fsm\_define\_%'
ORDER BY routine_name

-- name: schema_reporting_views
-- The views the reporting role is granted: fsm_v_% and fsm_held_locks_v1. Run without
-- parameters: its % is the LIKE pattern's.
-- Parameters: none.
-- Result: (table_name), ordered by name.
-- Used by: schema.grants.statements.
SELECT table_name FROM information_schema.views WHERE table_schema = DATABASE()
AND (table_name LIKE 'fsm\_v\_%' OR table_name = 'fsm_held_locks_v1') ORDER BY table_name

-- name: schema_procedures_named
-- Which of the named procedures the current database has (a role's procedures that came
-- with later revisions are granted where the schema has them).
-- Parameters: the names (one list).
-- Result: (routine_name), ordered by name.
-- Used by: schema.grants.statements (the reporting and relay roles).
SELECT routine_name FROM information_schema.routines WHERE routine_schema = DATABASE()
AND routine_type = 'PROCEDURE' AND routine_name IN %s ORDER BY routine_name

-- name: schema_record_account
-- Record an account `pyfsm grant` gave a role, so that later objects are granted to it too
-- (one line: `pyfsm grant --dry-run` shows it with its values).
-- Parameters: user, host, role.
-- Used by: schema.grants.grant.
INSERT IGNORE INTO fsm_accounts (user, host, role, granted_at) VALUES (%s, %s, %s, UTC_TIMESTAMP(6))

-- name: schema_recorded_accounts
-- The accounts `pyfsm grant` recorded (1146 before revision 0004: no such table).
-- Parameters: none.
-- Result: (user, host, role), ordered.
-- Used by: schema.grants.recorded.
SELECT user, host, role FROM fsm_accounts ORDER BY user, host, role

-- name: schema_forget_account
-- Forget a recorded account that no longer exists (it is never created again).
-- Parameters: user, host.
-- Used by: schema.grants.grant_recorded.
DELETE FROM fsm_accounts WHERE user = %s AND host = %s

-- name: schema_mark_objects_version
-- Record which set of per-type objects a type now has.
-- Parameters: objects version (v16, ...), machine.
-- Used by: schema.install.install_machine_objects, schema.upgrades.upgrade_machines and
-- schema.upgrades.replace_machine_triggers.
UPDATE fsm_machines SET objects_version = %s WHERE machine = %s

-- name: schema_machines_at
-- The types at one object set, to upgrade (a migration's per-type step).
-- Parameters: objects version.
-- Result: (machine), ordered.
-- Used by: schema.upgrades.upgrade_machines.
SELECT machine FROM fsm_machines WHERE objects_version = %s ORDER BY machine

-- name: schema_machines_with_views
-- The types whose objects have the reporting views the union views are built from.
-- Parameters: the object sets (one list: schema.views.VIEW_OBJECT_VERSIONS).
-- Result: (machine), ordered.
-- Used by: schema.views.refresh_views.
SELECT machine FROM fsm_machines WHERE objects_version IN %s ORDER BY machine

-- name: schema_has_timeouts
-- Whether a state of any definition version of a type has a timeout (it then gets the timer
-- triggers).
-- Parameters: machine.
-- Result: one row or none.
-- Used by: schema.install.has_timeouts.
SELECT 1 FROM fsm_states WHERE machine = %s AND timeout_seconds IS NOT NULL LIMIT 1

-- name: schema_procedures
-- Every procedure of the current database (information_schema shows an account the routines
-- it may use, so any account may run it).
-- Parameters: none.
-- Result: (routine_name), ordered by name.
-- Used by: schema.install.deprecated_present (`pyfsm check`).
SELECT routine_name FROM information_schema.routines WHERE routine_schema = DATABASE()
AND routine_type = 'PROCEDURE' ORDER BY routine_name

-- name: schema_migrate_lock
-- Serialise `pyfsm migrate` runs: wait up to 60 s for the one running.
-- Parameters: none.
-- Result: (1 when taken).
-- Used by: schema.install.migrate.
SELECT GET_LOCK('pyfsm_migrate', 60)

-- name: schema_migrate_unlock
-- Let the next `pyfsm migrate` run.
-- Parameters: none.
-- Used by: schema.install.migrate.
SELECT RELEASE_LOCK('pyfsm_migrate')

-- name: schema_fresh_install_tables
-- Which of the version table (with its comment: the fresh install's mark) and fsm_machines
-- the current database has: whether it is for a fresh install.
-- Parameters: the version table's name (schema.install.VERSION_TABLE).
-- Result: (table_name, table_comment).
-- Used by: schema.install.install_fresh.
SELECT table_name, table_comment FROM information_schema.tables
WHERE table_schema = DATABASE() AND table_name IN (%s, 'fsm_machines')

-- name: schema_revision
-- The schema revision recorded in the database, through the procedure any account that may
-- EXECUTE it can call (1305 before revision 0004: no such procedure; 1146: no version table).
-- Called by its name as written here, as every pyfsm has asked it.
-- Parameters: none.
-- Result: (version_num), no row when none is recorded.
-- Used by: schema.install.current_revision.
CALL fsm_schema_version_v1()

-- name: schema_revision_table
-- The schema revision recorded in the version table, where fsm_schema_version_v1 is missing
-- (before revision 0004); 1146 where there is no version table. The table is
-- schema.install.VERSION_TABLE (a unit test keeps them equal).
-- Parameters: none.
-- Result: (version_num), no row when none is recorded.
-- Used by: schema.install.current_revision.
SELECT version_num FROM `fsm_alembic_version`

-- name: schema_server_version
-- The server's version: MariaDB and MySQL get differently rendered transition triggers.
-- Parameters: none.
-- Result: (version).
-- Used by: schema.rendering.read_rules.
SELECT VERSION()

-- name: schema_current_version
-- A type's current definition version (new instances get it).
-- Parameters: machine.
-- Result: (current_version), no row for a type not defined.
-- Used by: schema.rendering.read_rules.
SELECT current_version FROM fsm_machines WHERE machine = %s

-- name: schema_rules_have_guards
-- Whether fsm_rules has its guard column (revision 0024): the landed migrations 0022 and 0023
-- render the transition trigger before it.
-- Parameters: none.
-- Result: (count), 0 or 1.
-- Used by: schema.rendering.read_rules.
SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE()
AND table_name = 'fsm_rules' AND column_name = 'guard'

-- name: schema_instance_versions
-- The definition versions a type's instances are at: a scan of the instance table (there is
-- no index on definition_version), which `pyfsm sync` runs rarely and which takes no locks.
-- Parameters: none ({type}: the machine type).
-- Result: (definition_version), each once.
-- Used by: schema.rendering.read_rules.
SELECT DISTINCT definition_version FROM `fsm_{type}`

-- name: schema_rules
-- The rules of some definition versions of a type, in the order the trigger tests them.
-- Parameters: machine, the versions (one list) ({guards}: schema_rule_guards, or
-- schema_rule_no_guards before fsm_rules had guards).
-- Result: (version, from_state, event, to_state, to_final, position, guard, guard_name).
-- Used by: schema.rendering.read_rules.
SELECT version, from_state, event, to_state, to_final, {guards} FROM fsm_rules
WHERE machine = %s AND version IN %s ORDER BY version, from_state, event, 6

-- name: schema_rule_guards
-- The guard columns of schema_rules.
-- Used by: schema.rendering.read_rules (in schema_rules).
position, guard, guard_name

-- name: schema_rule_no_guards
-- What stands for the guard columns of schema_rules where fsm_rules has none yet.
-- Used by: schema.rendering.read_rules (in schema_rules).
1, NULL, NULL

-- name: schema_event_data
-- Whether each of some definition versions of a type keeps its events' data.
-- Parameters: machine, the versions (one list).
-- Result: (version, event_data).
-- Used by: schema.rendering.read_rules.
SELECT version, event_data FROM fsm_definitions WHERE machine = %s AND version IN %s

-- name: schema_record_rendered
-- Record what a type's transition trigger was rendered for: its current version and the
-- rendered text's digest.
-- Parameters: current version, digest, machine.
-- Used by: schema.rendering.record_rendered.
UPDATE fsm_machines SET rendered_version = %s, rendered_digest = %s WHERE machine = %s

-- name: schema_rendered_digest
-- The digest of the text a type's transition trigger was last rendered with.
-- Parameters: machine.
-- Result: (rendered_digest), no row for a type not defined.
-- Used by: schema.rendering.install_transition_trigger.
SELECT rendered_digest FROM fsm_machines WHERE machine = %s

-- name: schema_clear_state_counts
-- Clear a type's counters, to count them again (under LOCK TABLES).
-- Parameters: machine.
-- Used by: schema.upgrades.rebuild_state_counts.
DELETE FROM fsm_state_counts WHERE machine = %s

-- name: schema_count_states
-- Count a type's instances per state and shard into fsm_state_counts (under LOCK TABLES:
-- exact only while no one can write the instance table).
-- Parameters: machine ({type}: the machine type).
-- Used by: schema.upgrades.rebuild_state_counts.
INSERT INTO fsm_state_counts (machine, state, shard, instances) SELECT %s, current_state,
MOD(id, 16), COUNT(*) FROM `fsm_{type}` GROUP BY current_state, MOD(id, 16)

-- name: schema_fill_left_at_on
-- Let the history trigger accept the left_at backfill (and nothing else) on this session.
-- Parameters: none.
-- Used by: schema.upgrades.fill_left_at.
SET @fsm_fill_left_at = 1

-- name: schema_fill_left_at_off
-- The left_at backfill is over.
-- Parameters: none.
-- Used by: schema.upgrades.fill_left_at.
SET @fsm_fill_left_at = NULL

-- name: schema_left_at_batch
-- A batch of history rows without left_at that are not their instance's most recent, each
-- with the time the next row began (GREATEST: a clock stepped back must not end a state
-- before it began).
-- Parameters: the last id of the batch before (0 first), batch size ({type}: the machine type).
-- Result: (id, left_at), by id; left_at NULL where there is no next row.
-- Used by: schema.upgrades.fill_left_at.
SELECT a.id, GREATEST(a.created_at, (SELECT b.created_at FROM `fsm_{type}_transitions` b
WHERE b.instance_id = a.instance_id AND b.sort_key > a.sort_key ORDER BY b.sort_key LIMIT 1))
FROM `fsm_{type}_transitions` a WHERE a.id > %s AND a.most_recent IS NULL AND a.left_at IS NULL
ORDER BY a.id LIMIT %s

-- name: schema_views_lock
-- Serialise the rebuilds of the union views: wait up to 60 s for the one running.
-- Parameters: none.
-- Result: (1 when taken).
-- Used by: schema.views.refresh_views.
SELECT GET_LOCK('pyfsm_views', 60)

-- name: schema_views_unlock
-- Let the next rebuild of the union views run.
-- Parameters: none.
-- Used by: schema.views.refresh_views.
SELECT RELEASE_LOCK('pyfsm_views')

-- name: attach_installed
-- Record an attached type's triggers installed (again, after a detach).
-- Parameters: machine.
-- Used by: pyfsm.schema.attached.install (Store.attach, `pyfsm attach`, `pyfsm sync`).
UPDATE fsm_attachments SET installed_at = COALESCE(IF(detached_at IS NULL, installed_at, NULL), UTC_TIMESTAMP(6)),
       detached_at = NULL
 WHERE machine = %s

-- name: attach_detached
-- Record an attached type's triggers removed; its rows, instances and history stay. Rows
-- written meanwhile have no instance: attached again, it is adopting again (adopted_at NULL).
-- Parameters: machine.
-- Used by: pyfsm.schema.attached.detach (Store.detach, `pyfsm detach`).
UPDATE fsm_attachments SET detached_at = UTC_TIMESTAMP(6), installed_at = NULL, adopted_at = NULL WHERE machine = %s

-- name: attach_row
-- One type's attachment as fsm_attachments records it (none: the type owns its table).
-- Parameters: machine.
-- Used by: pyfsm.schema.attached, pyfsm.attach.
SELECT machine, table_name, key_column, state_column, key_kind, key_type, lookup_column, data_columns,
       on_delete, created_at, installed_at, detached_at, adopted_at
  FROM fsm_attachments WHERE machine = %s

-- name: attach_adopted
-- Record an adoption finished with every row adopted.
-- Parameters: machine.
-- Used by: pyfsm.attach.adopt.
UPDATE fsm_attachments SET adopted_at = UTC_TIMESTAMP(6) WHERE machine = %s

-- name: attach_triggers
-- The attached type's triggers as the server has them: their table and their body, so that
-- one rendered differently (a newer pyfsm's, or the update trigger once adoption finished) is
-- created again.
-- Parameters: the trigger names (a list).
-- Result: (trigger name, table, body) per trigger.
-- Used by: pyfsm.schema.attached.install.
-- EVENT_OBJECT_SCHEMA, not TRIGGER_SCHEMA (the same value): see schema_machine_triggers.
SELECT TRIGGER_NAME, EVENT_OBJECT_TABLE, ACTION_STATEMENT FROM information_schema.TRIGGERS
 WHERE EVENT_OBJECT_SCHEMA = DATABASE() AND TRIGGER_NAME IN %s

-- name: attach_column_types
-- The columns of an attached table with their types (information_schema's DATA_TYPE): how the
-- lookup column and the copied columns are rendered into the triggers.
-- Parameters: table name.
-- Result: (column name, data type) per column.
-- Used by: pyfsm.schema.attached.with_column_types.
SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS
 WHERE TABLE_SCHEMA = DATABASE() AND CAST(TABLE_NAME AS BINARY) = CAST(%s AS BINARY)

-- name: attach_health_attachments
-- Every attachment fsm_attachments records, for `pyfsm check` (1142 for an account that may
-- not read the table, as the application's and reporting accounts may not: then not checked).
-- Parameters: none.
-- Result: the rows of attach_row, by machine.
-- Used by: pyfsm.attach_health.check (`pyfsm check`).
SELECT machine, table_name, key_column, state_column, key_kind, key_type, lookup_column, data_columns,
       on_delete, created_at, installed_at, detached_at, adopted_at
  FROM fsm_attachments ORDER BY machine

-- name: attach_health_columns
-- The columns an attached table has now (none: the table is gone), byte for byte by name.
-- Parameters: table name.
-- Result: (name, data_type, column_type, length) per column.
-- Used by: pyfsm.attach_health.check (`pyfsm check`).
SELECT COLUMN_NAME AS name, DATA_TYPE AS data_type, COLUMN_TYPE AS column_type, CHARACTER_MAXIMUM_LENGTH AS length
  FROM information_schema.COLUMNS
 WHERE TABLE_SCHEMA = DATABASE() AND CAST(TABLE_NAME AS BINARY) = CAST(%s AS BINARY)

-- name: attach_health_triggers
-- The triggers on an attached table and on its type's instance table, and the type's own
-- (named fsm_<type>_...) wherever they are: a renamed table takes its triggers along.
-- ACTION_ORDER is the order of the triggers of one table, timing and event.
-- Parameters: table name, instance table name (fsm_<type>), the prefix fsm_<type>_ twice.
-- Result: (name, table_name, timing, event, action_order) per trigger.
-- Used by: pyfsm.attach_health.check (`pyfsm check`).
-- EVENT_OBJECT_SCHEMA, not TRIGGER_SCHEMA (the same value): see schema_machine_triggers.
SELECT TRIGGER_NAME AS name, EVENT_OBJECT_TABLE AS table_name, ACTION_TIMING AS timing,
       EVENT_MANIPULATION AS event, ACTION_ORDER AS action_order
  FROM information_schema.TRIGGERS
 WHERE EVENT_OBJECT_SCHEMA = DATABASE()
   AND (CAST(EVENT_OBJECT_TABLE AS BINARY) IN (CAST(%s AS BINARY), CAST(%s AS BINARY))
        OR LEFT(TRIGGER_NAME, CHAR_LENGTH(%s)) = %s)

-- name: attach_health_procedure
-- Whether an attached type's adoption procedure exists.
-- Parameters: procedure name (fsm_<type>_adopt_v1).
-- Result: one row when it exists, none when not.
-- Used by: pyfsm.attach_health.check (`pyfsm check`).
SELECT ROUTINE_NAME AS name FROM information_schema.ROUTINES
 WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_TYPE = 'PROCEDURE' AND ROUTINE_NAME = %s

-- name: attach_health_states
-- Every state of every definition version of a type (its state column must hold each), with
-- the first version that has it.
-- Parameters: machine.
-- Result: (state, version) per state, by version then name.
-- Used by: pyfsm.attach_health.check (`pyfsm check`).
SELECT state, MIN(version) AS version FROM fsm_states WHERE machine = %s GROUP BY state ORDER BY MIN(version), state
