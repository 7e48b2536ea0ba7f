-- fsm_arm_timeouts_v1: arm the timeouts of instances already in a state with a timeout.
--
-- The timer triggers arm a timeout when an instance enters its state; instances that were
-- in such a state before the type's timer triggers existed (a DBA stored a definition with
-- timeouts and ran `pyfsm sync` later) have none. This arms one for each of them, due
-- timeout_seconds after the instance entered its state (its most recent history row),
-- so a timeout long past is due at once. Instances that have one are left alone; calling it
-- again arms nothing new. `pyfsm sync` and Store.define() call it after installing the
-- triggers. An instance that moves while this runs may get a timeout of the state it left:
-- fsm_fire_timers_v1 drops such a timer (logged) instead of sending its event.
-- Parameters: p_machine.
-- Result: one row (machine, armed: how many timers were armed).
-- Errors: 31002 unknown machine; 31009 invalid machine name; 31016 called inside an open transaction.
-- Example: CALL fsm_arm_timeouts_v1('order');
CREATE PROCEDURE `fsm_arm_timeouts_v1`(IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_started TINYINT DEFAULT 0;
  DECLARE v_armed BIGINT DEFAULT 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    IF v_started THEN
      ROLLBACK;
    END IF;
    SET @fsm_sql = NULL;
    RESIGNAL;
  END;
  CALL fsm_require_machine_v1(p_machine);
  CALL fsm_begin_v1();
  SET v_started = 1;
  -- the name is valid ([a-z][a-z0-9_]*, fsm_require_machine_v1): safe to write into the text
  SET @fsm_sql = CONCAT(
    'INSERT INTO fsm_timers (machine, instance_id, instance_key, kind, timeout_of, state, event, due_at, fire_at, ',
    'armed_at, armed_version) ',
    'SELECT ''', p_machine, ''', i.id, i.instance_key, ''timeout'', i.id, i.current_state, s.timeout_event, ',
    'DATE_ADD(h.created_at, INTERVAL s.timeout_seconds SECOND), DATE_ADD(h.created_at, INTERVAL s.timeout_seconds SECOND), ',
    'h.created_at, i.version ',
    'FROM `fsm_', p_machine, '` i ',
    'JOIN fsm_states s ON s.machine = ''', p_machine, ''' AND s.version = i.definition_version ',
    'AND s.state = i.current_state AND s.timeout_seconds IS NOT NULL ',
    'JOIN `fsm_', p_machine, '_transitions` h ON h.instance_id = i.id AND h.most_recent = 1 ',
    'WHERE NOT EXISTS (SELECT 1 FROM fsm_timers t WHERE t.machine = ''', p_machine, ''' AND t.timeout_of = i.id) ',
    'ON DUPLICATE KEY UPDATE id = fsm_timers.id');
  PREPARE fsm_stmt FROM @fsm_sql;
  EXECUTE fsm_stmt;
  SET v_armed = ROW_COUNT();
  DEALLOCATE PREPARE fsm_stmt;
  SET @fsm_sql = NULL;
  COMMIT;
  SELECT p_machine AS machine, v_armed AS armed;
END
