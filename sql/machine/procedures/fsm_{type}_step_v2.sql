-- fsm_{type}_step_v2: commit what the handler engine did for one claimed instance of {type}, in one transaction.
--
-- Does what fsm_step_v1 does for this type (the handler engine calls this one), without the
-- dynamic SQL a procedure for every type needs: the instance and its claim are read with
-- plain statements, each step is one UPDATE, and where the steps left the instance is what
-- the transition trigger (fsm_{type}_bu_v7) reports, not read back.
-- Checks that p_owner still holds the instance's claim in fsm_runs and that the instance is
-- at p_expected_version (so a step re-run after a crash can never apply its transition
-- twice), applies each step of p_steps through the transition trigger (rule, locks,
-- history with the handler name and data before and after, outbox), then sets what
-- happens next. p_status: 'running' (p_continue = 1: the claimer goes on, and its claim is
-- extended to p_claim_seconds from now once less than half of that is left; 0: back to the
-- queue, due after p_requeue_seconds),
-- 'waiting' (for an external event), 'paused', 'completed' or 'failed'. A final state
-- completes the instance whatever p_status says, and a pause requested meanwhile
-- (fsm_pause_v1) wins over 'running'. The instance's run leaves fsm_runs when it is
-- completed or failed.
-- Parameters: p_key, p_owner (the claim's owner), p_expected_version;
--   p_steps: a JSON array of {"event": e, "handler": h, "data": {...}} (may be empty);
--   p_status, p_continue, p_claim_seconds (0.1 to 86400), p_requeue_seconds (0 to 86400;
--   NULL: 0); p_data (a JSON object, NULL: unchanged): data the handler changed without
--   firing an event (it paused, completed or waits), written with the status.
-- Result: one row (instance_id, state, status, version, continue): continue = 1 when the
--   claimer should run the next step now.
-- Errors: 31003 unknown instance; 31005/31008/31011/31018 from a transition; 31007 the
--   instance is not at p_expected_version; 31009 invalid argument; 31016 inside an open
--   transaction; 31021 p_owner does not hold the claim any more.
-- Example: CALL `fsm_{type}_step_v2`('k-1', 'worker-1:ab12', 3, '[{"event": "pay", "handler": "charge", "data": {"paid": true}}]', 'running', 1, 60, NULL, NULL);
CREATE PROCEDURE `fsm_{type}_step_v2`(
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
  DECLARE v_id, v_version BIGINT UNSIGNED;
  DECLARE v_i, v_n INT DEFAULT 0;
  DECLARE v_pause, v_continue TINYINT DEFAULT 0;
  DECLARE v_state VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_status, v_was VARCHAR(16) CHARACTER SET utf8mb4;
  DECLARE v_claimed VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_due DATETIME(6);
  DECLARE v_attempt INT;
  DECLARE v_step, v_data LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    IF v_started THEN
      ROLLBACK;
    END IF;
    SET @fsm_event = NULL, @fsm_handler = NULL, @fsm_metadata = NULL, @fsm_source = NULL;
    RESIGNAL;
  END;
  IF p_key IS NULL OR CHAR_LENGTH(p_key) NOT BETWEEN 1 AND 191 OR p_key LIKE '% ' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: key must be 1 to 191 characters, not ending in a space', MYSQL_ERRNO = 31009;
  END IF;
  IF p_owner IS NULL OR CHAR_LENGTH(p_owner) NOT BETWEEN 1 AND 64 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: owner must be 1 to 64 characters of [A-Za-z0-9._:-]', MYSQL_ERRNO = 31009;
  END IF;
  IF p_status IS NULL OR p_status NOT IN ('running', 'waiting', 'paused', 'completed', 'failed')
     OR p_continue IS NULL OR p_continue NOT IN (0, 1) OR p_expected_version IS NULL OR p_expected_version < 1
     OR p_claim_seconds IS NULL OR p_claim_seconds NOT BETWEEN 0.1 AND 86400
     OR (p_requeue_seconds IS NOT NULL AND p_requeue_seconds NOT BETWEEN 0 AND 86400) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: invalid status, continue, expected_version or claim_seconds', MYSQL_ERRNO = 31009;
  END IF;
  -- CASE: JSON_TYPE must never see invalid JSON (an error on MySQL)
  IF NOT (p_steps IS NOT NULL AND CASE WHEN JSON_VALID(p_steps) THEN JSON_TYPE(p_steps) = 'ARRAY' ELSE 0 END) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: steps must be a JSON array', MYSQL_ERRNO = 31009;
  END IF;
  CALL fsm_begin_v1();  -- READ COMMITTED; 31016 inside a caller's transaction, left alone
  SET v_started = 1;
  -- MAX(): no row gives NULLs, not NOT FOUND. Instance row first, then its run: always that order.
  SELECT MAX(id), MAX(version), MAX(status), MAX(current_state) INTO v_id, v_version, v_was, v_state
    FROM `fsm_{type}` WHERE instance_key = p_key FOR UPDATE;
  IF v_id IS NULL THEN
    SET v_msg = LEFT(CONCAT('fsm: no {type} ', p_key), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31003;
  END IF;
  SELECT MAX(claimed_by), MAX(pause_requested), MAX(due_at), MAX(attempt) INTO v_claimed, v_pause, v_due, v_attempt
    FROM fsm_runs WHERE machine = '{type}' AND instance_id = v_id FOR UPDATE;
  IF NOT (v_claimed <=> p_owner) THEN
    SET v_msg = LEFT(CONCAT('fsm: {type} ', p_key, ' is not claimed by ', p_owner, ' any more'), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31021;
  END IF;
  IF NOT (v_version <=> p_expected_version) THEN
    SET v_msg = LEFT(CONCAT('fsm: {type} ', p_key, ' is at version ', v_version, ', not ', p_expected_version), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31007;
  END IF;
  SET v_pause = COALESCE(v_pause, 0), v_n = JSON_LENGTH(p_steps);
  WHILE v_i < v_n DO
    SET v_step = JSON_EXTRACT(p_steps, CONCAT('$[', v_i, ']'));
    IF NOT (JSON_TYPE(JSON_EXTRACT(v_step, '$.event')) <=> 'STRING') THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: every step needs an event', MYSQL_ERRNO = 31009;
    END IF;
    SET v_data = JSON_EXTRACT(v_step, '$.data');
    SET @fsm_event = JSON_UNQUOTE(JSON_EXTRACT(v_step, '$.event')),
        @fsm_handler = JSON_UNQUOTE(JSON_EXTRACT(v_step, '$.handler')),
        @fsm_metadata = NULL, @fsm_request_id = NULL, @fsm_source = 'engine', @fsm_last_version = NULL;
    UPDATE `fsm_{type}` SET data = COALESCE(v_data, data) WHERE id = v_id;
    SET @fsm_event = NULL, @fsm_handler = NULL, @fsm_source = NULL;
    -- where the step left the instance, as the transition trigger reports it
    SET v_state = @fsm_last_to, v_version = @fsm_last_version, v_was = @fsm_last_status;
    SET v_i = v_i + 1;
  END WHILE;
  IF v_n > 0 AND v_version IS NULL THEN
    -- an older transition trigger (a type not upgraded yet) reports none of it: read it back
    SELECT version, status, current_state INTO v_version, v_was, v_state FROM `fsm_{type}` WHERE id = v_id;
  END IF;
  SET v_status = v_was;
  IF v_status <> 'completed' THEN
    SET v_status = IF(v_pause AND p_status = 'running', 'paused', p_status);
    IF v_status <> v_was OR p_data IS NOT NULL THEN
      -- not a transition, whatever a failed raw UPDATE left in @fsm_event
      SET @fsm_event = NULL, @fsm_handler = NULL, @fsm_metadata = NULL, @fsm_request_id = NULL;
      UPDATE `fsm_{type}` SET status = v_status,
             resume_from_step = IF(v_status = 'paused', v_state, resume_from_step), data = COALESCE(p_data, data)
       WHERE id = v_id;
      SELECT version INTO v_version FROM `fsm_{type}` WHERE id = v_id;
    END IF;
  END IF;
  IF v_status IN ('completed', 'failed') THEN
    DELETE FROM fsm_runs WHERE machine = '{type}' AND instance_id = v_id;
  ELSEIF v_status = 'running' AND p_continue THEN
    SET v_continue = 1;
    -- The claim is extended only once half of it is used up (the claimer's heartbeat renews it
    -- too), and the attempt reset only when there is one: most steps write nothing here.
    IF v_due IS NULL OR v_due < DATE_ADD(v_now, INTERVAL ROUND(p_claim_seconds * 500000) MICROSECOND)
       OR (v_n > 0 AND v_attempt <> 0) THEN
      UPDATE fsm_runs SET due_at = DATE_ADD(v_now, INTERVAL ROUND(p_claim_seconds * 1000000) MICROSECOND),
             attempt = IF(v_n > 0, 0, attempt), updated_at = v_now
       WHERE machine = '{type}' AND instance_id = v_id;
    END IF;
  ELSE
    UPDATE fsm_runs SET due_at = IF(v_status = 'running',
             DATE_ADD(v_now, INTERVAL ROUND(COALESCE(p_requeue_seconds, 0) * 1000000) MICROSECOND), NULL),
           claimed_by = NULL, pause_requested = 0,
           attempt = IF(v_n > 0, 0, attempt), updated_at = v_now
     WHERE machine = '{type}' AND instance_id = v_id;
  END IF;
  COMMIT;
  SELECT v_id AS instance_id, v_state AS state, v_status AS status, v_version AS version, v_continue AS `continue`;
END
