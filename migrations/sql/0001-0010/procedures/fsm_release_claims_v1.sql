-- fsm_release_claims_v1: give back the claims an owner holds that it is not working on.
--
-- A worker whose claim call failed on the way back (the connection dropped after the claim
-- committed) holds claims it never learned of. Left alone they would run out and the next
-- claim would count an attempt of the step, as if a worker had died running it, although
-- no handler ran. The worker calls this right after such a failure: every run of p_machine
-- claimed by p_owner whose claim has not run out, except the instances in p_keep_ids (the
-- ones it is working on), is due again now and unclaimed, its attempt unchanged. Safe to
-- repeat; another owner's claims are never touched.
-- Parameters: p_owner (1-64 of [A-Za-z0-9._:-]); p_machine; p_keep_ids (comma-separated
--   instance ids the owner is still working on, '' or NULL for none).
-- Result: one row (released): how many claims were given back.
-- Errors: 31009 invalid argument.
-- Example: CALL fsm_release_claims_v1('worker-1:ab12', 'order', '12');
CREATE PROCEDURE `fsm_release_claims_v1`(
  IN p_owner TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_keep_ids TEXT CHARACTER SET ascii)
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  IF p_owner IS NULL OR CHAR_LENGTH(p_owner) NOT BETWEEN 1 AND 64 OR p_owner REGEXP '[^A-Za-z0-9._:-]'
     OR NOT fsm_valid_name_v1(p_machine, 48)
     OR (p_keep_ids IS NOT NULL AND p_keep_ids <> '' AND p_keep_ids NOT REGEXP '^[0-9]+(,[0-9]+)*$') THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: invalid owner, machine or instance ids', MYSQL_ERRNO = 31009;
  END IF;
  UPDATE fsm_runs SET due_at = v_now, claimed_by = NULL, updated_at = v_now
   WHERE claimed_by = p_owner AND machine = p_machine AND due_at > v_now
     AND FIND_IN_SET(instance_id, COALESCE(p_keep_ids, '')) = 0;
  SELECT ROW_COUNT() AS released;
END
