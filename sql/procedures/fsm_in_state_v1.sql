-- fsm_in_state_v1: list the instances of any machine type in one state, a page at a time.
--
-- Generic entry point for any machine type: checks p_machine with fsm_require_machine_v1,
-- then calls the per-type procedure `fsm_{type}_in_state_v1` with the remaining arguments,
-- which does the work. See that procedure (sql/machine/procedures/fsm_{type}_in_state_v1.sql) for the details.
-- Parameters: p_machine, then those of the per-type procedure.
-- Result: instance rows ordered by id.
-- Errors: 31002 unknown machine; 31009 invalid machine name; 31009 unknown state or limit out of range.
-- Example: CALL fsm_in_state_v1('order', 'paid', 0, 100);
CREATE PROCEDURE `fsm_in_state_v1`(IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, IN p_state TEXT CHARACTER SET utf8mb4, IN p_after_id BIGINT, IN p_limit INT)
SQL SECURITY DEFINER
BEGIN
  CALL fsm_require_machine_v1(p_machine);
  SET @fsm_a1 = p_state, @fsm_a2 = p_after_id, @fsm_a3 = p_limit;
  SET @fsm_sql = CONCAT('CALL `fsm_', p_machine, '_in_state_v1`(?, ?, ?)');
  PREPARE fsm_stmt FROM @fsm_sql;
  EXECUTE fsm_stmt USING @fsm_a1, @fsm_a2, @fsm_a3;
  DEALLOCATE PREPARE fsm_stmt;
END
