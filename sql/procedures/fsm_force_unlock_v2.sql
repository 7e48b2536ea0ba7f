-- fsm_force_unlock_v2: release a held lock whatever its owner, and record that in fsm_lock_log.
--
-- For a DBA when a holder is stuck. The lock rows of p_lookup_key (in p_scope: '*' for the
-- global lock, a machine type for its local lock, NULL for every scope) that are held are
-- released (unlocked_at = now, on the lock row and the instance row) and one fsm_lock_log
-- row per lock records the owner, the account that forced it and the reason. The old
-- owner's renewals and releases fail from then on. If the old holder's connection is alive
-- it still holds the advisory lock; the next acquirer may take the row anyway (see
-- fsm_lock_v1), and `KILL <advisory_connection>` frees the advisory lock too.
-- A lookup key ending in a space is refused: keys are compared with PAD SPACE, so 'acct-1 '
-- would release the locks of 'acct-1', a key pyfsm never stores with the space.
-- Parameters: p_scope ('*' for the global lock, a machine type for its local lock, NULL for
--   every scope); p_lookup_key (required, 1-191 characters, not ending in a space);
--   p_reason (required, at most 255 characters).
-- Result: one row per released lock (scope, lookup_key, machine, instance_key, owner,
--   expires_at, advisory_connection); no row when nothing was held.
-- Errors: 31009 invalid argument; 31016 called inside an open transaction.
-- Example: CALL fsm_force_unlock_v2('*', 'account-7', 'worker host lost, ticket OPS-12');
CREATE PROCEDURE `fsm_force_unlock_v2`(
  IN p_scope TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_lookup_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_reason TEXT CHARACTER SET utf8mb4)
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  IF p_lookup_key IS NULL OR CHAR_LENGTH(p_lookup_key) NOT BETWEEN 1 AND 191 OR p_lookup_key LIKE '% ' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: lookup_key must be 1 to 191 characters, not ending in a space', MYSQL_ERRNO = 31009;
  END IF;
  BEGIN
    DECLARE v_started TINYINT DEFAULT 0;
    DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
    DECLARE v_first BIGINT UNSIGNED;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
      IF v_started THEN
        ROLLBACK;
      END IF;
      RESIGNAL;
    END;
    IF p_lookup_key IS NULL OR CHAR_LENGTH(p_lookup_key) NOT BETWEEN 1 AND 191 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: lookup_key must be 1 to 191 characters', MYSQL_ERRNO = 31009;
    END IF;
    IF p_scope IS NOT NULL AND p_scope <> '*' AND NOT fsm_valid_name_v1(p_scope, 48) THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: scope must be *, a machine type or NULL', MYSQL_ERRNO = 31009;
    END IF;
    IF p_reason IS NULL OR CHAR_LENGTH(TRIM(p_reason)) = 0 OR CHAR_LENGTH(p_reason) > 255 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: a reason of 1 to 255 characters is required', MYSQL_ERRNO = 31009;
    END IF;
    CALL fsm_begin_v1();
    SET v_started = 1;
    CALL fsm_mark_released_v1(NULL, p_lookup_key, p_scope, v_now);  -- instance rows first, then fsm_locks
    SET v_first = (SELECT COALESCE(MAX(id), 0) + 1 FROM fsm_lock_log);
    INSERT INTO fsm_lock_log (scope, lookup_key, machine, instance_key, owner, expires_at, released_at, released_by, reason)
    SELECT scope, lookup_key, machine, instance_key, owner, expires_at, v_now, USER(), p_reason
      FROM fsm_locks
     WHERE lookup_key = p_lookup_key AND (p_scope IS NULL OR scope = p_scope)
       AND unlocked_at IS NULL AND expires_at > v_now
     ORDER BY id FOR UPDATE;
    UPDATE fsm_locks SET unlocked_at = v_now
     WHERE lookup_key = p_lookup_key AND (p_scope IS NULL OR scope = p_scope)
       AND unlocked_at IS NULL AND expires_at > v_now;
    COMMIT;
    SELECT g.scope, g.lookup_key, g.machine, g.instance_key, g.owner, g.expires_at,
           IS_USED_LOCK(l.advisory_name) AS advisory_connection
      FROM fsm_lock_log g JOIN fsm_locks l ON l.scope = g.scope AND l.lookup_key = g.lookup_key
     WHERE g.id >= v_first AND g.released_at = v_now AND g.released_by = USER()
     ORDER BY g.id;
  END;
END
