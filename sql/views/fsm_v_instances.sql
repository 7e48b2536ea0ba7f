-- fsm_v_instances: the current state of every instance of every machine type.
--
-- UNION ALL of the per-type views fsm_v_{type}, one branch per installed type, rebuilt by
-- pyfsm whenever a type is installed (`pyfsm sync`, Store.define, migrations); the view
-- exists once the first type does. Each branch's machine column is a constant, so a WHERE
-- machine = '...' turns the other branches into impossible WHEREs (MariaDB 10.3+, MySQL
-- 8.0.29+: condition pushdown into UNION). A sorted listing still reads every matching row
-- of the type before it sorts and cuts (seconds with a million instances): list one type
-- on fsm_v_{type}, which reads only the page. Columns: those of fsm_v_{type}.
-- Errors: none of its own.
-- Example: SELECT machine, instance_key, current_state, status, seconds_in_state FROM fsm_v_instances WHERE machine = 'order' AND instance_key = 'o-1';
CREATE OR REPLACE SQL SECURITY DEFINER VIEW `fsm_v_instances` AS
SELECT `id`, `machine`, `instance_key`, `lookup_key`, `current_state`, `status`, `data`, `version`,
       `definition_version`, `resume_from_step`, `kafka_topic`, `uses_global_lock`, `uses_local_lock`,
       `last_retry_at`, `created_at`, `updated_at`, `in_state_since`, `seconds_in_state`
  FROM `fsm_v_{type}`
