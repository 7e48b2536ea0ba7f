-- fsm_upgrade_plan_v1: the dry run of fsm_upgrade_instances_v1: per (from version, state), how many instances, where they go, which wait or cannot move. Writes nothing.
--
-- Calls the type's fsm_{type}_upgrade_plan_v1 after checking the arguments the same way
-- the real run does, so a map the real run would refuse is refused here too.
-- Parameters: p_machine, p_to_version, p_map, p_only (as fsm_upgrade_instances_v1).
-- Result: rows (from_version, from_state, to_state, outcome, instances, to_version), outcome
--   'move', 'claimed' (a worker holds a claim on its run: waits), 'locked' (its lookup key's
--   lock is held: waits) or 'unmapped' (no counterpart in the target version and no map
--   entry: cannot move; to_state NULL).
-- Errors: 31002 unknown machine; 31030; 31031 (as fsm_upgrade_instances_v1).
-- Example: CALL fsm_upgrade_plan_v1('order', NULL, '{"shipped": "sent"}', NULL);
CREATE PROCEDURE `fsm_upgrade_plan_v1`(
  IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_to_version BIGINT,
  IN p_map LONGTEXT CHARACTER SET utf8mb4,
  IN p_only LONGTEXT CHARACTER SET utf8mb4)
SQL SECURITY DEFINER
BEGIN
  CALL fsm_require_machine_v1(p_machine);
  SET @fsm_a1 = p_to_version, @fsm_a2 = p_map, @fsm_a3 = p_only;
  SET @fsm_sql = CONCAT('CALL `fsm_', p_machine, '_upgrade_plan_v1`(?, ?, ?)');
  PREPARE fsm_stmt FROM @fsm_sql;
  EXECUTE fsm_stmt USING @fsm_a1, @fsm_a2, @fsm_a3;
  DEALLOCATE PREPARE fsm_stmt;
  SET @fsm_a1 = NULL, @fsm_a2 = NULL, @fsm_a3 = NULL, @fsm_sql = NULL;
END
