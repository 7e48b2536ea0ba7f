-- fsm_retry_v1: run a failed instance again, from the state it failed in, with fresh attempts.
--
-- The instance becomes 'running' and its run is due now with attempt 0, so the next worker
-- runs the failed step's handler again. For DBAs: find failed instances with
-- fsm_failed_v1 (or the status index), fix the cause, retry.
-- Parameters: p_machine, p_key.
-- Result: one row (instance_key, state, status).
-- Errors: 31002; 31003; 31009; 31016; 31022 the instance is not failed.
-- Example: CALL fsm_retry_v1('order', 'k-1');
CREATE PROCEDURE `fsm_retry_v1`(
  IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_started TINYINT DEFAULT 0;
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    IF v_started THEN
      ROLLBACK;
    END IF;
    RESIGNAL;
  END;
  CALL fsm_require_machine_v1(p_machine);
  CALL fsm_begin_v1();
  SET v_started = 1;
  CALL fsm_lock_instance_v1(p_machine, p_key);
  IF @fsm_i_status <> 'failed' THEN
    SET v_msg = LEFT(CONCAT('fsm: ', p_machine, ' ', p_key, ' is ', @fsm_i_status, ', not failed'), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31022;
  END IF;
  CALL fsm_update_instance_v1(p_machine, @fsm_i_id, NULL, NULL, NULL, NULL, 'running', NULL);
  INSERT INTO fsm_runs (machine, instance_id, instance_key, due_at, attempt, created_at, updated_at)
  VALUES (p_machine, @fsm_i_id, p_key, v_now, 0, v_now, v_now)
  ON DUPLICATE KEY UPDATE due_at = v_now, claimed_by = NULL, attempt = 0, pause_requested = 0, updated_at = v_now;
  CALL fsm_lock_instance_v1(p_machine, p_key);
  COMMIT;
  SELECT p_key AS instance_key, @fsm_i_state AS state, @fsm_i_status AS status;
END
