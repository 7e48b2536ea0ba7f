-- fsm_{type}_au_subject_v1: AFTER UPDATE on fsm_{type} of a type attached to {subject}: the state column follows.
--
-- A transition applied to the instance row by pyfsm's procedures (Store.send, the engine,
-- timers, upgrades) or a DBA's raw UPDATE of fsm_{type} sets the attached row's state column
-- to the new state in the same statement. @fsm_subject_write = '{type}:<instance key>@<NOW(6)>'
-- tells the table's own trigger (fsm_{type}_sbu_v1) that this write is applied already; it is
-- set for this instance by that trigger when the transition came from the table, so nothing is
-- written twice. The mark names the statement too (NOW(6), the top-level statement's start,
-- the same in each trigger it runs): a statement that failed with a deadlock inside a trigger
-- leaves the mark set (MySQL runs no handler then), and the next statement, a retry of
-- Store.send say, must not take it for its own. When the row holds the state already (an
-- adoption moving an instance to the value its row has, byte for byte), the UPDATE changes
-- nothing and the table's trigger is not asked to do anything. The handlers are declared on
-- the path that writes the row only.
-- Errors: 31033 the attached row is missing (deleted with on_delete 'allow'); 31036 the state
--   column cannot hold the new state (an ENUM lacking it, a VARCHAR too short: the server's
--   1265 or 1406, named with the state; the names are not spliced into the message, they may
--   hold quotes).
-- Example: CALL fsm_{type}_fire_v1('42', 'pay');  -- {subject}.{state} becomes 'paid'
CREATE TRIGGER `fsm_{type}_au_subject_v1` AFTER UPDATE ON `fsm_{type}` FOR EACH ROW
BEGIN
  IF NOT (CAST(NEW.current_state AS BINARY) <=> CAST(OLD.current_state AS BINARY))
     AND NOT (@fsm_subject_write <=> CONCAT('{type}:', NEW.instance_key, '@', NOW(6))) THEN
    BEGIN
    DECLARE v_n INT;
    DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
      SET @fsm_subject_write = NULL;
      RESIGNAL;
    END;
    DECLARE EXIT HANDLER FOR 1265, 1406
    BEGIN
      SET @fsm_subject_write = NULL,
          v_msg = LEFT(CONCAT('fsm: the state column of the table {type} is attached to cannot hold ',
                              QUOTE(NEW.current_state), ': add it (ALTER TABLE ... MODIFY)'), 128);
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31036;
    END;
    SET @fsm_subject_write = CONCAT('{type}:', NEW.instance_key, '@', NOW(6));
    UPDATE {subject} SET {state} = NEW.current_state WHERE {key} = {subject_key};
    -- ROW_COUNT() of the UPDATE, read in the statement that clears the mark: 0 when the row is
    -- gone or holds the state already (adoption), so only then is the row looked for
    SET v_n = ROW_COUNT(), @fsm_subject_write = NULL;
    IF v_n = 0 AND NOT EXISTS (SELECT 1 FROM {subject} WHERE {key} = {subject_key}) THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: the attached row of this instance is missing', MYSQL_ERRNO = 31033;
    END IF;
    END;
  END IF;
END
