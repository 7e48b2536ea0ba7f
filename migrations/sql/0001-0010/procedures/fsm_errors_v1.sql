-- fsm_errors_v1: every failed handler attempt recorded for one instance, oldest first.
--
-- Parameters: p_machine, p_key.
-- Result: rows (id, state, handler, attempt, error_type, message, traceback, outcome,
--   next_run_at, created_at) in the order they happened (none if no attempt failed).
-- Errors: 31002 unknown machine; 31009 invalid argument.
-- Example: CALL fsm_errors_v1('fulfilment', 'f-1');
CREATE PROCEDURE `fsm_errors_v1`(
  IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
READS SQL DATA SQL SECURITY DEFINER
BEGIN
  CALL fsm_require_machine_v1(p_machine);
  CALL fsm_check_args_v1(p_key, NULL, NULL, NULL, NULL, NULL, NULL);
  SELECT `id`, `state`, `handler`, `attempt`, `error_type`, `message`, `traceback`, `outcome`, `next_run_at`,
         `created_at`
    FROM fsm_errors WHERE `machine` = p_machine AND `instance_key` = p_key ORDER BY `id`;
END
