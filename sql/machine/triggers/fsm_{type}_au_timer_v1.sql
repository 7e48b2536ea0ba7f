-- fsm_{type}_au_timer_v1: AFTER UPDATE on fsm_{type} — a transition disarms the old state's timeout and arms the new one's (types with timeouts only).
--
-- Installed only for a type whose definition (any version) gives a state a timeout. Runs
-- after the transition trigger (fsm_{type}_bu_v8) has applied the row's change, in the same statement and transaction,
-- whoever wrote it (a pyfsm procedure, a DBA's CALL or a raw UPDATE). A row is a transition
-- when its state changed, or when its version changed and the history's most recent row is
-- the one written at that version (a transition back into the same state). On a transition,
-- the instance's timeout timer (if any) is deleted, and when the new state has a timeout in
-- the instance's definition version a new one is armed, due timeout_seconds after the
-- transition: re-entering a state restarts its timeout. Other changes (data, status: a
-- paused instance keeps its timers) leave the timers alone. Scheduled events
-- (fsm_send_at_v1) are never touched here.
-- Errors: none of its own (a failure fails the UPDATE, which then changes nothing).
-- Example: fires on SET @fsm_event = 'pay'; UPDATE `fsm_{type}` SET current_state = 'paid' WHERE instance_key = 'k-1';
CREATE TRIGGER `fsm_{type}_au_timer_v1` AFTER UPDATE ON `fsm_{type}` FOR EACH ROW
BEGIN
  DECLARE v_after INT UNSIGNED;
  DECLARE v_event VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_after = NULL;
  IF NOT (CAST(NEW.current_state AS BINARY) <=> CAST(OLD.current_state AS BINARY))
     OR (NEW.version <> OLD.version
         AND (SELECT sort_key FROM `fsm_{type}_transitions` WHERE instance_id = NEW.id AND most_recent = 1) = NEW.version) THEN
    DELETE FROM fsm_timers WHERE machine = '{type}' AND timeout_of = NEW.id;
    SELECT timeout_seconds, timeout_event INTO v_after, v_event FROM fsm_states
     WHERE machine = '{type}' AND version = NEW.definition_version AND state = NEW.current_state;
    IF v_after IS NOT NULL THEN
      INSERT INTO fsm_timers (machine, instance_id, instance_key, kind, timeout_of, state, event, due_at, fire_at,
                              armed_at, armed_version)
      VALUES ('{type}', NEW.id, NEW.instance_key, 'timeout', NEW.id, NEW.current_state, v_event,
              DATE_ADD(NEW.updated_at, INTERVAL v_after SECOND), DATE_ADD(NEW.updated_at, INTERVAL v_after SECOND),
              NEW.updated_at, NEW.version);
    END IF;
  END IF;
END
