-- fsm_{type}_apply_send_v2: send one event to an instance of {type}, inside the caller's transaction (internal).
--
-- What fsm_{type}_send_v6 does for one call, without its transaction: fsm_{type}_send_many_v4
-- calls this once per item, each inside a savepoint. The caller has begun the transaction
-- (fsm_begin_v1) and commits or rolls back; on an error nothing is undone here (the caller
-- rolls back to its savepoint), only the transition context is cleared. Without a request
-- id, one UPDATE finds the instance by key (and expected version), locks it and applies the
-- event through fsm_{type}_bu_v14. Otherwise, or when that UPDATE finds no row: lock the row,
-- create a missing instance in the first start state (by position) that allows the event,
-- check the request id (a repeat returns the original transition, o_replayed = 1) and the
-- version, then apply the event. The state counters are left to the caller (count later in
-- the trigger's context): it moves them from the outputs (o_from, o_to, o_id, o_created)
-- once for all its items. Unlike send_v6, a creation that loses a race for the key does not
-- start its transaction over (that would undo the caller's other items): it waits for the
-- winner's row, and a deadlock there rolls back the caller's whole transaction.
-- Against apply_send_v1 (send_many_v3's): the context goes to the trigger in one variable,
-- @fsm_source 'ctx/p1/...' (fsm_{type}_bu_v14 describes it), where v1 set seven and cleared
-- five, and the answer comes back in @fsm_last, where it was six variables and, after a
-- request id, a read of the history row. Creating a missing instance still hands its INSERT
-- triggers the older context.
-- Parameters: as fsm_{type}_send_v6's but p_data_patch (the caller merges it); OUT o_tid, o_id, o_from, o_to, o_version, o_status,
--   o_created, o_replayed: its result row.
-- Errors: as fsm_{type}_send_v6 (31003, 31005, 31007, 31008, 31009, 31010, 31011, 31012,
--   31018, 31024), but never 31016: the caller's transaction is the point.
-- Example: CALL `fsm_{type}_apply_send_v2`('k-1', 'pay', NULL, NULL, NULL, NULL, NULL, NULL, @tid, @id, @from, @to, @version, @status, @created, @replayed);
CREATE PROCEDURE `fsm_{type}_apply_send_v2`(
  IN p_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_event TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_data LONGTEXT CHARACTER SET utf8mb4,
  IN p_metadata LONGTEXT CHARACTER SET utf8mb4,
  IN p_expected_version BIGINT,
  IN p_request_id TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_handler TEXT CHARACTER SET utf8mb4,
  IN p_lookup_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  OUT o_tid BIGINT UNSIGNED,
  OUT o_id BIGINT UNSIGNED,
  OUT o_from VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  OUT o_to VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  OUT o_version BIGINT UNSIGNED,
  OUT o_status VARCHAR(16) CHARACTER SET utf8mb4,
  OUT o_created TINYINT,
  OUT o_replayed TINYINT)
MODIFIES SQL DATA SQL SECURITY INVOKER
proc: BEGIN
  DECLARE v_dup TINYINT DEFAULT 0;
  DECLARE v_rows INT DEFAULT 0;
  DECLARE v_version, v_req_instance BIGINT UNSIGNED;
  DECLARE v_req_event, v_start VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;  -- SELECT ... INTO no row: the variables stay NULL
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    -- the older context too: the INSERT that creates an instance is handed it
    SET @fsm_event = NULL, @fsm_metadata = NULL, @fsm_handler = NULL, @fsm_request_id = NULL,
        @fsm_source = NULL, @fsm_count_later = NULL;
    RESIGNAL;
  END;
  SET o_tid = NULL, o_id = NULL, o_from = NULL, o_to = NULL, o_version = NULL, o_status = NULL,
      o_created = 0, o_replayed = 0;
  -- the same test as send_v2's: one for the usual arguments, fsm_check_args_v1 names the rest
  IF NOT COALESCE(p_event IS NOT NULL AND fsm_valid_name_v1(p_event, 64) AND p_key IS NOT NULL
          AND CHAR_LENGTH(p_key) BETWEEN 1 AND 191 AND p_key NOT LIKE '% '
          AND (p_data IS NULL OR (LENGTH(p_data) <= 1048576
               AND CASE WHEN JSON_VALID(p_data) THEN JSON_TYPE(p_data) = 'OBJECT' ELSE 0 END))
          AND (p_metadata IS NULL OR (LENGTH(p_metadata) <= 65536
               AND CASE WHEN JSON_VALID(p_metadata) THEN JSON_TYPE(p_metadata) = 'OBJECT' ELSE 0 END))
          AND (p_request_id IS NULL OR (CHAR_LENGTH(p_request_id) BETWEEN 1 AND 64 AND p_request_id NOT LIKE '% '))
          AND (p_handler IS NULL OR CHAR_LENGTH(p_handler) BETWEEN 1 AND 128)
          AND (p_lookup_key IS NULL OR (CHAR_LENGTH(p_lookup_key) BETWEEN 1 AND 191 AND p_lookup_key NOT LIKE '% '))
          AND (p_expected_version IS NULL OR p_expected_version >= 0), 0) THEN
    IF p_event IS NULL THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: event is required', MYSQL_ERRNO = 31009;
    END IF;
    CALL fsm_check_args_v1(p_key, p_event, p_data, p_metadata, p_request_id, p_handler, p_lookup_key);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: expected_version must not be negative', MYSQL_ERRNO = 31009;
  END IF;
  IF p_request_id IS NULL THEN
    -- the common case in one statement, as in send_v6
    SET @fsm_source = CONCAT('ctx/p1/', CHAR_LENGTH(p_event), '/', COALESCE(CHAR_LENGTH(p_handler), ''), '//',
                             COALESCE(CHAR_LENGTH(p_metadata), ''), '/', p_event,
                             COALESCE(p_handler, '') COLLATE utf8mb4_bin, COALESCE(p_metadata, '') COLLATE utf8mb4_bin);
    BEGIN
      DECLARE CONTINUE HANDLER FOR 1062 SET v_dup = 2;
      UPDATE `fsm_{type}` SET data = COALESCE(p_data, data)
       WHERE instance_key = p_key AND version = COALESCE(p_expected_version, version);
      SET v_rows = ROW_COUNT();
    END;
    IF v_rows = 1 THEN
      -- @fsm_last: 'transition id/instance id/version/status/from/to' (bu_v14)
      SET o_tid = SUBSTRING_INDEX(@fsm_last, '/', 1),
          o_id = SUBSTRING_INDEX(SUBSTRING_INDEX(@fsm_last, '/', 2), '/', -1),
          o_version = SUBSTRING_INDEX(SUBSTRING_INDEX(@fsm_last, '/', 3), '/', -1),
          o_status = SUBSTRING_INDEX(SUBSTRING_INDEX(@fsm_last, '/', 4), '/', -1),
          o_from = SUBSTRING_INDEX(SUBSTRING_INDEX(@fsm_last, '/', 5), '/', -1),
          o_to = SUBSTRING_INDEX(@fsm_last, '/', -1);
      LEAVE proc;
    END IF;
    -- no row, or a failed write: the trigger took the context, or never ran
    SET @fsm_source = NULL;
    IF v_dup = 2 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: history unique key violated; history was written outside pyfsm', MYSQL_ERRNO = 31012;
    END IF;
  END IF;
  SELECT id, version INTO o_id, v_version FROM `fsm_{type}` WHERE instance_key = p_key FOR UPDATE;
  IF o_id IS NULL THEN
    IF p_expected_version > 0 THEN
      SET v_msg = LEFT(CONCAT('fsm: {type} ', COALESCE(p_key, 'NULL'), ' does not exist (expected version ', p_expected_version, ')'), 128);
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31007;
    END IF;
    SET v_start = (SELECT s.state FROM fsm_machines m
        JOIN fsm_states s ON s.machine = m.machine AND s.version = m.current_version AND s.is_start = 1
        JOIN fsm_rules r ON r.machine = s.machine AND r.version = s.version AND r.from_state = s.state
       WHERE m.machine = '{type}' AND r.event = p_event ORDER BY s.position LIMIT 1);
    IF v_start IS NULL THEN
      SET v_msg = LEFT(CONCAT('fsm: no {type} ', COALESCE(p_key, 'NULL'), ' and event ', COALESCE(p_event, 'NULL'), ' cannot create one'), 128);
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31003;
    END IF;
    SET @fsm_event = NULL, @fsm_request_id = NULL, @fsm_metadata = p_metadata, @fsm_handler = p_handler,
        @fsm_source = 'procedure', @fsm_count_later = 1;
    BEGIN
      DECLARE CONTINUE HANDLER FOR 1062 SET v_dup = 1;
      INSERT INTO `fsm_{type}` (instance_key, lookup_key, current_state) VALUES (p_key, p_lookup_key, v_start);
    END;
    SET @fsm_metadata = NULL, @fsm_handler = NULL, @fsm_source = NULL, @fsm_count_later = NULL;
    IF v_dup THEN
      -- another caller created it first: wait for its row (see above)
      SELECT id, version INTO o_id, v_version FROM `fsm_{type}` WHERE instance_key = p_key FOR UPDATE;
    ELSE
      SET o_id = LAST_INSERT_ID(), v_version = 1, o_created = 1;
    END IF;
  END IF;
  IF p_request_id IS NOT NULL THEN
    SELECT id, instance_id, event INTO o_tid, v_req_instance, v_req_event
      FROM `fsm_{type}_transitions` WHERE request_id = p_request_id;
    IF o_tid IS NOT NULL THEN
      IF NOT (v_req_instance <=> o_id AND v_req_event <=> p_event) THEN
        SET v_msg = LEFT(CONCAT('fsm: request id ', COALESCE(p_request_id, 'NULL'), ' was used for another transition'), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31010;
      END IF;
      SET o_replayed = 1;
      SELECT status INTO o_status FROM `fsm_{type}` WHERE id = o_id;
    END IF;
  END IF;
  IF o_replayed = 0 THEN
    -- checked after the request id, so that a repeat of a creating call replays
    IF p_expected_version IS NOT NULL AND o_created = 0 AND p_expected_version <> v_version THEN
      SET v_msg = LEFT(CONCAT('fsm: {type} ', COALESCE(p_key, 'NULL'), ' is at version ', COALESCE(v_version, 'NULL'), ', not ', COALESCE(p_expected_version, 'NULL')), 128);
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31007;
    END IF;
    -- the row is locked (or new): the UPDATE finds it and its trigger takes the context
    SET @fsm_source = CONCAT('ctx/p1/', CHAR_LENGTH(p_event), '/', COALESCE(CHAR_LENGTH(p_handler), ''), '/',
                             COALESCE(CHAR_LENGTH(p_request_id), ''), '/', COALESCE(CHAR_LENGTH(p_metadata), ''), '/',
                             p_event, COALESCE(p_handler, '') COLLATE utf8mb4_bin, COALESCE(p_request_id, ''),
                             COALESCE(p_metadata, '') COLLATE utf8mb4_bin);
    BEGIN
      DECLARE CONTINUE HANDLER FOR 1062 SET v_dup = 2;
      UPDATE `fsm_{type}` SET data = COALESCE(p_data, data) WHERE id = o_id;
    END;
    IF v_dup = 2 AND p_request_id IS NULL THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: history unique key violated; history was written outside pyfsm', MYSQL_ERRNO = 31012;
    END IF;
    IF v_dup = 2 THEN
      -- with the row lock held, only the request id can collide
      SET v_msg = LEFT(CONCAT('fsm: request id ', COALESCE(p_request_id, 'NULL'), ' was used for another transition'), 128);
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31010;
    END IF;
    SET o_tid = SUBSTRING_INDEX(@fsm_last, '/', 1),
        o_version = SUBSTRING_INDEX(SUBSTRING_INDEX(@fsm_last, '/', 3), '/', -1),
        o_status = SUBSTRING_INDEX(SUBSTRING_INDEX(@fsm_last, '/', 4), '/', -1),
        o_from = SUBSTRING_INDEX(SUBSTRING_INDEX(@fsm_last, '/', 5), '/', -1),
        o_to = SUBSTRING_INDEX(@fsm_last, '/', -1);
    LEAVE proc;
  END IF;
  -- a repeat: the original transition
  SELECT from_state, to_state, sort_key INTO o_from, o_to, o_version FROM `fsm_{type}_transitions` WHERE id = o_tid;
END
