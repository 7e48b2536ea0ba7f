-- fsm_send_at_v2: schedule an event for an instance, at a time or after a delay (a scheduled timer).
--
-- Does what fsm_send_at_v1 does, and refuses metadata with a top-level key "timer" (31009):
-- the firing records pyfsm's own {"timer": {"id", "kind", "due_at", "state"}} there, which
-- under v1 silently replaced the caller's. Nothing is written when it is refused.
-- Arms a timer of kind 'scheduled' in fsm_timers. When it is due, a worker (or
-- fsm_fire_timers_v1) sends the event once, as a transition of its own with request id
-- 'fsm:timer:<timer id>'; if the event is not allowed from the instance's state then, the
-- timer is dropped and logged in fsm_timer_log, not sent. A scheduled event stays armed
-- whatever the instance does meanwhile (unlike a state timeout); fsm_cancel_timer_v1
-- removes it. The instance must exist and the event must be one of its definition
-- version's events (31028 otherwise: a misspelt event is refused now, not dropped later).
-- With p_request_id, a repeated call returns the timer the first call armed (replayed = 1),
-- even after it fired; the same id for another instance or event is refused (31010).
-- Parameters: p_machine, p_key, p_event (required); exactly one of p_at (a UTC DATETIME; a
--   time in the past makes it due at once) and p_after_seconds (0 to 999999999, fractions
--   allowed); p_metadata (a JSON object without a "timer" key, recorded in the history row
--   of the firing, with "timer" added); p_request_id (1 to 64 characters).
-- Result: one row (timer_id, machine, instance_key, kind, event, due_at, replayed).
-- Errors: 31002 unknown machine; 31003 no such instance; 31008 metadata not a JSON object;
--   31009 invalid argument (both or neither of p_at and p_after_seconds, metadata with a
--   "timer" key, ...); 31010 request id used for another timer; 31016 called inside an open
--   transaction; 31028 unknown event.
-- Example: CALL fsm_send_at_v2('order', 'o-42', 'remind', NULL, 3600, '{"by": "dba"}', NULL);
CREATE PROCEDURE `fsm_send_at_v2`(
  IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_event TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_at DATETIME(6),
  IN p_after_seconds DECIMAL(16,6),
  IN p_metadata LONGTEXT CHARACTER SET utf8mb4,
  IN p_request_id TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
MODIFIES SQL DATA SQL SECURITY DEFINER
proc: BEGIN
  DECLARE v_started, v_dup TINYINT DEFAULT 0;
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_due DATETIME(6);
  DECLARE v_id BIGINT UNSIGNED;
  DECLARE v_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_event VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    IF v_started THEN
      ROLLBACK;
    END IF;
    SET @fsm_sql = NULL, @fsm_a1 = NULL, @fsm_t_dv = NULL;
    RESIGNAL;
  END;
  CALL fsm_require_machine_v1(p_machine);
  IF p_key IS NULL OR CHAR_LENGTH(p_key) NOT BETWEEN 1 AND 191 OR p_key LIKE '% ' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: key must be 1 to 191 characters, not ending in a space', MYSQL_ERRNO = 31009;
  END IF;
  IF NOT COALESCE(fsm_valid_name_v1(p_event, 64), 0) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: event must match [a-z][a-z0-9_]* and have at most 64 characters', MYSQL_ERRNO = 31009;
  END IF;
  IF (p_at IS NULL) = (p_after_seconds IS NULL) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: give exactly one of at and after_seconds', MYSQL_ERRNO = 31009;
  END IF;
  IF p_after_seconds IS NOT NULL AND p_after_seconds NOT BETWEEN 0 AND 999999999 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: after_seconds must be 0 to 999999999', MYSQL_ERRNO = 31009;
  END IF;
  IF p_metadata IS NOT NULL AND NOT (LENGTH(p_metadata) <= 65536 AND fsm_is_object_v1(p_metadata)) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: metadata must be a JSON object of at most 65536 bytes', MYSQL_ERRNO = 31008;
  END IF;
  -- refused when the firing's JSON_SET(metadata, '$.timer', ...) would replace a key; the test
  -- is that JSON_SET itself: on MariaDB, JSON_CONTAINS_PATH misses a "timer" key spelt with
  -- JSON escapes, which JSON_SET replaces all the same
  IF p_metadata IS NOT NULL AND JSON_LENGTH(JSON_SET(p_metadata, '$.timer', NULL)) = JSON_LENGTH(p_metadata) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: metadata must not have a key "timer": the firing records the timer there', MYSQL_ERRNO = 31009;
  END IF;
  IF p_request_id IS NOT NULL AND (CHAR_LENGTH(p_request_id) NOT BETWEEN 1 AND 64 OR p_request_id LIKE '% ') THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: request id must be 1 to 64 characters, not ending in a space', MYSQL_ERRNO = 31009;
  END IF;
  SET v_due = COALESCE(p_at, DATE_ADD(v_now, INTERVAL ROUND(p_after_seconds * 1000000) MICROSECOND));
  CALL fsm_begin_v1();  -- READ COMMITTED; 31016 inside a caller's transaction, left alone
  SET v_started = 1;
  CALL fsm_lock_instance_v1(p_machine, p_key);  -- 31003 when there is none
  replay: LOOP
    IF p_request_id IS NOT NULL THEN
      SET v_id = NULL;
      SELECT MAX(id), MAX(instance_key), MAX(event) INTO v_id, v_key, v_event FROM (
        SELECT id, instance_key, event FROM fsm_timers WHERE machine = p_machine AND request_id = p_request_id
        UNION ALL
        SELECT id, instance_key, event FROM fsm_timer_log WHERE machine = p_machine AND request_id = p_request_id) t;
      IF v_id IS NOT NULL THEN
        IF NOT (CAST(v_key AS BINARY) = CAST(p_key AS BINARY) AND CAST(v_event AS BINARY) = CAST(p_event AS BINARY)) THEN
          SET v_msg = LEFT(CONCAT('fsm: request id ', p_request_id, ' was used for another timer'), 128);
          SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31010;
        END IF;
        COMMIT;
        SELECT id AS timer_id, machine, instance_key, kind, event, due_at, 1 AS replayed FROM fsm_timers WHERE id = v_id
        UNION ALL
        SELECT id, machine, instance_key, kind, event, due_at, 1 FROM fsm_timer_log WHERE id = v_id;
        LEAVE proc;
      END IF;
    END IF;
    IF v_dup THEN
      -- a duplicate that is gone again: cannot happen (a timer leaves fsm_timers for the log)
      SET v_msg = LEFT(CONCAT('fsm: request id ', p_request_id, ' was used for another timer'), 128);
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31010;
    END IF;
    SET @fsm_sql = CONCAT('SELECT definition_version INTO @fsm_t_dv FROM `fsm_', p_machine, '` WHERE id = ?'),
        @fsm_a1 = @fsm_i_id;
    PREPARE fsm_stmt FROM @fsm_sql;
    EXECUTE fsm_stmt USING @fsm_a1;
    DEALLOCATE PREPARE fsm_stmt;
    IF NOT EXISTS (SELECT 1 FROM fsm_rules WHERE machine = p_machine AND version = @fsm_t_dv
                    AND CAST(event AS BINARY) = CAST(p_event AS BINARY)) THEN
      SET v_msg = LEFT(CONCAT('fsm: ', p_event, ' is not an event of ', p_machine, ' (definition version ', @fsm_t_dv, ')'), 128);
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31028;
    END IF;
    BEGIN
      -- another call with this request id committed first: replay it
      DECLARE CONTINUE HANDLER FOR 1062 SET v_dup = 1;
      INSERT INTO fsm_timers (machine, instance_id, instance_key, kind, timeout_of, state, event, metadata, request_id,
                              due_at, fire_at, armed_at, armed_version)
      VALUES (p_machine, @fsm_i_id, p_key, 'scheduled', NULL, NULL, p_event, p_metadata, p_request_id,
              v_due, v_due, v_now, @fsm_i_version);
    END;
    IF NOT v_dup THEN
      LEAVE replay;
    END IF;
  END LOOP;
  SET v_id = LAST_INSERT_ID(), @fsm_sql = NULL, @fsm_a1 = NULL, @fsm_t_dv = NULL;
  COMMIT;
  SELECT id AS timer_id, machine, instance_key, kind, event, due_at, 0 AS replayed FROM fsm_timers WHERE id = v_id;
END
