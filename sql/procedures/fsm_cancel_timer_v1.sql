-- fsm_cancel_timer_v1: cancel an armed timer (a scheduled event or a state timeout) before it fires.
--
-- Deletes the timer from fsm_timers and logs it in fsm_timer_log with outcome 'cancelled'
-- and the reason given, in one transaction. A timer being fired at that moment is waited
-- for: it has then fired, and the cancel says so. Cancelling a state timeout leaves the
-- instance in its state with no timeout; entering a state with a timeout again arms a new one.
-- Parameters: p_timer_id (the timer's id: fsm_send_at_v1's timer_id, fsm_timers_v1's
--   timer_id), p_reason (NULL or 1 to 255 characters, kept in the log).
-- Result: one row (timer_id, machine, instance_key, kind, event, due_at, outcome 'cancelled').
-- Errors: 31009 invalid argument; 31016 called inside an open transaction; 31029 no armed
--   timer of that id (the message says when it already fired, was dropped or cancelled).
-- Example: CALL fsm_cancel_timer_v1(42, 'customer paid by phone');
CREATE PROCEDURE `fsm_cancel_timer_v1`(
  IN p_timer_id BIGINT,
  IN p_reason TEXT CHARACTER SET utf8mb4)
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_started TINYINT DEFAULT 0;
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_n INT;
  DECLARE v_outcome VARCHAR(16) CHARACTER SET utf8mb4;
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    IF v_started THEN
      ROLLBACK;
    END IF;
    RESIGNAL;
  END;
  IF p_timer_id IS NULL OR p_timer_id < 1 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: timer id must be a positive number', MYSQL_ERRNO = 31009;
  END IF;
  IF p_reason IS NOT NULL AND CHAR_LENGTH(p_reason) NOT BETWEEN 1 AND 255 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: reason must be 1 to 255 characters', MYSQL_ERRNO = 31009;
  END IF;
  CALL fsm_begin_v1();  -- READ COMMITTED; 31016 inside a caller's transaction, left alone
  SET v_started = 1;
  SELECT COUNT(*) INTO v_n FROM fsm_timers WHERE id = p_timer_id FOR UPDATE;
  IF v_n = 0 THEN
    SELECT MAX(outcome) INTO v_outcome FROM fsm_timer_log WHERE id = p_timer_id;
    SET v_msg = LEFT(IF(v_outcome IS NULL, CONCAT('fsm: no armed timer ', p_timer_id),
                        CONCAT('fsm: timer ', p_timer_id, ' is no longer armed: it was ', v_outcome)), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31029;
  END IF;
  INSERT INTO fsm_timer_log (id, machine, instance_id, instance_key, kind, state, event, request_id, due_at,
                             armed_at, outcome, transition_id, errno, reason, done_by, done_at)
  SELECT id, machine, instance_id, instance_key, kind, state, event, request_id, due_at,
         armed_at, 'cancelled', NULL, NULL, p_reason, LEFT(USER(), 64), v_now
    FROM fsm_timers WHERE id = p_timer_id;
  DELETE FROM fsm_timers WHERE id = p_timer_id;
  COMMIT;
  SELECT id AS timer_id, machine, instance_key, kind, event, due_at, outcome FROM fsm_timer_log WHERE id = p_timer_id;
END
