-- fsm_{type}_hbi_v3: BEFORE INSERT on fsm_{type}_transitions — only pyfsm writes history.
--
-- History rows are inserted by fsm_{type}_ai_v4 (creations) and fsm_{type}_bu_v7 (transitions),
-- which set @fsm_guard to '<instance id>/<created_at>' of the row they write. Anything else
-- (an INSERT by hand, a REPLACE) is refused, so no one can invent a transition or take the
-- next sort_key and block an instance. The time is checked as well as the instance: a
-- deadlock inside a trigger can end the statement without running any handler, which can
-- leave @fsm_guard set on the connection, and such a stale guard must not let the session's
-- next INSERT through. A NULL on either side refuses: v2 compared with <=>, so with no guard
-- a row whose created_at (or instance_id) was NULL at this point got through, and under a
-- non-strict sql_mode a multi-row INSERT then stored it with a zero date. Like
-- fsm_{type}_hbu_v5 this stops mistakes; privileges are what stop a determined user.
-- Errors: 31012 history rows are written by pyfsm only.
-- Example: INSERT INTO `fsm_{type}_transitions` (instance_id, sort_key, to_state, data_after, metadata, definition_version, source, created_at) VALUES (1, 9, 'x', '{}', '{}', 1, 'x', NOW());  -- fails with 31012
CREATE TRIGGER `fsm_{type}_hbi_v3` BEFORE INSERT ON `fsm_{type}_transitions` FOR EACH ROW
BEGIN
  -- as bytes: a number in @fsm_guard (the v1 form) would compare as a number, '5/...' as 5
  IF NOT COALESCE(CAST(@fsm_guard AS BINARY) = CAST(CONCAT(NEW.instance_id, '/', NEW.created_at) AS BINARY), 0) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: history rows are written by pyfsm only', MYSQL_ERRNO = 31012;
  END IF;
END
