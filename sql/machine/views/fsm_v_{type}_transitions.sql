-- fsm_v_{type}_transitions: the history of {type} with each instance's key and the time spent in each state.
--
-- One row per history row (creation included): the state the instance entered (to_state)
-- at entered_at, left at left_at (NULL while it is still there) after seconds_in_state
-- (counted up to now for the current state). The state of an instance as of a time T is the
-- row with entered_at <= T AND (left_at > T OR left_at IS NULL). A MERGE view: a WHERE on
-- instance_key reads the instance by its unique key and its history by (instance_id, sort_key).
-- Errors: none of its own.
-- Example: SELECT sort_key, event, from_state, to_state, entered_at, seconds_in_state FROM `fsm_v_{type}_transitions` WHERE instance_key = 'k-1' ORDER BY sort_key;
CREATE OR REPLACE ALGORITHM = MERGE SQL SECURITY DEFINER VIEW `fsm_v_{type}_transitions` AS
SELECT h.`id` AS `transition_id`, '{type}' AS `machine`, i.`instance_key`, i.`lookup_key`, h.`instance_id`, h.`sort_key`,
       h.`event`, h.`from_state`, h.`to_state`, h.`handler`, h.`source`, h.`request_id`, h.`definition_version`,
       h.`data_before`, h.`data_after`, h.`metadata`, h.`created_at` AS `entered_at`, h.`left_at`,
       TIMESTAMPDIFF(MICROSECOND, h.`created_at`, COALESCE(h.`left_at`, UTC_TIMESTAMP(6))) * 0.000001
         AS `seconds_in_state`,
       h.`most_recent` IS NOT NULL AS `is_current`
  FROM `fsm_{type}_transitions` h
  JOIN `fsm_{type}` i ON i.`id` = h.`instance_id`
