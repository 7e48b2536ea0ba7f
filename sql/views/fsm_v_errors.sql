-- fsm_v_errors: every error a handler raised, with its traceback and what the engine did next.
--
-- One row per failed attempt of a step: the instance, the state and handler, the attempt,
-- the exception's type, message and traceback, and outcome ('retry' with next_run_at, or
-- 'failed' when the attempts ran out). A MERGE view: a WHERE on machine and instance_id
-- reads the index (machine, instance_id, id).
-- For reporting accounts (`pyfsm grant --reporting`) and the web console.
-- Errors: none of its own.
-- Example: SELECT created_at, handler, attempt, error_type, message FROM fsm_v_errors WHERE machine = 'order' AND instance_id = 1001 ORDER BY id DESC;
CREATE OR REPLACE ALGORITHM = MERGE SQL SECURITY DEFINER VIEW `fsm_v_errors` AS
SELECT e.`id`, e.`machine`, e.`instance_id`, e.`instance_key`, e.`state`, e.`handler`, e.`attempt`, e.`error_type`,
       e.`message`, e.`traceback`, e.`outcome`, e.`next_run_at`, e.`created_at`
  FROM `fsm_errors` e
