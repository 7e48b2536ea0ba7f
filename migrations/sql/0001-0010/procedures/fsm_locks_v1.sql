-- fsm_locks_v1: the locks held now, oldest first; all of them or one lookup key's.
--
-- The rows of the view fsm_held_locks_v1, for accounts that may only EXECUTE procedures.
-- Parameters: p_lookup_key (NULL for every lock).
-- Result: rows (id, kind, scope, lookup_key, machine, instance_id, instance_key, owner, since,
--   expires_at, connection_id, advisory_connection, advisory_name) ordered by since, id.
-- Errors: 31009 invalid lookup key.
-- Example: CALL fsm_locks_v1('customer-7');
CREATE PROCEDURE `fsm_locks_v1`(IN p_lookup_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
READS SQL DATA SQL SECURITY DEFINER
BEGIN
  IF p_lookup_key IS NOT NULL THEN
    CALL fsm_check_args_v1(p_lookup_key, NULL, NULL, NULL, NULL, NULL, NULL);
  END IF;
  SELECT `id`, `kind`, `scope`, `lookup_key`, `machine`, `instance_id`, `instance_key`, `owner`, `since`,
         `expires_at`, `connection_id`, `advisory_connection`, `advisory_name`
    FROM fsm_held_locks_v1
   WHERE p_lookup_key IS NULL OR `lookup_key` = p_lookup_key
   ORDER BY `since`, `id`;
END
