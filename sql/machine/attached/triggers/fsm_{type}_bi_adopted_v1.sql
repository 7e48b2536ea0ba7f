-- fsm_{type}_bi_adopted_v1: BEFORE INSERT on fsm_{type}, after fsm_{type}_bi_v1: an adopted row's state, checked.
--
-- The state fsm_{type}_bi_adopt_v1 kept aside must be one of the instance's definition
-- version, byte for byte (a NULL or unknown state is refused, never silently accepted); the
-- instance is 'completed' at a final state. fsm_{type}_ai_v4 then writes its first history
-- row (source 'adopt', event and from_state NULL) and counts it.
-- Errors: 31038 the state is not one of the machine's.
-- Example: see fsm_{type}_bi_adopt_v1.
CREATE TRIGGER `fsm_{type}_bi_adopted_v1` BEFORE INSERT ON `fsm_{type}` FOR EACH ROW FOLLOWS `fsm_{type}_bi_v1`
BEGIN
  DECLARE v_state VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_final TINYINT;
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  IF @fsm_source = 'adopt' THEN
    SELECT MIN(state), MAX(is_final) INTO v_state, v_final FROM fsm_states
     WHERE machine = '{type}' AND version = NEW.definition_version AND state = @fsm_adopt_state
       AND CAST(state AS BINARY) = CAST(@fsm_adopt_state AS BINARY);
    IF v_state IS NULL THEN
      SET v_msg = LEFT(CONCAT('fsm: {type} has no state ', COALESCE(QUOTE(@fsm_adopt_state), 'NULL'),
                              ': row ', NEW.instance_key, ' cannot be adopted'), 128);
      SET @fsm_adopt_state = NULL, @fsm_source = NULL;
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31038;
    END IF;
    SET NEW.current_state = v_state, NEW.status = IF(v_final, 'completed', 'running'), @fsm_adopt_state = NULL;
  END IF;
END
