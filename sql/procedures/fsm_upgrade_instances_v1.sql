-- fsm_upgrade_instances_v1: move instances of a type to a newer definition version, one batch (keyset, resumable).
--
-- What a DBA calls in a loop (docs/changing-machines.md): it checks the arguments, then
-- calls the type's fsm_{type}_upgrade_v1, which moves up to p_limit instances of older
-- versions with id > p_after_id, each in a transaction of its own, and says where to go on
-- from. Start with p_after_id = 0; call again with the last_id it returned until done = 1.
-- After an interruption, start again from 0 (or from the last last_id seen): what moved is
-- not looked at again. Instances that had to wait ('claimed', 'locked') are moved by the
-- next run; 'unmapped' ones need a map entry. Never inside an open transaction.
-- Parameters: p_machine; p_to_version (NULL: the type's current version); p_map (JSON object
--   {"old state": "new state"} for states renamed or dropped, or NULL); p_only (JSON
--   {"states": [...], "versions": [...]} or NULL: every instance of an older version);
--   p_after_id (0 to start); p_limit (1 to 10000).
-- Result: as fsm_{type}_upgrade_v1: rows (from_version, from_state, to_state, outcome,
--   instances, to_version, last_id, done).
-- Errors: 31002 unknown machine; 31009 invalid p_after_id or p_limit; 31016 inside an open
--   transaction; 31030 a target version that does not exist, or a map or only that is not
--   valid (the message says what); 31031 the target version has timeouts and the type no
--   timer triggers yet (`pyfsm sync`); 1213 a deadlock ended the batch (call again).
-- Example: CALL fsm_upgrade_instances_v1('order', NULL, NULL, NULL, 0, 1000);
CREATE PROCEDURE `fsm_upgrade_instances_v1`(
  IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_to_version BIGINT,
  IN p_map LONGTEXT CHARACTER SET utf8mb4,
  IN p_only LONGTEXT CHARACTER SET utf8mb4,
  IN p_after_id BIGINT,
  IN p_limit INT)
SQL SECURITY DEFINER
BEGIN
  CALL fsm_require_machine_v1(p_machine);
  SET @fsm_a1 = p_to_version, @fsm_a2 = p_map, @fsm_a3 = p_only, @fsm_a4 = p_after_id, @fsm_a5 = p_limit;
  SET @fsm_sql = CONCAT('CALL `fsm_', p_machine, '_upgrade_v1`(?, ?, ?, ?, ?)');
  PREPARE fsm_stmt FROM @fsm_sql;
  EXECUTE fsm_stmt USING @fsm_a1, @fsm_a2, @fsm_a3, @fsm_a4, @fsm_a5;
  DEALLOCATE PREPARE fsm_stmt;
  SET @fsm_a1 = NULL, @fsm_a2 = NULL, @fsm_a3 = NULL, @fsm_a4 = NULL, @fsm_a5 = NULL, @fsm_sql = NULL;
END
