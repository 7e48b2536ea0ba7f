-- fsm_get_v1: read one instance of any machine type by key.
--
-- Generic entry point for any machine type: checks p_machine with fsm_require_machine_v1,
-- then calls the per-type procedure `fsm_{type}_get_v1` with the remaining arguments,
-- which does the work. See that procedure (sql/machine/procedures/fsm_{type}_get_v1.sql) for the details.
-- Parameters: p_machine, then those of the per-type procedure.
-- Result: one row with every column of the instance table.
-- Errors: 31002 unknown machine; 31009 invalid machine name; 31003 no such instance.
-- Example: CALL fsm_get_v1('order', 'o-1');
CREATE PROCEDURE `fsm_get_v1`(IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, IN p_key TEXT CHARACTER SET utf8mb4)
SQL SECURITY DEFINER
BEGIN
  CALL fsm_require_machine_v1(p_machine);
  SET @fsm_a1 = p_key;
  SET @fsm_sql = CONCAT('CALL `fsm_', p_machine, '_get_v1`(?)');
  PREPARE fsm_stmt FROM @fsm_sql;
  EXECUTE fsm_stmt USING @fsm_a1;
  DEALLOCATE PREPARE fsm_stmt;
END
