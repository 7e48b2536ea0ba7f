-- fsm_instances_per_version_v1: how many instances each definition version of a type holds.
--
-- One row per version the type has (instances 0 for a version none is left at), the current
-- one marked: after a new definition, what an upgrade (fsm_upgrade_instances_v1) would move.
-- Reads the whole instance table (there is no index on definition_version): a report, not a
-- call for every request.
-- Parameters: p_machine.
-- Result: rows (version, instances, is_current, defined_at), ordered by version.
-- Errors: 31002 unknown machine.
-- Example: CALL fsm_instances_per_version_v1('order');
CREATE PROCEDURE `fsm_instances_per_version_v1`(IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
READS SQL DATA SQL SECURITY DEFINER
BEGIN
  CALL fsm_require_machine_v1(p_machine);
  SET @fsm_a1 = p_machine;
  -- the name is valid ([a-z][a-z0-9_]*, fsm_require_machine_v1): safe to write into the text
  SET @fsm_sql = CONCAT(
    'SELECT d.version, COALESCE(c.instances, 0) AS instances, d.version = m.current_version AS is_current, ',
    'd.created_at AS defined_at FROM fsm_definitions d JOIN fsm_machines m ON m.machine = d.machine ',
    'LEFT JOIN (SELECT definition_version, COUNT(*) AS instances FROM `fsm_', p_machine, '` ',
    'GROUP BY definition_version) c ON c.definition_version = d.version ',
    'WHERE d.machine = ? ORDER BY d.version');
  PREPARE fsm_stmt FROM @fsm_sql;
  EXECUTE fsm_stmt USING @fsm_a1;
  DEALLOCATE PREPARE fsm_stmt;
  SET @fsm_a1 = NULL, @fsm_sql = NULL;
END
