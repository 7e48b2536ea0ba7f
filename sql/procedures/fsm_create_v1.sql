-- fsm_create_v1: create an instance of any machine type explicitly.
--
-- Generic entry point for any machine type: checks p_machine with fsm_require_machine_v1,
-- then calls the per-type procedure `fsm_{type}_create_v1` with the remaining arguments,
-- which does the work. See that procedure (sql/machine/procedures/fsm_{type}_create_v1.sql) for the details.
-- Parameters: p_machine, then those of the per-type procedure.
-- Result: one row, the same columns as fsm_send_v1.
-- Errors: 31002 unknown machine; 31009 invalid machine name; those of fsm_{type}_create_v1 (31004, 31005, 31008, 31009, 31010, 31016).
-- Example: CALL fsm_create_v1('order', 'o-2', NULL, '{"total": 10}', NULL, NULL, 'account-7');
CREATE PROCEDURE `fsm_create_v1`(IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_key TEXT CHARACTER SET utf8mb4, IN p_state TEXT CHARACTER SET utf8mb4,
  IN p_data LONGTEXT CHARACTER SET utf8mb4, IN p_metadata LONGTEXT CHARACTER SET utf8mb4,
  IN p_request_id TEXT CHARACTER SET utf8mb4, IN p_lookup_key TEXT CHARACTER SET utf8mb4)
SQL SECURITY DEFINER
BEGIN
  CALL fsm_require_machine_v1(p_machine);
  SET @fsm_a1 = p_key, @fsm_a2 = p_state, @fsm_a3 = p_data, @fsm_a4 = p_metadata,
      @fsm_a5 = p_request_id, @fsm_a6 = p_lookup_key;
  SET @fsm_sql = CONCAT('CALL `fsm_', p_machine, '_create_v1`(?, ?, ?, ?, ?, ?)');
  PREPARE fsm_stmt FROM @fsm_sql;
  EXECUTE fsm_stmt USING @fsm_a1, @fsm_a2, @fsm_a3, @fsm_a4, @fsm_a5, @fsm_a6;
  DEALLOCATE PREPARE fsm_stmt;
END
