-- fsm_force_unlock_v2: release a held lock whatever its owner — fsm_force_unlock_v1 that
-- refuses a lookup key ending in a space.
--
-- Lookup keys are compared with PAD SPACE (trailing spaces ignored), so v1 released the
-- locks of 'acct-1' when asked for 'acct-1 ', a key pyfsm never stores (fsm_check_args_v1
-- refuses it everywhere else). v2 refuses it, then does exactly what v1 does (see
-- sql/procedures/fsm_force_unlock_v1.sql): for a DBA when a holder is stuck, the held lock
-- rows of p_lookup_key in p_scope are released and logged in fsm_lock_log.
-- Parameters: p_scope ('*' for the global lock, a machine type for its local lock, NULL for
--   every scope); p_lookup_key (required, 1-191 characters, not ending in a space);
--   p_reason (required, at most 255 characters).
-- Result: one row per released lock (scope, lookup_key, machine, instance_key, owner,
--   expires_at, advisory_connection); no row when nothing was held.
-- Errors: 31009 invalid argument; 31016 called inside an open transaction.
-- Example: CALL fsm_force_unlock_v2('*', 'account-7', 'worker host lost, ticket OPS-12');
CREATE PROCEDURE `fsm_force_unlock_v2`(
  IN p_scope TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_lookup_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_reason TEXT CHARACTER SET utf8mb4)
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  IF p_lookup_key IS NULL OR CHAR_LENGTH(p_lookup_key) NOT BETWEEN 1 AND 191 OR p_lookup_key LIKE '% ' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: lookup_key must be 1 to 191 characters, not ending in a space', MYSQL_ERRNO = 31009;
  END IF;
  CALL fsm_force_unlock_v1(p_scope, p_lookup_key, p_reason);
END
