-- fsm___M___send_many_v1: send many events to instances of __M__ in one call and one transaction.
--
-- The bulk form of fsm___M___send_v2 (for a DBA moving many instances, and pyfsm's
-- Store.send_many): one call, one transaction and one commit for up to 1000 items, which is
-- most of what a transition costs the server. Each item is applied inside its own savepoint
-- by fsm___M___apply_send_v1, with every check send_v2 makes (the rule, the expected
-- version, the request id, locks, pause; creation of a missing instance when a start state
-- allows the event): an item that is refused is rolled back alone and reported with its
-- error number, and the others are committed. Nothing of a refused item is written. A
-- deadlock (1213) or a lock wait timeout (1205) rolls back the whole call and is raised,
-- so the caller can repeat it (pyfsm's Store does).
-- So that two calls, or a call and single sends, do not deadlock on each other's rows, the
-- instance rows of the items are locked first, in key order, then the state counter rows
-- they will move, in key order, and the items are applied in key order (those of one key in
-- the order given); the result keeps the order given.
-- Parameters: p_items: a JSON array of 1 to 1000 objects {"key": k, "event": e, "data":
--   {...}, "metadata": {...}, "expected_version": n, "request_id": r, "handler": h,
--   "lookup_key": l}, each as send_v2's arguments (only key and event are required).
-- Result: one row per item, in the order given: item (its position, from 1), instance_key,
--   then for an applied item transition_id, instance_id, from_state, to_state, version,
--   status, created, replayed (as send_v2) and errno and message NULL; for a refused item
--   errno and message (the others NULL).
-- Errors: 31009 p_items is not a JSON array of 1 to 1000 objects; 31016 inside an open
--   transaction; 1213 and 1205, the call rolled back as a whole.
-- Example: CALL `fsm___M___send_many_v1`('[{"key": "k-1", "event": "pay"}, {"key": "k-2", "event": "pay", "metadata": {"by": "dba"}}]');
CREATE PROCEDURE `fsm___M___send_many_v1`(IN p_items LONGTEXT CHARACTER SET utf8mb4)
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_started, v_done TINYINT DEFAULT 0;
  DECLARE v_n, v_pos INT DEFAULT 0;
  DECLARE v_item, v_data, v_metadata, v_version, v_out LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_tid, v_id, v_to_version BIGINT UNSIGNED;
  DECLARE v_from, v_to VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_status VARCHAR(16) CHARACTER SET utf8mb4;
  DECLARE v_created, v_replayed TINYINT;
  DECLARE v_errno INT;
  DECLARE v_error TEXT CHARACTER SET utf8mb4;
  DECLARE v_sorted_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  -- the items in key order (their position breaks ties), a key that is not a string last
  DECLARE v_items CURSOR FOR
    SELECT j.pos, CONVERT(j.k USING utf8mb4) COLLATE utf8mb4_bin
      FROM JSON_TABLE(p_items, '$[*]' COLUMNS (pos FOR ORDINALITY, k VARCHAR(255) PATH '$.key')) AS j
     ORDER BY j.k IS NULL, CONVERT(j.k USING utf8mb4) COLLATE utf8mb4_bin, j.pos;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    IF v_started THEN
      ROLLBACK;
    END IF;
    RESIGNAL;
  END;
  -- CASE: JSON_TYPE must never see invalid JSON (an error on MySQL)
  IF NOT (p_items IS NOT NULL AND CASE WHEN JSON_VALID(p_items) THEN JSON_TYPE(p_items) = 'ARRAY' ELSE 0 END) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: items must be a JSON array of 1 to 1000 objects', MYSQL_ERRNO = 31009;
  END IF;
  SET v_n = JSON_LENGTH(p_items);
  IF v_n NOT BETWEEN 1 AND 1000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: items must be a JSON array of 1 to 1000 objects', MYSQL_ERRNO = 31009;
  END IF;
  CALL fsm_begin_v1();  -- READ COMMITTED; 31016 inside a caller's transaction, left alone
  SET v_started = 1;
  -- Locks in the order every writer takes them: first the instance rows, in key order (a
  -- single send locks its one instance row first too), then the counter rows the items will
  -- move, in key order, before any item moves one. Otherwise two calls, or a call and a
  -- single send, can each hold a row the other waits for.
  OPEN v_items;
  locking: LOOP
    SET v_done = 0;
    FETCH v_items INTO v_pos, v_sorted_key;
    IF v_done THEN
      LEAVE locking;
    END IF;
    SELECT id INTO v_id FROM `fsm___M__` WHERE instance_key = v_sorted_key FOR UPDATE;
  END LOOP;
  CLOSE v_items;
  -- Only a lock: an existing counter row is left as it is, a missing one is created at 0.
  INSERT INTO fsm_state_counts (machine, state, shard, instances)
  SELECT '__M__', c.state, c.shard, 0 FROM (
    SELECT i.current_state AS state, i.id % 16 AS shard
      FROM JSON_TABLE(p_items, '$[*]' COLUMNS (k VARCHAR(191) PATH '$.key')) AS j
      JOIN `fsm___M__` i ON i.instance_key = CONVERT(j.k USING utf8mb4) COLLATE utf8mb4_bin
    UNION
    SELECT r.to_state, i.id % 16
      FROM JSON_TABLE(p_items, '$[*]' COLUMNS (k VARCHAR(191) PATH '$.key', e VARCHAR(64) PATH '$.event')) AS j
      JOIN `fsm___M__` i ON i.instance_key = CONVERT(j.k USING utf8mb4) COLLATE utf8mb4_bin
      JOIN fsm_rules r ON r.machine = '__M__' AND r.version = i.definition_version AND r.from_state = i.current_state
                      AND r.event = CONVERT(j.e USING utf8mb4) COLLATE utf8mb4_bin
  ) AS c
  ORDER BY c.state, c.shard
  ON DUPLICATE KEY UPDATE instances = instances;
  SET v_out = '';
  OPEN v_items;
  items: LOOP
    SET v_done = 0;
    FETCH v_items INTO v_pos, v_sorted_key;
    IF v_done THEN
      LEAVE items;
    END IF;
    SET v_item = JSON_EXTRACT(p_items, CONCAT('$[', v_pos - 1, ']'));
    SET v_key = NULL;
    SAVEPOINT fsm_item;
    item: BEGIN
      DECLARE EXIT HANDLER FOR SQLEXCEPTION
      BEGIN
        GET DIAGNOSTICS CONDITION 1 v_errno = MYSQL_ERRNO, v_error = MESSAGE_TEXT;
        IF v_errno IN (1205, 1213) THEN
          RESIGNAL;  -- the call as a whole: a deadlock has rolled it all back already
        END IF;
        ROLLBACK TO SAVEPOINT fsm_item;
        -- (+ 0: MariaDB's JSON_OBJECT writes a numeric routine variable as a string)
        SET v_out = CONCAT(v_out, IF(v_out = '', '', ','),
                           JSON_OBJECT('item', v_pos + 0, 'key', LEFT(v_key, 255), 'errno', v_errno + 0,
                                       'message', LEFT(v_error, 512)));
      END;
      -- the key first, so that a refusal names it whenever it is a string
      SET v_key = IF(JSON_TYPE(JSON_EXTRACT(v_item, '$.key')) = 'STRING', JSON_UNQUOTE(JSON_EXTRACT(v_item, '$.key')), NULL);
      IF JSON_TYPE(v_item) <> 'OBJECT' OR COALESCE(JSON_TYPE(JSON_EXTRACT(v_item, '$.key')), '') <> 'STRING'
         OR COALESCE(JSON_TYPE(JSON_EXTRACT(v_item, '$.event')), '') <> 'STRING' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: every item must be a JSON object with a string key and event', MYSQL_ERRNO = 31009;
      END IF;
      -- JSON_TYPE, not NULLIF(..., 'null'): on MySQL JSON_EXTRACT returns a JSON value
      SET v_data = JSON_EXTRACT(v_item, '$.data'), v_metadata = JSON_EXTRACT(v_item, '$.metadata'),
          v_version = JSON_EXTRACT(v_item, '$.expected_version');
      IF COALESCE(JSON_TYPE(v_version), 'NULL') NOT IN ('NULL', 'INTEGER', 'UNSIGNED INTEGER') THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: expected_version must be a whole number or null', MYSQL_ERRNO = 31009;
      END IF;
      IF COALESCE(JSON_TYPE(JSON_EXTRACT(v_item, '$.request_id')), 'NULL') NOT IN ('NULL', 'STRING')
         OR COALESCE(JSON_TYPE(JSON_EXTRACT(v_item, '$.handler')), 'NULL') NOT IN ('NULL', 'STRING')
         OR COALESCE(JSON_TYPE(JSON_EXTRACT(v_item, '$.lookup_key')), 'NULL') NOT IN ('NULL', 'STRING') THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: request_id, handler and lookup_key must be strings or null', MYSQL_ERRNO = 31009;
      END IF;
      CALL `fsm___M___apply_send_v1`(
        v_key, JSON_UNQUOTE(JSON_EXTRACT(v_item, '$.event')),
        IF(COALESCE(JSON_TYPE(v_data), 'NULL') = 'NULL', NULL, v_data),
        IF(COALESCE(JSON_TYPE(v_metadata), 'NULL') = 'NULL', NULL, v_metadata),
        IF(COALESCE(JSON_TYPE(v_version), 'NULL') = 'NULL', NULL, v_version),
        IF(JSON_TYPE(JSON_EXTRACT(v_item, '$.request_id')) = 'STRING', JSON_UNQUOTE(JSON_EXTRACT(v_item, '$.request_id')), NULL),
        IF(JSON_TYPE(JSON_EXTRACT(v_item, '$.handler')) = 'STRING', JSON_UNQUOTE(JSON_EXTRACT(v_item, '$.handler')), NULL),
        IF(JSON_TYPE(JSON_EXTRACT(v_item, '$.lookup_key')) = 'STRING', JSON_UNQUOTE(JSON_EXTRACT(v_item, '$.lookup_key')), NULL),
        v_tid, v_id, v_from, v_to, v_to_version, v_status, v_created, v_replayed);
      SET v_out = CONCAT(v_out, IF(v_out = '', '', ','),
                         JSON_OBJECT('item', v_pos + 0, 'key', v_key, 'transition_id', v_tid + 0, 'instance_id', v_id + 0,
                                     'from_state', v_from, 'to_state', v_to, 'version', v_to_version + 0,
                                     'status', v_status, 'created', v_created + 0, 'replayed', v_replayed + 0));
    END item;
  END LOOP;
  CLOSE v_items;
  COMMIT;
  SELECT r.item, r.instance_key, r.transition_id, r.instance_id, r.from_state, r.to_state, r.version, r.status,
         r.created, r.replayed, r.errno, r.message
    FROM JSON_TABLE(CONCAT('[', v_out, ']'), '$[*]' COLUMNS (
           item INT PATH '$.item', instance_key VARCHAR(255) PATH '$.key',
           transition_id BIGINT UNSIGNED PATH '$.transition_id', instance_id BIGINT UNSIGNED PATH '$.instance_id',
           from_state VARCHAR(64) PATH '$.from_state', to_state VARCHAR(64) PATH '$.to_state',
           version BIGINT UNSIGNED PATH '$.version', status VARCHAR(16) PATH '$.status',
           created TINYINT PATH '$.created', replayed TINYINT PATH '$.replayed',
           errno INT PATH '$.errno', message VARCHAR(512) PATH '$.message')) AS r
   ORDER BY r.item;
END
