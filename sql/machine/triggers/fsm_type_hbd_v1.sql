-- fsm___M___hbd_v1: BEFORE DELETE on fsm___M___transitions — history is never deleted.
--
-- Errors: 31012 history rows cannot be deleted.
-- Example: DELETE FROM `fsm___M___transitions` WHERE id = 1;  -- fails with 31012
CREATE TRIGGER `fsm___M___hbd_v1` BEFORE DELETE ON `fsm___M___transitions` FOR EACH ROW
BEGIN
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: history rows cannot be deleted', MYSQL_ERRNO = 31012;
END
