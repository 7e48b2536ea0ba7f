-- fsm_{type}_adopt_v1: adopt up to p_limit existing rows of {subject} into machine type '{type}', in one transaction.
--
-- One batch of an adoption (Store.adopt and `pyfsm attach` call it in a loop; rendered for the
-- attached table when it is attached). Keyset over the table's key: it looks at the rows with
-- {key} > p_after (NULL: from the first) in key order, locks them (FOR UPDATE, in key order, as
-- the table's own writers lock a row before its instance), and gives each row with no
-- instance yet whose state is one of the current definition version's an instance in that
-- state, with its first history row (source 'adopt', event and from_state NULL), its counter
-- and, for a type with a topic, its outbox row. A row in a state the machine lacks (NULL
-- included) is counted and left alone: never silently accepted. The batch commits as a
-- whole, so a run killed at any moment left each row wholly adopted or not; calling again
-- from the last key returned (or from NULL: adopted rows are skipped) finishes the job. The
-- application's writes go on meanwhile: a row inserted since is created with its instance,
-- and one whose state changes before its batch is adopted by that UPDATE
-- (fsm_{type}_sbu_v1).
-- Parameters: p_after (the last key of the previous batch as text, as `last_key` returned;
--   NULL to start), p_limit (1 to 10000 rows to look at).
-- A row that has an instance already (adopted before a detach) whose state changed since is
-- moved by the rules, as a raw UPDATE of the instance would be (history source 'update',
-- metadata {"reattached": true}); a move the rules refuse is counted and left alone.
-- Result: one row: seen (rows looked at), adopted, unknown (rows left in a state the machine
--   lacks), first_unknown (the key of the first of them, as text), moved and refused (rows
--   whose state changed while detached, moved or left), first_refused, last_key (give it as
--   p_after next), done (1: no row after last_key).
-- Errors: 31009 invalid p_limit; 31016 called inside an open transaction; 1213 a deadlock
--   (call again: the batch was rolled back).
-- Example: CALL fsm_{type}_adopt_v1(NULL, 1000);
CREATE PROCEDURE `fsm_{type}_adopt_v1`(
  IN p_after TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_limit INT)
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_last {key_type};
  DECLARE v_seen, v_adopted, v_unknown, v_moved, v_refused INT DEFAULT 0;
  DECLARE v_first_unknown, v_first_refused TEXT CHARACTER SET utf8mb4;
  DECLARE v_version INT UNSIGNED;
  DECLARE v_offset INT DEFAULT GREATEST(COALESCE(p_limit, 1), 1) - 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    SET @fsm_source = NULL, @fsm_subject_write = NULL, @fsm_metadata = NULL;
    RESIGNAL;
  END;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: p_limit must be 1 to 10000', MYSQL_ERRNO = 31009;
  END IF;
  CALL fsm_begin_v1();
  SET v_version = (SELECT current_version FROM fsm_machines WHERE machine = '{type}');
  -- the batch's last key: the p_limit-th row after p_after, or the table's last
  SET v_last = (SELECT {key} FROM {subject} WHERE p_after IS NULL OR {key} > {after_key}
                 ORDER BY {key} LIMIT 1 OFFSET v_offset);
  IF v_last IS NULL THEN
    SET v_last = (SELECT MAX({key}) FROM {subject});
  END IF;
  -- lock the batch's rows in key order, before any instance row (the writers' order)
  SELECT COUNT(*) INTO v_seen FROM {subject}
   WHERE (p_after IS NULL OR {key} > {after_key}) AND {key} <= v_last FOR UPDATE;
  SELECT COUNT(*), MIN({instance_key_s}) INTO v_unknown, v_first_unknown FROM {subject} s
   WHERE (p_after IS NULL OR s.{key} > {after_key}) AND s.{key} <= v_last
     AND NOT EXISTS (SELECT 1 FROM fsm_states st WHERE st.machine = '{type}' AND st.version = v_version
                        AND CAST(st.state AS BINARY) = CAST(s.{state} AS BINARY));
  -- each instance by its own single-row INSERT ... VALUES, not one INSERT ... SELECT: MariaDB
  -- (innodb_autoinc_lock_mode 1) holds fsm_{type}'s table AUTO-INC lock for the whole of an
  -- INSERT ... SELECT, while a REPEATABLE READ writer adopting a row itself (fsm_{type}_sbu_v1)
  -- holds the gap its UPDATE found empty and waits for that lock: a deadlock MariaDB reports
  -- to the writer as 1467, which no retry loop knows
  BEGIN
    DECLARE v_end TINYINT DEFAULT 0;
    DECLARE v_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_state VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_lookup TEXT CHARACTER SET utf8mb4;
    DECLARE v_data JSON;
    DECLARE c_new CURSOR FOR
      SELECT {instance_key_s}, s.{state}, {s_lookup_value}, {s_data_value} FROM {subject} s
       WHERE (p_after IS NULL OR s.{key} > {after_key}) AND s.{key} <= v_last
         AND EXISTS (SELECT 1 FROM fsm_states st WHERE st.machine = '{type}' AND st.version = v_version
                        AND CAST(st.state AS BINARY) = CAST(s.{state} AS BINARY))
         AND NOT EXISTS (SELECT 1 FROM `fsm_{type}` i WHERE i.instance_key = {instance_key_s})
       ORDER BY s.{key};
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_end = 1;
    OPEN c_new;
    adopting: LOOP
      -- reset before each FETCH: only the FETCH's own NOT FOUND ends the loop
      SET v_end = 0;
      FETCH c_new INTO v_key, v_state, v_lookup, v_data;
      IF v_end THEN
        LEAVE adopting;
      END IF;
      SET @fsm_source = 'adopt';
      INSERT INTO `fsm_{type}` (instance_key, current_state, lookup_key, data) VALUES (v_key, v_state, v_lookup, v_data);
      SET v_adopted = v_adopted + 1;
    END LOOP;
    CLOSE c_new;
    SET @fsm_source = NULL;
  END;
  -- rows whose state changed while the type was detached: moved by the rules, as a raw UPDATE
  -- of the instance would be (metadata {"reattached": true}); a move the rules refuse is
  -- counted and left, the instance where its history ends
  BEGIN
    DECLARE v_end TINYINT DEFAULT 0;
    DECLARE v_id BIGINT UNSIGNED;
    DECLARE v_key TEXT CHARACTER SET utf8mb4;
    DECLARE v_to VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_lookup TEXT CHARACTER SET utf8mb4;
    DECLARE v_data JSON;
    DECLARE v_ok TINYINT;
    DECLARE c_drifted CURSOR FOR
      SELECT i.id, i.instance_key, CONVERT(CAST(s.{state} AS BINARY) USING utf8mb4), {s_lookup_value}, {s_data_value}
        FROM {subject} s
        JOIN `fsm_{type}` i ON i.instance_key = {instance_key_s}
       WHERE (p_after IS NULL OR s.{key} > {after_key}) AND s.{key} <= v_last
         AND NOT (CAST(i.current_state AS BINARY) <=> CAST(s.{state} AS BINARY))
       ORDER BY s.{key};
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_end = 1;
    OPEN c_drifted;
    drifted: LOOP
      FETCH c_drifted INTO v_id, v_key, v_to, v_lookup, v_data;
      IF v_end THEN
        LEAVE drifted;
      END IF;
      SET v_ok = 1;
      BEGIN
        -- the rules' refusals only (SIGNAL's 45000): a deadlock still ends the batch
        DECLARE CONTINUE HANDLER FOR SQLSTATE '45000' SET v_ok = 0;
        -- the instance alone (the row holds v_to already: the instance's trigger that moves
        -- the row's column finds nothing to change); the row's lookup and copied columns as
        -- read above (the copy trigger sets each copied column again from the row)
        SET @fsm_metadata = '{"reattached": true}';
        UPDATE `fsm_{type}` SET current_state = v_to{drift_tracked_set} WHERE id = v_id;
      END;
      SET @fsm_metadata = NULL;
      IF v_ok THEN
        SET v_moved = v_moved + 1;
      ELSE
        SET v_refused = v_refused + 1, v_first_refused = COALESCE(v_first_refused, v_key);
      END IF;
    END LOOP;
    CLOSE c_drifted;
  END;
  COMMIT;
  SELECT v_seen AS seen, v_adopted AS adopted, v_unknown AS unknown, v_first_unknown AS first_unknown,
         v_moved AS moved, v_refused AS refused, v_first_refused AS first_refused,
         {last_key_text} AS last_key,
         NOT EXISTS (SELECT 1 FROM {subject} WHERE {key} > v_last) AS done;
END
