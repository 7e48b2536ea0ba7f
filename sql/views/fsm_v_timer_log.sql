-- fsm_v_timer_log: what became of timers that fired, were dropped or cancelled, with the firing lag.
--
-- One row per timer in fsm_timer_log. lag_seconds is how long after its due time the timer
-- was handled (for 'fired': the firing lag). A dropped timer's errno and reason say why its
-- event was not sent (31005: not allowed from the instance's state when it came due).
-- Errors: none.
-- Example: SELECT machine, outcome, COUNT(*), AVG(lag_seconds) FROM fsm_v_timer_log WHERE done_at > UTC_TIMESTAMP(6) - INTERVAL 1 DAY GROUP BY machine, outcome;
CREATE OR REPLACE SQL SECURITY DEFINER VIEW `fsm_v_timer_log` AS
SELECT l.`id` AS `timer_id`, l.`machine`, l.`instance_key`, l.`instance_id`, l.`kind`, l.`state`, l.`event`,
       l.`request_id`, l.`due_at`, l.`armed_at`, l.`outcome`, l.`transition_id`, l.`errno`, l.`reason`,
       l.`done_by`, l.`done_at`,
       TIMESTAMPDIFF(MICROSECOND, l.`due_at`, l.`done_at`) / 1000000 AS `lag_seconds`
  FROM `fsm_timer_log` l
