-- fsm___M___send_v1: send an event to an instance of __M__, in one transaction.
--
-- Locks the instance row, applies the event through fsm___M___bu_v1 (rule check, history,
-- outbox) and commits. A key with no instance is created first, in the first start state
-- (by position) that allows the event. With p_request_id, a call repeated with the same id
-- returns the original transition (replayed = 1) instead of applying it again.
-- Parameters: p_key, p_event (required); p_data (NULL keeps data, an object replaces it);
--   p_metadata (JSON object recorded in history); p_expected_version (NULL: no check;
--   0: the instance must not exist yet; N: its version must be N); p_request_id;
--   p_handler (recorded in history); p_lookup_key (used only when creating).
-- Result: one row (transition_id, instance_id, instance_key, event, from_state, to_state,
--   sort_key, version, status, created, replayed). version = sort_key: the instance's
--   version right after this transition.
-- Errors: 31003 no instance and the event cannot create one; 31016 called inside an open
--   transaction (nothing is changed, the caller's transaction is left alone); 31005 not allowed;
--   31007 version conflict; 31008 invalid data; 31009 invalid argument; 31010 request id
--   used for another transition; 31011 paused; 31012 the history was tampered with; 31018
--   locked by another owner (see fsm_lock_v1); 1213 deadlock: the transaction was rolled
--   back whole, call again (pyfsm's Store does, up to 3 times); 1205 lock wait timeout.
-- Example: CALL `fsm___M___send_v1`('k-1', 'pay', NULL, '{"by": "dba"}', NULL, NULL, NULL, NULL);
CREATE PROCEDURE `fsm___M___send_v1`(
  IN p_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_event TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_data LONGTEXT CHARACTER SET utf8mb4,
  IN p_metadata LONGTEXT CHARACTER SET utf8mb4,
  IN p_expected_version BIGINT,
  IN p_request_id TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_handler TEXT CHARACTER SET utf8mb4,
  IN p_lookup_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_started TINYINT DEFAULT 0;
  DECLARE v_found TINYINT DEFAULT 1;
  DECLARE v_dup TINYINT DEFAULT 0;
  DECLARE v_id, v_version, v_tid, v_req_instance BIGINT UNSIGNED;
  DECLARE v_created, v_replayed TINYINT DEFAULT 0;
  DECLARE v_req_event, v_start, v_event, v_from, v_to VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_status VARCHAR(16) CHARACTER SET utf8mb4;
  DECLARE v_sort BIGINT UNSIGNED;
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_found = 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    IF v_started THEN
      ROLLBACK;
    END IF;
    SET @fsm_event = NULL, @fsm_metadata = NULL, @fsm_handler = NULL, @fsm_request_id = NULL,
        @fsm_source = NULL, @fsm_guard = NULL;
    RESIGNAL;
  END;
  IF p_event IS NULL THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: event is required', MYSQL_ERRNO = 31009;
  END IF;
  CALL fsm_check_args_v1(p_key, p_event, p_data, p_metadata, p_request_id, p_handler, p_lookup_key);
  IF p_expected_version < 0 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: expected_version must not be negative', MYSQL_ERRNO = 31009;
  END IF;
  BEGIN
    -- Inside a caller's open transaction SET TRANSACTION fails (1568); say so, and leave
    -- the caller's transaction alone (the handler below rolls back only what we started).
    DECLARE EXIT HANDLER FOR 1568
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: called inside an open transaction; commit or roll back first', MYSQL_ERRNO = 31016;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  END;
  START TRANSACTION;
  SET v_started = 1;
  SELECT id, version, current_state INTO v_id, v_version, v_from FROM `fsm___M__` WHERE instance_key = p_key FOR UPDATE;
  IF v_id IS NULL THEN
    IF p_expected_version > 0 THEN
      SET v_msg = LEFT(CONCAT('fsm: __M__ ', COALESCE(p_key, 'NULL'), ' does not exist (expected version ', p_expected_version, ')'), 128);
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31007;
    END IF;
    SET v_start = (SELECT s.state FROM fsm_machines m
        JOIN fsm_states s ON s.machine = m.machine AND s.version = m.current_version AND s.is_start = 1
        JOIN fsm_rules r ON r.machine = s.machine AND r.version = s.version AND r.from_state = s.state
       WHERE m.machine = '__M__' AND r.event = p_event ORDER BY s.position LIMIT 1);
    IF v_start IS NULL THEN
      SET v_msg = LEFT(CONCAT('fsm: no __M__ ', COALESCE(p_key, 'NULL'), ' and event ', COALESCE(p_event, 'NULL'), ' cannot create one'), 128);
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31003;
    END IF;
    SET @fsm_metadata = p_metadata, @fsm_handler = p_handler, @fsm_source = 'procedure';
    BEGIN
      DECLARE CONTINUE HANDLER FOR 1062 SET v_dup = 1;
      INSERT INTO `fsm___M__` (instance_key, lookup_key, current_state) VALUES (p_key, p_lookup_key, v_start);
    END;
    IF v_dup THEN
      -- Another caller created it first; continue with theirs, unless ours had to be new.
      -- The failed INSERT left us a shared lock on the key; two callers each holding one
      -- and asking for the row lock would deadlock. Nothing is written yet, so start over.
      ROLLBACK;
      SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
      START TRANSACTION;
      SELECT id, version, current_state INTO v_id, v_version, v_from FROM `fsm___M__` WHERE instance_key = p_key FOR UPDATE;
    ELSE
      SET v_id = LAST_INSERT_ID(), v_version = 1, v_from = v_start, v_created = 1;
    END IF;
  END IF;
  IF p_request_id IS NOT NULL THEN
    SELECT id, instance_id, event INTO v_tid, v_req_instance, v_req_event
      FROM `fsm___M___transitions` WHERE request_id = p_request_id;
    IF v_tid IS NOT NULL THEN
      IF NOT (v_req_instance <=> v_id AND v_req_event <=> p_event) THEN
        SET v_msg = LEFT(CONCAT('fsm: request id ', COALESCE(p_request_id, 'NULL'), ' was used for another transition'), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31010;
      END IF;
      SET v_replayed = 1;
      SELECT from_state, to_state, sort_key INTO v_from, v_to, v_sort
        FROM `fsm___M___transitions` WHERE id = v_tid;
      SELECT status INTO v_status FROM `fsm___M__` WHERE id = v_id;
    END IF;
  END IF;
  IF v_replayed = 0 THEN
    -- checked after the request id, so that a repeat of a creating call replays
    IF p_expected_version IS NOT NULL AND v_created = 0 AND p_expected_version <> v_version THEN
      SET v_msg = LEFT(CONCAT('fsm: __M__ ', COALESCE(p_key, 'NULL'), ' is at version ', COALESCE(v_version, 'NULL'), ', not ', COALESCE(p_expected_version, 'NULL')), 128);
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31007;
    END IF;
    SET @fsm_event = p_event, @fsm_metadata = p_metadata, @fsm_handler = p_handler,
        @fsm_request_id = p_request_id, @fsm_source = 'procedure';
    BEGIN
      DECLARE CONTINUE HANDLER FOR 1062 SET v_dup = 2;
      UPDATE `fsm___M__` SET data = COALESCE(p_data, data) WHERE id = v_id;
    END;
    SET @fsm_event = NULL, @fsm_metadata = NULL, @fsm_handler = NULL, @fsm_request_id = NULL, @fsm_source = NULL;
    IF v_dup = 2 AND p_request_id IS NULL THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: history unique key violated; history was written outside pyfsm', MYSQL_ERRNO = 31012;
    END IF;
    IF v_dup = 2 THEN
      -- with the row lock held, only the request id can collide
      SET v_msg = LEFT(CONCAT('fsm: request id ', COALESCE(p_request_id, 'NULL'), ' was used for another transition'), 128);
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31010;
    END IF;
    SET v_tid = @fsm_last_transition_id;
    SELECT current_state, version, status INTO v_to, v_sort, v_status FROM `fsm___M__` WHERE id = v_id;
  END IF;
  SET @fsm_metadata = NULL, @fsm_handler = NULL, @fsm_source = NULL;
  COMMIT;
  SELECT v_tid AS transition_id, v_id AS instance_id, p_key AS instance_key, p_event AS event,
         v_from AS from_state, v_to AS to_state, v_sort AS sort_key, v_sort AS version,
         v_status AS status, v_created AS created, v_replayed AS replayed;
END
