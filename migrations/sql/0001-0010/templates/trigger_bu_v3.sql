-- fsm___M___bu_v3: BEFORE UPDATE on fsm___M__ — every state change is an allowed, recorded transition.
--
-- This is the one place transitions are applied, for pyfsm's procedures and for raw
-- UPDATEs alike. A row is a transition when @fsm_event is set (the procedures set it; a DBA
-- may too) or current_state changes. Then the rule for (old state, event) is looked up in
-- the instance's definition version, the previous history row's most_recent is turned off,
-- a history row is inserted (sort_key = new version), an outbox row too when kafka_topic is
-- set, and version/updated_at/status are maintained. A raw UPDATE without @fsm_event takes
-- the one event leading from the old to the new state, and stores the rule's spelling of
-- the target state. Any other update bumps version.
-- v2 (revision 0002) adds to v1: waking. A transition of an instance the handler engine
-- left 'waiting' sets it 'running' and makes it due in fsm_runs (or, at a final state,
-- removes its run). Bookkeeping. An update of unlocked_at or last_retry_at
-- alone does not bump version. Locks. When the instance uses the global or the local
-- lock and a row of fsm_locks for its lookup_key is held by an owner other than
-- @fsm_lock_owner, the transition is refused (fsm_lock_v1 sets @fsm_lock_owner on the
-- connection that holds the lock). Event data: the outbox row carries the data only when
-- the definition's event_data option is on (NULL otherwise).
-- v3 (revision 0004) adds to v2: counting. A change of state moves one instance from the old
-- state's counter to the new one's in fsm_state_counts (two single-row upserts, taken in key
-- order so that two opposite moves in one statement never deadlock; a missing row is
-- created). The rows stay locked until the transaction ends: keep transactions that move
-- instances short (pyfsm's own are one CALL). Time in state. The previous history row gets
-- left_at (never before its own created_at), in the same UPDATE that turns its most_recent off.
-- Session context read: @fsm_event, @fsm_metadata (JSON object), @fsm_handler,
-- @fsm_request_id, @fsm_source (the procedures clear these after each call, and this trigger
-- when the statement fails), @fsm_lock_owner
-- (set by fsm_lock_v1, cleared by fsm_unlock_v1). Written:
-- @fsm_last_transition_id, the id of the history row just inserted.
-- Errors: 31005 transition not allowed; 31006 several events lead to the new state (set
--         @fsm_event); 31008 data or @fsm_metadata not a JSON object; 31009 invalid status;
--         31011 instance is paused; 31018 locked by another owner; 31013 id, machine, instance_key, kafka_topic,
--         definition_version or created_at changed.
-- Example: SET @fsm_event = 'pay'; UPDATE `fsm___M__` SET current_state = 'paid' WHERE instance_key = 'k-1'; SET @fsm_event = NULL;
CREATE TRIGGER `fsm___M___bu_v3` BEFORE UPDATE ON `fsm___M__` FOR EACH ROW
BEGIN
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  DECLARE v_n INT;
  DECLARE v_final TINYINT;
  DECLARE v_event VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_to VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_holder VARCHAR(64) CHARACTER SET utf8mb4;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_to = NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    -- the statement failed as a whole: its transition context must not outlive it and turn
    -- the session's next, unrelated UPDATE into a transition
    SET @fsm_guard = NULL, @fsm_event = NULL, @fsm_metadata = NULL, @fsm_handler = NULL, @fsm_request_id = NULL;
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
    IF (OLD.uses_global_lock OR OLD.uses_local_lock) AND OLD.lookup_key IS NOT NULL THEN
      -- a scalar subquery, not SELECT INTO: no row must not raise NOT FOUND here
      SET v_holder = (SELECT owner FROM fsm_locks
        WHERE lookup_key = OLD.lookup_key
          AND ((scope = '*' AND OLD.uses_global_lock) OR (scope = '__M__' AND OLD.uses_local_lock))
          AND unlocked_at IS NULL AND expires_at > v_now AND NOT (owner <=> @fsm_lock_owner)
        LIMIT 1);
      IF v_holder IS NOT NULL THEN
        SET v_msg = LEFT(CONCAT('fsm: __M__ ', OLD.instance_key, ' is locked by ', v_holder), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31018;
      END IF;
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
    IF OLD.status = 'waiting' THEN
      -- the external event an engine-run instance was waiting for: it runs again (or is done)
      IF v_final THEN
        DELETE FROM fsm_runs WHERE machine = '__M__' AND instance_id = OLD.id;
      ELSE
        SET NEW.status = 'running';
        INSERT INTO fsm_runs (machine, instance_id, instance_key, due_at, attempt, created_at, updated_at)
        VALUES ('__M__', OLD.id, OLD.instance_key, v_now, 0, v_now, v_now)
        ON DUPLICATE KEY UPDATE due_at = v_now, claimed_by = NULL, attempt = 0, updated_at = v_now;
      END IF;
    END IF;
    -- @fsm_guard lets the history triggers tell pyfsm's own writes from anyone else's.
    IF CAST(v_to AS BINARY) < CAST(OLD.current_state AS BINARY) THEN
      -- the two counter rows in key order, whatever the direction of the move
      INSERT INTO fsm_state_counts (machine, state, shard, instances) VALUES ('__M__', v_to, OLD.id % 16, 1)
      ON DUPLICATE KEY UPDATE instances = instances + 1;
      INSERT INTO fsm_state_counts (machine, state, shard, instances) VALUES ('__M__', OLD.current_state, OLD.id % 16, -1)
      ON DUPLICATE KEY UPDATE instances = instances - 1;
    ELSEIF CAST(v_to AS BINARY) > CAST(OLD.current_state AS BINARY) THEN
      INSERT INTO fsm_state_counts (machine, state, shard, instances) VALUES ('__M__', OLD.current_state, OLD.id % 16, -1)
      ON DUPLICATE KEY UPDATE instances = instances - 1;
      INSERT INTO fsm_state_counts (machine, state, shard, instances) VALUES ('__M__', v_to, OLD.id % 16, 1)
      ON DUPLICATE KEY UPDATE instances = instances + 1;
    END IF;
    SET @fsm_guard = OLD.id;
    -- GREATEST: a clock stepped back must not make a state end before it began
    UPDATE `fsm___M___transitions` SET most_recent = NULL, left_at = GREATEST(v_now, created_at)
     WHERE instance_id = OLD.id AND most_recent = 1;
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
         NEW.version, v_event, OLD.current_state, v_to,
         IF((SELECT event_data FROM fsm_definitions WHERE machine = '__M__' AND version = OLD.definition_version) = 0,
            NULL, NEW.data),
         COALESCE(@fsm_metadata, '{}'), v_now);
    END IF;
  ELSEIF NOT (CAST(NEW.lookup_key AS BINARY) <=> CAST(OLD.lookup_key AS BINARY) AND NEW.status <=> OLD.status
              AND CAST(NEW.resume_from_step AS BINARY) <=> CAST(OLD.resume_from_step AS BINARY)
              AND NEW.save_after_step <=> OLD.save_after_step AND NEW.data <=> OLD.data
              AND NEW.uses_global_lock <=> OLD.uses_global_lock AND NEW.uses_local_lock <=> OLD.uses_local_lock) THEN
    -- a change of the instance; unlocked_at and last_retry_at alone are bookkeeping and
    -- leave version (the optimistic check) and updated_at alone
    SET NEW.version = OLD.version + 1, NEW.updated_at = v_now;
  END IF;
END
