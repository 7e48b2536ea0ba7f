-- fsm_require_machine_v1: fail unless p_machine names a machine whose tables exist (internal).
--
-- Used by the generic procedures before they build a statement from the name, so that
-- nothing unvalidated reaches dynamic SQL. An unknown name's message lists the installed
-- types (revision 0025 replaced this procedure in place for that: its parameters and
-- errors are as before), the first twelve by name: revision 0027 replaced it in place again,
-- because GROUP_CONCAT over every type of a database of more than about forty (its 1,024
-- bytes) raised MySQL's 1260 'Row N was cut by GROUP_CONCAT()' in place of 31002.
-- Parameters: p_machine.
-- Result: none.
-- Errors: 31002 unknown machine ('fsm: unknown machine nc_ordr; installed: nc_order, shop'),
--   or its tables are not installed; 31009 invalid name.
-- Example: CALL fsm_require_machine_v1('order');
CREATE PROCEDURE `fsm_require_machine_v1`(IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
READS SQL DATA SQL SECURITY INVOKER
BEGIN
  DECLARE v_msg VARCHAR(4096) CHARACTER SET utf8mb4;
  IF NOT fsm_valid_name_v1(p_machine, 48) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: machine name must match [a-z][a-z0-9_]* and have at most 48 characters', MYSQL_ERRNO = 31009;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM fsm_machines WHERE machine = p_machine) THEN
    -- the installed types, so that a misspelling names what is right (cut at the 128
    -- characters an error message holds: then it ends in '...')
    SET v_msg = CONCAT('fsm: unknown machine ', COALESCE(p_machine, 'NULL'), '; installed: ',
                       COALESCE((SELECT GROUP_CONCAT(first.machine ORDER BY first.machine SEPARATOR ', ')
                                   FROM (SELECT machine FROM fsm_machines ORDER BY machine LIMIT 12) first), 'none'));
    SET v_msg = IF(CHAR_LENGTH(v_msg) > 128, CONCAT(LEFT(v_msg, 125), '...'), v_msg);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31002;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM fsm_machines WHERE machine = p_machine AND objects_version IS NOT NULL) THEN
    SET v_msg = LEFT(CONCAT('fsm: machine ', COALESCE(p_machine, 'NULL'), ' has no tables yet: run pyfsm sync'), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31002;
  END IF;
END
