-- fsm_v_history: the history of every machine type, with the time spent in each state.
--
-- UNION ALL of the per-type views fsm_v_{type}_transitions, rebuilt by pyfsm whenever a
-- type is installed. One row per state an instance entered: to_state, entered_at, left_at
-- (NULL while it is still there), seconds_in_state (up to now for the current state).
-- The state of an instance as of time T: entered_at <= T AND (left_at > T OR left_at IS NULL).
-- Errors: none of its own.
-- Example: SELECT machine, instance_key, sort_key, event, to_state, entered_at, seconds_in_state FROM fsm_v_history WHERE machine = 'order' AND instance_key = 'o-1' ORDER BY sort_key;
CREATE OR REPLACE SQL SECURITY DEFINER VIEW `fsm_v_history` AS
SELECT `transition_id`, `machine`, `instance_key`, `lookup_key`, `instance_id`, `sort_key`, `event`,
       `from_state`, `to_state`, `handler`, `source`, `request_id`, `definition_version`, `data_before`,
       `data_after`, `metadata`, `entered_at`, `left_at`, `seconds_in_state`, `is_current`
  FROM `fsm_v_{type}_transitions`
