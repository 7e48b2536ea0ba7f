-- fsm_renew_claims_v1: extend every live claim of one owner (a worker's heartbeat).
--
-- A worker claims runs for claim_seconds; while it works on them (a long handler, the rest
-- of a claimed batch) it renews them all every third of that, so that only a worker that
-- died or hangs loses its claims. Claims that already ran out are not renewed: another
-- worker may have them.
-- Parameters: p_owner; p_claim_seconds (0.1 to 86400): the new end is now + claim_seconds.
-- Result: one row (renewed): how many claims were extended.
-- Errors: 31009 invalid argument.
-- Example: CALL fsm_renew_claims_v1('worker-1:ab12', 60);
CREATE PROCEDURE `fsm_renew_claims_v1`(
  IN p_owner TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_claim_seconds DECIMAL(12,3))
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  IF p_owner IS NULL OR CHAR_LENGTH(p_owner) NOT BETWEEN 1 AND 64 OR p_claim_seconds IS NULL
     OR p_claim_seconds NOT BETWEEN 0.1 AND 86400 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: owner must be 1 to 64 characters and claim_seconds 0.1 to 86400', MYSQL_ERRNO = 31009;
  END IF;
  UPDATE fsm_runs SET due_at = DATE_ADD(v_now, INTERVAL ROUND(p_claim_seconds * 1000000) MICROSECOND)
   WHERE claimed_by = p_owner AND due_at > v_now;
  SELECT ROW_COUNT() AS renewed;
END
