-- fsm_unlock_v1: release every lock an owner holds, and its advisory locks on this connection.
--
-- Rows still held by p_owner get unlocked_at = now (and so do their instances' rows); rows
-- that expired or were taken over are left alone, so a holder whose lease ran out can never
-- release the next holder's lock.
-- The advisory (GET_LOCK) locks of this owner's rows that this connection holds are
-- released, and @fsm_lock_owner is cleared when it names p_owner. Releasing nothing is not
-- an error (released = 0): releasing is tolerant.
-- Parameters: p_owner.
-- Result: one row (released): how many lock rows were released.
-- Errors: 31009 invalid argument; 31016 called inside an open transaction.
-- Example: CALL fsm_unlock_v1('worker-7:5f0c');
CREATE PROCEDURE `fsm_unlock_v1`(IN p_owner TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_n INT;
  DECLARE v_ignored INT;
  DECLARE v_started TINYINT DEFAULT 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    IF v_started THEN
      ROLLBACK;
    END IF;
    RESIGNAL;
  END;
  IF p_owner IS NULL OR CHAR_LENGTH(p_owner) NOT BETWEEN 1 AND 64 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: owner must be 1 to 64 characters of [A-Za-z0-9._:-]', MYSQL_ERRNO = 31009;
  END IF;
  CALL fsm_begin_v1();
  SET v_started = 1;
  CALL fsm_mark_released_v1(p_owner, NULL, NULL, v_now);  -- instance rows first, then fsm_locks
  UPDATE fsm_locks SET unlocked_at = v_now WHERE owner = p_owner AND unlocked_at IS NULL AND expires_at > v_now;
  SET v_n = ROW_COUNT();
  COMMIT;
  -- RELEASE_LOCK gives back only locks this connection holds; others' are untouched (0).
  SELECT COUNT(RELEASE_LOCK(advisory_name)) INTO v_ignored FROM fsm_locks
   WHERE owner = p_owner AND IS_USED_LOCK(advisory_name) <=> CONNECTION_ID();
  IF @fsm_lock_owner <=> p_owner THEN
    SET @fsm_lock_owner = NULL;
  END IF;
  SELECT v_n AS released;
END
