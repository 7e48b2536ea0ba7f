-- fsm_update_instance_v1: one UPDATE of an instance row by the engine (internal).
--
-- With p_event, a transition: @fsm_event, @fsm_handler, @fsm_metadata and @fsm_source =
-- 'engine' are set for the transition trigger, which checks the rule and the locks and
-- writes history and outbox; p_data (a JSON object) becomes the instance's data. Without
-- p_event, p_status, p_resume_from_step and p_data are written (NULL keeps them). Runs inside the
-- caller's transaction, after fsm_lock_instance_v1.
-- Parameters: p_machine (validated by the caller), p_id, p_event, p_data, p_handler,
--   p_metadata, p_status, p_resume_from_step.
-- Result: none.
-- Errors: those of the transition trigger (31005, 31008, 31011, 31018, ...).
-- Example: CALL fsm_update_instance_v1('order', 42, 'pay', '{"paid": true}', 'charge', NULL, NULL, NULL);
CREATE PROCEDURE `fsm_update_instance_v1`(
  IN p_machine VARCHAR(48) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_id BIGINT UNSIGNED,
  IN p_event VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_data LONGTEXT CHARACTER SET utf8mb4,
  IN p_handler VARCHAR(128) CHARACTER SET utf8mb4,
  IN p_metadata LONGTEXT CHARACTER SET utf8mb4,
  IN p_status VARCHAR(16) CHARACTER SET utf8mb4,
  IN p_resume_from_step VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    SET @fsm_event = NULL, @fsm_handler = NULL, @fsm_metadata = NULL, @fsm_source = NULL,
        @fsm_a1 = NULL, @fsm_a2 = NULL, @fsm_a3 = NULL, @fsm_a4 = NULL;
    RESIGNAL;
  END;
  IF NOT fsm_valid_name_v1(p_machine, 48) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: invalid machine name', MYSQL_ERRNO = 31009;
  END IF;
  SET @fsm_a1 = p_id;
  IF p_event IS NOT NULL THEN
    SET @fsm_event = p_event, @fsm_handler = p_handler, @fsm_metadata = p_metadata, @fsm_source = 'engine',
        @fsm_request_id = NULL,
        @fsm_a2 = p_data;
    SET @fsm_sql = CONCAT('UPDATE `fsm_', p_machine, '` SET data = COALESCE(?, data) WHERE id = ?');
    PREPARE fsm_stmt FROM @fsm_sql;
    EXECUTE fsm_stmt USING @fsm_a2, @fsm_a1;
  ELSE
    -- not a transition, whatever a failed raw UPDATE left in @fsm_event
    SET @fsm_event = NULL, @fsm_handler = NULL, @fsm_metadata = NULL, @fsm_request_id = NULL;
    SET @fsm_a2 = p_status, @fsm_a3 = p_resume_from_step, @fsm_a4 = p_data;
    SET @fsm_sql = CONCAT('UPDATE `fsm_', p_machine, '` SET status = COALESCE(?, status), ',
                          'resume_from_step = COALESCE(?, resume_from_step), data = COALESCE(?, data) WHERE id = ?');
    PREPARE fsm_stmt FROM @fsm_sql;
    EXECUTE fsm_stmt USING @fsm_a2, @fsm_a3, @fsm_a4, @fsm_a1;
  END IF;
  DEALLOCATE PREPARE fsm_stmt;
  SET @fsm_event = NULL, @fsm_handler = NULL, @fsm_metadata = NULL, @fsm_source = NULL,
      @fsm_a1 = NULL, @fsm_a2 = NULL, @fsm_a3 = NULL, @fsm_a4 = NULL, @fsm_sql = NULL;
END
