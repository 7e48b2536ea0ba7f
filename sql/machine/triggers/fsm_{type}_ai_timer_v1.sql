-- fsm_{type}_ai_timer_v1: AFTER INSERT on fsm_{type} — arm the start state's timeout (types with timeouts only).
--
-- Installed only for a type whose definition (any version) gives a state a timeout: a type
-- without timeouts has no timer trigger and pays nothing. When the new instance's state has
-- a timeout in its definition version (fsm_states.timeout_seconds), a timer row is armed in
-- fsm_timers, due timeout_seconds after the creation, in the INSERT's own transaction.
-- Errors: none of its own (a failure fails the INSERT, which then leaves nothing behind).
-- Example: fires on INSERT INTO `fsm_{type}` (instance_key) VALUES ('k-1');
CREATE TRIGGER `fsm_{type}_ai_timer_v1` AFTER INSERT ON `fsm_{type}` FOR EACH ROW
BEGIN
  DECLARE v_after INT UNSIGNED;
  DECLARE v_event VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_after = NULL;
  SELECT timeout_seconds, timeout_event INTO v_after, v_event FROM fsm_states
   WHERE machine = '{type}' AND version = NEW.definition_version AND state = NEW.current_state;
  IF v_after IS NOT NULL THEN
    INSERT INTO fsm_timers (machine, instance_id, instance_key, kind, timeout_of, state, event, due_at, fire_at,
                            armed_at, armed_version)
    VALUES ('{type}', NEW.id, NEW.instance_key, 'timeout', NEW.id, NEW.current_state, v_event,
            DATE_ADD(NEW.created_at, INTERVAL v_after SECOND), DATE_ADD(NEW.created_at, INTERVAL v_after SECOND),
            NEW.created_at, NEW.version);
  END IF;
END
