-- fsm_v_stuck: the instances a handler runs that are not done (running, waiting or paused), with how long they have been in their state and their run.
--
-- Only what the handler engine is responsible for: an instance with a run in fsm_runs
-- (started by Process.start, Store.enqueue, `pyfsm enqueue`, the console or
-- fsm_enqueue_v2), and not an idle one, which no handler runs and which moves only when an
-- event is sent (an order waiting for its payment is not stuck). running: due or claimed
-- (due_at is when it is due, or when its claim runs out); waiting: for an external event
-- (due_at NULL); paused. Failed instances are in fsm_v_failed. Filter on seconds_in_state
-- for "stuck longer than": a view takes no parameters.
-- UNION ALL of one branch per installed type, rebuilt by pyfsm whenever a type is installed,
-- as fsm_v_instances is; each branch reads the type's runs (the hot queue: few rows) and
-- looks each instance up by its id.
-- Errors: none of its own.
-- Example: SELECT machine, instance_key, current_state, status, seconds_in_state FROM fsm_v_stuck WHERE seconds_in_state > 3600 ORDER BY seconds_in_state DESC;
CREATE OR REPLACE SQL SECURITY DEFINER VIEW `fsm_v_stuck` AS
SELECT i.`machine`, i.`id`, i.`instance_key`, i.`lookup_key`, i.`current_state`, i.`status`, i.`in_state_since`,
       i.`seconds_in_state`, i.`updated_at`, r.`due_at`, r.`claimed_by`, r.`attempt`
  FROM `fsm_runs` r
  JOIN `fsm_v_{type}` i ON i.`id` = r.`instance_id`
 WHERE r.`machine` = '{type}' AND i.`status` IN ('running', 'waiting', 'paused')
