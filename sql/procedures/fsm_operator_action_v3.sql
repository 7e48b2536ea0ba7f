-- fsm_operator_action_v3: record an action an operator is about to take, before it runs.
--
-- The web console calls it before every action and fsm_operator_outcome_v1 after it, so
-- that fsm_operator_log holds every action that was tried, with who asked for it, even when
-- the console dies in between (the row then stays 'requested'). One autocommitted INSERT.
-- Differs from fsm_operator_action_v2 (deprecated) only in the action enqueue (revision 0025: the
-- console's Queue action, which hands an idle instance to its process's workers), as v2 differed
-- from v1 only in cancel_timer (revision 0019).
-- Parameters: p_operator (1-64 characters, not ending in a space); p_action (send, pause,
--   resume, retry, enqueue, force_unlock, unpark or cancel_timer); p_machine (a machine type or NULL); p_key (the
--   instance key or NULL, at most 191 characters); p_detail (a JSON object: the action's
--   arguments).
-- Result: one row (action_id).
-- Errors: 31009 invalid argument.
-- Example: CALL fsm_operator_action_v3('alice', 'enqueue', 'order', 'o-1001', '{}');
CREATE PROCEDURE `fsm_operator_action_v3`(
  IN p_operator TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_action TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_detail LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  IF p_operator IS NULL OR CHAR_LENGTH(TRIM(p_operator)) = 0 OR CHAR_LENGTH(p_operator) > 64 OR p_operator LIKE '% ' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: operator must be 1 to 64 characters, not ending in a space', MYSQL_ERRNO = 31009;
  END IF;
  IF p_action IS NULL OR p_action NOT IN ('send', 'pause', 'resume', 'retry', 'enqueue', 'force_unlock', 'unpark', 'cancel_timer') THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: action must be send, pause, resume, retry, enqueue, force_unlock, unpark or cancel_timer', MYSQL_ERRNO = 31009;
  END IF;
  IF p_machine IS NOT NULL AND NOT fsm_valid_name_v1(p_machine, 48) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: machine must be a machine type name or NULL', MYSQL_ERRNO = 31009;
  END IF;
  IF p_key IS NOT NULL AND CHAR_LENGTH(p_key) NOT BETWEEN 1 AND 191 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: key must be 1 to 191 characters or NULL', MYSQL_ERRNO = 31009;
  END IF;
  IF p_detail IS NULL OR NOT fsm_is_object_v1(p_detail) OR CHAR_LENGTH(p_detail) > 65535 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: detail must be a JSON object of at most 65535 characters', MYSQL_ERRNO = 31009;
  END IF;
  -- LEFT: MariaDB's user names may be longer than MySQL's 32 characters the column is sized for
  INSERT INTO fsm_operator_log (`operator`, `account`, `action`, `machine`, `instance_key`, `detail`, `requested_at`,
                                `outcome`)
  VALUES (p_operator, LEFT(USER(), 288), p_action, p_machine, p_key, p_detail, UTC_TIMESTAMP(6), 'requested');
  SELECT LAST_INSERT_ID() AS action_id;
END
