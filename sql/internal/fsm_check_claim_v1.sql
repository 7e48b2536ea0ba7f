-- fsm_check_claim_v1: check, inside the engine's transaction, that a step may be committed (internal).
--
-- Locks the instance's fsm_runs row (after fsm_lock_instance_v1 locked the instance row:
-- always in that order) and checks that p_owner still holds the claim and that the
-- instance is at p_expected_version, so that a step re-run after a crash, or by a worker
-- whose claim has run out, is never applied twice. Sets @fsm_pause_requested.
-- Parameters: p_machine, p_key, p_instance_id, p_owner, p_expected_version.
-- Result: none.
-- Errors: 31007 the instance is not at p_expected_version; 31021 the claim is not p_owner's.
-- Example: CALL fsm_check_claim_v1('order', 'k-1', 42, 'worker-1:ab12', 3);
CREATE PROCEDURE `fsm_check_claim_v1`(
  IN p_machine VARCHAR(48) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_instance_id BIGINT UNSIGNED,
  IN p_owner TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_expected_version BIGINT)
MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
  DECLARE v_claimed VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_pause TINYINT;
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  SELECT MAX(claimed_by), MAX(pause_requested) INTO v_claimed, v_pause
    FROM fsm_runs WHERE machine = p_machine AND instance_id = p_instance_id FOR UPDATE;
  IF NOT (v_claimed <=> p_owner) THEN
    SET v_msg = LEFT(CONCAT('fsm: ', p_machine, ' ', p_key, ' is not claimed by ', p_owner, ' any more'), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31021;
  END IF;
  IF NOT (@fsm_i_version <=> p_expected_version) THEN
    SET v_msg = LEFT(CONCAT('fsm: ', p_machine, ' ', p_key, ' is at version ', @fsm_i_version, ', not ', p_expected_version), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31007;
  END IF;
  SET @fsm_pause_requested = COALESCE(v_pause, 0);
END
