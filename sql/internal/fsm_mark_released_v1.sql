-- fsm_mark_released_v1: record the release on the instance rows of the locks about to be released (internal).
--
-- For every instance holding a lock row that matches (p_owner, or p_lookup_key with
-- p_scope; NULL matches all) and is held at p_at, sets the instance's unlocked_at to p_at
-- (fsm_mark_unlocked_v1). Called by fsm_unlock_v1 and fsm_force_unlock_v2 inside their
-- transactions, before they update fsm_locks: instance rows first, then fsm_locks, the
-- order of the transition trigger.
-- Parameters: p_owner, p_lookup_key, p_scope, p_at.
-- Result: none.
-- Errors: none of its own.
-- Example: CALL fsm_mark_released_v1('worker-7:5f0c', NULL, NULL, UTC_TIMESTAMP(6));
CREATE PROCEDURE `fsm_mark_released_v1`(
  IN p_owner VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_lookup_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_scope VARCHAR(48) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_at DATETIME(6))
MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
  DECLARE v_done TINYINT DEFAULT 0;
  DECLARE v_machine VARCHAR(48) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_instance BIGINT UNSIGNED;
  DECLARE v_held CURSOR FOR
    SELECT DISTINCT machine, instance_id FROM fsm_locks
     WHERE (p_owner IS NULL OR owner = p_owner) AND (p_lookup_key IS NULL OR lookup_key = p_lookup_key)
       AND (p_scope IS NULL OR scope = p_scope) AND unlocked_at IS NULL AND expires_at > p_at;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
  OPEN v_held;
  mark: LOOP
    FETCH v_held INTO v_machine, v_instance;
    IF v_done THEN
      LEAVE mark;
    END IF;
    CALL fsm_mark_unlocked_v1(v_machine, v_instance, p_at);
  END LOOP;
  CLOSE v_held;
END
