-- fsm_{type}_allowed_events_v1: the rules an instance of {type} may take now, with their guards and its data, in one read.
--
-- One row per rule of the instance's definition version from its current state, in the
-- order they are tried (event, then position): event, position, to_state, to_final, guard
-- (the rule's condition, JSON, NULL for none) and guard_name; every row also carries the
-- instance's current_state, status, definition_version, version and data, which the guards
-- are tested against. An instance in a state no rule leaves gives one row with NULL event.
-- The guards are not evaluated here (a procedure cannot run the SQL a guard becomes without
-- rendering it per type): Store.allowed_events, `pyfsm events` and the console test them
-- against data as the transition trigger does (pyfsm.guards.holds; tests/server/test_guards.py
-- compares the two). A DBA reads the guards and the data side by side. No lock is taken:
-- the answer is as of the read, and the trigger decides under the row lock.
-- Parameters: p_key.
-- Result: the rows above.
-- Errors: 31003 no such instance; 31009 invalid key.
-- Example: CALL `fsm_{type}_allowed_events_v1`('k-1');
CREATE PROCEDURE `fsm_{type}_allowed_events_v1`(IN p_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
READS SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  CALL fsm_check_args_v1(p_key, NULL, NULL, NULL, NULL, NULL, NULL);
  IF NOT EXISTS (SELECT 1 FROM `fsm_{type}` WHERE instance_key = p_key) THEN
    SET v_msg = LEFT(CONCAT('fsm: no {type} ', COALESCE(p_key, 'NULL')), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31003;
  END IF;
  SELECT i.current_state, i.status, i.definition_version, i.version, i.data,
         r.event, r.position, r.to_state, r.to_final, r.guard, r.guard_name
    FROM `fsm_{type}` i
    LEFT JOIN fsm_rules r ON r.machine = '{type}' AND r.version = i.definition_version
                         AND CAST(r.from_state AS BINARY) = CAST(i.current_state AS BINARY)
   WHERE i.instance_key = p_key
   ORDER BY r.event, r.position;
END
