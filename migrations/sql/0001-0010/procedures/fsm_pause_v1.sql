-- fsm_pause_v1: pause an instance: it runs no handler and accepts no event until resumed.
--
-- An instance nobody is running now is paused at once: status 'paused', resume_from_step
-- = its state, and its run (if the engine runs it) is no longer due. An instance a worker
-- or caller is running right now (its claim in fsm_runs is live) is paused at the next
-- step boundary: pause_requested is set and the claimer pauses it after committing the
-- step in progress (pending = 1 in the result until then). Pausing a paused instance
-- changes nothing.
-- Parameters: p_machine, p_key.
-- Result: one row (instance_key, state, status, pending).
-- Errors: 31002; 31003; 31009; 31016; 31022 the instance is completed or failed.
-- Example: CALL fsm_pause_v1('order', 'k-1');
CREATE PROCEDURE `fsm_pause_v1`(
  IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_started, v_pending TINYINT DEFAULT 0;
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_claimed VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_due DATETIME(6);
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
  IF @fsm_i_status IN ('completed', 'failed') THEN
    SET v_msg = LEFT(CONCAT('fsm: ', p_machine, ' ', p_key, ' is ', @fsm_i_status, ' and cannot be paused'), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31022;
  END IF;
  IF @fsm_i_status <> 'paused' THEN
    SELECT MAX(claimed_by), MAX(due_at) INTO v_claimed, v_due
      FROM fsm_runs WHERE machine = p_machine AND instance_id = @fsm_i_id FOR UPDATE;
    IF v_claimed IS NOT NULL AND v_due > v_now THEN
      SET v_pending = 1;
      UPDATE fsm_runs SET pause_requested = 1, updated_at = v_now WHERE machine = p_machine AND instance_id = @fsm_i_id;
    ELSE
      UPDATE fsm_runs SET due_at = NULL, claimed_by = NULL, pause_requested = 0, updated_at = v_now
       WHERE machine = p_machine AND instance_id = @fsm_i_id;
      CALL fsm_update_instance_v1(p_machine, @fsm_i_id, NULL, NULL, NULL, NULL, 'paused', @fsm_i_state);
    END IF;
  END IF;
  CALL fsm_lock_instance_v1(p_machine, p_key);
  COMMIT;
  SELECT p_key AS instance_key, @fsm_i_state AS state, @fsm_i_status AS status, v_pending AS pending;
END
