-- fsm_lock_holders_v1: who holds the locks an instance's type needs for its lookup key.
--
-- What LockNotAcquired names: the global lock ('*') and the type's local lock held for the
-- instance's lookup_key, whoever took them.
-- Parameters: p_machine, p_key.
-- Result: rows as fsm_locks_v1, ordered by since, id (none when nothing is held).
-- Errors: 31002 unknown machine; 31009 invalid argument.
-- Example: CALL fsm_lock_holders_v1('payout', 'p-2');
CREATE PROCEDURE `fsm_lock_holders_v1`(
  IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
READS SQL DATA SQL SECURITY DEFINER
BEGIN
  CALL fsm_require_machine_v1(p_machine);
  CALL fsm_check_args_v1(p_key, NULL, NULL, NULL, NULL, NULL, NULL);
  SET @fsm_a1 = p_key, @fsm_a2 = p_machine;
  SET @fsm_sql = CONCAT('SELECT v.`id`, v.`kind`, v.`scope`, v.`lookup_key`, v.`machine`, v.`instance_id`, ',
    'v.`instance_key`, v.`owner`, v.`since`, v.`expires_at`, v.`connection_id`, v.`advisory_connection`, ',
    'v.`advisory_name` FROM fsm_held_locks_v1 v JOIN `fsm_', p_machine, '` i ON i.lookup_key = v.lookup_key ',
    'WHERE i.instance_key = ? AND v.scope IN (''*'', ?) ORDER BY v.since, v.id');
  PREPARE fsm_stmt FROM @fsm_sql;
  EXECUTE fsm_stmt USING @fsm_a1, @fsm_a2;
  DEALLOCATE PREPARE fsm_stmt;
  SET @fsm_a1 = NULL, @fsm_a2 = NULL, @fsm_sql = NULL;
END
