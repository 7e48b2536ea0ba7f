-- fsm_send_v4: send an event to an instance of any machine type (the per-type fsm_{type}_send_v4).
--
-- Generic entry point for any machine type: checks p_machine with fsm_require_machine_v1,
-- then calls the per-type procedure `fsm_{type}_send_v4` with the remaining arguments,
-- which does the work. See that procedure (sql/machine/procedures/fsm_{type}_send_v4.sql) for the details;
-- it answers as fsm_{type}_send_v3 (which fsm_send_v3 calls) does, with less work.
-- Parameters: p_machine, then those of the per-type procedure.
-- Result: one row (transition_id, instance_id, from_state, to_state, version, status, created, replayed).
-- Errors: 31002 unknown machine; 31009 invalid machine name; those of fsm_{type}_send_v4 (31003, 31005, 31007, 31008, 31009, 31010, 31011, 31012, 31016, 31018, 31024, 31028).
-- Example: CALL fsm_send_v4('order', 'o-1', 'pay', NULL, '{"by": "dba"}', NULL, NULL, NULL, NULL);
CREATE PROCEDURE `fsm_send_v4`(IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_key TEXT CHARACTER SET utf8mb4, IN p_event TEXT CHARACTER SET utf8mb4,
  IN p_data LONGTEXT CHARACTER SET utf8mb4, IN p_metadata LONGTEXT CHARACTER SET utf8mb4,
  IN p_expected_version BIGINT, IN p_request_id TEXT CHARACTER SET utf8mb4,
  IN p_handler TEXT CHARACTER SET utf8mb4, IN p_lookup_key TEXT CHARACTER SET utf8mb4)
SQL SECURITY DEFINER
BEGIN
  CALL fsm_require_machine_v1(p_machine);
  SET @fsm_a1 = p_key, @fsm_a2 = p_event, @fsm_a3 = p_data, @fsm_a4 = p_metadata,
      @fsm_a5 = p_expected_version, @fsm_a6 = p_request_id, @fsm_a7 = p_handler, @fsm_a8 = p_lookup_key;
  SET @fsm_sql = CONCAT('CALL `fsm_', p_machine, '_send_v4`(?, ?, ?, ?, ?, ?, ?, ?)');
  PREPARE fsm_stmt FROM @fsm_sql;
  EXECUTE fsm_stmt USING @fsm_a1, @fsm_a2, @fsm_a3, @fsm_a4, @fsm_a5, @fsm_a6, @fsm_a7, @fsm_a8;
  DEALLOCATE PREPARE fsm_stmt;
END
