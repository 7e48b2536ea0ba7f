-- fsm_step_v1: commit what the handler engine did for one claimed instance, in one transaction.
--
-- Checks that p_owner still holds the instance's claim in fsm_runs and that the instance is
-- at p_expected_version (so a step re-run after a crash can never apply its transition
-- twice), applies each step of p_steps through the transition trigger (rule, locks,
-- history with the handler name and data before and after, outbox), then sets what
-- happens next. p_status: 'running' (p_continue = 1: the claimer goes on and its claim is
-- extended by p_claim_seconds; 0: back to the queue, due after p_requeue_seconds),
-- 'waiting' (for an external
-- event), 'paused', 'completed' or 'failed'. A final state completes the instance whatever
-- p_status says, and a pause requested meanwhile (fsm_pause_v1) wins over 'running'. The
-- instance's run leaves fsm_runs when it is completed or failed.
-- Parameters: p_machine, p_key, p_owner (the claim's owner), p_expected_version;
--   p_steps: a JSON array of {"event": e, "handler": h, "data": {...}} (may be empty);
--   p_status, p_continue, p_claim_seconds (0.1 to 86400), p_requeue_seconds (0 to 86400;
--   NULL: 0); p_data (a JSON object, NULL: unchanged): data the handler changed without
--   firing an event (it paused, completed or waits), written with the status.
-- Result: one row (instance_id, state, status, version, continue): continue = 1 when the
--   claimer should run the next step now.
-- Errors: 31002 unknown machine; 31003 unknown instance; 31005/31008/31011/31018 from a
--   transition; 31007 the instance is not at p_expected_version; 31009 invalid argument;
--   31016 inside an open transaction; 31021 p_owner does not hold the claim any more.
-- Example: CALL fsm_step_v1('order', 'k-1', 'worker-1:ab12', 3, '[{"event": "pay", "handler": "charge", "data": {"paid": true}}]', 'running', 1, 60, NULL, NULL);
CREATE PROCEDURE `fsm_step_v1`(
  IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_owner TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_expected_version BIGINT,
  IN p_steps LONGTEXT CHARACTER SET utf8mb4,
  IN p_status VARCHAR(16) CHARACTER SET utf8mb4,
  IN p_continue TINYINT,
  IN p_claim_seconds DECIMAL(12,3),
  IN p_requeue_seconds DECIMAL(12,3),
  IN p_data LONGTEXT CHARACTER SET utf8mb4)
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_started TINYINT DEFAULT 0;
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_id BIGINT UNSIGNED;
  DECLARE v_i, v_n INT DEFAULT 0;
  DECLARE v_pause, v_continue TINYINT DEFAULT 0;
  DECLARE v_from, v_state VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_status VARCHAR(16) CHARACTER SET utf8mb4;
  DECLARE v_step LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    IF v_started THEN
      ROLLBACK;
    END IF;
    RESIGNAL;
  END;
  CALL fsm_require_machine_v1(p_machine);
  IF p_owner IS NULL OR CHAR_LENGTH(p_owner) NOT BETWEEN 1 AND 64 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: owner must be 1 to 64 characters of [A-Za-z0-9._:-]', MYSQL_ERRNO = 31009;
  END IF;
  IF p_status IS NULL OR p_status NOT IN ('running', 'waiting', 'paused', 'completed', 'failed')
     OR p_continue IS NULL OR p_continue NOT IN (0, 1) OR p_expected_version IS NULL OR p_expected_version < 1
     OR p_claim_seconds IS NULL OR p_claim_seconds NOT BETWEEN 0.1 AND 86400
     OR (p_requeue_seconds IS NOT NULL AND p_requeue_seconds NOT BETWEEN 0 AND 86400) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: invalid status, continue, expected_version or claim_seconds', MYSQL_ERRNO = 31009;
  END IF;
  IF p_steps IS NULL OR NOT JSON_VALID(p_steps) OR JSON_TYPE(p_steps) <> 'ARRAY' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: steps must be a JSON array', MYSQL_ERRNO = 31009;
  END IF;
  CALL fsm_begin_v1();
  SET v_started = 1;
  CALL fsm_lock_instance_v1(p_machine, p_key);
  SET v_id = @fsm_i_id, v_from = @fsm_i_state;
  CALL fsm_check_claim_v1(p_machine, p_key, v_id, p_owner, p_expected_version);
  SET v_pause = @fsm_pause_requested;
  SET v_n = JSON_LENGTH(p_steps);
  WHILE v_i < v_n DO
    SET v_step = JSON_EXTRACT(p_steps, CONCAT('$[', v_i, ']'));
    IF JSON_TYPE(JSON_EXTRACT(v_step, '$.event')) <> 'STRING' THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: every step needs an event', MYSQL_ERRNO = 31009;
    END IF;
    CALL fsm_update_instance_v1(p_machine, v_id, JSON_UNQUOTE(JSON_EXTRACT(v_step, '$.event')),
         JSON_EXTRACT(v_step, '$.data'), JSON_UNQUOTE(JSON_EXTRACT(v_step, '$.handler')), NULL, NULL, NULL);
    SET v_i = v_i + 1;
  END WHILE;
  IF v_n > 0 THEN
    CALL fsm_lock_instance_v1(p_machine, p_key);  -- where the steps left it
  END IF;
  SET v_state = @fsm_i_state, v_status = @fsm_i_status;
  IF v_status <> 'completed' THEN
    SET v_status = IF(v_pause AND p_status = 'running', 'paused', p_status);
    IF v_status <> @fsm_i_status OR p_data IS NOT NULL THEN
      CALL fsm_update_instance_v1(p_machine, v_id, NULL, p_data, NULL, NULL, v_status,
                                  IF(v_status = 'paused', v_state, NULL));
      CALL fsm_lock_instance_v1(p_machine, p_key);  -- the new version
    END IF;
  END IF;
  IF v_status IN ('completed', 'failed') THEN
    DELETE FROM fsm_runs WHERE machine = p_machine AND instance_id = v_id;
  ELSEIF v_status = 'running' AND p_continue THEN
    SET v_continue = 1;
    UPDATE fsm_runs SET due_at = DATE_ADD(v_now, INTERVAL ROUND(p_claim_seconds * 1000000) MICROSECOND),
           attempt = IF(v_n > 0, 0, attempt), updated_at = v_now
     WHERE machine = p_machine AND instance_id = v_id;
  ELSE
    UPDATE fsm_runs SET due_at = IF(v_status = 'running',
             DATE_ADD(v_now, INTERVAL ROUND(COALESCE(p_requeue_seconds, 0) * 1000000) MICROSECOND), NULL),
           claimed_by = NULL, pause_requested = 0,
           attempt = IF(v_n > 0, 0, attempt), updated_at = v_now
     WHERE machine = p_machine AND instance_id = v_id;
  END IF;
  COMMIT;
  SELECT v_id AS instance_id, @fsm_i_state AS state, @fsm_i_status AS status, @fsm_i_version AS version,
         v_continue AS `continue`;
END
