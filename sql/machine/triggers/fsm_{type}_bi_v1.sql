-- fsm_{type}_bi_v1: BEFORE INSERT on fsm_{type} — a new instance starts in a start state.
--
-- Fills what the INSERT left out from the machine's definition (current version unless
-- definition_version is given): machine, current_state (the first start state),
-- kafka_topic, save_after_step and lock flags; sets version 1 and the timestamps (UTC).
-- @fsm_metadata, if set, must be a JSON object; it is recorded in the creation history row.
-- Errors: 31002 unknown machine or definition version; 31005 state is not a start state;
--         31008 data or @fsm_metadata not a JSON object; 31009 empty key, key ending in a
--         space (utf8mb4_bin ignores trailing spaces, so 'k ' would collide with 'k') or
--         invalid status.
-- Example: INSERT INTO `fsm_{type}` (instance_key, lookup_key) VALUES ('k-1', 'account-7');
CREATE TRIGGER `fsm_{type}_bi_v1` BEFORE INSERT ON `fsm_{type}` FOR EACH ROW
BEGIN
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  DECLARE v_n INT;
  DECLARE v_final TINYINT;
  DECLARE v_topic VARCHAR(249) CHARACTER SET utf8mb4;
  DECLARE v_state VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_save, v_global, v_local TINYINT;
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  SET NEW.machine = '{type}';
  IF NEW.instance_key IS NULL OR CHAR_LENGTH(NEW.instance_key) = 0 OR NEW.instance_key LIKE '% ' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: instance_key must be a non-empty string not ending in a space', MYSQL_ERRNO = 31009;
  END IF;
  IF NEW.definition_version = 0 THEN
    SET NEW.definition_version = COALESCE((SELECT current_version FROM fsm_machines WHERE machine = '{type}'), 0);
  END IF;
  SELECT COUNT(*), MAX(topic), MAX(save_after_step), MAX(uses_global_lock), MAX(uses_local_lock)
    INTO v_n, v_topic, v_save, v_global, v_local
    FROM fsm_definitions WHERE machine = '{type}' AND version = NEW.definition_version;
  IF v_n = 0 THEN
    SET v_msg = LEFT(CONCAT('fsm: machine {type} has no definition version ', COALESCE(NEW.definition_version, 'NULL')), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31002;
  END IF;
  IF NEW.current_state IS NULL THEN
    SET NEW.current_state = (SELECT state FROM fsm_states
      WHERE machine = '{type}' AND version = NEW.definition_version AND is_start = 1
      ORDER BY position LIMIT 1);
  END IF;
  SELECT COUNT(*), MAX(is_final), MIN(state) INTO v_n, v_final, v_state FROM fsm_states
    WHERE machine = '{type}' AND version = NEW.definition_version AND state = NEW.current_state AND is_start = 1;
  IF v_n = 0 THEN
    SET v_msg = LEFT(CONCAT('fsm: ', COALESCE(NEW.current_state, 'NULL'), ' is not a start state of {type}'), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31005;
  END IF;
  IF NEW.status NOT IN ('running', 'waiting', 'paused', 'completed', 'failed') THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: status must be running, waiting, paused, completed or failed', MYSQL_ERRNO = 31009;
  END IF;
  SET NEW.data = COALESCE(NEW.data, '{}');
  IF NOT fsm_is_object_v1(NEW.data) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: data must be a JSON object', MYSQL_ERRNO = 31008;
  END IF;
  IF @fsm_metadata IS NOT NULL AND NOT fsm_is_object_v1(@fsm_metadata) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: @fsm_metadata must be a JSON object', MYSQL_ERRNO = 31008;
  END IF;
  IF v_final THEN
    SET NEW.status = 'completed';
  END IF;
  SET NEW.current_state = v_state;  -- the definition's spelling ('new ' would pass the lookup)
  SET NEW.kafka_topic = COALESCE(NEW.kafka_topic, v_topic),
      NEW.save_after_step = COALESCE(NEW.save_after_step, v_save),
      NEW.uses_global_lock = COALESCE(NEW.uses_global_lock, v_global),
      NEW.uses_local_lock = COALESCE(NEW.uses_local_lock, v_local),
      NEW.version = 1, NEW.created_at = v_now, NEW.updated_at = v_now;
END
