-- fsm_{type}_history_v1: the history of one instance of {type}, oldest first.
--
-- Parameters: p_key.
-- Result: one row per transition (creation first), ordered by sort_key.
-- Errors: 31003 no such instance; 31009 invalid key.
-- Example: CALL `fsm_{type}_history_v1`('k-1');
CREATE PROCEDURE `fsm_{type}_history_v1`(IN p_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
READS SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_id BIGINT UNSIGNED;
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  CALL fsm_check_args_v1(p_key, NULL, NULL, NULL, NULL, NULL, NULL);
  SET v_id = (SELECT id FROM `fsm_{type}` WHERE instance_key = p_key);
  IF v_id IS NULL THEN
    SET v_msg = LEFT(CONCAT('fsm: no {type} ', COALESCE(p_key, 'NULL')), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31003;
  END IF;
  SELECT id, instance_id, sort_key, most_recent, event, from_state, to_state, handler,
         data_before, data_after, metadata, definition_version, request_id, source, created_at
    FROM `fsm_{type}_transitions` WHERE instance_id = v_id ORDER BY sort_key;
END
