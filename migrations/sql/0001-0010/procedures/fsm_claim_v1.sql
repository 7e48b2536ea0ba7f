-- fsm_claim_v1: claim due work of one machine type for a worker, or one instance for a caller.
--
-- Without p_key: up to p_limit runs of p_machine that are due (due_at <= now), oldest due
-- first, read through the index (machine, due_at, id) with FOR UPDATE SKIP LOCKED, so that
-- concurrent workers skip each other's rows instead of waiting for them and never come back
-- empty while due work is unclaimed. With p_key: that instance, due or not, as long as no
-- other owner's claim on it is still running; an instance without a run gets one (the
-- engine runs it from now on). A claim is a lease: due_at becomes now + p_claim_seconds and
-- claimed_by p_owner, so the run is due again if the claimer dies.
-- Parameters: p_machine, p_owner (1-64 of [A-Za-z0-9._:-]), p_limit (1 to 1000),
--   p_claim_seconds (0.1 to 86400), p_key (NULL: any due run).
-- Result: one row per claimed instance: its columns (id, instance_key, lookup_key,
--   current_state, status, data, version, ...), the run's attempt, pause_requested and
--   run_immediately, and entered: the sort_key of the transition into the current state
--   (stable across retries and pauses of the step); no row when nothing is due. A run whose
--   previous claim ran out without being given back has its attempt counted up.
-- Errors: 31002 unknown machine; 31003 unknown instance (p_key); 31009 invalid argument;
--   31016 inside an open transaction; 31020 p_key is claimed by another owner.
-- Example: CALL fsm_claim_v1('order', 'worker-1:ab12', 10, 60, NULL);
CREATE PROCEDURE `fsm_claim_v1`(
  IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_owner TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_limit INT,
  IN p_claim_seconds DECIMAL(12,3),
  IN p_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_started, v_done TINYINT DEFAULT 0;
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_until DATETIME(6);
  DECLARE v_run BIGINT UNSIGNED;
  DECLARE v_claimed VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_due DATETIME(6);
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  DECLARE v_due_runs CURSOR FOR
    SELECT id FROM fsm_runs WHERE machine = p_machine AND due_at <= v_now
     ORDER BY due_at, id LIMIT p_limit FOR UPDATE SKIP LOCKED;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    IF v_started THEN
      ROLLBACK;
    END IF;
    RESIGNAL;
  END;
  CALL fsm_require_machine_v1(p_machine);
  IF p_owner IS NULL OR CHAR_LENGTH(p_owner) NOT BETWEEN 1 AND 64 OR p_owner REGEXP '[^A-Za-z0-9._:-]' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: owner must be 1 to 64 characters of [A-Za-z0-9._:-]', MYSQL_ERRNO = 31009;
  END IF;
  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 OR p_claim_seconds IS NULL
     OR p_claim_seconds NOT BETWEEN 0.1 AND 86400 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: limit must be 1 to 1000 and claim_seconds 0.1 to 86400', MYSQL_ERRNO = 31009;
  END IF;
  SET v_until = DATE_ADD(v_now, INTERVAL ROUND(p_claim_seconds * 1000000) MICROSECOND);
  CALL fsm_begin_v1();
  SET v_started = 1;
  IF p_key IS NULL THEN
    OPEN v_due_runs;
    claim: LOOP
      FETCH v_due_runs INTO v_run;
      IF v_done THEN
        LEAVE claim;
      END IF;
      -- still claimed_by someone while due: that claim ran out (its worker died or hung)
      UPDATE fsm_runs SET attempt = attempt + (claimed_by IS NOT NULL), due_at = v_until, claimed_by = p_owner,
             updated_at = v_now WHERE id = v_run;
    END LOOP;
    CLOSE v_due_runs;
  ELSE
    CALL fsm_lock_instance_v1(p_machine, p_key);
    SELECT MAX(claimed_by), MAX(due_at) INTO v_claimed, v_due
      FROM fsm_runs WHERE machine = p_machine AND instance_id = @fsm_i_id FOR UPDATE;
    IF v_claimed IS NOT NULL AND v_claimed <> p_owner AND v_due > v_now THEN
      SET v_msg = LEFT(CONCAT('fsm: ', p_machine, ' ', p_key, ' is being run by ', v_claimed, ' until ', v_due), 128);
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31020;
    END IF;
    INSERT INTO fsm_runs (machine, instance_id, instance_key, due_at, claimed_by, attempt, created_at, updated_at)
    VALUES (p_machine, @fsm_i_id, p_key, v_until, p_owner, 0, v_now, v_now)
    ON DUPLICATE KEY UPDATE attempt = attempt + (claimed_by IS NOT NULL AND claimed_by <> p_owner),
      due_at = v_until, claimed_by = p_owner, updated_at = v_now;
  END IF;
  COMMIT;
  SET @fsm_a1 = p_machine, @fsm_a2 = p_owner, @fsm_a3 = v_now;
  SET @fsm_sql = CONCAT('SELECT i.*, r.attempt, r.pause_requested, r.run_immediately, ',
    '(SELECT t.sort_key FROM `fsm_', p_machine, '_transitions` t WHERE t.instance_id = i.id AND t.most_recent = 1) ',
    'AS entered FROM fsm_runs r JOIN `fsm_', p_machine, '` i ON i.id = r.instance_id ',
    'WHERE r.machine = ? AND r.claimed_by = ? AND r.updated_at = ? ORDER BY r.id');
  PREPARE fsm_stmt FROM @fsm_sql;
  EXECUTE fsm_stmt USING @fsm_a1, @fsm_a2, @fsm_a3;
  DEALLOCATE PREPARE fsm_stmt;
  SET @fsm_a1 = NULL, @fsm_a2 = NULL, @fsm_a3 = NULL, @fsm_sql = NULL;
END
