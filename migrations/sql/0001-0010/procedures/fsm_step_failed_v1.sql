-- fsm_step_failed_v1: record a failed attempt of a step and decide what follows, in one transaction.
--
-- Writes an fsm_errors row (type, message, traceback excerpt, attempt) and sets the
-- instance's last_retry_at. Then: with p_retry_in_seconds, the run is due again after that
-- delay (attempt = p_attempt; a pause requested meanwhile wins); otherwise, with
-- p_failure_event, that transition is applied (a backward or compensating move, recorded
-- with the handler's name and the error in its metadata) and the run is due now; otherwise
-- the instance is 'failed' and leaves fsm_runs (fsm_retry_v1 brings it back).
-- Parameters: p_machine, p_key, p_owner (the claim's owner), p_expected_version, p_handler,
--   p_attempt (1-based), p_error_type, p_message, p_traceback (cut to their column sizes),
--   p_retry_in_seconds (NULL: no retry), p_failure_event (NULL: none).
-- Result: one row (outcome, next_run_at, state, status, version); outcome is 'retry',
--   'failure_event' or 'failed'.
-- Errors: 31002; 31003; 31005 the failure event is not allowed here; 31007 the instance is
--   not at p_expected_version; 31009 invalid argument; 31016; 31021 claim lost.
-- Example: CALL fsm_step_failed_v1('order', 'k-1', 'worker-1:ab12', 3, 'charge', 1, 'TimeoutError', 'bank timed out', '...', 2.5, NULL);
CREATE PROCEDURE `fsm_step_failed_v1`(
  IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_owner TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_expected_version BIGINT,
  IN p_handler TEXT CHARACTER SET utf8mb4,
  IN p_attempt INT,
  IN p_error_type TEXT CHARACTER SET utf8mb4,
  IN p_message TEXT CHARACTER SET utf8mb4,
  IN p_traceback TEXT CHARACTER SET utf8mb4,
  IN p_retry_in_seconds DECIMAL(12,3),
  IN p_failure_event TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_started, v_pause TINYINT DEFAULT 0;
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_next DATETIME(6);
  DECLARE v_id BIGINT UNSIGNED;
  DECLARE v_state VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_outcome VARCHAR(16) CHARACTER SET utf8mb4;
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    IF v_started THEN
      ROLLBACK;
    END IF;
    RESIGNAL;
  END;
  CALL fsm_require_machine_v1(p_machine);
  IF p_owner IS NULL OR p_handler IS NULL OR CHAR_LENGTH(p_handler) NOT BETWEEN 1 AND 128 OR p_attempt IS NULL
     OR p_attempt < 1 OR p_error_type IS NULL OR p_expected_version IS NULL
     OR (p_retry_in_seconds IS NOT NULL AND p_retry_in_seconds NOT BETWEEN 0 AND 86400 * 366)
     OR (p_failure_event IS NOT NULL AND NOT fsm_valid_name_v1(p_failure_event, 64)) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: invalid owner, handler, attempt, error type, retry delay or failure event', MYSQL_ERRNO = 31009;
  END IF;
  CALL fsm_begin_v1();
  SET v_started = 1;
  CALL fsm_lock_instance_v1(p_machine, p_key);
  SET v_id = @fsm_i_id, v_state = @fsm_i_state;
  CALL fsm_check_claim_v1(p_machine, p_key, v_id, p_owner, p_expected_version);
  SET v_pause = @fsm_pause_requested;
  SET @fsm_event = NULL, @fsm_handler = NULL, @fsm_metadata = NULL, @fsm_request_id = NULL;  -- not a transition
  SET @fsm_a1 = v_now, @fsm_a2 = v_id;
  SET @fsm_sql = CONCAT('UPDATE `fsm_', p_machine, '` SET last_retry_at = ? WHERE id = ?');
  PREPARE fsm_stmt FROM @fsm_sql;
  EXECUTE fsm_stmt USING @fsm_a1, @fsm_a2;
  DEALLOCATE PREPARE fsm_stmt;
  IF p_retry_in_seconds IS NOT NULL THEN
    SET v_outcome = 'retry';
    SET v_next = IF(v_pause, NULL, DATE_ADD(v_now, INTERVAL ROUND(p_retry_in_seconds * 1000000) MICROSECOND));
    UPDATE fsm_runs SET attempt = p_attempt, due_at = v_next, claimed_by = NULL, pause_requested = 0, updated_at = v_now
     WHERE machine = p_machine AND instance_id = v_id;
    IF v_pause THEN
      CALL fsm_update_instance_v1(p_machine, v_id, NULL, NULL, NULL, NULL, 'paused', v_state);
    END IF;
  ELSEIF p_failure_event IS NOT NULL THEN
    SET v_outcome = 'failure_event', v_next = v_now;
    CALL fsm_update_instance_v1(p_machine, v_id, p_failure_event, NULL, p_handler,
         JSON_OBJECT('error_type', LEFT(p_error_type, 255), 'attempt', p_attempt), NULL, NULL);
    UPDATE fsm_runs SET attempt = 0, due_at = v_now, claimed_by = NULL, updated_at = v_now
     WHERE machine = p_machine AND instance_id = v_id;
  ELSE
    SET v_outcome = 'failed', v_next = NULL;
    CALL fsm_update_instance_v1(p_machine, v_id, NULL, NULL, NULL, NULL, 'failed', NULL);
    DELETE FROM fsm_runs WHERE machine = p_machine AND instance_id = v_id;
  END IF;
  INSERT INTO fsm_errors (machine, instance_id, instance_key, state, handler, attempt, error_type, message,
                          traceback, outcome, next_run_at, created_at)
  VALUES (p_machine, v_id, p_key, v_state, p_handler, p_attempt, LEFT(p_error_type, 255),
          LEFT(COALESCE(p_message, ''), 1000), RIGHT(COALESCE(p_traceback, ''), 4000), v_outcome, v_next, v_now);
  CALL fsm_lock_instance_v1(p_machine, p_key);
  IF @fsm_i_status = 'completed' THEN
    DELETE FROM fsm_runs WHERE machine = p_machine AND instance_id = v_id;  -- the failure event ended it
  END IF;
  COMMIT;
  SET @fsm_a1 = NULL, @fsm_a2 = NULL, @fsm_sql = NULL;
  SELECT v_outcome AS outcome, v_next AS next_run_at, @fsm_i_state AS state, @fsm_i_status AS status,
         @fsm_i_version AS version;
END
