-- fsm_v_timers: the armed timers, state timeouts and scheduled events, with how overdue each is.
--
-- One row per timer in fsm_timers. overdue_seconds is how long ago it came due (0 while it
-- is not due); overdue is 1 once due_at has passed. A timer overdue by more than a few
-- seconds means no worker fires timers (run `pyfsm timers run`, or workers), or it is held:
-- holds > 0, last_errno says why (31011 the instance is paused: it fires after resume;
-- 31018 locked by another owner). claimed_by names the call firing it right now.
-- Errors: none.
-- Example: SELECT machine, instance_key, kind, event, due_at, overdue_seconds FROM fsm_v_timers WHERE overdue = 1 ORDER BY due_at LIMIT 20;
CREATE OR REPLACE SQL SECURITY DEFINER VIEW `fsm_v_timers` AS
SELECT t.`id` AS `timer_id`, t.`machine`, t.`instance_key`, t.`instance_id`, t.`kind`, t.`state`, t.`event`,
       t.`due_at`, t.`fire_at`, t.`armed_at`,
       t.`due_at` <= UTC_TIMESTAMP(6) AS `overdue`,
       GREATEST(0, TIMESTAMPDIFF(MICROSECOND, t.`due_at`, UTC_TIMESTAMP(6))) / 1000000 AS `overdue_seconds`,
       t.`claimed_by`, t.`holds`, t.`last_errno`, t.`last_error`, t.`request_id`, t.`metadata`
  FROM `fsm_timers` t
