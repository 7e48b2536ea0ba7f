-- fsm_reserved_name_v2: may a new machine type not take this name, which pyfsm keeps for its own objects?
--
-- A type's table is fsm_{type}, its reporting view fsm_v_{type} and its procedures
-- fsm_{type}_<operation>_vN, so a name is reserved when one of those would be one of
-- pyfsm's own objects (fsm_locks, fsm_operator_log; account: fsm_account_history_v1), now or
-- in a planned release; so are names starting with v_ (the reporting views) and ending in
-- _transitions (a type's history table). fsm_define_v6 refuses them for a new type. The list
-- is pyfsm.resources.RESERVED_MACHINE_NAMES with RESERVED_FOR_NEW_TYPES
-- (tests/server/test_reserved_names.py keeps them equal); a revision that adds an object whose name a
-- type could spell adds the name to both. Binary collation: 'Locks' is not reserved, it is
-- invalid. Internal: fsm_define_v6's helper. Differs from v1 in
-- timers and timer_log (revision 0019's tables fsm_timers, fsm_timer_log); attachments
-- (revision 0027's fsm_attachments) added in place by that revision.
-- Parameters: p_machine (text, may be NULL).
-- Returns: 1 or 0 (0 for NULL).
-- Errors: none.
-- Example: SELECT fsm_reserved_name_v2('operator_log'), fsm_reserved_name_v2('v_orders'), fsm_reserved_name_v2('orders');
CREATE FUNCTION `fsm_reserved_name_v2`(p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
RETURNS TINYINT DETERMINISTIC NO SQL SQL SECURITY INVOKER
RETURN COALESCE(
  p_machine IN ('machines', 'definitions', 'states', 'rules', 'outbox', 'locks', 'lock_log',
                'queue', 'workers', 'relay', 'archive', 'settings', 'errors', 'schema',
                'alembic_version', 'runs', 'accounts', 'state_counts', 'held_locks_v1',
                'instances', 'history', 'failed', 'funnel', 'stuck', 'relay_leaders',
                'operator_log', 'account', 'timers', 'timer_log', 'attachments')
  OR p_machine LIKE 'v\_%'
  OR p_machine LIKE '%\_transitions', 0)
