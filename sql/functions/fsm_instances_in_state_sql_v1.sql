-- fsm_instances_in_state_sql_v1: the statement fsm_instances_in_state_v1 runs (internal).
--
-- Checks the arguments and returns one SELECT: a branch per installed machine type (object
-- set v3 or later) whose definitions, any version, have the state, from the cursor's type on.
-- Each branch reads its type's index (current_state, id), forced (on a small table the
-- optimizer may prefer to walk the primary key in id order, whose cost depends on where the
-- state's rows lie), and stops after p_limit rows; with more than one branch, a UNION ALL of
-- them is sorted by machine, id and cut to p_limit. The state, the cursor's id and the limit
-- are checked before they are written into the text as literals; machine names come from
-- fsm_machines and are checked again. A DBA may EXPLAIN the text to see the procedure's plan.
-- Parameters: those of fsm_instances_in_state_v1.
-- Returns: the statement (LONGTEXT).
-- Errors: those of fsm_instances_in_state_v1 (31009).
-- Example: SELECT fsm_instances_in_state_sql_v1('paid', NULL, NULL, 50);
CREATE FUNCTION `fsm_instances_in_state_sql_v1`(
  p_state TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  p_after_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  p_after_id BIGINT,
  p_limit INT)
RETURNS LONGTEXT CHARACTER SET utf8mb4 NOT DETERMINISTIC READS SQL DATA SQL SECURITY INVOKER
BEGIN
  DECLARE v_machine VARCHAR(48) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL;
  DECLARE v_branch, v_sql LONGTEXT CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_branches INT DEFAULT 0;
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  IF NOT fsm_valid_name_v1(p_state, 64) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: state must match [a-z][a-z0-9_]* and have at most 64 characters', MYSQL_ERRNO = 31009;
  END IF;
  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: limit must be between 1 and 10000', MYSQL_ERRNO = 31009;
  END IF;
  IF (p_after_machine IS NULL) <> (p_after_id IS NULL) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: cursor: give both after_machine and after_id (the last row of a page), or neither', MYSQL_ERRNO = 31009;
  END IF;
  IF p_after_machine IS NOT NULL AND NOT fsm_valid_name_v1(p_after_machine, 48) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: cursor: after_machine must match [a-z][a-z0-9_]* and have at most 48 characters', MYSQL_ERRNO = 31009;
  END IF;
  IF p_after_id < 0 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: cursor: after_id must be 0 or more', MYSQL_ERRNO = 31009;
  END IF;
  SET v_machine = (SELECT m.`machine` FROM fsm_machines m
                    WHERE m.`machine` >= COALESCE(p_after_machine, '')
                      AND m.`objects_version` IS NOT NULL AND m.`objects_version` NOT IN ('v1', 'v2')
                      AND EXISTS (SELECT 1 FROM fsm_states s WHERE s.`machine` = m.`machine` AND s.`state` = p_state)
                    ORDER BY m.`machine` LIMIT 1);
  WHILE v_machine IS NOT NULL DO
    IF NOT fsm_valid_name_v1(v_machine, 48) THEN  -- never true for a defined type: nothing unchecked reaches SQL
      SET v_msg = LEFT(CONCAT('fsm: a machine type has an invalid name: ', v_machine), 128);
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31009;
    END IF;
    SET v_branch = CONCAT(
      'SELECT i.`id`, _utf8mb4''', v_machine, ''' COLLATE utf8mb4_bin AS `machine`, i.`instance_key`, i.`lookup_key`, ',
      'i.`current_state`, i.`status`, i.`resume_from_step`, i.`save_after_step`, i.`kafka_topic`, i.`data`, ',
      'i.`created_at`, i.`updated_at`, i.`uses_global_lock`, i.`uses_local_lock`, i.`unlocked_at`, i.`last_retry_at`, ',
      'i.`definition_version`, i.`version`, h.`created_at` AS `in_state_since`, ',
      'TIMESTAMPDIFF(MICROSECOND, h.`created_at`, UTC_TIMESTAMP(6)) * 0.000001 AS `seconds_in_state` ',
      'FROM `fsm_', v_machine, '` i FORCE INDEX (`fsm_', v_machine, '_state`) ',
      'LEFT JOIN `fsm_', v_machine, '_transitions` h ',
      'ON h.`instance_id` = i.`id` AND h.`most_recent` = 1 ',
      'WHERE i.`current_state` = ''', p_state, '''',
      IF(v_machine = p_after_machine, CONCAT(' AND i.`id` > ', p_after_id), ''),
      ' ORDER BY i.`id` LIMIT ', p_limit);
    SET v_sql = IF(v_branches = 0, v_branch, CONCAT(IF(v_branches = 1, CONCAT('(', v_sql, ')'), v_sql),
                                                   ' UNION ALL (', v_branch, ')'));
    SET v_branches = v_branches + 1;
    SET v_machine = (SELECT m.`machine` FROM fsm_machines m
                      WHERE m.`machine` > v_machine
                        AND m.`objects_version` IS NOT NULL AND m.`objects_version` NOT IN ('v1', 'v2')
                        AND EXISTS (SELECT 1 FROM fsm_states s WHERE s.`machine` = m.`machine` AND s.`state` = p_state)
                      ORDER BY m.`machine` LIMIT 1);
  END WHILE;
  IF v_branches = 0 AND NOT EXISTS (SELECT 1 FROM fsm_states WHERE `state` = p_state) THEN
    SET v_msg = LEFT(CONCAT('fsm: ', p_state, ' is not a state of any machine type'), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31009;
  END IF;
  IF v_branches = 0 THEN  -- no installed type has the state from the cursor on: an empty page
    RETURN CONCAT(
      'SELECT CAST(NULL AS UNSIGNED) AS `id`, CAST(NULL AS CHAR(48)) AS `machine`, NULL AS `instance_key`, ',
      'NULL AS `lookup_key`, NULL AS `current_state`, NULL AS `status`, NULL AS `resume_from_step`, ',
      'NULL AS `save_after_step`, NULL AS `kafka_topic`, NULL AS `data`, NULL AS `created_at`, NULL AS `updated_at`, ',
      'NULL AS `uses_global_lock`, NULL AS `uses_local_lock`, NULL AS `unlocked_at`, NULL AS `last_retry_at`, ',
      'NULL AS `definition_version`, NULL AS `version`, NULL AS `in_state_since`, NULL AS `seconds_in_state` ',
      'FROM DUAL WHERE FALSE');
  END IF;
  IF v_branches > 1 THEN  -- the merge: at most p_limit rows per type, sorted, cut
    SET v_sql = CONCAT(v_sql, ' ORDER BY `machine`, `id` LIMIT ', p_limit);
  END IF;
  RETURN v_sql;
END
