-- fsm_enqueue_v2: hand an instance to the engine's workers: its run is due now (or later).
--
-- Creates the instance's run in fsm_runs if it has none. A run that someone is running now
-- (a live claim) is left alone. p_run_immediately overrides, for this instance, whether
-- the engine runs the next step at once after one (1), or queues it for a worker (0);
-- NULL keeps the current choice. Completed and failed instances are refused.
-- Differs from fsm_enqueue_v1 only in when it reads its result: inside its transaction. v1
-- read the run after its COMMIT, so a worker that had run the instance to its end in between
-- (and removed the run) left it no row to return (revision 0019).
-- Parameters: p_machine, p_key, p_delay_seconds (0 to 31622400; NULL: now),
--   p_run_immediately (1, 0 or NULL).
-- Result: one row (instance_key, due_at, claimed_by, run_immediately).
-- Errors: 31002; 31003; 31009; 31016; 31022 the instance is completed or failed.
-- Example: CALL fsm_enqueue_v2('order', 'k-1', NULL, 0);
CREATE PROCEDURE `fsm_enqueue_v2`(
  IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_delay_seconds DECIMAL(12,3),
  IN p_run_immediately TINYINT)
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_started TINYINT DEFAULT 0;
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_due, v_row_due DATETIME(6);
  DECLARE v_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_claimed VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_run_immediately TINYINT;
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    IF v_started THEN
      ROLLBACK;
    END IF;
    RESIGNAL;
  END;
  CALL fsm_require_machine_v1(p_machine);
  IF (p_delay_seconds IS NOT NULL AND p_delay_seconds NOT BETWEEN 0 AND 31622400)
     OR NOT (p_run_immediately IS NULL OR p_run_immediately IN (0, 1)) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: delay must be 0 to 31622400 s and run_immediately 1, 0 or NULL', MYSQL_ERRNO = 31009;
  END IF;
  SET v_due = DATE_ADD(v_now, INTERVAL ROUND(COALESCE(p_delay_seconds, 0) * 1000000) MICROSECOND);
  CALL fsm_begin_v1();
  SET v_started = 1;
  CALL fsm_lock_instance_v1(p_machine, p_key);
  IF @fsm_i_status IN ('completed', 'failed') THEN
    SET v_msg = LEFT(CONCAT('fsm: ', p_machine, ' ', p_key, ' is ', @fsm_i_status, '; use fsm_retry_v1 for failed ones'), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31022;
  END IF;
  INSERT INTO fsm_runs (machine, instance_id, instance_key, due_at, attempt, run_immediately, created_at, updated_at)
  VALUES (p_machine, @fsm_i_id, p_key, IF(@fsm_i_status = 'running', v_due, NULL), 0, p_run_immediately, v_now, v_now)
  ON DUPLICATE KEY UPDATE
    due_at = IF(claimed_by IS NOT NULL AND due_at > v_now, due_at, IF(@fsm_i_status = 'running', v_due, NULL)),
    run_immediately = COALESCE(p_run_immediately, run_immediately), updated_at = v_now;
  SELECT instance_key, due_at, claimed_by, run_immediately INTO v_key, v_row_due, v_claimed, v_run_immediately
    FROM fsm_runs WHERE machine = p_machine AND instance_id = @fsm_i_id;
  COMMIT;
  SELECT v_key AS instance_key, v_row_due AS due_at, v_claimed AS claimed_by, v_run_immediately AS run_immediately;
END
