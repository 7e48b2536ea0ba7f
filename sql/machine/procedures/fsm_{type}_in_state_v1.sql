-- fsm_{type}_in_state_v1: instances of {type} in one state, a page at a time.
--
-- Served by the index (current_state, id); history is not read. Pass the last id of a
-- page as p_after_id to get the next page.
-- Parameters: p_state; p_after_id (NULL or 0 for the first page); p_limit (1-10000).
-- Result: rows with every column of fsm_{type}, ordered by id.
-- Errors: 31009 invalid state name, unknown state, or limit out of range.
-- Example: CALL `fsm_{type}_in_state_v1`('paid', 0, 100);
CREATE PROCEDURE `fsm_{type}_in_state_v1`(
  IN p_state TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, IN p_after_id BIGINT, IN p_limit INT)
READS SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  IF NOT fsm_valid_name_v1(p_state, 64) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: state must match [a-z][a-z0-9_]* and have at most 64 characters', MYSQL_ERRNO = 31009;
  END IF;
  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: limit must be between 1 and 10000', MYSQL_ERRNO = 31009;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM fsm_states WHERE machine = '{type}' AND state = p_state) THEN
    SET v_msg = LEFT(CONCAT('fsm: ', COALESCE(p_state, 'NULL'), ' is not a state of {type}'), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31009;
  END IF;
  SELECT id, machine, instance_key, lookup_key, current_state, status, resume_from_step,
         save_after_step, kafka_topic, data, created_at, updated_at, uses_global_lock,
         uses_local_lock, unlocked_at, last_retry_at, definition_version, version
    FROM `fsm_{type}` WHERE current_state = p_state AND id > COALESCE(p_after_id, 0)
   ORDER BY id LIMIT p_limit;
END
