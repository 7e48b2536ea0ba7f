-- fsm_relay_resign_v1: give up the leadership of a relay lock, so that a standby takes over at once.
--
-- Sets the row's expiry to now when p_holder holds it; any other row is left alone (a
-- relay that lost its leadership cannot end its successor's).
-- Parameters: p_name (the relay lock name); p_holder (the relay that leads).
-- Result: one row (resigned): 1 when p_holder led and resigned, else 0.
-- Errors: 31009 invalid argument.
-- Example: CALL fsm_relay_resign_v1('pyfsm_relay_3f2a', 'host-1:4242:9c1e');
CREATE PROCEDURE `fsm_relay_resign_v1`(
  IN p_name TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_holder TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  IF p_name IS NULL OR CHAR_LENGTH(p_name) NOT BETWEEN 1 AND 64 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: relay lock name must be 1 to 64 characters', MYSQL_ERRNO = 31009;
  END IF;
  IF p_holder IS NULL OR CHAR_LENGTH(p_holder) NOT BETWEEN 1 AND 128 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: relay holder must be 1 to 128 characters', MYSQL_ERRNO = 31009;
  END IF;
  -- one statement, autocommitted: no transaction to leave open
  UPDATE fsm_relay_leaders SET expires_at = v_now
   WHERE name = p_name AND holder = p_holder AND expires_at > v_now;
  SELECT ROW_COUNT() AS resigned;
END
