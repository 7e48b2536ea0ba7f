-- fsm_v_operator_log: what operators did through the web console, newest last (fsm_operator_log).
--
-- One row per action: who asked (operator, and the MySQL account that ran it), what
-- (action, machine, instance_key, detail), when, and how it ended (outcome 'requested',
-- 'done' or 'refused', with errno and message). A MERGE view: a WHERE on machine and
-- instance_key reads the index (machine, instance_key, id).
-- For reporting accounts (`pyfsm grant --reporting`) and the web console.
-- Errors: none of its own.
-- Example: SELECT requested_at, operator, action, outcome FROM fsm_v_operator_log WHERE machine = 'order' AND instance_key = 'o-1001' ORDER BY id;
CREATE OR REPLACE ALGORITHM = MERGE SQL SECURITY DEFINER VIEW `fsm_v_operator_log` AS
SELECT l.`id`, l.`operator`, l.`account`, l.`action`, l.`machine`, l.`instance_key`, l.`detail`, l.`requested_at`,
       l.`outcome`, l.`errno`, l.`message`, l.`finished_at`
  FROM `fsm_operator_log` l
