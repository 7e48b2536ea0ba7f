-- fsm_v_runs: the handler engine's queue: one row per instance a process runs, with when it is due and who has it.
--
-- A run is due when due_at <= now and nobody holds it; a claim is a lease, so while a
-- worker holds a run its due_at is the end of that lease (claimed_by names the worker).
-- due_at NULL: the run waits for an event or a resume (waiting, paused). A run whose
-- due_at lies well in the past is stuck: nobody picks it up, or its claimer died and no
-- worker took it over. overdue_seconds counts from due_at to now (NULL when not due).
-- A MERGE view: a WHERE on machine and due_at reads the index (machine, due_at, id).
-- For reporting accounts (`pyfsm grant --reporting`) and the web console.
-- Errors: none of its own.
-- Example: SELECT machine, instance_key, due_at, claimed_by, attempt, overdue_seconds FROM fsm_v_runs WHERE machine = 'order' AND due_at < UTC_TIMESTAMP(6) - INTERVAL 5 MINUTE ORDER BY due_at LIMIT 20;
CREATE OR REPLACE ALGORITHM = MERGE SQL SECURITY DEFINER VIEW `fsm_v_runs` AS
SELECT r.`id`, r.`machine`, r.`instance_id`, r.`instance_key`, r.`due_at`, r.`claimed_by`, r.`attempt`,
       r.`pause_requested`, r.`run_immediately`, r.`created_at`, r.`updated_at`,
       IF(r.`due_at` <= UTC_TIMESTAMP(6), TIMESTAMPDIFF(MICROSECOND, r.`due_at`, UTC_TIMESTAMP(6)) * 0.000001, NULL)
         AS `overdue_seconds`
  FROM `fsm_runs` r
