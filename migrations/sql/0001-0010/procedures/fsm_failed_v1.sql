-- fsm_failed_v1: the failed instances of a machine type with their last error, a page at a time.
--
-- Reads the instance table's (status, id) index and each instance's newest fsm_errors row
-- through (machine, instance_id, id): no scan of either table.
-- Parameters: p_machine; p_after_id (0 for the first page, then the last id seen); p_limit
--   (1 to 10000).
-- Result: rows (id, instance_key, lookup_key, current_state, updated_at, handler, attempt,
--   error_type, message, failed_at) in id order.
-- Errors: 31002; 31009.
-- Example: CALL fsm_failed_v1('order', 0, 100);
CREATE PROCEDURE `fsm_failed_v1`(
  IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_after_id BIGINT UNSIGNED,
  IN p_limit INT)
READS SQL DATA SQL SECURITY DEFINER
BEGIN
  CALL fsm_require_machine_v1(p_machine);
  IF p_after_id IS NULL OR p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: after_id is required and limit must be 1 to 10000', MYSQL_ERRNO = 31009;
  END IF;
  SET @fsm_a1 = p_machine, @fsm_a2 = p_after_id, @fsm_a3 = p_limit;
  SET @fsm_sql = CONCAT('SELECT i.id, i.instance_key, i.lookup_key, i.current_state, i.updated_at, ',
    'e.handler, e.attempt, e.error_type, e.message, e.created_at AS failed_at FROM `fsm_', p_machine, '` i ',
    'LEFT JOIN fsm_errors e ON e.id = (SELECT MAX(x.id) FROM fsm_errors x WHERE x.machine = ? AND x.instance_id = i.id) ',
    'WHERE i.status = ''failed'' AND i.id > ? ORDER BY i.id LIMIT ?');
  PREPARE fsm_stmt FROM @fsm_sql;
  EXECUTE fsm_stmt USING @fsm_a1, @fsm_a2, @fsm_a3;
  DEALLOCATE PREPARE fsm_stmt;
  SET @fsm_a1 = NULL, @fsm_a2 = NULL, @fsm_a3 = NULL, @fsm_sql = NULL;
END
