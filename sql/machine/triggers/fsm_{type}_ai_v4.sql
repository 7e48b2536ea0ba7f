-- fsm_{type}_ai_v4: AFTER INSERT on fsm_{type} — record the creation in history and outbox.
--
-- The creation row has event and from_state NULL, sort_key 1 and most_recent 1. It runs
-- AFTER the insert because only then is the instance id known. The new instance is counted
-- in fsm_state_counts (its state, shard id % 16) unless the procedure's context says it
-- counts later (@fsm_count_later = 1); the outbox row carries the data only when the
-- definition's event_data option is on. Sets @fsm_last_transition_id to the creation row's id.
-- A context set by pyfsm's procedures (@fsm_source 'procedure' or 'engine') is taken into
-- local variables and cleared before the first write: a deadlock can end the call without
-- running any handler, and the context must not outlive it. @fsm_guard names the instance
-- and the time of the row written, so a guard left behind allows no other write (the
-- history triggers check it). Text that is not valid UTF-8 (encoded surrogates, which
-- MariaDB's utf8mb4 accepts and no client can decode) is refused in instance_key,
-- lookup_key, data, @fsm_metadata, @fsm_handler and @fsm_request_id.
-- Errors: 31024 text not valid UTF-8 (a duplicate @fsm_request_id fails with 1062).
-- Example: fires on INSERT INTO `fsm_{type}` (instance_key) VALUES ('k-1');
CREATE TRIGGER `fsm_{type}_ai_v4` AFTER INSERT ON `fsm_{type}` FOR EACH ROW
BEGIN
  DECLARE v_metadata LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_handler, v_request_id, v_source TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_count_later TINYINT DEFAULT 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    SET @fsm_guard = NULL;
    RESIGNAL;
  END;
  SET v_metadata = @fsm_metadata, v_handler = @fsm_handler, v_request_id = @fsm_request_id,
      v_source = @fsm_source;
  IF v_source IN ('procedure', 'engine') THEN
    -- a procedure's context is for this one row: taken before any write that may deadlock
    SET v_count_later = COALESCE(@fsm_count_later, 0) = 1;
    SET @fsm_event = NULL, @fsm_metadata = NULL, @fsm_handler = NULL, @fsm_request_id = NULL,
        @fsm_source = NULL, @fsm_count_later = NULL;
  END IF;
  -- only an ED byte can start an encoded surrogate: the function runs only where there is one
  IF INSTR(CONCAT_WS('', CAST(NEW.instance_key AS BINARY), CAST(NEW.lookup_key AS BINARY), CAST(NEW.data AS BINARY),
                     CAST(v_metadata AS BINARY), CAST(v_handler AS BINARY), CAST(v_request_id AS BINARY)), 0xED) > 0
     AND NOT fsm_valid_utf8_v1(CONCAT_WS('', CAST(NEW.instance_key AS BINARY), CAST(NEW.lookup_key AS BINARY),
                                         CAST(NEW.data AS BINARY), CAST(v_metadata AS BINARY),
                                         CAST(v_handler AS BINARY), CAST(v_request_id AS BINARY))) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: instance_key, lookup_key, data, @fsm_metadata, @fsm_handler and @fsm_request_id must be valid UTF-8 (no encoded surrogates)', MYSQL_ERRNO = 31024;
  END IF;
  SET @fsm_guard = CONCAT(NEW.id, '/', NEW.created_at);  -- this write only (see fsm_{type}_hbi_v2)
  INSERT INTO `fsm_{type}_transitions`
    (instance_id, sort_key, most_recent, event, from_state, to_state, handler, data_before,
     data_after, metadata, definition_version, request_id, source, created_at)
  VALUES (NEW.id, NEW.version, 1, NULL, NULL, NEW.current_state, v_handler, NULL,
     NEW.data, COALESCE(v_metadata, '{}'), NEW.definition_version, v_request_id,
     COALESCE(v_source, 'update'), NEW.created_at);
  SET @fsm_guard = NULL, @fsm_last_transition_id = LAST_INSERT_ID();
  IF NOT v_count_later THEN  -- (see fsm_{type}_bu_v6)
    INSERT INTO fsm_state_counts (machine, state, shard, instances)
    VALUES ('{type}', NEW.current_state, NEW.id % 16, 1)
    ON DUPLICATE KEY UPDATE instances = instances + 1;
  END IF;
  IF NEW.kafka_topic IS NOT NULL THEN
    INSERT INTO fsm_outbox
      (machine, topic, instance_id, instance_key, lookup_key, transition_id, sort_key, event,
       from_state, to_state, data, metadata, occurred_at)
    VALUES ('{type}', NEW.kafka_topic, NEW.id, NEW.instance_key, NEW.lookup_key, @fsm_last_transition_id,
       NEW.version, NULL, NULL, NEW.current_state,
       IF((SELECT event_data FROM fsm_definitions WHERE machine = '{type}' AND version = NEW.definition_version) = 0,
          NULL, NEW.data),
       COALESCE(v_metadata, '{}'), NEW.created_at);
  END IF;
END
