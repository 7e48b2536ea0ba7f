-- fsm_operator_outcome_v1: record how an action recorded by fsm_operator_action_v1 ended.
--
-- Sets outcome, errno, message and finished_at of a row that is still 'requested'; a row
-- whose outcome is already set is never changed (outcomes are written once).
-- Parameters: p_action_id (from fsm_operator_action_v1); p_outcome ('done' or 'refused');
--   p_errno (the error number of a refused action, else NULL); p_message (at most 512
--   characters, or NULL).
-- Result: one row (recorded): 1.
-- Errors: 31009 invalid argument, or no action p_action_id still waiting for its outcome.
-- Example: CALL fsm_operator_outcome_v1(17, 'refused', 31022, 'order o-1001 is running, not failed');
CREATE PROCEDURE `fsm_operator_outcome_v1`(
  IN p_action_id BIGINT UNSIGNED,
  IN p_outcome TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_errno INT,
  IN p_message TEXT CHARACTER SET utf8mb4)
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  IF p_outcome IS NULL OR p_outcome NOT IN ('done', 'refused') THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: outcome must be done or refused', MYSQL_ERRNO = 31009;
  END IF;
  IF p_message IS NOT NULL AND CHAR_LENGTH(p_message) > 512 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: message must have at most 512 characters', MYSQL_ERRNO = 31009;
  END IF;
  UPDATE fsm_operator_log SET `outcome` = p_outcome, `errno` = p_errno, `message` = p_message,
         `finished_at` = UTC_TIMESTAMP(6)
   WHERE `id` = p_action_id AND `outcome` = 'requested';
  IF ROW_COUNT() <> 1 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: no operator action with that id waits for its outcome', MYSQL_ERRNO = 31009;
  END IF;
  SELECT 1 AS recorded;
END
