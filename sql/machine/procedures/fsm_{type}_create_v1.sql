-- fsm_{type}_create_v1: create an instance of {type} explicitly, in a start state.
--
-- Parameters: p_key (required); p_state (NULL: the first start state); p_data (JSON
--   object, NULL for {}); p_metadata (JSON object recorded in history); p_request_id (a
--   repeated call with the same id returns the original creation, replayed = 1);
--   p_lookup_key (the account the instance belongs to, used for locking).
-- Result: one row, the same columns as fsm_{type}_send_v1 (event and from_state NULL).
-- Errors: 31004 an instance with this key exists; 31005 not a start state; 31008 invalid
--   data; 31009 invalid argument; 31010 request id used for another transition; 31016
--   called inside an open transaction.
-- Example: CALL `fsm_{type}_create_v1`('k-1', NULL, '{"total": 10}', NULL, NULL, 'account-7');
CREATE PROCEDURE `fsm_{type}_create_v1`(
  IN p_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_state TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_data LONGTEXT CHARACTER SET utf8mb4,
  IN p_metadata LONGTEXT CHARACTER SET utf8mb4,
  IN p_request_id TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_lookup_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_started TINYINT DEFAULT 0;
  DECLARE v_found TINYINT DEFAULT 1;
  DECLARE v_dup TINYINT DEFAULT 0;
  DECLARE v_id, v_tid BIGINT UNSIGNED;
  DECLARE v_replayed TINYINT DEFAULT 0;
  DECLARE v_req_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_req_event, v_to VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_status VARCHAR(16) CHARACTER SET utf8mb4;
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_found = 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    IF v_started THEN
      ROLLBACK;
    END IF;
    SET @fsm_metadata = NULL, @fsm_handler = NULL, @fsm_request_id = NULL, @fsm_source = NULL;
    RESIGNAL;
  END;
  CALL fsm_check_args_v1(p_key, NULL, p_data, p_metadata, p_request_id, NULL, p_lookup_key);
  IF p_state IS NOT NULL AND NOT fsm_valid_name_v1(p_state, 64) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: state must match [a-z][a-z0-9_]* and have at most 64 characters', MYSQL_ERRNO = 31009;
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
  SET @fsm_metadata = p_metadata, @fsm_request_id = p_request_id, @fsm_source = 'procedure';
  BEGIN
    DECLARE CONTINUE HANDLER FOR 1062 SET v_dup = 1;
    INSERT INTO `fsm_{type}` (instance_key, lookup_key, current_state, data)
    VALUES (p_key, p_lookup_key, p_state, COALESCE(p_data, '{}'));
  END;
  SET @fsm_metadata = NULL, @fsm_request_id = NULL, @fsm_source = NULL;
  -- A used request id always makes the INSERT fail on a unique key: the instance's (same
  -- key, perhaps a concurrent twin whose commit our INSERT waited for) or the history's
  -- (another key). So the request id is looked up only then.
  IF v_dup AND p_request_id IS NOT NULL THEN
    SELECT h.id, i.instance_key, h.event INTO v_tid, v_req_key, v_req_event
      FROM `fsm_{type}_transitions` h JOIN `fsm_{type}` i ON i.id = h.instance_id
     WHERE h.request_id = p_request_id;
    IF v_tid IS NOT NULL THEN
      IF NOT (v_req_key <=> p_key AND v_req_event IS NULL) THEN
        SET v_msg = LEFT(CONCAT('fsm: request id ', COALESCE(p_request_id, 'NULL'), ' was used for another transition'), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31010;
      END IF;
      SET v_replayed = 1, v_dup = 0;
    END IF;
  END IF;
  IF v_dup THEN
    SET v_msg = LEFT(CONCAT('fsm: {type} ', COALESCE(p_key, 'NULL'), ' already exists'), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31004;
  END IF;
  IF v_replayed = 0 THEN
    SET v_id = LAST_INSERT_ID(), v_tid = @fsm_last_transition_id;
  END IF;
  SELECT h.instance_id, h.to_state, i.status INTO v_id, v_to, v_status
    FROM `fsm_{type}_transitions` h JOIN `fsm_{type}` i ON i.id = h.instance_id WHERE h.id = v_tid;
  COMMIT;
  SELECT v_tid AS transition_id, v_id AS instance_id, p_key AS instance_key, NULL AS event,
         NULL AS from_state, v_to AS to_state, 1 AS sort_key, 1 AS version,
         v_status AS status, 1 - v_replayed AS created, v_replayed AS replayed;
END
