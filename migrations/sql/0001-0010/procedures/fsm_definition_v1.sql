-- fsm_definition_v1: read a stored machine definition.
--
-- Parameters: p_machine; p_version (NULL for the current version).
-- Result: one row (machine, version, is_current, body, topic, save_after_step,
--   uses_global_lock, uses_local_lock, created_at).
-- Errors: 31002 unknown machine or version; 31009 invalid name.
-- Example: CALL fsm_definition_v1('order', NULL);
CREATE PROCEDURE `fsm_definition_v1`(IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, IN p_version INT)
READS SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_version INT UNSIGNED;
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  IF NOT fsm_valid_name_v1(p_machine, 48) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: machine name must match [a-z][a-z0-9_]* and have at most 48 characters', MYSQL_ERRNO = 31009;
  END IF;
  SET v_version = COALESCE(p_version, (SELECT current_version FROM fsm_machines WHERE machine = p_machine));
  IF NOT EXISTS (SELECT 1 FROM fsm_definitions WHERE machine = p_machine AND version = v_version) THEN
    SET v_msg = LEFT(CONCAT('fsm: unknown machine ', COALESCE(p_machine, 'NULL'), ' version ', COALESCE(p_version, 'current')), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31002;
  END IF;
  SELECT d.machine, d.version, d.version = m.current_version AS is_current, d.body, d.topic,
         d.save_after_step, d.uses_global_lock, d.uses_local_lock, d.created_at
    FROM fsm_definitions d JOIN fsm_machines m ON m.machine = d.machine
   WHERE d.machine = p_machine AND d.version = v_version;
END
