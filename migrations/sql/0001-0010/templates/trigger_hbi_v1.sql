-- fsm___M___hbi_v1: BEFORE INSERT on fsm___M___transitions — only pyfsm writes history.
--
-- History rows are inserted by fsm___M___ai_v1 and fsm___M___bu_v1, which set @fsm_guard to
-- the instance id while they write. Anything else (an INSERT by hand, a REPLACE) is refused,
-- so no one can invent a transition or take the next sort_key and block an instance. Like
-- fsm___M___hbu_v1 this stops mistakes; privileges are what stop a determined user.
-- Errors: 31012 history rows are written by pyfsm only.
-- Example: INSERT INTO `fsm___M___transitions` (instance_id, sort_key, to_state, data_after, metadata, definition_version, source, created_at) VALUES (1, 9, 'x', '{}', '{}', 1, 'x', NOW());  -- fails with 31012
CREATE TRIGGER `fsm___M___hbi_v1` BEFORE INSERT ON `fsm___M___transitions` FOR EACH ROW
BEGIN
  IF NOT (@fsm_guard <=> NEW.instance_id) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: history rows are written by pyfsm only', MYSQL_ERRNO = 31012;
  END IF;
END
