-- fsm___M___ai_v2: AFTER INSERT on fsm___M__ — record the creation in history and outbox.
--
-- The creation row has event and from_state NULL, sort_key 1 and most_recent 1. It runs
-- AFTER the insert because only then is the instance id known. Sets
-- @fsm_last_transition_id to the creation row's id.
-- v2 (revision 0002) adds to v1: the outbox row carries the data only when the
-- definition's event_data option is on (NULL otherwise).
-- Errors: none of its own (a duplicate @fsm_request_id fails with 1062).
-- Example: fires on INSERT INTO `fsm___M__` (instance_key) VALUES ('k-1');
CREATE TRIGGER `fsm___M___ai_v2` AFTER INSERT ON `fsm___M__` FOR EACH ROW
BEGIN
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    SET @fsm_guard = NULL;
    RESIGNAL;
  END;
  SET @fsm_guard = NEW.id;
  INSERT INTO `fsm___M___transitions`
    (instance_id, sort_key, most_recent, event, from_state, to_state, handler, data_before,
     data_after, metadata, definition_version, request_id, source, created_at)
  VALUES (NEW.id, NEW.version, 1, NULL, NULL, NEW.current_state, @fsm_handler, NULL,
     NEW.data, COALESCE(@fsm_metadata, '{}'), NEW.definition_version, @fsm_request_id,
     COALESCE(@fsm_source, 'update'), NEW.created_at);
  SET @fsm_guard = NULL, @fsm_last_transition_id = LAST_INSERT_ID();
  IF NEW.kafka_topic IS NOT NULL THEN
    INSERT INTO fsm_outbox
      (machine, topic, instance_id, instance_key, lookup_key, transition_id, sort_key, event,
       from_state, to_state, data, metadata, occurred_at)
    VALUES ('__M__', NEW.kafka_topic, NEW.id, NEW.instance_key, NEW.lookup_key, @fsm_last_transition_id,
       NEW.version, NULL, NULL, NEW.current_state,
       IF((SELECT event_data FROM fsm_definitions WHERE machine = '__M__' AND version = NEW.definition_version) = 0,
          NULL, NEW.data),
       COALESCE(@fsm_metadata, '{}'), NEW.created_at);
  END IF;
END
