-- fsm_instances_in_state_v1: the instances of every machine type in one state, a page at a time.
--
-- The fast way to list a state across types: fsm_v_instances sorts every instance in the
-- state before it cuts a page (seconds with a million instances). Here each installed type
-- whose definitions have the state is read through its own index (current_state, id), at
-- most p_limit rows, and those pages are merged: a page costs about what it costs on one
-- type, whatever the number of instances. Rows are ordered by machine (byte order), then id;
-- pass the last row's machine and id as the cursor to get the next page (keyset pagination:
-- no OFFSET, no row skipped or repeated). in_state_since is when the instance entered its
-- state (its latest history row, one index lookup per row). The statement it runs is
-- fsm_instances_in_state_sql_v1's (a DBA may EXPLAIN it).
-- Parameters: p_state; p_after_machine, p_after_id (the last row of the previous page; both
--   NULL for the first page); p_limit (1-10000).
-- Result: rows with every column of fsm_{type} (machine names the type), in_state_since
--   and seconds_in_state, ordered by machine, id; no row after the last page.
-- Errors: 31009 invalid state name, a state no machine type has, limit out of range, or a
--   cursor that is half given, has an invalid machine name or a negative id.
-- Example: CALL fsm_instances_in_state_v1('paid', NULL, NULL, 50);
CREATE PROCEDURE `fsm_instances_in_state_v1`(
  IN p_state TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_after_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_after_id BIGINT,
  IN p_limit INT)
READS SQL DATA SQL SECURITY DEFINER
BEGIN
  SET @fsm_sql = fsm_instances_in_state_sql_v1(p_state, p_after_machine, p_after_id, p_limit);
  PREPARE fsm_stmt FROM @fsm_sql;
  SET @fsm_sql = NULL;
  EXECUTE fsm_stmt;
  DEALLOCATE PREPARE fsm_stmt;
END
