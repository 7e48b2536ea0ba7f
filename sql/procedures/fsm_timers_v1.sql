-- fsm_timers_v1: list armed timers (state timeouts and scheduled events), a page at a time.
--
-- Reads fsm_timers (the view fsm_v_timers shows the same to reporting accounts). Filters
-- combine: p_machine (NULL: every type), p_key (needs p_machine), p_overdue (1: only timers
-- past their due time). Ordered by timer id; the next page starts after the last id seen.
-- Parameters: p_machine, p_key, p_overdue (0 or 1), p_after_id (0 for the first page),
--   p_limit (1 to 10000).
-- Result: rows (timer_id, machine, instance_key, kind, state, event, due_at, fire_at,
--   armed_at, overdue_seconds (0 when not due yet), claimed_by, holds, last_errno,
--   last_error, request_id, metadata).
-- Errors: 31002 unknown machine; 31009 invalid argument.
-- Example: CALL fsm_timers_v1('order', NULL, 1, 0, 100);
CREATE PROCEDURE `fsm_timers_v1`(
  IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_overdue TINYINT,
  IN p_after_id BIGINT,
  IN p_limit INT)
READS SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  IF p_machine IS NOT NULL THEN
    CALL fsm_require_machine_v1(p_machine);
  END IF;
  IF p_key IS NOT NULL AND (p_machine IS NULL OR CHAR_LENGTH(p_key) NOT BETWEEN 1 AND 191) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: a key needs its machine and 1 to 191 characters', MYSQL_ERRNO = 31009;
  END IF;
  IF p_overdue IS NULL OR p_overdue NOT IN (0, 1) OR p_after_id IS NULL OR p_after_id < 0
     OR p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: overdue must be 0 or 1, after_id at least 0 and limit 1 to 10000', MYSQL_ERRNO = 31009;
  END IF;
  SELECT id AS timer_id, machine, instance_key, kind, state, event, due_at, fire_at, armed_at,
         GREATEST(0, TIMESTAMPDIFF(MICROSECOND, due_at, v_now)) / 1000000 AS overdue_seconds,
         claimed_by, holds, last_errno, last_error, request_id, metadata
    FROM fsm_timers
   WHERE id > p_after_id AND (p_machine IS NULL OR machine = p_machine)
     AND (p_key IS NULL OR instance_key = p_key) AND (p_overdue = 0 OR due_at <= v_now)
   ORDER BY id LIMIT p_limit;
END
