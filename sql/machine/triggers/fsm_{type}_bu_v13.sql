-- fsm_{type}_bu_v13: BEFORE UPDATE on fsm_{type} — every state change is an allowed, recorded transition.
--
-- This is the one place transitions are applied, for pyfsm's procedures and for raw
-- UPDATEs alike. A row is a transition when @fsm_event is set (the procedures set it; a DBA
-- may too) or current_state changes in any byte. Then the rule for (old state, event) is
-- looked up in the instance's definition version (@fsm_event compared byte for byte), the
-- previous history row's most_recent is turned off and its left_at set, a history row is
-- inserted (sort_key = new version), the instance is moved from the old state's counter to
-- the new one's in fsm_state_counts, an outbox row is inserted when kafka_topic is set, and
-- version/updated_at/status are maintained. A raw UPDATE without @fsm_event takes the one
-- event leading from the old to the new state, and stores the rule's spelling of the target
-- state. Any other change of the instance bumps version; unlocked_at and last_retry_at alone
-- are bookkeeping and do not.
-- Upgrades: definition_version changes only when @fsm_upgrade names this row and its new
-- version ('<id>/<version>', as fsm_{type}_upgrade_v1 sets it; anything else is 31013). Such
-- an UPDATE may change definition_version and current_state and nothing else; the new state
-- must be one of the new version's (its spelling is stored) and the version newer (31030).
-- It is recorded as one history row (source 'upgrade', event NULL, metadata {"upgrade":
-- {from_version, to_version, from_state, to_state}} over @fsm_metadata), moves the state
-- counters when the state changes, bumps version, writes an outbox row when kafka_topic is
-- set, and sets status as the new version says: 'completed' at one of its final states (its
-- run removed), 'running' for an instance 'completed' at a state that is no longer final.
-- Waking: a transition of an instance the handler engine left 'waiting' sets it 'running'
-- and makes it due in fsm_runs (or, at a final state, removes its run); a final state sets
-- 'completed'. Locks: when the instance uses the global or the local lock and a row of
-- fsm_locks for its lookup_key is held by an owner other than @fsm_lock_owner, the
-- transition is refused. Event data: the outbox row carries the data only when the
-- definition's event_data option is on.
-- Its cost is paid on every transition, so the common path is short: the checks every
-- update passes are one IF, and those every transition passes another (which check failed
-- is told apart inside it, so the errors come in a fixed order); data is checked only when
-- it changes; the two counter rows are one UPDATE, which meets them in key order so that
-- opposite moves never deadlock (when one of them is not there yet, the first move into a
-- state in a shard, the UPDATE is undone and one INSERT writes both); what the move did is
-- left in session variables (below) so that the procedures need not read the row back
-- (BENCHMARKS.md measures each part).
-- Times: a statement's UTC_TIMESTAMP() is when it began, before any wait for the row lock,
-- so a transition is stamped no earlier than the instance's updated_at.
-- Context: pyfsm's procedures (@fsm_source 'procedure' or 'engine'; their UPDATEs change
-- one row) have their context taken into local variables and cleared before the first
-- write. fsm_{type}_fire_v2, the common call, sets one variable only: @fsm_source 'fire/'
-- followed by the event, which is then the whole context (no metadata, handler or request
-- id, whatever those variables hold: a context a failed call left behind is never read;
-- recorded as source 'procedure'; @fsm_count_later is not honoured). It is the variable every
-- procedure sets, so what a killed call of one left behind never steers the next call of
-- another. Its result goes back in one variable, @fsm_last (below). fsm_{type}_fire_v1 (an
-- older pyfsm's call) sets two: @fsm_source 'fire' and @fsm_event, the event. A deadlock
-- inside this trigger (on the history's most_recent flip) can end the CALL without running any handler (seen on MariaDB 10.11),
-- so a context cleared only there would outlive the failed call. A context a DBA set (no
-- @fsm_source) is read for every row of the statement, and cleared by the handler on failure. With @fsm_count_later = 1
-- (honoured only beside @fsm_source 'procedure') the counters are left to the procedure:
-- fsm_{type}_send_many_v1 moves those of all its items with one statement at the end.
-- @fsm_guard is set to the instance and time of the history rows written; the history
-- triggers allow exactly those. Text that is not valid UTF-8 (encoded surrogates) is
-- refused in new data and lookup_key, and in the event, metadata, handler and request id.
-- Session context read: @fsm_event, @fsm_metadata (JSON object), @fsm_handler,
-- @fsm_request_id, @fsm_source, @fsm_count_later (see above), @fsm_lock_owner (set by fsm_lock_v1, cleared by
-- fsm_unlock_v1).
-- Written: @fsm_last_transition_id (the history row just inserted) and @fsm_last_status (the
-- instance's status after it), always; for every call but fire_v2's also @fsm_last_instance_id,
-- @fsm_last_from, @fsm_last_to and @fsm_last_version (the procedures read them back), and for
-- fire_v2's @fsm_last instead: 'transition id/instance id/version/status/from/to' in one
-- variable (names never hold a '/'), one statement where four would be (each user variable
-- set inside a trigger is a statement of its own: bench/bench_statements.py counts them).
-- Errors: 31024 text not valid UTF-8; 31005 transition not allowed; 31032 refused by the
--         rules' guards; 31031 a guarded rule of a version the trigger was not rendered with; 31006 several events lead to the new state (set
--         @fsm_event); 31008 data or @fsm_metadata not a JSON object; 31009 invalid status;
--         31011 instance is paused; 31018 locked by another owner; 31013 id, machine,
--         instance_key, kafka_topic, definition_version or created_at changed (an upgrade
--         changing more than definition_version and current_state); 31030 an upgrade to a
--         version that is not newer, or to a state the new version lacks.
-- Guards: a rule may carry a guard, a condition on the instance's data as it will be after
-- the transition (NEW.data), and several rules may share (state, event): they are tried in
-- their order (fsm_rules.position) and the first whose guard holds is taken; when none does
-- the transition is refused (31032, naming the guards). A raw UPDATE without @fsm_event whose
-- new state one event reaches takes that event, tried the same way: the rule taken must lead
-- to that state (31005 otherwise). Guards are rendered into the trigger per type
-- (pyfsm.schema.rendering, pyfsm.schema.guard_sql): a definition version the trigger was not
-- rendered with (a DBA's fsm_define_v8 before `pyfsm sync`) is checked against fsm_rules,
-- which cannot test a guard, so a guarded rule of it is refused (31031) until then.
-- The previous history row: found through (instance_id, sort_key), the last of the instance's
-- rows, not through (instance_id, most_recent). Every transition delete-marks the entry
-- (instance, 1) of that index and inserts a new one; until the server's purge removes the
-- marked ones, a lookup of (instance, 1) meets each of them and reads its row to see which is
-- current, so an instance that moves often paid for every move the purge had not caught up
-- with (measured on MariaDB 10.11: 1,000-1,600 buffer pool page reads per transition of one
-- busy instance, about 700 through sort_key; BENCHMARKS.md, "Issue 49, item 5"). Entries of
-- (instance_id, sort_key) are never changed. The most_recent test stays in the WHERE: the row
-- found is the most recent one (the history's own triggers keep it so), and if it were not,
-- the scan would go on to the one that is.
-- Changes against bu_v12 (revision 0029): the previous row found through sort_key (above);
-- what it enforces and records is bu_v12's (fire_v2's one-variable context and result and the
-- counters moved by one UPDATE came in bu_v12, revision 0028; guards in bu_v11, 0024).
-- Example: SET @fsm_event = 'pay'; UPDATE `fsm_{type}` SET current_state = 'paid' WHERE instance_key = 'k-1'; SET @fsm_event = NULL;
CREATE TRIGGER `fsm_{type}_bu_v13` BEFORE UPDATE ON `fsm_{type}` FOR EACH ROW
BEGIN
  DECLARE v_event, v_to VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_final TINYINT;
  -- what refused the transition: the guards of the rules tried, by name (rendered code sets it)
  DECLARE v_refused VARCHAR(255) CHARACTER SET utf8mb4;
  DECLARE v_count_later, v_upgrade, v_fire TINYINT DEFAULT 0;
  DECLARE v_now DATETIME(6);
  DECLARE v_metadata LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_handler, v_request_id, v_source TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_to = NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    -- the statement failed as a whole: its transition context must not outlive it and turn
    -- the session's next, unrelated UPDATE into a transition
    SET @fsm_guard = NULL, @fsm_event = NULL, @fsm_metadata = NULL, @fsm_handler = NULL, @fsm_request_id = NULL,
        @fsm_upgrade = NULL;
    RESIGNAL;
  END;
  -- after the handlers: an event too long for v_event fails with the context cleared
  IF LEFT(@fsm_source, 5) = 'fire/' THEN
    -- fsm_{type}_fire_v2's context: the event alone, one variable read and cleared
    SET v_event = SUBSTRING(@fsm_source, 6), v_source = 'procedure', v_fire = 1, @fsm_source = NULL;
  ELSEIF @fsm_source = 'fire' THEN
    -- fsm_{type}_fire_v1's (an older pyfsm's call): the event alone, two variables read and cleared
    SET v_event = @fsm_event, v_source = 'procedure', @fsm_event = NULL, @fsm_source = NULL;
  ELSE
    SET v_event = @fsm_event, v_metadata = @fsm_metadata, v_handler = @fsm_handler,
        v_request_id = @fsm_request_id, v_source = @fsm_source;
    IF v_source IN ('procedure', 'engine') THEN
      -- a procedure's context is for this one row: taken before any write that may deadlock
      SET v_count_later = COALESCE(@fsm_count_later, 0) = 1;
      SET @fsm_event = NULL, @fsm_metadata = NULL, @fsm_handler = NULL, @fsm_request_id = NULL,
          @fsm_source = NULL, @fsm_count_later = NULL;
    END IF;
  END IF;
  -- UTC_TIMESTAMP() is when the UPDATE began, which may be before it waited for the row lock
  -- of the transition before it: never earlier than that one (its time is updated_at), so
  -- history's times follow sort_key. After the handlers: a bad updated_at fails with the
  -- context cleared.
  SET v_now = GREATEST(UTC_TIMESTAMP(6), COALESCE(OLD.updated_at, UTC_TIMESTAMP(6)));
  -- One test for the checks every update passes, which one failed is found inside.
  -- Binary comparison: utf8mb4_bin ignores trailing spaces, so 'k1 ' would equal 'k1'. CASE,
  -- not AND: JSON_TYPE must never see invalid JSON (an error on MySQL). UTF-8 (see above) in
  -- what this UPDATE changes: only an ED byte can start an encoded surrogate, so the function
  -- runs only where there is one. COALESCE: a NULL status makes the test NULL, and the
  -- column's NOT NULL refuses it afterwards.
  IF NOT COALESCE(NEW.id <=> OLD.id AND NEW.machine <=> OLD.machine
                  AND CAST(NEW.instance_key AS BINARY) <=> CAST(OLD.instance_key AS BINARY)
                  AND CAST(NEW.kafka_topic AS BINARY) <=> CAST(OLD.kafka_topic AS BINARY)
                  AND NEW.definition_version <=> OLD.definition_version AND NEW.created_at <=> OLD.created_at
                  AND NEW.status IN ('running', 'waiting', 'paused', 'completed', 'failed')
                  AND (NEW.data <=> OLD.data
                       OR (CASE WHEN JSON_VALID(NEW.data) THEN JSON_TYPE(NEW.data) = 'OBJECT' ELSE 0 END
                           /*[utf8*/AND (INSTR(CAST(NEW.data AS BINARY), 0xED) = 0 OR fsm_valid_utf8_v1(NEW.data))/*utf8]*/))
                  /*[utf8*/AND (CAST(NEW.lookup_key AS BINARY) <=> CAST(OLD.lookup_key AS BINARY)
                       OR INSTR(CAST(NEW.lookup_key AS BINARY), 0xED) = 0 OR fsm_valid_utf8_v1(NEW.lookup_key))/*utf8]*/, 0) THEN
    IF NOT (NEW.id <=> OLD.id AND NEW.machine <=> OLD.machine
            AND CAST(NEW.instance_key AS BINARY) <=> CAST(OLD.instance_key AS BINARY)
            AND CAST(NEW.kafka_topic AS BINARY) <=> CAST(OLD.kafka_topic AS BINARY)
            AND NEW.definition_version <=> OLD.definition_version AND NEW.created_at <=> OLD.created_at) THEN
      -- an upgrade: only definition_version changes here, and @fsm_upgrade names this row and version
      IF NOT (NEW.id <=> OLD.id AND NEW.machine <=> OLD.machine
              AND CAST(NEW.instance_key AS BINARY) <=> CAST(OLD.instance_key AS BINARY)
              AND CAST(NEW.kafka_topic AS BINARY) <=> CAST(OLD.kafka_topic AS BINARY)
              AND NEW.created_at <=> OLD.created_at
              AND COALESCE(CAST(@fsm_upgrade AS BINARY) = CAST(CONCAT(OLD.id, '/', NEW.definition_version) AS BINARY), 0)) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: id, machine, instance_key, kafka_topic, definition_version and created_at cannot change', MYSQL_ERRNO = 31013;
      END IF;
      SET v_upgrade = 1;
    END IF;
    IF NEW.status NOT IN ('running', 'waiting', 'paused', 'completed', 'failed') THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: status must be running, waiting, paused, completed or failed', MYSQL_ERRNO = 31009;
    END IF;
    IF NOT (NEW.data <=> OLD.data OR CASE WHEN JSON_VALID(NEW.data) THEN JSON_TYPE(NEW.data) = 'OBJECT' ELSE 0 END) THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: data must be a JSON object', MYSQL_ERRNO = 31008;
    END IF;
    /*[utf8*/IF NOT ((NEW.data <=> OLD.data OR INSTR(CAST(NEW.data AS BINARY), 0xED) = 0 OR fsm_valid_utf8_v1(NEW.data))
            AND (CAST(NEW.lookup_key AS BINARY) <=> CAST(OLD.lookup_key AS BINARY)
                 OR INSTR(CAST(NEW.lookup_key AS BINARY), 0xED) = 0 OR fsm_valid_utf8_v1(NEW.lookup_key))) THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: data and lookup_key must be valid UTF-8 (no encoded surrogates)', MYSQL_ERRNO = 31024;
    END IF;/*utf8]*/
  END IF;
  IF v_upgrade THEN
    SET @fsm_upgrade = NULL;
    IF NOT (CAST(NEW.lookup_key AS BINARY) <=> CAST(OLD.lookup_key AS BINARY) AND NEW.status <=> OLD.status
            AND CAST(NEW.resume_from_step AS BINARY) <=> CAST(OLD.resume_from_step AS BINARY)
            AND NEW.save_after_step <=> OLD.save_after_step AND NEW.data <=> OLD.data
            AND NEW.uses_global_lock <=> OLD.uses_global_lock AND NEW.uses_local_lock <=> OLD.uses_local_lock
            AND NEW.version <=> OLD.version) THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: an upgrade changes definition_version and current_state only', MYSQL_ERRNO = 31013;
    END IF;
    SELECT state, is_final INTO v_to, v_final FROM fsm_states
     WHERE machine = '{type}' AND version = NEW.definition_version AND state = NEW.current_state
       AND CAST(state AS BINARY) = CAST(NEW.current_state AS BINARY);
    IF v_to IS NULL OR NOT NEW.definition_version > OLD.definition_version THEN
      BEGIN
        DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4 DEFAULT LEFT(CONCAT('fsm: cannot upgrade {type} ', OLD.instance_key,
                                ' to version ', NEW.definition_version, ' state ', COALESCE(NEW.current_state, 'NULL')), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31030;
      END;
    END IF;
    SET v_metadata = JSON_MERGE_PATCH(CASE WHEN JSON_VALID(v_metadata) AND JSON_TYPE(v_metadata) = 'OBJECT'
                                           THEN v_metadata ELSE '{}' END,
                                      JSON_OBJECT('upgrade', JSON_OBJECT('from_version', OLD.definition_version,
                                                  'to_version', NEW.definition_version, 'from_state', OLD.current_state,
                                                  'to_state', v_to)));
    SET NEW.current_state = v_to, NEW.version = OLD.version + 1, NEW.updated_at = v_now;
    IF v_final THEN
      SET NEW.status = 'completed';
      DELETE FROM fsm_runs WHERE machine = '{type}' AND instance_id = OLD.id;
    ELSEIF OLD.status = 'completed' THEN
      SET NEW.status = 'running';  -- its state has a way out in the new version
    END IF;
    IF NOT (CAST(v_to AS BINARY) <=> CAST(OLD.current_state AS BINARY)) THEN
      INSERT INTO fsm_state_counts (machine, state, shard, instances) VALUES
        ('{type}', IF(CAST(v_to AS BINARY) < CAST(OLD.current_state AS BINARY), v_to, OLD.current_state), OLD.id % 16,
         IF(CAST(v_to AS BINARY) < CAST(OLD.current_state AS BINARY), 1, -1)),
        ('{type}', IF(CAST(v_to AS BINARY) < CAST(OLD.current_state AS BINARY), OLD.current_state, v_to), OLD.id % 16,
         IF(CAST(v_to AS BINARY) < CAST(OLD.current_state AS BINARY), -1, 1))
      ON DUPLICATE KEY UPDATE instances = instances + IF(CAST(TRIM(TRAILING ' ' FROM state) AS BINARY) = CAST(v_to AS BINARY), 1, -1);
    END IF;
    SET @fsm_guard = CONCAT(OLD.id, '/', v_now);
    UPDATE `fsm_{type}_transitions` FORCE INDEX (`fsm_{type}_t_sort`)
       SET most_recent = NULL, left_at = GREATEST(v_now, created_at)
     WHERE instance_id = OLD.id AND most_recent = 1 ORDER BY sort_key DESC LIMIT 1;
    INSERT INTO `fsm_{type}_transitions`
      (instance_id, sort_key, most_recent, event, from_state, to_state, handler, data_before,
       data_after, metadata, definition_version, request_id, source, created_at)
    VALUES (OLD.id, NEW.version, 1, NULL, OLD.current_state, v_to, NULL, OLD.data,
       NEW.data, v_metadata, NEW.definition_version, NULL, 'upgrade', v_now);
    SET @fsm_guard = NULL, @fsm_last_transition_id = LAST_INSERT_ID(), @fsm_last_status = NEW.status,
        @fsm_last_instance_id = OLD.id, @fsm_last_from = OLD.current_state, @fsm_last_to = v_to,
        @fsm_last_version = NEW.version;
    IF NEW.kafka_topic IS NOT NULL THEN
      INSERT INTO fsm_outbox
        (machine, topic, instance_id, instance_key, lookup_key, transition_id, sort_key, event,
         from_state, to_state, data, metadata, occurred_at)
      VALUES ('{type}', NEW.kafka_topic, OLD.id, OLD.instance_key, NEW.lookup_key, @fsm_last_transition_id,
         NEW.version, NULL, OLD.current_state, v_to,
         IF((SELECT event_data FROM fsm_definitions WHERE machine = '{type}' AND version = NEW.definition_version) = 0,
            NULL, NEW.data),
         v_metadata, v_now);
    END IF;
  -- byte for byte: with PAD SPACE 'new  ' would equal 'new' and pass as no change
  ELSEIF v_event IS NOT NULL OR NOT (CAST(NEW.current_state AS BINARY) <=> CAST(OLD.current_state AS BINARY)) THEN
    -- one test for the checks a transition passes (paused, locks, metadata, UTF-8)
    IF OLD.status = 'paused' OR ((OLD.uses_global_lock OR OLD.uses_local_lock) AND OLD.lookup_key IS NOT NULL)
       OR NOT (v_metadata IS NULL OR CASE WHEN JSON_VALID(v_metadata) THEN JSON_TYPE(v_metadata) = 'OBJECT' ELSE 0 END)
       /*[utf8*/OR INSTR(CAST(CONCAT_WS('', v_event, v_metadata, v_handler, v_request_id) AS BINARY), 0xED) > 0/*utf8]*/ THEN
      /*[utf8*/IF INSTR(CAST(CONCAT_WS('', v_event, v_metadata, v_handler, v_request_id) AS BINARY), 0xED) > 0
         AND NOT fsm_valid_utf8_v1(CONCAT_WS('', v_event, v_metadata, v_handler, v_request_id)) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: event, @fsm_metadata, @fsm_handler and @fsm_request_id must be valid UTF-8 (no encoded surrogates)', MYSQL_ERRNO = 31024;
      END IF;/*utf8]*/
      IF OLD.status = 'paused' THEN
        BEGIN
          DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4 DEFAULT
            LEFT(CONCAT('fsm: {type} ', COALESCE(OLD.instance_key, 'NULL'), ' is paused'), 128);
          SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31011;
        END;
      END IF;
      IF (OLD.uses_global_lock OR OLD.uses_local_lock) AND OLD.lookup_key IS NOT NULL THEN
        BEGIN
          DECLARE v_holder VARCHAR(64) CHARACTER SET utf8mb4;
          DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
          -- a scalar subquery, not SELECT INTO: no row must not raise NOT FOUND here (and SET,
          -- not DECLARE ... DEFAULT: a subquery there is not accepted by every server)
          SET v_holder = (SELECT owner FROM fsm_locks
            WHERE lookup_key = OLD.lookup_key
              AND ((scope = '*' AND OLD.uses_global_lock) OR (scope = '{type}' AND OLD.uses_local_lock))
              AND unlocked_at IS NULL AND expires_at > v_now AND NOT (owner <=> @fsm_lock_owner)
            LIMIT 1);
          IF v_holder IS NOT NULL THEN
            SET v_msg = LEFT(CONCAT('fsm: {type} ', OLD.instance_key, ' is locked by ', v_holder), 128);
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31018;
          END IF;
        END;
      END IF;
      IF NOT (v_metadata IS NULL OR CASE WHEN JSON_VALID(v_metadata) THEN JSON_TYPE(v_metadata) = 'OBJECT' ELSE 0 END) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: @fsm_metadata must be a JSON object', MYSQL_ERRNO = 31008;
      END IF;
    END IF;
    IF v_event IS NOT NULL THEN
      /*[rules_by_event*/BEGIN
        DECLARE v_guarded TINYINT;
        DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
        -- fsm_rules cannot test a guard: a guarded rule waits for the rendered trigger
        SELECT to_state, to_final, guard IS NOT NULL INTO v_to, v_final, v_guarded FROM fsm_rules
         WHERE machine = '{type}' AND version = OLD.definition_version
           AND from_state = OLD.current_state AND event = v_event
           AND CAST(event AS BINARY) = CAST(v_event AS BINARY) ORDER BY position LIMIT 1;
        IF v_guarded THEN
          SET v_msg = LEFT(CONCAT('fsm: {type} version ', OLD.definition_version, ' has guards its trigger lacks: run pyfsm sync {type}'), 128);
          SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31031;
        END IF;
      END;/*rules_by_event]*/
      IF v_to IS NULL OR NOT (NEW.current_state <=> OLD.current_state OR NEW.current_state <=> v_to) THEN
        BEGIN
          DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4 DEFAULT LEFT(CONCAT('fsm: event ', COALESCE(v_event, 'NULL'), ' not allowed from ',
                                  COALESCE(OLD.current_state, 'NULL'), ' ({type} ', OLD.instance_key, ')'), 128);
          IF v_to IS NULL AND v_refused IS NOT NULL THEN
            SET v_msg = LEFT(CONCAT('fsm: guard ', v_refused, ' refuses ', v_event, ' from ', OLD.current_state,
                                    ' ({type} ', OLD.instance_key, ')'), 128);
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31032;
          END IF;
          SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31005;
        END;
      END IF;
    ELSE
      BEGIN
        DECLARE v_n INT;
        DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
        /*[rules_by_target*/SELECT COUNT(DISTINCT event), MIN(event), MIN(to_state), MAX(to_final) INTO v_n, v_event, v_to, v_final FROM fsm_rules
         WHERE machine = '{type}' AND version = OLD.definition_version
           AND from_state = OLD.current_state AND to_state = NEW.current_state;
        IF v_n = 1 AND EXISTS (SELECT 1 FROM fsm_rules WHERE machine = '{type}' AND version = OLD.definition_version
                                  AND from_state = OLD.current_state AND event = v_event AND guard IS NOT NULL) THEN
          SET v_msg = LEFT(CONCAT('fsm: {type} version ', OLD.definition_version, ' has guards its trigger lacks: run pyfsm sync {type}'), 128);
          SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31031;
        END IF;/*rules_by_target]*/
        IF v_n = 0 THEN
          SET v_msg = LEFT(CONCAT('fsm: no transition from ', COALESCE(OLD.current_state, 'NULL'), ' to ',
                                  COALESCE(NEW.current_state, 'NULL'), ' ({type} ', OLD.instance_key, ')'), 128);
          SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31005;
        END IF;
        IF v_n > 1 THEN
          SET v_msg = LEFT(CONCAT('fsm: several events lead from ', COALESCE(OLD.current_state, 'NULL'), ' to ',
                                  COALESCE(NEW.current_state, 'NULL'), '; SET @fsm_event first'), 128);
          SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31006;
        END IF;
        -- the one event's rules were tried (rendered code, when they have guards): the rule
        -- taken must lead to the new state
        IF v_to IS NULL THEN
          SET v_msg = LEFT(CONCAT('fsm: guard ', v_refused, ' refuses ', v_event, ' from ', OLD.current_state,
                                  ' ({type} ', OLD.instance_key, ')'), 128);
          SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31032;
        END IF;
        IF NOT (v_to <=> NEW.current_state) THEN
          SET v_msg = LEFT(CONCAT('fsm: event ', v_event, ' leads from ', OLD.current_state, ' to ', v_to, ' here, not ',
                                  NEW.current_state, ' ({type} ', OLD.instance_key, ')'), 128);
          SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31005;
        END IF;
      END;
    END IF;
    SET NEW.current_state = v_to, NEW.version = OLD.version + 1, NEW.updated_at = v_now;
    IF v_final OR OLD.status = 'waiting' THEN
      IF v_final THEN
        SET NEW.status = 'completed';
      END IF;
      IF OLD.status = 'waiting' THEN
        -- the external event an engine-run instance was waiting for: it runs again (or is done)
        IF v_final THEN
          DELETE FROM fsm_runs WHERE machine = '{type}' AND instance_id = OLD.id;
        ELSE
          SET NEW.status = 'running';
          INSERT INTO fsm_runs (machine, instance_id, instance_key, due_at, attempt, created_at, updated_at)
          VALUES ('{type}', OLD.id, OLD.instance_key, v_now, 0, v_now, v_now)
          ON DUPLICATE KEY UPDATE due_at = v_now, claimed_by = NULL, attempt = 0, updated_at = v_now;
        END IF;
      END IF;
    END IF;
    IF NOT (v_count_later OR CAST(v_to AS BINARY) <=> CAST(OLD.current_state AS BINARY)) THEN
      -- one statement for both counter rows, met in key order whatever the direction of the
      -- move, so opposite moves never deadlock; the row's own state says which way it moves
      -- (trimmed: a row written before revision 0005 may spell it with trailing spaces)
      UPDATE fsm_state_counts
         SET instances = instances + IF(CAST(TRIM(TRAILING ' ' FROM state) AS BINARY) = CAST(v_to AS BINARY), 1, -1)
       WHERE machine = '{type}' AND state IN (OLD.current_state, v_to) AND shard = OLD.id % 16;
      IF ROW_COUNT() < 2 THEN
        -- a row is not there yet: undo what was moved (its lock is held) and write both rows
        -- as one INSERT, rows in key order
        UPDATE fsm_state_counts
           SET instances = instances - IF(CAST(TRIM(TRAILING ' ' FROM state) AS BINARY) = CAST(v_to AS BINARY), 1, -1)
         WHERE machine = '{type}' AND state IN (OLD.current_state, v_to) AND shard = OLD.id % 16;
        INSERT INTO fsm_state_counts (machine, state, shard, instances) VALUES
          ('{type}', IF(CAST(v_to AS BINARY) < CAST(OLD.current_state AS BINARY), v_to, OLD.current_state), OLD.id % 16,
           IF(CAST(v_to AS BINARY) < CAST(OLD.current_state AS BINARY), 1, -1)),
          ('{type}', IF(CAST(v_to AS BINARY) < CAST(OLD.current_state AS BINARY), OLD.current_state, v_to), OLD.id % 16,
           IF(CAST(v_to AS BINARY) < CAST(OLD.current_state AS BINARY), -1, 1))
        ON DUPLICATE KEY UPDATE instances = instances + IF(CAST(TRIM(TRAILING ' ' FROM state) AS BINARY) = CAST(v_to AS BINARY), 1, -1);
      END IF;
    END IF;
    -- @fsm_guard lets the history triggers tell pyfsm's own writes from anyone else's. It
    -- names this write (instance and time, as fsm_{type}_hbi_v2 and _hbu_v4 check), so a guard
    -- that a deadlock left behind allows no other write.
    SET @fsm_guard = CONCAT(OLD.id, '/', v_now);
    -- GREATEST: a clock stepped back must not make a state end before it began; the previous
    -- row through sort_key, not most_recent (see above)
    UPDATE `fsm_{type}_transitions` FORCE INDEX (`fsm_{type}_t_sort`)
       SET most_recent = NULL, left_at = GREATEST(v_now, created_at)
     WHERE instance_id = OLD.id AND most_recent = 1 ORDER BY sort_key DESC LIMIT 1;
    INSERT INTO `fsm_{type}_transitions`
      (instance_id, sort_key, most_recent, event, from_state, to_state, handler, data_before,
       data_after, metadata, definition_version, request_id, source, created_at)
    VALUES (OLD.id, NEW.version, 1, v_event, OLD.current_state, v_to, v_handler, OLD.data,
       NEW.data, COALESCE(v_metadata, '{}'), OLD.definition_version, v_request_id,
       COALESCE(v_source, 'update'), v_now);
    IF v_fire THEN
      SET @fsm_guard = NULL, @fsm_last_transition_id = LAST_INSERT_ID(), @fsm_last_status = NEW.status,
          @fsm_last = CONCAT_WS('/', LAST_INSERT_ID(), OLD.id, NEW.version, NEW.status, OLD.current_state, v_to);
    ELSE
      SET @fsm_guard = NULL, @fsm_last_transition_id = LAST_INSERT_ID(), @fsm_last_status = NEW.status,
          @fsm_last_instance_id = OLD.id, @fsm_last_from = OLD.current_state, @fsm_last_to = v_to,
          @fsm_last_version = NEW.version;
    END IF;
    IF NEW.kafka_topic IS NOT NULL THEN
      INSERT INTO fsm_outbox
        (machine, topic, instance_id, instance_key, lookup_key, transition_id, sort_key, event,
         from_state, to_state, data, metadata, occurred_at)
      VALUES ('{type}', NEW.kafka_topic, OLD.id, OLD.instance_key, NEW.lookup_key, @fsm_last_transition_id,
         NEW.version, v_event, OLD.current_state, v_to,
         IF(/*[event_data*/(SELECT event_data FROM fsm_definitions WHERE machine = '{type}' AND version = OLD.definition_version)/*event_data]*/ = 0,
            NULL, NEW.data),
         COALESCE(v_metadata, '{}'), v_now);
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

