-- fsm_mark_unlocked_v1: record on an instance row until when its lock holds (internal).
--
-- Sets unlocked_at of instance p_instance_id of type p_machine to p_at: the lease's expiry
-- when a lock is taken (in the future: held), the moment of release when it is released.
-- The lock itself lives in fsm_locks; this keeps the instance row telling the same story.
-- A bookkeeping update: it does not bump the instance's version. Called by fsm_lock_v1,
-- fsm_unlock_v1 and fsm_force_unlock_v2 inside their transactions.
-- Parameters: p_machine (a validated machine name), p_instance_id, p_at.
-- Result: none.
-- Errors: none of its own.
-- Example: CALL fsm_mark_unlocked_v1('order', 42, UTC_TIMESTAMP(6));
CREATE PROCEDURE `fsm_mark_unlocked_v1`(
  IN p_machine VARCHAR(48) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_instance_id BIGINT UNSIGNED,
  IN p_at DATETIME(6))
MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
  IF fsm_valid_name_v1(p_machine, 48) THEN
    -- a leftover @fsm_event (a failed raw UPDATE) must not turn this into a transition
    SET @fsm_event = NULL, @fsm_handler = NULL, @fsm_metadata = NULL, @fsm_request_id = NULL;
    SET @fsm_a1 = p_at, @fsm_a2 = p_instance_id;
    SET @fsm_sql = CONCAT('UPDATE `fsm_', p_machine, '` SET unlocked_at = ? WHERE id = ?');
    PREPARE fsm_stmt FROM @fsm_sql;
    EXECUTE fsm_stmt USING @fsm_a1, @fsm_a2;
    DEALLOCATE PREPARE fsm_stmt;
    SET @fsm_a1 = NULL, @fsm_a2 = NULL, @fsm_sql = NULL;
  END IF;
END
