-- fsm_lock_instance_v1: lock one instance row for the caller's transaction and read it (internal).
--
-- SELECT ... FOR UPDATE of instance p_key of type p_machine; sets @fsm_i_id, @fsm_i_version,
-- @fsm_i_status and @fsm_i_state. The engine's procedures lock the instance row first and
-- the fsm_runs row second, in that order, like the transition trigger, so that they cannot
-- deadlock each other. Must run inside a transaction the caller started.
-- Parameters: p_machine (validated by the caller), p_key.
-- Result: none (the session variables above).
-- Errors: 31003 no such instance; 31009 invalid machine name or key.
-- Example: START TRANSACTION; CALL fsm_lock_instance_v1('order', 'k-1'); SELECT @fsm_i_status; COMMIT;
CREATE PROCEDURE `fsm_lock_instance_v1`(
  IN p_machine VARCHAR(48) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  IF NOT fsm_valid_name_v1(p_machine, 48) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: invalid machine name', MYSQL_ERRNO = 31009;
  END IF;
  IF p_key IS NULL OR CHAR_LENGTH(p_key) NOT BETWEEN 1 AND 191 OR p_key LIKE '% ' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: key must be 1 to 191 characters, not ending in a space', MYSQL_ERRNO = 31009;
  END IF;
  SET @fsm_i_id = NULL, @fsm_i_version = NULL, @fsm_i_status = NULL, @fsm_i_state = NULL, @fsm_a1 = p_key;
  SET @fsm_sql = CONCAT('SELECT MAX(id), MAX(version), MAX(status), MAX(current_state) ',
    'INTO @fsm_i_id, @fsm_i_version, @fsm_i_status, @fsm_i_state FROM `fsm_', p_machine,
    '` WHERE instance_key = ? FOR UPDATE');
  PREPARE fsm_stmt FROM @fsm_sql;
  EXECUTE fsm_stmt USING @fsm_a1;
  DEALLOCATE PREPARE fsm_stmt;
  SET @fsm_a1 = NULL, @fsm_sql = NULL;
  IF @fsm_i_id IS NULL THEN
    SET v_msg = LEFT(CONCAT('fsm: no ', p_machine, ' ', COALESCE(p_key, 'NULL')), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31003;
  END IF;
END
