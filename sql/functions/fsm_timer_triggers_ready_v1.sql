-- fsm_timer_triggers_ready_v1: does a machine type that needs timer triggers have them?
--
-- A type needs its timer triggers (fsm_{type}_ai_timer_v1 and _au_timer_v1, which arm and
-- disarm state timeouts) when a state of any of its definition versions has a timeout. They
-- can only be created by a client (MySQL cannot create triggers from a routine): `pyfsm sync`
-- or Store.define(). fsm_define_v6 reports the answer in tables_ready. Internal.
-- Parameters: p_machine (a valid machine name).
-- Returns: 1 when no state of the type has a timeout or both triggers exist, else 0.
-- Errors: none.
-- Example: SELECT fsm_timer_triggers_ready_v1('order');
CREATE FUNCTION `fsm_timer_triggers_ready_v1`(p_machine VARCHAR(48) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
RETURNS TINYINT NOT DETERMINISTIC READS SQL DATA SQL SECURITY INVOKER
RETURN NOT EXISTS (SELECT 1 FROM fsm_states WHERE machine = p_machine AND timeout_seconds IS NOT NULL)
  OR (SELECT COUNT(*) FROM information_schema.triggers
       WHERE trigger_schema = DATABASE()
         AND CAST(trigger_name AS BINARY) IN (CAST(CONCAT('fsm_', p_machine, '_ai_timer_v1') AS BINARY),
                                              CAST(CONCAT('fsm_', p_machine, '_au_timer_v1') AS BINARY))) = 2
