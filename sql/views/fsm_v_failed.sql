-- fsm_v_failed: the failed instances of every machine type, each with its last recorded error.
--
-- Reads each type's (status, id) index and the newest fsm_errors row of each failed instance
-- through fsm_errors (machine, instance_id, id). A handler's ctx.fail(reason) records an
-- error too (pyfsm.HandlerFailed with the reason); the error columns are NULL only for an
-- instance no error was recorded for (failed by SQL). Rebuilt by pyfsm
-- whenever a type is installed.
-- Errors: none of its own.
-- Example: SELECT machine, instance_key, current_state, handler, attempt, error_type, message, failed_at FROM fsm_v_failed ORDER BY failed_at DESC LIMIT 20;
CREATE OR REPLACE SQL SECURITY DEFINER VIEW `fsm_v_failed` AS
SELECT '{type}' AS `machine`, i.`id`, i.`instance_key`, i.`lookup_key`, i.`current_state`, i.`updated_at`,
       e.`handler`, e.`attempt`, e.`error_type`, e.`message`, e.`created_at` AS `failed_at`
  FROM `fsm_{type}` i
  LEFT JOIN `fsm_errors` e
    ON e.`id` = (SELECT MAX(x.`id`) FROM `fsm_errors` x WHERE x.`machine` = '{type}' AND x.`instance_id` = i.`id`)
 WHERE i.`status` = 'failed'
