-- fsm_state_at_v1: the state an instance was in at a past moment.
--
-- The history row with the highest sort_key entered at or before p_at (read backwards
-- through (instance_id, sort_key): one row, whatever the length of the history).
-- Parameters: p_machine, p_key, p_at (a UTC DATETIME(6); NULL means now).
-- Result: no row if the instance did not exist yet at p_at; else one row (state, sort_key,
--   event, entered_at, left_at) — left_at NULL if it is still in that state.
-- Errors: 31002 unknown machine; 31003 no such instance; 31009 invalid argument.
-- Example: CALL fsm_state_at_v1('order', 'o-1', '2026-11-22 10:00:00');
CREATE PROCEDURE `fsm_state_at_v1`(
  IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_at DATETIME(6))
READS SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  CALL fsm_require_machine_v1(p_machine);
  CALL fsm_check_args_v1(p_key, NULL, NULL, NULL, NULL, NULL, NULL);
  SET @fsm_a1 = p_key, @fsm_a2 = COALESCE(p_at, UTC_TIMESTAMP(6)), @fsm_a3 = NULL;
  SET @fsm_sql = CONCAT('SELECT id INTO @fsm_a3 FROM `fsm_', p_machine, '` WHERE instance_key = ?');
  PREPARE fsm_stmt FROM @fsm_sql;
  EXECUTE fsm_stmt USING @fsm_a1;
  DEALLOCATE PREPARE fsm_stmt;
  IF @fsm_a3 IS NULL THEN
    SET @fsm_a1 = NULL, @fsm_a2 = NULL, @fsm_sql = NULL;
    SET v_msg = LEFT(CONCAT('fsm: no ', p_machine, ' ', p_key), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31003;
  END IF;
  SET @fsm_sql = CONCAT('SELECT to_state AS state, sort_key, event, created_at AS entered_at, left_at FROM `fsm_',
    p_machine, '_transitions` WHERE instance_id = ? AND created_at <= ? ORDER BY sort_key DESC LIMIT 1');
  PREPARE fsm_stmt FROM @fsm_sql;
  EXECUTE fsm_stmt USING @fsm_a3, @fsm_a2;
  DEALLOCATE PREPARE fsm_stmt;
  SET @fsm_a1 = NULL, @fsm_a2 = NULL, @fsm_a3 = NULL, @fsm_sql = NULL;
END
