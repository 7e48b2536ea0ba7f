-- fsm_{type}_bd_v1: BEFORE DELETE on fsm_{type} — instances are not deleted.
--
-- Deleting an instance would orphan its history, and REPLACE INTO (a delete and an insert)
-- would silently reset it to a start state under a new id. Both are refused.
-- Errors: 31017 instances cannot be deleted.
-- Example: DELETE FROM `fsm_{type}` WHERE instance_key = 'k-1';  -- fails with 31017
CREATE TRIGGER `fsm_{type}_bd_v1` BEFORE DELETE ON `fsm_{type}` FOR EACH ROW
BEGIN
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: instances cannot be deleted', MYSQL_ERRNO = 31017;
END
