-- fsm_lock_v2: take the locks an instance's type uses (global, then local), for one owner.
--
-- For each lock the instance uses (uses_global_lock: scope '*' for its lookup_key across
-- all types; uses_local_lock: scope = its type), always global first so that two callers
-- cannot deadlock each other: GET_LOCK(name, 0) on this connection (freed by MySQL if the
-- connection dies), then the lock row in fsm_locks, taken when it is free (no row,
-- released, expired) or already this owner's. The row is what counts: a row held by
-- another owner refuses the lock even where its holder's connection is gone, until the row
-- expires; a free row is taken even where a stalled holder's connection still has the
-- advisory lock. The instance row is locked first, then fsm_locks, the order of the
-- transition trigger. Nothing waits for a holder: a busy lock fails at once (pyfsm's
-- Python side retries a few times). An owner token must be unique per holder. On success
-- the connection's @fsm_lock_owner is set, so that transitions sent on this connection
-- pass the transition trigger's lock check; fsm_unlock_v1 releases and clears it. The
-- instance's unlocked_at is set to the expiry (renewals extend only the lock rows).
-- v2 (revision 0018) does what v1 did with advisory lock names MySQL 9.6+ can compute:
-- v1 hashed them with SHA1, which MySQL 9.6 moved out of the server (into a component not
-- installed by default), so every lock failed there. SHA2(..., 224) is built into MySQL 8.0
-- to 9.x and MariaDB; 'fsm:g:' or 'fsm:l:' and its 56 hex digits stay within MySQL's 64
-- characters for a lock name. The names differ from v1's: a holder through v1 and a taker
-- through v2 do not meet on the advisory lock, but the lock row decides, as always.
-- Parameters: p_machine, p_key (the instance); p_owner (1-64 of [A-Za-z0-9._:-], unique per
--   holder, e.g. a UUID); p_lease_seconds (0.1 to 86400; NULL: the definition's
--   lock_lease_seconds).
-- Result: one row (owner, machine, instance_key, lookup_key, global_lock, local_lock,
--   lease_seconds, expires_at); global_lock and local_lock say which locks were taken
--   (both 0: the instance uses no lock).
-- Errors: 31002 unknown machine; 31003 unknown instance; 31009 invalid argument, or the
--   instance has no lookup_key; 31014 a lock is held by another owner (the message names
--   it) or is being taken right now; 31016 called inside an open transaction.
-- Example: CALL fsm_lock_v2('order', 'k-1', 'worker-7:5f0c', NULL);
CREATE PROCEDURE `fsm_lock_v2`(
  IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_owner TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_lease_seconds DECIMAL(12,3))
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_started TINYINT DEFAULT 0;
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_expires, v_until DATETIME(6);
  DECLARE v_id BIGINT UNSIGNED;
  DECLARE v_lookup VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_key, v_held_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_global, v_local, v_want, v_found, v_free TINYINT DEFAULT 0;
  DECLARE v_got_g, v_got_l TINYINT DEFAULT 0;
  DECLARE v_lease DECIMAL(12,3);
  DECLARE v_i INT DEFAULT 0;
  DECLARE v_scope, v_held_machine VARCHAR(48) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_name, v_holder VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_unlocked DATETIME(6);
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_found = 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    IF v_started THEN
      ROLLBACK;
    END IF;
    -- give back only the advisory locks this call took
    IF v_got_g THEN
      DO RELEASE_LOCK(CONCAT('fsm:g:', SHA2(v_lookup, 224)));
    END IF;
    IF v_got_l THEN
      DO RELEASE_LOCK(CONCAT('fsm:l:', SHA2(CONCAT(p_machine, ':', v_lookup), 224)));
    END IF;
    RESIGNAL;
  END;
  CALL fsm_require_machine_v1(p_machine);
  IF p_key IS NULL OR CHAR_LENGTH(p_key) NOT BETWEEN 1 AND 191 OR p_key LIKE '% ' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: key must be 1 to 191 characters, not ending in a space', MYSQL_ERRNO = 31009;
  END IF;
  IF p_owner IS NULL OR CHAR_LENGTH(p_owner) NOT BETWEEN 1 AND 64 OR p_owner REGEXP '[^A-Za-z0-9._:-]' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: owner must be 1 to 64 characters of [A-Za-z0-9._:-]', MYSQL_ERRNO = 31009;
  END IF;
  IF p_lease_seconds IS NOT NULL AND p_lease_seconds NOT BETWEEN 0.1 AND 86400 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: lease_seconds must be between 0.1 and 86400', MYSQL_ERRNO = 31009;
  END IF;
  CALL fsm_begin_v1();
  SET v_started = 1;
  -- the instance row first, then fsm_locks: the order the transition trigger uses
  CALL fsm_lock_instance_v1(p_machine, p_key);
  SET @fsm_lk_key = p_key;
  SET @fsm_sql = CONCAT('SELECT MAX(i.id), MAX(i.lookup_key), MAX(i.uses_global_lock), MAX(i.uses_local_lock), ',
    'MAX(d.lock_lease_seconds) INTO @fsm_lk_id, @fsm_lk_lookup, @fsm_lk_global, @fsm_lk_local, @fsm_lk_lease ',
    'FROM `fsm_', p_machine, '` i JOIN fsm_definitions d ON d.machine = i.machine AND d.version = i.definition_version ',
    'WHERE i.instance_key = ?');
  PREPARE fsm_stmt FROM @fsm_sql;
  EXECUTE fsm_stmt USING @fsm_lk_key;
  DEALLOCATE PREPARE fsm_stmt;
  SET v_id = @fsm_lk_id, v_lookup = @fsm_lk_lookup, v_global = COALESCE(@fsm_lk_global, 0),
      v_local = COALESCE(@fsm_lk_local, 0), v_lease = COALESCE(p_lease_seconds, @fsm_lk_lease), v_key = p_key;
  SET @fsm_lk_key = NULL, @fsm_lk_id = NULL, @fsm_lk_lookup = NULL, @fsm_lk_global = NULL,
      @fsm_lk_local = NULL, @fsm_lk_lease = NULL, @fsm_sql = NULL;
  IF v_id IS NULL THEN
    SET v_msg = LEFT(CONCAT('fsm: no ', p_machine, ' ', p_key), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31003;
  END IF;
  IF (v_global OR v_local) AND v_lookup IS NULL THEN
    SET v_msg = LEFT(CONCAT('fsm: ', p_machine, ' ', p_key, ' has no lookup_key; locks are keyed by it'), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31009;
  END IF;
  SET v_expires = DATE_ADD(v_now, INTERVAL ROUND(v_lease * 1000000) MICROSECOND);
  WHILE v_i < 2 DO
    SET v_want = IF(v_i = 0, v_global, v_local);
    IF v_want THEN
      SET v_scope = IF(v_i = 0, '*', p_machine);
      SET v_name = IF(v_i = 0, CONCAT('fsm:g:', SHA2(v_lookup, 224)), CONCAT('fsm:l:', SHA2(CONCAT(p_machine, ':', v_lookup), 224)));
      IF NOT (IS_USED_LOCK(v_name) <=> CONNECTION_ID()) THEN  -- not twice: GET_LOCK counts re-entries
        IF GET_LOCK(v_name, 0) = 1 THEN
          IF v_i = 0 THEN SET v_got_g = 1; ELSE SET v_got_l = 1; END IF;
        END IF;
      END IF;
      SET v_found = 1, v_holder = NULL;
      SELECT owner, expires_at, unlocked_at, machine, instance_key
        INTO v_holder, v_until, v_unlocked, v_held_machine, v_held_key
        FROM fsm_locks WHERE scope = v_scope AND lookup_key = v_lookup FOR UPDATE;
      -- The row decides: free (no row, released, expired) or ours already. Its FOR UPDATE
      -- makes concurrent takers queue; the advisory lock is only the fast path, so a row left
      -- by a stalled holder whose connection still has the advisory lock can be taken over.
      SET v_free = NOT v_found OR v_unlocked IS NOT NULL OR v_until <= v_now OR v_holder = p_owner;
      IF NOT v_free THEN
        SET v_msg = LEFT(CONCAT('fsm: lock ', v_scope, ' ', v_lookup, ' is held by ', v_holder, ' (', v_held_machine,
                                ' ', v_held_key, ') until ', v_until), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31014;
      END IF;
      IF v_found THEN
        UPDATE fsm_locks SET machine = p_machine, instance_id = v_id, instance_key = v_key,
               locked_at = IF(owner = p_owner AND unlocked_at IS NULL, locked_at, v_now), owner = p_owner,
               unlocked_at = NULL, expires_at = v_expires, advisory_name = v_name, connection_id = CONNECTION_ID()
         WHERE scope = v_scope AND lookup_key = v_lookup;
      ELSE
        BEGIN
          -- another taker inserted the first row of this lock a moment ago: it holds it now
          DECLARE EXIT HANDLER FOR 1062
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: lock is being taken by another owner right now', MYSQL_ERRNO = 31014;
          INSERT INTO fsm_locks (scope, lookup_key, machine, instance_id, instance_key, owner, locked_at,
                                 unlocked_at, expires_at, advisory_name, connection_id)
          VALUES (v_scope, v_lookup, p_machine, v_id, v_key, p_owner, v_now, NULL, v_expires, v_name, CONNECTION_ID());
        END;
      END IF;
    END IF;
    SET v_i = v_i + 1;
  END WHILE;
  IF v_global OR v_local THEN
    CALL fsm_mark_unlocked_v1(p_machine, v_id, v_expires);
  END IF;
  COMMIT;
  SET @fsm_lock_owner = p_owner;
  SELECT p_owner AS owner, p_machine AS machine, v_key AS instance_key, v_lookup AS lookup_key,
         v_global AS global_lock, v_local AS local_lock, v_lease AS lease_seconds,
         IF(v_global OR v_local, v_expires, NULL) AS expires_at;
END
