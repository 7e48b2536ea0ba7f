-- fsm_{type}_get_v1: one instance of {type} by key.
--
-- Parameters: p_key.
-- Result: one row with every column of fsm_{type}.
-- Errors: 31003 no such instance; 31009 invalid key.
-- Example: CALL `fsm_{type}_get_v1`('k-1');
CREATE PROCEDURE `fsm_{type}_get_v1`(IN p_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
READS SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  CALL fsm_check_args_v1(p_key, NULL, NULL, NULL, NULL, NULL, NULL);
  IF NOT EXISTS (SELECT 1 FROM `fsm_{type}` WHERE instance_key = p_key) THEN
    SET v_msg = LEFT(CONCAT('fsm: no {type} ', COALESCE(p_key, 'NULL')), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31003;
  END IF;
  SELECT id, machine, instance_key, lookup_key, current_state, status, resume_from_step,
         save_after_step, kafka_topic, data, created_at, updated_at, uses_global_lock,
         uses_local_lock, unlocked_at, last_retry_at, definition_version, version
    FROM `fsm_{type}` WHERE instance_key = p_key;
END
