-- fsm_counts_v1: count the instances of any machine type per state.
--
-- Generic entry point for any machine type: checks p_machine with fsm_require_machine_v1,
-- then calls the per-type procedure `fsm_<machine>_counts_v1` with the remaining arguments,
-- which does the work. See that procedure (sql/templates/counts_v1.sql) for the details.
-- Parameters: p_machine, then those of the per-type procedure.
-- Result: rows (state, instances).
-- Errors: 31002 unknown machine; 31009 invalid machine name; none other.
-- Example: CALL fsm_counts_v1('order');
CREATE PROCEDURE `fsm_counts_v1`(IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
SQL SECURITY DEFINER
BEGIN
  CALL fsm_require_machine_v1(p_machine);

  SET @fsm_sql = CONCAT('CALL `fsm_', p_machine, '_counts_v1`()');
  PREPARE fsm_stmt FROM @fsm_sql;
  EXECUTE fsm_stmt;
  DEALLOCATE PREPARE fsm_stmt;
END
