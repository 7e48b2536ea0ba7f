-- fsm_{type}_sbd_v1: BEFORE DELETE on the application's table {subject} attached to machine type '{type}'.
--
-- The attachment's on_delete 'refuse' (the default): a row under the machine is not deleted,
-- so its history never loses its row. A row not adopted yet is not under it and may go.
-- (on_delete 'allow' installs no such trigger: the row goes, its instance and history stay.)
-- Errors: 31017 rows of an attached table cannot be deleted.
-- Example: DELETE FROM {subject} WHERE {key} = 42;  -- fails with 31017
CREATE TRIGGER `fsm_{type}_sbd_v1` BEFORE DELETE ON {subject} FOR EACH ROW
BEGIN
  IF EXISTS (SELECT 1 FROM `fsm_{type}` WHERE instance_key = {old_instance_key}) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: rows under machine {type} cannot be deleted (its on_delete is refuse)', MYSQL_ERRNO = 31017;
  END IF;
END
