-- fsm_renew_lock_v1: extend every lock an owner holds (a heartbeat).
--
-- Only rows still held by p_owner are extended: a lock that expired, was released, was
-- force-released or was taken over by another owner is never renewed, so a holder whose
-- lease ran out cannot extend the next holder's lock. Renewing nothing is an error.
-- Parameters: p_owner; p_lease_seconds (0.1 to 86400): the new expiry is now + lease.
-- Result: one row (renewed, expires_at): how many lock rows were extended.
-- Errors: 31009 invalid argument; 31019 the owner holds no lock any more.
-- Example: CALL fsm_renew_lock_v1('worker-7:5f0c', 60);
CREATE PROCEDURE `fsm_renew_lock_v1`(
  IN p_owner TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_lease_seconds DECIMAL(12,3))
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_expires DATETIME(6);
  DECLARE v_n INT;
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  IF p_owner IS NULL OR CHAR_LENGTH(p_owner) NOT BETWEEN 1 AND 64 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: owner must be 1 to 64 characters of [A-Za-z0-9._:-]', MYSQL_ERRNO = 31009;
  END IF;
  IF p_lease_seconds IS NULL OR p_lease_seconds NOT BETWEEN 0.1 AND 86400 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: lease_seconds must be between 0.1 and 86400', MYSQL_ERRNO = 31009;
  END IF;
  SET v_expires = DATE_ADD(v_now, INTERVAL ROUND(p_lease_seconds * 1000000) MICROSECOND);
  -- one statement, autocommitted: no transaction to leave open
  UPDATE fsm_locks SET expires_at = v_expires
   WHERE owner = p_owner AND unlocked_at IS NULL AND expires_at > v_now;
  SET v_n = ROW_COUNT();
  IF v_n = 0 THEN
    SET v_msg = LEFT(CONCAT('fsm: ', p_owner, ' holds no lock any more (expired, released or taken over)'), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31019;
  END IF;
  SELECT v_n AS renewed, v_expires AS expires_at;
END
