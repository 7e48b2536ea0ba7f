-- fsm_reserved_name_v1: is p_machine a machine name pyfsm keeps for its own objects?
--
-- A type's table is fsm_<machine> and its reporting view fsm_v_<machine>, so a name that
-- would give one of pyfsm's own tables or views (fsm_locks, fsm_operator_log, ...), now or in
-- a planned release, is refused; so are names starting with v_ (the reporting views) and
-- ending in _transitions (a type's history table). The list equals the Python one,
-- pyfsm.resources.RESERVED_MACHINE_NAMES (tests/test_reserved_names.py): a revision that adds
-- a table adds its name to both. Binary collation: 'Locks' is not reserved, it is invalid.
-- Parameters: p_machine (text, may be NULL).
-- Returns: 1 or 0 (0 for NULL).
-- Errors: none.
-- Example: SELECT fsm_reserved_name_v1('operator_log'), fsm_reserved_name_v1('v_orders'), fsm_reserved_name_v1('orders');
CREATE FUNCTION `fsm_reserved_name_v1`(p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
RETURNS TINYINT DETERMINISTIC NO SQL SQL SECURITY INVOKER
RETURN COALESCE(
  p_machine IN ('machines', 'definitions', 'states', 'rules', 'outbox', 'locks', 'lock_log',
                'queue', 'workers', 'relay', 'archive', 'settings', 'errors', 'schema',
                'alembic_version', 'runs', 'accounts', 'state_counts', 'held_locks_v1',
                'instances', 'history', 'failed', 'funnel', 'stuck', 'relay_leaders',
                'operator_log')
  OR p_machine LIKE 'v\_%'
  OR p_machine LIKE '%\_transitions', 0)
