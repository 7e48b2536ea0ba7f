-- fsm_resume_v2: resume a paused instance where it paused (or cancel a pause still pending).
--
-- A paused instance becomes 'running' again; if the engine runs it, its run is due now and
-- the next worker continues with the handler of the state it paused in (its
-- resume_from_step). A pause requested but not yet taken effect is withdrawn. Its timers
-- that came due while it was paused (held by fsm_fire_timers_v1) are due again at once.
-- Differs from fsm_resume_v1 only in those timers (revision 0019).
-- Parameters: p_machine, p_key.
-- Result: one row (instance_key, state, status).
-- Errors: 31002; 31003; 31009; 31016; 31022 the instance is not paused.
-- Example: CALL fsm_resume_v2('order', 'k-1');
CREATE PROCEDURE `fsm_resume_v2`(
  IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_started, v_pending TINYINT DEFAULT 0;
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
  SELECT COALESCE(MAX(pause_requested), 0) INTO v_pending
    FROM fsm_runs WHERE machine = p_machine AND instance_id = @fsm_i_id FOR UPDATE;
  IF @fsm_i_status = 'paused' THEN
    CALL fsm_update_instance_v1(p_machine, @fsm_i_id, NULL, NULL, NULL, NULL, 'running', NULL);
    UPDATE fsm_runs SET due_at = v_now, claimed_by = NULL, pause_requested = 0, updated_at = v_now
     WHERE machine = p_machine AND instance_id = @fsm_i_id;
    -- timers held while it was paused are due again now (not at the end of their backoff)
    UPDATE fsm_timers SET fire_at = due_at
     WHERE machine = p_machine AND instance_id = @fsm_i_id AND claimed_by IS NULL AND holds > 0 AND fire_at > due_at;
  ELSEIF v_pending THEN
    UPDATE fsm_runs SET pause_requested = 0, updated_at = v_now WHERE machine = p_machine AND instance_id = @fsm_i_id;
  ELSE
    SET v_msg = LEFT(CONCAT('fsm: ', p_machine, ' ', p_key, ' is ', @fsm_i_status, ', not paused'), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31022;
  END IF;
  CALL fsm_lock_instance_v1(p_machine, p_key);
  COMMIT;
  SELECT p_key AS instance_key, @fsm_i_state AS state, @fsm_i_status AS status;
END
