-- fsm_{type}_ai_subject_v1: AFTER INSERT on fsm_{type} of a type attached to {subject}: an instance has its row.
--
-- An attached type's instances are the rows of {subject}: one is created by inserting a row
-- there (or by adopting a row), never by Store.send or fsm_{type}_create_v1 for a key the
-- table lacks.
-- Errors: 31033 no row of {subject} has this key.
-- Example: CALL fsm_{type}_create_v1('999', NULL, NULL, NULL);  -- 31033 when no row 999
CREATE TRIGGER `fsm_{type}_ai_subject_v1` AFTER INSERT ON `fsm_{type}` FOR EACH ROW
BEGIN
  IF NOT EXISTS (SELECT 1 FROM {subject} WHERE {key} = {subject_key_checked}) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: this type is attached to a table: insert a row there to create an instance', MYSQL_ERRNO = 31033;
  END IF;
END
