-- fsm_v_instances: the current state of every instance of every machine type.
--
-- UNION ALL of the per-type views fsm_v_<type>, one branch per installed type, rebuilt by
-- pyfsm whenever a type is installed (`pyfsm sync`, Store.define, migrations); the view
-- exists once the first type does. A WHERE machine = '...' prunes the other branches on
-- MariaDB 10.3+ and MySQL 8.0.29+ (condition pushdown into UNION); listings of one type at
-- scale are fastest on fsm_v_<type> itself. Columns: those of fsm_v_<type>.
-- Errors: none of its own.
-- Example: SELECT machine, instance_key, current_state, status, seconds_in_state FROM fsm_v_instances WHERE machine = 'order' AND instance_key = 'o-1';
CREATE OR REPLACE SQL SECURITY DEFINER VIEW `fsm_v_instances` AS
SELECT `id`, `machine`, `instance_key`, `lookup_key`, `current_state`, `status`, `data`, `version`,
       `definition_version`, `resume_from_step`, `kafka_topic`, `uses_global_lock`, `uses_local_lock`,
       `last_retry_at`, `created_at`, `updated_at`, `in_state_since`, `seconds_in_state`
  FROM `fsm_v___M__`
