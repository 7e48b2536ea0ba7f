-- fsm_run_info_v1: an instance's row in the handler engine's queue.
--
-- Parameters: p_machine, p_key.
-- Result: no row when the engine does not run the instance (never enqueued, or done);
--   else one row (instance_id, due_at, claimed_by, attempt, pause_requested,
--   run_immediately). due_at is the next run time; while claimed_by is set, it is when
--   the claim expires.
-- Errors: 31002 unknown machine; 31009 invalid argument.
-- Example: CALL fsm_run_info_v1('fulfilment', 'f-1');
CREATE PROCEDURE `fsm_run_info_v1`(
  IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
READS SQL DATA SQL SECURITY DEFINER
BEGIN
  CALL fsm_require_machine_v1(p_machine);
  CALL fsm_check_args_v1(p_key, NULL, NULL, NULL, NULL, NULL, NULL);
  SET @fsm_a1 = p_machine, @fsm_a2 = p_key;
  SET @fsm_sql = CONCAT('SELECT r.`instance_id`, r.`due_at`, r.`claimed_by`, r.`attempt`, r.`pause_requested`, ',
    'r.`run_immediately` FROM `fsm_', p_machine, '` i JOIN fsm_runs r ON r.`machine` = ? AND r.`instance_id` = i.`id` ',
    'WHERE i.`instance_key` = ?');
  PREPARE fsm_stmt FROM @fsm_sql;
  EXECUTE fsm_stmt USING @fsm_a1, @fsm_a2;
  DEALLOCATE PREPARE fsm_stmt;
  SET @fsm_a1 = NULL, @fsm_a2 = NULL, @fsm_sql = NULL;
END
