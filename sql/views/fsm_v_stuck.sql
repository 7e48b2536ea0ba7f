-- fsm_v_stuck: instances that are not done (running, waiting or paused), with how long they
-- have been in their current state.
--
-- Filter on seconds_in_state for "stuck longer than": a view takes no parameters. Reads
-- fsm_v_instances (every type). Created with it.
-- Errors: none of its own.
-- Example: SELECT machine, instance_key, current_state, status, seconds_in_state FROM fsm_v_stuck WHERE seconds_in_state > 3600 ORDER BY seconds_in_state DESC;
CREATE OR REPLACE SQL SECURITY DEFINER VIEW `fsm_v_stuck` AS
SELECT `machine`, `id`, `instance_key`, `lookup_key`, `current_state`, `status`, `in_state_since`,
       `seconds_in_state`, `updated_at`
  FROM `fsm_v_instances`
 WHERE `status` IN ('running', 'waiting', 'paused')
