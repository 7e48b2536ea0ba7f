-- fsm_set_locking_v1: choose, for one instance, whether it uses the global and the local lock.
--
-- Instances start with their definition's uses_global_lock and uses_local_lock; this
-- overrides them for one instance (NULL keeps a setting). Like any update of the instance
-- row that is not a transition, it bumps the instance's version when a value changes.
-- Parameters: p_machine, p_key; p_global, p_local (1, 0 or NULL).
-- Result: one row (instance_key, uses_global_lock, uses_local_lock, version).
-- Errors: 31002 unknown machine; 31003 unknown instance; 31009 invalid argument.
-- Example: CALL fsm_set_locking_v1('order', 'k-1', 1, NULL);
CREATE PROCEDURE `fsm_set_locking_v1`(
  IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_global TINYINT,
  IN p_local TINYINT)
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  CALL fsm_require_machine_v1(p_machine);
  IF p_key IS NULL OR CHAR_LENGTH(p_key) NOT BETWEEN 1 AND 191 OR p_key LIKE '% ' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: key must be 1 to 191 characters, not ending in a space', MYSQL_ERRNO = 31009;
  END IF;
  IF NOT (p_global IS NULL OR p_global IN (0, 1)) OR NOT (p_local IS NULL OR p_local IN (0, 1)) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: lock settings must be 1, 0 or NULL', MYSQL_ERRNO = 31009;
  END IF;
  SET @fsm_event = NULL, @fsm_handler = NULL, @fsm_metadata = NULL, @fsm_request_id = NULL;  -- not a transition
  SET @fsm_a1 = p_global, @fsm_a2 = p_local, @fsm_a3 = p_key;
  SET @fsm_sql = CONCAT('UPDATE `fsm_', p_machine, '` SET uses_global_lock = COALESCE(?, uses_global_lock), ',
                        'uses_local_lock = COALESCE(?, uses_local_lock) WHERE instance_key = ?');
  PREPARE fsm_stmt FROM @fsm_sql;
  EXECUTE fsm_stmt USING @fsm_a1, @fsm_a2, @fsm_a3;
  DEALLOCATE PREPARE fsm_stmt;
  SET @fsm_sql = CONCAT('SELECT MAX(instance_key), MAX(uses_global_lock), MAX(uses_local_lock), MAX(version) ',
                        'INTO @fsm_a1, @fsm_a2, @fsm_a4, @fsm_a5 FROM `fsm_', p_machine, '` WHERE instance_key = ?');
  PREPARE fsm_stmt FROM @fsm_sql;
  EXECUTE fsm_stmt USING @fsm_a3;
  DEALLOCATE PREPARE fsm_stmt;
  IF @fsm_a1 IS NULL THEN
    SET v_msg = LEFT(CONCAT('fsm: no ', p_machine, ' ', p_key), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31003;
  END IF;
  SELECT @fsm_a1 AS instance_key, @fsm_a2 AS uses_global_lock, @fsm_a4 AS uses_local_lock, @fsm_a5 AS version;
  SET @fsm_a1 = NULL, @fsm_a2 = NULL, @fsm_a3 = NULL, @fsm_a4 = NULL, @fsm_a5 = NULL, @fsm_sql = NULL;
END
