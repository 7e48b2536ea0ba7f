-- fsm_account_history_sql_v1: the statement fsm_account_history_v1 runs (internal).
--
-- Checks the arguments and returns one SELECT: a branch per installed machine type (object
-- set v3 or later) that joins the account's instances (index on lookup_key, forced: the plan
-- starts there whatever the statistics say) to their history (index on instance_id), keeps
-- the rows after the cursor, sorts them by entered_at and id and stops after p_limit rows;
-- with more than one branch, a UNION ALL of them is sorted by entered_at, machine,
-- transition_id and cut to p_limit. The lookup key is written into the text as a hex literal,
-- the cursor's time as digits; the limit and the cursor's id are checked numbers, and machine
-- names come from fsm_machines and are checked again. A DBA may EXPLAIN the text to see the
-- procedure's plan.
-- Parameters: those of fsm_account_history_v1.
-- Returns: the statement (LONGTEXT).
-- Errors: those of fsm_account_history_v1 (31009, 31024).
-- Example: SELECT fsm_account_history_sql_v1('customer-7', 1, NULL, NULL, NULL, 50);
CREATE FUNCTION `fsm_account_history_sql_v1`(
  p_lookup_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  p_newest_first TINYINT,
  p_after_at DATETIME(6),
  p_after_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  p_after_id BIGINT,
  p_limit INT)
RETURNS LONGTEXT CHARACTER SET utf8mb4 NOT DETERMINISTIC READS SQL DATA SQL SECURITY INVOKER
BEGIN
  DECLARE v_machine VARCHAR(48) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL;
  DECLARE v_branch, v_sql LONGTEXT CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_key, v_at, v_after TEXT CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_branches INT DEFAULT 0;
  DECLARE v_desc TINYINT DEFAULT COALESCE(p_newest_first, 1);
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  -- Lookup keys may not end in a space: utf8mb4_bin pads, so 'k ' and 'k' are the same key.
  IF p_lookup_key IS NULL OR CHAR_LENGTH(p_lookup_key) NOT BETWEEN 1 AND 191 OR p_lookup_key LIKE '% ' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: lookup_key must be 1 to 191 characters, not ending in a space', MYSQL_ERRNO = 31009;
  END IF;
  IF NOT fsm_valid_utf8_v1(CAST(p_lookup_key AS BINARY)) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: lookup_key must be valid UTF-8 (no encoded surrogates)', MYSQL_ERRNO = 31024;
  END IF;
  IF v_desc NOT IN (0, 1) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: newest_first must be 1 (newest first), 0 (oldest first) or NULL', MYSQL_ERRNO = 31009;
  END IF;
  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: limit must be between 1 and 10000', MYSQL_ERRNO = 31009;
  END IF;
  IF NOT ((p_after_at IS NULL AND p_after_machine IS NULL AND p_after_id IS NULL)
          OR (p_after_at IS NOT NULL AND p_after_machine IS NOT NULL AND p_after_id IS NOT NULL)) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: cursor: give after_at, after_machine and after_id (the last row of a page), or none', MYSQL_ERRNO = 31009;
  END IF;
  IF p_after_machine IS NOT NULL AND NOT fsm_valid_name_v1(p_after_machine, 48) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: cursor: after_machine must match [a-z][a-z0-9_]* and have at most 48 characters', MYSQL_ERRNO = 31009;
  END IF;
  IF p_after_id < 0 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: cursor: after_id must be 0 or more', MYSQL_ERRNO = 31009;
  END IF;
  -- Values reach the statement as literals that cannot break out of it: the key as hex, the
  -- cursor's time in digits; names are checked above.
  SET v_key = CONCAT('_utf8mb4 X''', HEX(p_lookup_key), ''' COLLATE utf8mb4_bin');
  SET v_at = CONCAT('CAST(''', DATE_FORMAT(p_after_at, '%Y-%m-%d %H:%i:%s.%f'), ''' AS DATETIME(6))');
  SET v_machine = (SELECT m.`machine` FROM fsm_machines m
                    WHERE m.`objects_version` IS NOT NULL AND m.`objects_version` NOT IN ('v1', 'v2')
                    ORDER BY m.`machine` LIMIT 1);
  WHILE v_machine IS NOT NULL DO
    IF NOT fsm_valid_name_v1(v_machine, 48) THEN  -- never true for a defined type: nothing unchecked reaches SQL
      SET v_msg = LEFT(CONCAT('fsm: a machine type has an invalid name: ', v_machine), 128);
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31009;
    END IF;
    -- The rows of this type after the cursor (entered_at, machine, id) in the page order. Oldest
    -- first: a type before the cursor's (byte order) only later times, a type after it the
    -- cursor's time too, the cursor's own type later ids at that time. Newest first, mirrored:
    -- a type before the cursor's comes after it at the same time, a type after it does not.
    SET v_after = CASE
      WHEN p_after_at IS NULL THEN ''
      WHEN v_machine < p_after_machine THEN CONCAT(' AND h.`created_at` ', IF(v_desc, '<=', '>'), ' ', v_at)
      WHEN v_machine > p_after_machine THEN CONCAT(' AND h.`created_at` ', IF(v_desc, '<', '>='), ' ', v_at)
      ELSE CONCAT(' AND (h.`created_at` ', IF(v_desc, '<', '>'), ' ', v_at, ' OR (h.`created_at` = ', v_at,
                  ' AND h.`id` ', IF(v_desc, '<', '>'), ' ', p_after_id, '))') END;
    SET v_branch = CONCAT(
      'SELECT h.`id` AS `transition_id`, _utf8mb4''', v_machine, ''' COLLATE utf8mb4_bin AS `machine`, ',
      'i.`instance_key`, i.`lookup_key`, h.`instance_id`, h.`sort_key`, h.`event`, h.`from_state`, h.`to_state`, ',
      'h.`handler`, h.`source`, h.`request_id`, h.`definition_version`, h.`data_before`, h.`data_after`, ',
      'h.`metadata`, h.`created_at` AS `entered_at`, h.`left_at`, ',
      'TIMESTAMPDIFF(MICROSECOND, h.`created_at`, COALESCE(h.`left_at`, UTC_TIMESTAMP(6))) * 0.000001 AS `seconds_in_state`, ',
      'h.`most_recent` IS NOT NULL AS `is_current` ',
      'FROM `fsm_', v_machine, '` i FORCE INDEX (`fsm_', v_machine, '_lookup`) ',
      'JOIN `fsm_', v_machine, '_transitions` h ON h.`instance_id` = i.`id` ',
      'WHERE i.`lookup_key` = ', v_key, v_after,
      ' ORDER BY h.`created_at`', IF(v_desc, ' DESC', ''), ', h.`id`', IF(v_desc, ' DESC', ''), ' LIMIT ', p_limit);
    SET v_sql = IF(v_branches = 0, v_branch, CONCAT(IF(v_branches = 1, CONCAT('(', v_sql, ')'), v_sql),
                                                   ' UNION ALL (', v_branch, ')'));
    SET v_branches = v_branches + 1;
    SET v_machine = (SELECT m.`machine` FROM fsm_machines m
                      WHERE m.`machine` > v_machine
                        AND m.`objects_version` IS NOT NULL AND m.`objects_version` NOT IN ('v1', 'v2')
                      ORDER BY m.`machine` LIMIT 1);
  END WHILE;
  IF v_branches = 0 THEN  -- no machine type installed yet: an empty page
    RETURN CONCAT(
      'SELECT CAST(NULL AS UNSIGNED) AS `transition_id`, CAST(NULL AS CHAR(48)) AS `machine`, NULL AS `instance_key`, ',
      'NULL AS `lookup_key`, NULL AS `instance_id`, NULL AS `sort_key`, NULL AS `event`, NULL AS `from_state`, ',
      'NULL AS `to_state`, NULL AS `handler`, NULL AS `source`, NULL AS `request_id`, NULL AS `definition_version`, ',
      'NULL AS `data_before`, NULL AS `data_after`, NULL AS `metadata`, NULL AS `entered_at`, NULL AS `left_at`, ',
      'NULL AS `seconds_in_state`, NULL AS `is_current` FROM DUAL WHERE FALSE');
  END IF;
  IF v_branches > 1 THEN  -- the merge: at most p_limit rows per type, sorted, cut
    SET v_sql = CONCAT(v_sql, ' ORDER BY `entered_at`', IF(v_desc, ' DESC', ''), ', `machine`',
                       IF(v_desc, ' DESC', ''), ', `transition_id`', IF(v_desc, ' DESC', ''), ' LIMIT ', p_limit);
  END IF;
  RETURN v_sql;
END
