-- fsm_renew_claims_v1: extend the claims a worker still holds (its heartbeat).
--
-- A worker claims runs for claim_seconds; while it works on them (a long handler, the rest
-- of a claimed batch) it renews the ones it still holds every third of that, so that only
-- a worker that died loses its claims. Only the listed instances of p_machine claimed by
-- p_owner and not yet run out are renewed: another worker may have the others.
-- Parameters: p_owner; p_machine; p_instance_ids (comma-separated ids, e.g. '12,15');
--   p_claim_seconds (0.1 to 86400): the new end is now + claim_seconds.
-- Result: one row (renewed): how many claims were extended.
-- Errors: 31009 invalid argument.
-- Example: CALL fsm_renew_claims_v1('worker-1:ab12', 'order', '12,15', 60);
CREATE PROCEDURE `fsm_renew_claims_v1`(
  IN p_owner TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_instance_ids TEXT CHARACTER SET ascii,
  IN p_claim_seconds DECIMAL(12,3))
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  IF p_owner IS NULL OR CHAR_LENGTH(p_owner) NOT BETWEEN 1 AND 64 OR p_claim_seconds IS NULL
     OR p_claim_seconds NOT BETWEEN 0.1 AND 86400 OR NOT fsm_valid_name_v1(p_machine, 48)
     OR p_instance_ids IS NULL OR p_instance_ids NOT REGEXP '^[0-9]+(,[0-9]+)*$' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: invalid owner, machine, instance ids or claim_seconds', MYSQL_ERRNO = 31009;
  END IF;
  UPDATE fsm_runs SET due_at = DATE_ADD(v_now, INTERVAL ROUND(p_claim_seconds * 1000000) MICROSECOND)
   WHERE claimed_by = p_owner AND machine = p_machine AND FIND_IN_SET(instance_id, p_instance_ids) > 0
     AND due_at > v_now;
  SELECT ROW_COUNT() AS renewed;
END
