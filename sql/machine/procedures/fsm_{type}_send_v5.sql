-- fsm_{type}_send_v5: send an event to an instance of {type}, in one transaction (pyfsm's Store uses this).
--
-- fsm_{type}_send_v4 with one more parameter, p_data_patch: a JSON merge patch (RFC 7396)
-- applied to the instance's data inside the transition's own transaction, before the rules'
-- guards judge it, so a sender can change part of the data (a key set to null is removed,
-- objects merge key by key, anything else replaces) without reading it first and without
-- hiding the rest from the guards. Everything else is send_v4's, described below.
--
-- Answers every call as fsm_{type}_send_v3 does (the same result row, the same refusals with
-- the same numbers), with less work on the way: this is the procedure of every Store.send().
-- When no request id is given, one UPDATE finds the instance by key (and expected version),
-- locks it and applies the event through fsm_{type}_bu_v9 (rule check, history, counters,
-- outbox); the result is what the trigger left in @fsm_last_*, with no second read. When that
-- UPDATE finds no row (no instance yet, or another version), and for every call with a
-- request id, it goes the long way: lock the row, create a missing instance in the first
-- start state (by position) that allows the event, check the request id and the version,
-- then apply the event. With p_request_id, a call repeated with the same id returns the
-- original transition (replayed = 1) instead of applying it again.
-- What it leaves out, against send_v3: the transaction is begun here (no CALL of
-- fsm_begin_v1); the context (@fsm_event ...) is set once, and the trigger takes and clears
-- it; the answer of a trigger older than bu_v9 is not read back (this procedure is created
-- with bu_v9); the event's name is checked only when the call fails (a name that is not
-- valid is in no rule, so such a call always fails: its error is then 31009, as send_v3's);
-- a duplicate key is told apart in the one error handler, not in a handler of its own.
-- Parameters: p_key, p_event (required); p_data (NULL keeps data, an object replaces it);
--   p_data_patch (last: NULL, or an object merged into the data, JSON_MERGE_PATCH; with p_data
--   it is 31009: give one of them);
--   p_metadata (JSON object recorded in history); p_expected_version (NULL: no check;
--   0: the instance must not exist yet; N: its version must be N); p_request_id;
--   p_handler (recorded in history); p_lookup_key (used only when creating).
-- Result: one row (transition_id, instance_id, from_state, to_state, version, status,
--   created, replayed): version is the instance's version right after this transition, and
--   the history row's sort_key.
-- Errors: 31028 {type} has no such event (its definition version's events are listed);
--   31003 no instance and no start state allows the event; 31016 called inside an open
--   transaction (nothing is changed, the caller's transaction is left alone); 31005 not allowed;
--   31007 version conflict; 31008 invalid data; 31009 invalid argument; 31010 request id
--   used for another transition; 31011 paused; 31012 the history was tampered with; 31018
--   locked by another owner (see fsm_lock_v2); 31008 also for a p_data_patch that is not a
--   JSON object of at most 1 MiB; 31024 text not valid UTF-8 (MariaDB; MySQL
--   refuses such text itself: 1366); 1213 deadlock: the transaction was rolled back whole,
--   call again (pyfsm's Store does, up to 3 times); 1205 lock wait timeout.
-- Example: CALL `fsm_{type}_send_v5`('k-1', 'pay', NULL, '{"by": "dba"}', NULL, NULL, NULL, NULL, '{"card": "visa"}');
CREATE PROCEDURE `fsm_{type}_send_v5`(
  IN p_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_event TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_data LONGTEXT CHARACTER SET utf8mb4,
  IN p_metadata LONGTEXT CHARACTER SET utf8mb4,
  IN p_expected_version BIGINT,
  IN p_request_id TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_handler TEXT CHARACTER SET utf8mb4,
  IN p_lookup_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_data_patch LONGTEXT CHARACTER SET utf8mb4)
MODIFIES SQL DATA SQL SECURITY DEFINER
proc: BEGIN
  DECLARE v_started TINYINT DEFAULT 0;
  DECLARE v_errno INT;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    -- first: on MySQL any statement before it, a DECLARE of the handler's own included, clears
    -- the condition it reads (the handler's own locals are declared in a block after it: a
    -- local costs every call, the handler runs only on failure)
    GET DIAGNOSTICS CONDITION 1 v_errno = MYSQL_ERRNO;
    BEGIN
      DECLARE v_dv INT UNSIGNED;
      DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
      IF v_started THEN
        ROLLBACK;
      END IF;
      SET @fsm_event = NULL, @fsm_metadata = NULL, @fsm_handler = NULL, @fsm_request_id = NULL,
          @fsm_source = NULL, @fsm_guard = NULL;
      IF NOT COALESCE(fsm_valid_name_v1(p_event, 64), 0) THEN
        -- not a name, so in no rule: every such call ends here, and is told so (31009) as send_v3 tells it
        CALL fsm_check_args_v1(p_key, p_event, p_data, p_metadata, p_request_id, p_handler, p_lookup_key);
      END IF;
      IF v_errno = 1568 AND NOT v_started THEN
        -- SET TRANSACTION inside the caller's transaction: nothing was done, theirs is left alone
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: called inside an open transaction; commit or roll back first', MYSQL_ERRNO = 31016;
      END IF;
      IF v_errno = 1062 THEN
        -- with the row lock held, only the request id can collide; without one, only history
        -- that was written outside pyfsm
        IF p_request_id IS NULL THEN
          SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: history unique key violated; history was written outside pyfsm', MYSQL_ERRNO = 31012;
        END IF;
        SET v_msg = LEFT(CONCAT('fsm: request id ', p_request_id, ' was used for another transition'), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31010;
      END IF;
      IF v_errno IN (31003, 31005) THEN
        -- Refused by the rules (31005) or by every start state (31003): is the event one of
        -- the type's at all? Read after the rollback, on the error path only, with scalar
        -- subqueries (which raise no NOT FOUND when nothing matches): in the instance's
        -- definition version, or in the current one for a key with no instance.
        SET v_dv = COALESCE((SELECT definition_version FROM `fsm_{type}` WHERE instance_key = p_key),
                            (SELECT current_version FROM fsm_machines WHERE machine = '{type}'));
        IF NOT EXISTS (SELECT 1 FROM fsm_rules WHERE machine = '{type}' AND version = v_dv AND event = p_event
                          AND CAST(event AS BINARY) = CAST(p_event AS BINARY)) THEN
          SET v_msg = LEFT(CONCAT('fsm: {type} has no event ', p_event, ' (definition version ', COALESCE(v_dv, 'NULL'),
                                  '); its events: ', COALESCE((SELECT GROUP_CONCAT(DISTINCT event ORDER BY event SEPARATOR ', ')
                                    FROM fsm_rules WHERE machine = '{type}' AND version = v_dv), 'none')), 128);
          SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31028;
        END IF;
      END IF;
    END;
    RESIGNAL;
  END;
  -- One test that the usual arguments pass (the event's name: see above); fsm_check_args_v1
  -- names what is wrong otherwise. CASE: JSON_TYPE never sees invalid JSON; COALESCE: a NULL
  -- anywhere fails it.
  IF NOT COALESCE(p_event IS NOT NULL AND p_key IS NOT NULL
          AND CHAR_LENGTH(p_key) BETWEEN 1 AND 191 AND p_key NOT LIKE '% '
          AND (p_data IS NULL OR (LENGTH(p_data) <= 1048576
               AND CASE WHEN JSON_VALID(p_data) THEN JSON_TYPE(p_data) = 'OBJECT' ELSE 0 END))
          AND (p_metadata IS NULL OR (LENGTH(p_metadata) <= 65536
               AND CASE WHEN JSON_VALID(p_metadata) THEN JSON_TYPE(p_metadata) = 'OBJECT' ELSE 0 END))
          AND (p_request_id IS NULL OR (CHAR_LENGTH(p_request_id) BETWEEN 1 AND 64 AND p_request_id NOT LIKE '% '))
          AND (p_handler IS NULL OR CHAR_LENGTH(p_handler) BETWEEN 1 AND 128)
          AND (p_lookup_key IS NULL OR (CHAR_LENGTH(p_lookup_key) BETWEEN 1 AND 191 AND p_lookup_key NOT LIKE '% '))
          AND (p_expected_version IS NULL OR p_expected_version >= 0)
          AND (p_data_patch IS NULL OR (p_data IS NULL AND LENGTH(p_data_patch) <= 1048576
               AND CASE WHEN JSON_VALID(p_data_patch) THEN JSON_TYPE(p_data_patch) = 'OBJECT' ELSE 0 END)), 0) THEN
    IF p_event IS NULL THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: event is required', MYSQL_ERRNO = 31009;
    END IF;
    CALL fsm_check_args_v1(p_key, p_event, p_data, p_metadata, p_request_id, p_handler, p_lookup_key);
    IF p_expected_version < 0 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: expected_version must not be negative', MYSQL_ERRNO = 31009;
    END IF;
    IF p_data IS NOT NULL THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: give data (it replaces the data) or data_patch (it is merged into it), not both', MYSQL_ERRNO = 31009;
    END IF;
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: data_patch must be a JSON object of at most 1 MiB', MYSQL_ERRNO = 31008;
  END IF;
  -- READ COMMITTED, as fsm_begin_v1 begins it; inside the caller's transaction this is 1568 (31016 above)
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  SET v_started = 1;
  IF p_request_id IS NULL THEN
    -- The common case in one statement: the UPDATE finds the instance by key and version,
    -- locks it, and the trigger applies the event and clears the context. No row: see below.
    SET @fsm_event = p_event, @fsm_metadata = p_metadata, @fsm_handler = p_handler,
        @fsm_request_id = NULL, @fsm_source = 'procedure';
    UPDATE `fsm_{type}` SET data = IF(p_data_patch IS NULL, COALESCE(p_data, data), JSON_MERGE_PATCH(COALESCE(data, '{}'), p_data_patch))
     WHERE instance_key = p_key AND version = COALESCE(p_expected_version, version);
    IF ROW_COUNT() = 1 THEN
      COMMIT;
      SELECT @fsm_last_transition_id AS transition_id, @fsm_last_instance_id AS instance_id,
             @fsm_last_from AS from_state, @fsm_last_to AS to_state, @fsm_last_version AS version,
             @fsm_last_status AS status, 0 AS created, 0 AS replayed;
      LEAVE proc;
    END IF;
    -- no row: the trigger did not run, so the context is still set
    SET @fsm_event = NULL, @fsm_metadata = NULL, @fsm_handler = NULL, @fsm_source = NULL;
  END IF;
  BEGIN
    -- No instance with that key and version, or a request id: lock the row (if any) first.
    DECLARE v_dup TINYINT DEFAULT 0;
    DECLARE v_id, v_version, v_tid, v_req_instance BIGINT UNSIGNED;
    DECLARE v_created, v_replayed TINYINT DEFAULT 0;
    DECLARE v_req_event, v_start VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_status VARCHAR(16) CHARACTER SET utf8mb4;
    DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;  -- SELECT ... INTO no row: the variables stay NULL
    SELECT id, version INTO v_id, v_version FROM `fsm_{type}` WHERE instance_key = p_key FOR UPDATE;
    IF v_id IS NULL THEN
      IF p_expected_version > 0 THEN
        SET v_msg = LEFT(CONCAT('fsm: {type} ', p_key, ' does not exist (expected version ', p_expected_version, ')'), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31007;
      END IF;
      SET v_start = (SELECT s.state FROM fsm_machines m
          JOIN fsm_states s ON s.machine = m.machine AND s.version = m.current_version AND s.is_start = 1
          JOIN fsm_rules r ON r.machine = s.machine AND r.version = s.version AND r.from_state = s.state
         WHERE m.machine = '{type}' AND r.event = p_event ORDER BY s.position LIMIT 1);
      IF v_start IS NULL THEN
        SET v_msg = LEFT(CONCAT('fsm: no {type} ', p_key, ' and event ', p_event, ' cannot create one'), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31003;
      END IF;
      SET @fsm_metadata = p_metadata, @fsm_handler = p_handler, @fsm_source = 'procedure';
      BEGIN
        DECLARE CONTINUE HANDLER FOR 1062 SET v_dup = 1;
        INSERT INTO `fsm_{type}` (instance_key, lookup_key, current_state) VALUES (p_key, p_lookup_key, v_start);
      END;
      SET @fsm_metadata = NULL, @fsm_handler = NULL, @fsm_source = NULL;
      IF v_dup THEN
        -- Another caller created it first; continue with theirs, unless ours had to be new.
        -- The failed INSERT left us a shared lock on the key; two callers each holding one
        -- and asking for the row lock would deadlock. Nothing is written yet, so start over.
        ROLLBACK;
        SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        START TRANSACTION;
        SELECT id, version INTO v_id, v_version FROM `fsm_{type}` WHERE instance_key = p_key FOR UPDATE;
      ELSE
        SET v_id = LAST_INSERT_ID(), v_version = 1, v_created = 1;
      END IF;
    END IF;
    IF p_request_id IS NOT NULL THEN
      SELECT id, instance_id, event INTO v_tid, v_req_instance, v_req_event
        FROM `fsm_{type}_transitions` WHERE request_id = p_request_id;
      IF v_tid IS NOT NULL THEN
        IF NOT (v_req_instance <=> v_id AND v_req_event <=> p_event) THEN
          SET v_msg = LEFT(CONCAT('fsm: request id ', p_request_id, ' was used for another transition'), 128);
          SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31010;
        END IF;
        SET v_replayed = 1;
        SELECT status INTO v_status FROM `fsm_{type}` WHERE id = v_id;
        COMMIT;
        SELECT id AS transition_id, instance_id, from_state, to_state, sort_key AS version, v_status AS status,
               v_created AS created, v_replayed AS replayed
          FROM `fsm_{type}_transitions` WHERE id = v_tid;
        LEAVE proc;
      END IF;
    END IF;
    -- checked after the request id, so that a repeat of a creating call replays
    IF p_expected_version IS NOT NULL AND v_created = 0 AND p_expected_version <> v_version THEN
      SET v_msg = LEFT(CONCAT('fsm: {type} ', p_key, ' is at version ', COALESCE(v_version, 'NULL'), ', not ', p_expected_version), 128);
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31007;
    END IF;
    SET @fsm_event = p_event, @fsm_metadata = p_metadata, @fsm_handler = p_handler,
        @fsm_request_id = p_request_id, @fsm_source = 'procedure';
    UPDATE `fsm_{type}` SET data = IF(p_data_patch IS NULL, COALESCE(p_data, data), JSON_MERGE_PATCH(COALESCE(data, '{}'), p_data_patch))
     WHERE id = v_id;
    COMMIT;
    SELECT @fsm_last_transition_id AS transition_id, @fsm_last_instance_id AS instance_id,
           @fsm_last_from AS from_state, @fsm_last_to AS to_state, @fsm_last_version AS version,
           @fsm_last_status AS status, v_created AS created, 0 AS replayed;
  END;
END
