-- fsm_relay_lead_v1: take or keep the leadership of a relay lock (one publishing relay per database).
--
-- The relay's leadership is a row of fsm_relay_leaders with an expiry, so that relays on
-- different servers of a cluster (where GET_LOCK is local to each server) still have one
-- leader. The caller leads afterwards when the row was free or already its own:
--   * no row, or the row expired: taken (term + 1);
--   * the caller's own row, not expired: renewed (same term);
--   * another holder's row on this same server while the caller holds the advisory lock
--     GET_LOCK(p_name) here: that holder lost its connection (MySQL freed its advisory
--     lock), so the row is taken at once instead of after its expiry (term + 1).
-- A server is told apart by @@hostname:@@port#@@server_id. Otherwise nothing changes and
-- the result names the leader. Two callers on two servers
-- racing for a free row: one commits, the other gets a deadlock (1213, a certification
-- conflict on Galera) or a duplicate-key refusal reported as not leading.
-- Parameters: p_name (1-64 characters: the relay lock name); p_holder (1-128 characters:
-- the relay, unique per running relay); p_lease_seconds (0.1 to 3600): the new expiry is
-- now + lease.
-- Result: one row (leader, holder, term, server, since, expires_at): leader is 1 when the
-- caller leads now; the other columns describe whoever leads (NULL if nobody).
-- Errors: 31009 invalid argument; 31016 called inside an open transaction.
-- Example: CALL fsm_relay_lead_v1('pyfsm_relay_3f2a', 'host-1:4242:9c1e', 10);
CREATE PROCEDURE `fsm_relay_lead_v1`(
  IN p_name TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_holder TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_lease_seconds DECIMAL(12,3))
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_started, v_advisory, v_leads, v_taken TINYINT DEFAULT 0;
  DECLARE v_found TINYINT DEFAULT 1;
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_expires, v_until, v_since DATETIME(6);
  DECLARE v_server, v_held_server VARCHAR(300) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_holder VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_term BIGINT UNSIGNED;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_found = 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    IF v_started THEN
      ROLLBACK;
    END IF;
    RESIGNAL;
  END;
  IF p_name IS NULL OR CHAR_LENGTH(p_name) NOT BETWEEN 1 AND 64 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: relay lock name must be 1 to 64 characters', MYSQL_ERRNO = 31009;
  END IF;
  IF p_holder IS NULL OR CHAR_LENGTH(p_holder) NOT BETWEEN 1 AND 128 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: relay holder must be 1 to 128 characters', MYSQL_ERRNO = 31009;
  END IF;
  IF p_lease_seconds IS NULL OR p_lease_seconds NOT BETWEEN 0.1 AND 3600 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: lease_seconds must be between 0.1 and 3600', MYSQL_ERRNO = 31009;
  END IF;
  SET v_server = CONCAT(@@hostname, ':', @@port, '#', @@server_id);
  SET v_advisory = IS_USED_LOCK(p_name) <=> CONNECTION_ID();
  SET v_expires = DATE_ADD(v_now, INTERVAL ROUND(p_lease_seconds * 1000000) MICROSECOND);
  CALL fsm_begin_v1();
  SET v_started = 1;
  SELECT holder, term, server, since, expires_at INTO v_holder, v_term, v_held_server, v_since, v_until
    FROM fsm_relay_leaders WHERE name = p_name FOR UPDATE;
  IF NOT v_found THEN
    BEGIN
      -- another relay inserted the first row a moment ago (on this server): it leads
      DECLARE CONTINUE HANDLER FOR 1062 SET v_taken = 1;
      INSERT INTO fsm_relay_leaders (name, holder, term, server, connection_id, since, renewed_at, expires_at)
      VALUES (p_name, p_holder, 1, v_server, CONNECTION_ID(), v_now, v_now, v_expires);
    END;
    IF NOT v_taken THEN
      SET v_leads = 1, v_holder = p_holder, v_term = 1, v_held_server = v_server, v_since = v_now, v_until = v_expires;
    END IF;
  ELSEIF v_holder = p_holder AND v_until > v_now THEN
    UPDATE fsm_relay_leaders SET renewed_at = v_now, expires_at = v_expires, server = v_server,
           connection_id = CONNECTION_ID()
     WHERE name = p_name;
    SET v_leads = 1, v_held_server = v_server, v_until = v_expires;
  ELSEIF v_until <= v_now OR (v_held_server = v_server AND v_advisory) THEN
    UPDATE fsm_relay_leaders SET holder = p_holder, term = term + 1, server = v_server,
           connection_id = CONNECTION_ID(), since = v_now, renewed_at = v_now, expires_at = v_expires
     WHERE name = p_name;
    SET v_leads = 1, v_holder = p_holder, v_term = v_term + 1, v_held_server = v_server, v_since = v_now,
        v_until = v_expires;
  END IF;
  COMMIT;
  SELECT v_leads AS leader, v_holder AS holder, v_term AS term, v_held_server AS server, v_since AS since,
         v_until AS expires_at;
END
