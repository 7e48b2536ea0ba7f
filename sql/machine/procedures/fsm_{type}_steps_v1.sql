-- fsm_{type}_steps_v1: commit the steps of several claimed instances of {type} in one transaction.
--
-- What fsm_{type}_step_v2 does for one instance, for a batch of them (a worker running the
-- instances it claimed side by side): one call, one transaction, one commit for all of them,
-- which is most of what a step costs the server. Each instance is still committed after each
-- of its steps; only instances are grouped, never the steps of one instance.
-- Each item is applied inside its own savepoint by fsm_{type}_apply_step_v1, with the same
-- checks as step_v2 (the claim, the expected version, every transition through the
-- trigger): an item that fails is rolled back alone and reported with its error number,
-- and the others are committed. A deadlock (1213) or a lock wait timeout (1205) rolls back
-- the whole batch and is raised, so the caller can repeat it or commit the items one by one.
-- So that two batches never deadlock on the state counters, the counter rows of every item's
-- first step (its current state and the rule's target, in its shard) are locked first, in
-- key order, with one statement.
-- Parameters: p_owner (the claims' owner), p_claim_seconds (0.1 to 86400), p_items: a JSON
--   array of 1 to 1000 objects {"key": k, "version": expected version, "steps": [{"event":
--   e, "handler": h, "data": {...}}, ...], "status": s, "continue": 0 or 1,
--   "requeue_seconds": n or null, "data": {...} or null}, each as step_v2's arguments.
-- Result: one row, one column `results`: a JSON array with an object per item, in order:
--   {"key", "instance_id", "state", "status", "version", "continue"} when it was applied,
--   {"key", "errno", "message"} when it was refused (nothing of it was written).
-- Errors: 31009 p_owner, p_claim_seconds or p_items invalid; 31016 inside an open
--   transaction; 1213 and 1205, the batch rolled back as a whole.
-- Example: CALL `fsm_{type}_steps_v1`('worker-1:ab12', 60, '[{"key": "k-1", "version": 3, "steps": [{"event": "pay", "handler": "charge", "data": {}}], "status": "running", "continue": 1}, {"key": "k-2", "version": 7, "steps": [], "status": "completed", "continue": 0}]');
CREATE PROCEDURE `fsm_{type}_steps_v1`(
  IN p_owner TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_claim_seconds DECIMAL(12,3),
  IN p_items LONGTEXT CHARACTER SET utf8mb4)
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_started TINYINT DEFAULT 0;
  DECLARE v_k, v_n INT DEFAULT 0;
  DECLARE v_item, v_steps, v_data, v_requeue, v_out LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_id, v_version BIGINT UNSIGNED;
  DECLARE v_state VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_status VARCHAR(16) CHARACTER SET utf8mb4;
  DECLARE v_continue TINYINT;
  DECLARE v_errno INT;
  DECLARE v_error TEXT CHARACTER SET utf8mb4;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    IF v_started THEN
      ROLLBACK;
    END IF;
    RESIGNAL;
  END;
  IF p_owner IS NULL OR CHAR_LENGTH(p_owner) NOT BETWEEN 1 AND 64
     OR p_claim_seconds IS NULL OR p_claim_seconds NOT BETWEEN 0.1 AND 86400 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: owner must be 1 to 64 characters and claim_seconds 0.1 to 86400', MYSQL_ERRNO = 31009;
  END IF;
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
  -- The counter rows the first steps will move, locked in key order before any of them:
  -- otherwise two batches take them in their items' order and can deadlock. Only a lock:
  -- an existing row is left as it is, a missing one is created at 0.
  INSERT INTO fsm_state_counts (machine, state, shard, instances)
  SELECT '{type}', c.state, c.shard, 0 FROM (
    SELECT i.current_state AS state, i.id % 16 AS shard
      FROM JSON_TABLE(p_items, '$[*]' COLUMNS (k VARCHAR(191) PATH '$.key', e VARCHAR(64) PATH '$.steps[0].event')) AS j
      JOIN `fsm_{type}` i ON i.instance_key = CONVERT(j.k USING utf8mb4) COLLATE utf8mb4_bin
     WHERE j.e IS NOT NULL
    UNION
    SELECT r.to_state, i.id % 16
      FROM JSON_TABLE(p_items, '$[*]' COLUMNS (k VARCHAR(191) PATH '$.key', e VARCHAR(64) PATH '$.steps[0].event')) AS j
      JOIN `fsm_{type}` i ON i.instance_key = CONVERT(j.k USING utf8mb4) COLLATE utf8mb4_bin
      JOIN fsm_rules r ON r.machine = '{type}' AND r.version = i.definition_version AND r.from_state = i.current_state
                      AND r.event = CONVERT(j.e USING utf8mb4) COLLATE utf8mb4_bin
  ) AS c
  ORDER BY c.state, c.shard
  ON DUPLICATE KEY UPDATE instances = instances;
  SET v_out = '';
  -- (+ 0 below: MariaDB's JSON_OBJECT writes a numeric routine variable as a string)
  WHILE v_k < v_n DO
    SET v_item = JSON_EXTRACT(p_items, CONCAT('$[', v_k, ']'));
    SET v_key = JSON_UNQUOTE(JSON_EXTRACT(v_item, '$.key'));
    SAVEPOINT fsm_item;
    item: BEGIN
      DECLARE EXIT HANDLER FOR SQLEXCEPTION
      BEGIN
        GET DIAGNOSTICS CONDITION 1 v_errno = MYSQL_ERRNO, v_error = MESSAGE_TEXT;
        IF v_errno IN (1205, 1213) THEN
          RESIGNAL;  -- the batch as a whole: a deadlock has rolled it all back already
        END IF;
        ROLLBACK TO SAVEPOINT fsm_item;
        SET v_out = CONCAT(v_out, IF(v_k > 0, ',', ''),
                           JSON_OBJECT('key', v_key, 'errno', v_errno + 0, 'message', v_error));
      END;
      IF JSON_TYPE(v_item) <> 'OBJECT' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: every item must be a JSON object', MYSQL_ERRNO = 31009;
      END IF;
      -- JSON_TYPE, not NULLIF(..., 'null'): on MySQL JSON_EXTRACT returns a JSON value, which a
      -- string never equals
      SET v_steps = JSON_EXTRACT(v_item, '$.steps'), v_data = JSON_EXTRACT(v_item, '$.data'),
          v_requeue = JSON_EXTRACT(v_item, '$.requeue_seconds');
      CALL `fsm_{type}_apply_step_v1`(
        v_key, p_owner, JSON_EXTRACT(v_item, '$.version'), v_steps,
        JSON_UNQUOTE(JSON_EXTRACT(v_item, '$.status')), JSON_EXTRACT(v_item, '$.continue'), p_claim_seconds,
        IF(JSON_TYPE(v_requeue) = 'NULL', NULL, v_requeue),
        IF(JSON_TYPE(v_data) = 'NULL', NULL, v_data),
        v_id, v_state, v_status, v_version, v_continue);
      SET v_out = CONCAT(v_out, IF(v_k > 0, ',', ''),
                         JSON_OBJECT('key', v_key, 'instance_id', v_id + 0, 'state', v_state, 'status', v_status,
                                     'version', v_version + 0, 'continue', v_continue + 0));
    END item;
    SET v_k = v_k + 1;
  END WHILE;
  COMMIT;
  SELECT CONCAT('[', v_out, ']') AS results;
END
