-- fsm___M___bu_v1: BEFORE UPDATE on fsm___M__ — every state change is an allowed, recorded transition.
--
-- This is the one place transitions are applied, for pyfsm's procedures and for raw
-- UPDATEs alike. A row is a transition when @fsm_event is set (the procedures set it; a DBA
-- may too) or current_state changes. Then the rule for (old state, event) is looked up in
-- the instance's definition version, the previous history row's most_recent is turned off,
-- a history row is inserted (sort_key = new version), an outbox row too when kafka_topic is
-- set, and version/updated_at/status are maintained. A raw UPDATE without @fsm_event takes
-- the one event leading from the old to the new state, and stores the rule's spelling of
-- the target state. Any other update bumps version.
-- Session context read: @fsm_event, @fsm_metadata (JSON object), @fsm_handler,
-- @fsm_request_id, @fsm_source. The procedures clear them after each call. Written:
-- @fsm_last_transition_id, the id of the history row just inserted.
-- Errors: 31005 transition not allowed; 31006 several events lead to the new state (set
--         @fsm_event); 31008 data or @fsm_metadata not a JSON object; 31009 invalid status;
--         31011 instance is paused; 31013 id, machine, instance_key, kafka_topic,
--         definition_version or created_at changed.
-- Example: SET @fsm_event = 'pay'; UPDATE `fsm___M__` SET current_state = 'paid' WHERE instance_key = 'k-1'; SET @fsm_event = NULL;
CREATE TRIGGER `fsm___M___bu_v1` BEFORE UPDATE ON `fsm___M__` FOR EACH ROW
BEGIN
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  DECLARE v_n INT;
  DECLARE v_final TINYINT;
  DECLARE v_event VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_to VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_to = NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    SET @fsm_guard = NULL;
    RESIGNAL;
  END;
  -- Binary comparison: utf8mb4_bin ignores trailing spaces, so 'k1 ' would equal 'k1'.
  IF NOT (NEW.id <=> OLD.id AND NEW.machine <=> OLD.machine
          AND CAST(NEW.instance_key AS BINARY) <=> CAST(OLD.instance_key AS BINARY)
          AND CAST(NEW.kafka_topic AS BINARY) <=> CAST(OLD.kafka_topic AS BINARY)
          AND NEW.definition_version <=> OLD.definition_version AND NEW.created_at <=> OLD.created_at) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: id, machine, instance_key, kafka_topic, definition_version and created_at cannot change', MYSQL_ERRNO = 31013;
  END IF;
  IF NEW.status NOT IN ('running', 'waiting', 'paused', 'completed', 'failed') THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: status must be running, waiting, paused, completed or failed', MYSQL_ERRNO = 31009;
  END IF;
  IF NOT fsm_is_object_v1(NEW.data) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: data must be a JSON object', MYSQL_ERRNO = 31008;
  END IF;
  SET v_event = @fsm_event;
  IF v_event IS NOT NULL OR NOT (NEW.current_state <=> OLD.current_state) THEN
    IF OLD.status = 'paused' THEN
      SET v_msg = LEFT(CONCAT('fsm: __M__ ', COALESCE(OLD.instance_key, 'NULL'), ' is paused'), 128);
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31011;
    END IF;
    IF @fsm_metadata IS NOT NULL AND NOT fsm_is_object_v1(@fsm_metadata) THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: @fsm_metadata must be a JSON object', MYSQL_ERRNO = 31008;
    END IF;
    IF v_event IS NOT NULL THEN
      SELECT to_state, to_final INTO v_to, v_final FROM fsm_rules
       WHERE machine = '__M__' AND version = OLD.definition_version
         AND from_state = OLD.current_state AND event = v_event;
      IF v_to IS NULL OR NOT (NEW.current_state <=> OLD.current_state OR NEW.current_state <=> v_to) THEN
        SET v_msg = LEFT(CONCAT('fsm: event ', COALESCE(v_event, 'NULL'), ' not allowed from ', COALESCE(OLD.current_state, 'NULL'),
                                ' (__M__ ', OLD.instance_key, ')'), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31005;
      END IF;
    ELSE
      SELECT COUNT(*), MIN(event), MIN(to_state), MAX(to_final) INTO v_n, v_event, v_to, v_final FROM fsm_rules
       WHERE machine = '__M__' AND version = OLD.definition_version
         AND from_state = OLD.current_state AND to_state = NEW.current_state;
      IF v_n = 0 THEN
        SET v_msg = LEFT(CONCAT('fsm: no transition from ', COALESCE(OLD.current_state, 'NULL'), ' to ',
                                COALESCE(NEW.current_state, 'NULL'), ' (__M__ ', OLD.instance_key, ')'), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31005;
      END IF;
      IF v_n > 1 THEN
        SET v_msg = LEFT(CONCAT('fsm: several events lead from ', COALESCE(OLD.current_state, 'NULL'), ' to ',
                                COALESCE(NEW.current_state, 'NULL'), '; SET @fsm_event first'), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31006;
      END IF;
    END IF;
    SET NEW.current_state = v_to, NEW.version = OLD.version + 1, NEW.updated_at = v_now;
    IF v_final THEN
      SET NEW.status = 'completed';
    END IF;
    -- @fsm_guard lets the history triggers tell pyfsm's own writes from anyone else's.
    SET @fsm_guard = OLD.id;
    UPDATE `fsm___M___transitions` SET most_recent = NULL WHERE instance_id = OLD.id AND most_recent = 1;
    INSERT INTO `fsm___M___transitions`
      (instance_id, sort_key, most_recent, event, from_state, to_state, handler, data_before,
       data_after, metadata, definition_version, request_id, source, created_at)
    VALUES (OLD.id, NEW.version, 1, v_event, OLD.current_state, v_to, @fsm_handler, OLD.data,
       NEW.data, COALESCE(@fsm_metadata, '{}'), OLD.definition_version, @fsm_request_id,
       COALESCE(@fsm_source, 'update'), v_now);
    SET @fsm_guard = NULL, @fsm_last_transition_id = LAST_INSERT_ID();
    IF NEW.kafka_topic IS NOT NULL THEN
      INSERT INTO fsm_outbox
        (machine, topic, instance_id, instance_key, lookup_key, transition_id, sort_key, event,
         from_state, to_state, data, metadata, occurred_at)
      VALUES ('__M__', NEW.kafka_topic, OLD.id, OLD.instance_key, NEW.lookup_key, @fsm_last_transition_id,
         NEW.version, v_event, OLD.current_state, v_to, NEW.data, COALESCE(@fsm_metadata, '{}'), v_now);
    END IF;
  ELSE
    SET NEW.version = OLD.version + 1, NEW.updated_at = v_now;
  END IF;
END
