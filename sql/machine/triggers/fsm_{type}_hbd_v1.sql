-- fsm_{type}_hbd_v1: BEFORE DELETE on fsm_{type}_transitions — history is never deleted.
--
-- Errors: 31012 history rows cannot be deleted.
-- Example: DELETE FROM `fsm_{type}_transitions` WHERE id = 1;  -- fails with 31012
CREATE TRIGGER `fsm_{type}_hbd_v1` BEFORE DELETE ON `fsm_{type}_transitions` FOR EACH ROW
BEGIN
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: history rows cannot be deleted', MYSQL_ERRNO = 31012;
END
