-- fsm_{type}_send_many_v3: send many events to instances of {type} in one call and one transaction.
--
-- fsm_{type}_send_many_v2 with one more item field, "data_patch": a JSON merge patch (RFC
-- 7396) applied to the instance's data (read under its row lock, in the item's savepoint)
-- before the rules' guards judge it, as fsm_{type}_send_v5's p_data_patch. Everything else is
-- send_many_v2's, described below.
--
-- The bulk form of fsm_{type}_send_v2 (for a DBA moving many instances, and pyfsm's
-- Store.send_many): one call, one transaction and one commit for up to 1000 items, which is
-- most of what a transition costs the server. Each item is applied inside its own savepoint
-- by fsm_{type}_apply_send_v1, with every check send_v2 makes (the rule, the expected
-- version, the request id, locks, pause; creation of a missing instance when a start state
-- allows the event): an item that is refused is rolled back alone and reported with its
-- error number, and the others are committed. Nothing of a refused item is written. A
-- deadlock (1213) or a lock wait timeout (1205) rolls back the whole call and is raised,
-- so the caller can repeat it (pyfsm's Store does).
-- So that two calls, or a call and single sends, do not deadlock on each other's rows, the
-- items are applied in the order of their instances' ids (new keys last, in key order; those
-- of one key in the order given), so their instance rows and history keys are locked in one
-- order, and the state counters of all of them are moved at the end
-- with one statement, in key order (the triggers leave them to this call, see
-- fsm_{type}_apply_send_v1): a single send too locks its instance row before counter rows,
-- and concurrent calls hold the counter rows only from that statement to the commit. The
-- result keeps the order given.
-- v2 (revision 0018) does what v1 did, and sorts items of any size on MySQL: the items are
-- sorted with their text, and MySQL's filesort refuses (1038, out of sort memory) a row
-- larger than its sort buffer (256 KiB by default), so an item of 400 kB failed the whole
-- call there. The session's sort_buffer_size is raised for the cursor's sort to hold the
-- whole call (it is allocated as the sort needs it) and set back right after.
-- Parameters: p_items: a JSON array of 1 to 1000 objects {"key": k, "event": e, "data":
--   {...}, "data_patch": {...}, "metadata": {...}, "expected_version": n, "request_id": r,
--   "handler": h, "lookup_key": l}, each as send_v5's arguments (only key and event are
--   required; an item with both data and data_patch is refused with 31009, a data_patch that
--   is not an object with 31008).
-- Result: one row per item, in the order given: item (its position, from 1), instance_key,
--   then for an applied item transition_id, instance_id, from_state, to_state, version,
--   status, created, replayed (as send_v2) and errno and message NULL; for a refused item
--   errno and message (the others NULL).
-- Errors: 31009 p_items is not a JSON array of 1 to 1000 objects; 31016 inside an open
--   transaction; 1213 and 1205, the call rolled back as a whole.
-- Example: CALL `fsm_{type}_send_many_v3`('[{"key": "k-1", "event": "pay"}, {"key": "k-2", "event": "pay", "data_patch": {"card": "visa"}}]');
CREATE PROCEDURE `fsm_{type}_send_many_v3`(IN p_items LONGTEXT CHARACTER SET utf8mb4)
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_started, v_done TINYINT DEFAULT 0;
  DECLARE v_n, v_pos INT DEFAULT 0;
  DECLARE v_item, v_data, v_patch, v_metadata, v_version, v_out, v_counts LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_tid, v_id, v_to_version BIGINT UNSIGNED;
  DECLARE v_from, v_to VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_status VARCHAR(16) CHARACTER SET utf8mb4;
  DECLARE v_created, v_replayed TINYINT;
  DECLARE v_errno INT;
  DECLARE v_error TEXT CHARACTER SET utf8mb4;
  DECLARE v_sort_buffer BIGINT UNSIGNED DEFAULT @@SESSION.sort_buffer_size;
  -- the items in the order of their instances' ids (the order of the history's unique keys
  -- too, so calls take those locks in one order), then new keys in key order; the items of
  -- one key keep the order given
  DECLARE v_items CURSOR FOR
    SELECT j.pos, j.item
      FROM JSON_TABLE(p_items, '$[*]' COLUMNS (pos FOR ORDINALITY, item JSON PATH '$', k VARCHAR(255) PATH '$.key')) AS j
      LEFT JOIN `fsm_{type}` i ON i.instance_key = CONVERT(j.k USING utf8mb4) COLLATE utf8mb4_bin
     ORDER BY i.id IS NULL, i.id, j.k IS NULL, CONVERT(j.k USING utf8mb4) COLLATE utf8mb4_bin, j.pos;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    SET SESSION sort_buffer_size = v_sort_buffer;
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
  SET v_out = '', v_counts = '';
  -- the cursor is sorted and materialised when it is opened: room for the whole call there
  SET SESSION sort_buffer_size = CAST(GREATEST(v_sort_buffer, 2 * LENGTH(p_items) + 1048576) AS UNSIGNED);
  OPEN v_items;
  SET SESSION sort_buffer_size = v_sort_buffer;
  items: LOOP
    SET v_done = 0;
    FETCH v_items INTO v_pos, v_item;  -- the item itself: no parse of the whole array per item
    IF v_done THEN
      LEAVE items;
    END IF;
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
      IF COALESCE(JSON_TYPE(v_item), '') <> 'OBJECT' OR COALESCE(JSON_TYPE(JSON_EXTRACT(v_item, '$.key')), '') <> 'STRING'
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
      SET v_patch = JSON_EXTRACT(v_item, '$.data_patch');
      IF COALESCE(JSON_TYPE(v_patch), 'NULL') <> 'NULL' THEN
        IF JSON_TYPE(v_patch) <> 'OBJECT' THEN
          SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: data_patch must be a JSON object', MYSQL_ERRNO = 31008;
        END IF;
        IF COALESCE(JSON_TYPE(v_data), 'NULL') <> 'NULL' THEN
          SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: give data (it replaces the data) or data_patch (it is merged into it), not both', MYSQL_ERRNO = 31009;
        END IF;
        -- the data as it is now, under the row lock the item takes anyway (no row: a new
        -- instance, whose data starts as {}); SELECT ... INTO no row leaves v_data NULL (the
        -- NOT FOUND handler above only marks v_done, which the next FETCH sets again)
        SET v_data = NULL;
        SELECT data INTO v_data FROM `fsm_{type}` WHERE instance_key = v_key FOR UPDATE;
        SET v_data = JSON_MERGE_PATCH(COALESCE(v_data, '{}'), v_patch);
      END IF;
      CALL `fsm_{type}_apply_send_v1`(
        v_key, JSON_UNQUOTE(JSON_EXTRACT(v_item, '$.event')),
        IF(COALESCE(JSON_TYPE(v_data), 'NULL') = 'NULL', NULL, v_data),
        IF(COALESCE(JSON_TYPE(v_metadata), 'NULL') = 'NULL', NULL, v_metadata),
        IF(COALESCE(JSON_TYPE(v_version), 'NULL') = 'NULL', NULL, v_version),
        IF(JSON_TYPE(JSON_EXTRACT(v_item, '$.request_id')) = 'STRING', JSON_UNQUOTE(JSON_EXTRACT(v_item, '$.request_id')), NULL),
        IF(JSON_TYPE(JSON_EXTRACT(v_item, '$.handler')) = 'STRING', JSON_UNQUOTE(JSON_EXTRACT(v_item, '$.handler')), NULL),
        IF(JSON_TYPE(JSON_EXTRACT(v_item, '$.lookup_key')) = 'STRING', JSON_UNQUOTE(JSON_EXTRACT(v_item, '$.lookup_key')), NULL),
        v_tid, v_id, v_from, v_to, v_to_version, v_status, v_created, v_replayed);
      -- what the item moved in the state counters (the triggers left them to this call):
      -- [state, shard, +1 or -1] entries, summed at the end
      IF v_replayed = 0 AND NOT (CAST(v_from AS BINARY) <=> CAST(v_to AS BINARY) AND v_created = 0) THEN
        SET v_counts = CONCAT(v_counts, IF(v_counts = '', '', ','), JSON_ARRAY(v_to, v_id % 16, 1),
                              IF(v_created, '', CONCAT(',', JSON_ARRAY(v_from, v_id % 16, -1))));
      END IF;
      SET v_out = CONCAT(v_out, IF(v_out = '', '', ','),
                         JSON_OBJECT('item', v_pos + 0, 'key', v_key, 'transition_id', v_tid + 0, 'instance_id', v_id + 0,
                                     'from_state', v_from, 'to_state', v_to, 'version', v_to_version + 0,
                                     'status', v_status, 'created', v_created + 0, 'replayed', v_replayed + 0));
    END item;
  END LOOP;
  CLOSE v_items;
  -- The counter rows of all the items at once, in key order, just before the commit: held
  -- for a moment rather than for the whole call, and never before an instance row.
  IF v_counts <> '' THEN
    INSERT INTO fsm_state_counts (machine, state, shard, instances)
    SELECT '{type}', d.state, d.shard, d.delta FROM (
      SELECT c.state, c.shard, SUM(c.delta) AS delta
        FROM JSON_TABLE(CONCAT('[', v_counts, ']'), '$[*]' COLUMNS (
               state VARCHAR(64) PATH '$[0]', shard INT PATH '$[1]', delta INT PATH '$[2]')) AS c
       GROUP BY c.state, c.shard) AS d
     WHERE d.delta <> 0
     ORDER BY d.state, d.shard
    ON DUPLICATE KEY UPDATE instances = instances + d.delta;
  END IF;
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
