-- fsm_{type}_upgrade_v1: move up to p_limit instances of {type} to a newer definition version, each in a transaction of its own.
--
-- One batch of an upgrade (fsm_upgrade_instances_v1 calls it; Store.upgrade_instances and
-- `pyfsm upgrade` call that in a loop). Keyset: it looks at the instances of an older
-- version with id > p_after_id, in id order, and returns the last id it looked at; call it
-- again from there until done = 1. Each instance is locked (FOR UPDATE), read again (a sender
-- may have moved it since: it is upgraded from where it is now) and moved in one short
-- transaction: definition_version and the mapped state by one UPDATE, which the transition
-- trigger records as one history row (source 'upgrade'), with its counters, status and
-- outbox row; its state timeout follows the new version (the timer trigger disarms a
-- timeout the new version drops and arms one it adds or changes, counted from the move; an
-- unchanged timeout (same seconds and event) keeps its due time). An instance stays where
-- it is, counted, when a worker holds a claim on its run ('claimed': a handler may be
-- running it), when the lock of its lookup key is held ('locked'), or when its state has no
-- counterpart in the target version and no map entry ('unmapped'). Running it again after
-- an interruption (SIGKILL, lost connection) finishes the job: a moved instance is at the
-- target version and no longer looked at; an instance is always wholly moved or not.
-- Progress: after each instance, @fsm_u_last (the last id looked at) and @fsm_u_groups (the
-- counts so far, as the result below in JSON) are set, so that a caller whose call failed
-- part way (a deadlock inside the trigger ends the call) can tell what was done.
-- Parameters: p_to_version (NULL: the type's current version), p_map (JSON object
--   {"old state": "new state"} or NULL), p_only (JSON {"states": [...], "versions": [...]}
--   or NULL), p_after_id (0 to start), p_limit (1 to 10000 instances to look at).
--   fsm_upgrade_check_v1 says what each must be.
-- Result: one row per (from_version, from_state, to_state, outcome) met in this batch, outcome
--   'moved', 'claimed', 'locked' or 'unmapped' (to_state NULL), with instances, and on every
--   row to_version, last_id (give it as p_after_id next) and done (1: no instance of an older
--   version is left after last_id); a batch that met none returns one row with from_version NULL.
-- Errors: 31009 invalid p_after_id or p_limit; 31016 called inside an open transaction;
--   31030, 31031 (fsm_upgrade_check_v1); 1213 a deadlock inside the trigger (call again from
--   @fsm_u_last).
-- Example: CALL `fsm_{type}_upgrade_v1`(NULL, NULL, NULL, 0, 500);
CREATE PROCEDURE `fsm_{type}_upgrade_v1`(
  IN p_to_version BIGINT,
  IN p_map LONGTEXT CHARACTER SET utf8mb4,
  IN p_only LONGTEXT CHARACTER SET utf8mb4,
  IN p_after_id BIGINT,
  IN p_limit INT)
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_started TINYINT DEFAULT 0;
  DECLARE v_to, v_last, v_seen, v_from BIGINT DEFAULT 0;
  DECLARE v_id BIGINT UNSIGNED;
  DECLARE v_done TINYINT DEFAULT 0;
  DECLARE v_states, v_versions LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_groups LONGTEXT CHARACTER SET utf8mb4 DEFAULT '{}';
  DECLARE v_state, v_target VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_lookup VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_global, v_local TINYINT;
  DECLARE v_outcome VARCHAR(16) CHARACTER SET utf8mb4;
  DECLARE v_group VARCHAR(200) CHARACTER SET utf8mb4;
  DECLARE v_old_after, v_new_after INT UNSIGNED;
  DECLARE v_old_event, v_new_event VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_due, v_fire, v_armed DATETIME(6);
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    IF v_started THEN
      ROLLBACK;
    END IF;
    SET @fsm_upgrade = NULL;
    RESIGNAL;
  END;
  IF p_after_id IS NULL OR p_after_id < 0 OR p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: p_after_id must be 0 or more and p_limit 1 to 10000', MYSQL_ERRNO = 31009;
  END IF;
  CALL fsm_upgrade_check_v1('{type}', p_to_version, p_map, p_only);
  -- inside a caller's transaction it would commit that: 31016 at once, whether or not an
  -- instance is left to move (fsm_begin_v1 refuses before it starts one)
  CALL fsm_begin_v1();
  COMMIT;
  SET v_to = @fsm_u_to, v_last = p_after_id,
      v_states = JSON_EXTRACT(p_only, '$.states'), v_versions = JSON_EXTRACT(p_only, '$.versions');
  SET @fsm_u_last = v_last, @fsm_u_groups = NULL;
  WHILE v_seen < p_limit AND NOT v_done DO
    SET v_id = NULL;
    -- the next candidate, read without a lock (the primary key from v_last on)
    SELECT MIN(id) INTO v_id FROM (
      SELECT id FROM `fsm_{type}`
       WHERE id > v_last AND definition_version < v_to
         AND (v_states IS NULL OR JSON_CONTAINS(v_states, JSON_QUOTE(current_state)))
         AND (v_versions IS NULL OR JSON_CONTAINS(v_versions, CAST(definition_version AS CHAR)))
       ORDER BY id LIMIT 1) AS next_one;
    IF v_id IS NULL THEN
      SET v_done = 1;
    ELSE
      SET v_seen = v_seen + 1, v_last = v_id;
      CALL fsm_begin_v1();
      SET v_started = 1;
      SET v_state = NULL;
      SELECT current_state, definition_version, lookup_key, uses_global_lock, uses_local_lock
        INTO v_state, v_from, v_lookup, v_global, v_local
        FROM `fsm_{type}` WHERE id = v_id FOR UPDATE;
      -- read again under the lock: moved, upgraded or filtered out meanwhile?
      IF v_state IS NULL OR v_from >= v_to
         OR NOT (v_states IS NULL OR JSON_CONTAINS(v_states, JSON_QUOTE(v_state)))
         OR NOT (v_versions IS NULL OR JSON_CONTAINS(v_versions, CAST(v_from AS CHAR))) THEN
        SET v_outcome = NULL;
      ELSE
        -- v_state is a state name ([a-z][a-z0-9_]*, the trigger stores the rule's spelling): safe in a path
        SET v_target = COALESCE(JSON_UNQUOTE(JSON_EXTRACT(p_map, CONCAT('$."', v_state, '"'))), v_state);
        SET v_target = (SELECT MAX(state) FROM fsm_states WHERE machine = '{type}' AND version = v_to
                         AND state = v_target AND CAST(state AS BINARY) = CAST(v_target AS BINARY));
        IF v_target IS NULL THEN
          SET v_outcome = 'unmapped';
        ELSEIF EXISTS (SELECT 1 FROM fsm_runs WHERE machine = '{type}' AND instance_id = v_id
                       AND claimed_by IS NOT NULL AND due_at > UTC_TIMESTAMP(6)) THEN
          SET v_outcome = 'claimed';
        ELSEIF (v_global OR v_local) AND v_lookup IS NOT NULL AND EXISTS (
                 SELECT 1 FROM fsm_locks WHERE lookup_key = v_lookup
                    AND ((scope = '*' AND v_global) OR (scope = '{type}' AND v_local))
                    AND unlocked_at IS NULL AND expires_at > UTC_TIMESTAMP(6)) THEN
          SET v_outcome = 'locked';
        ELSE
          SET v_outcome = 'moved';
          -- the state timeout before and after, and the armed timer's times
          SET v_old_after = NULL, v_old_event = NULL, v_new_after = NULL, v_new_event = NULL, v_due = NULL;
          SELECT MAX(timeout_seconds), MAX(timeout_event) INTO v_old_after, v_old_event FROM fsm_states
           WHERE machine = '{type}' AND version = v_from AND state = v_state;
          SELECT MAX(timeout_seconds), MAX(timeout_event) INTO v_new_after, v_new_event FROM fsm_states
           WHERE machine = '{type}' AND version = v_to AND state = v_target;
          SELECT MAX(due_at), MAX(fire_at), MAX(armed_at) INTO v_due, v_fire, v_armed FROM fsm_timers
           WHERE machine = '{type}' AND timeout_of = v_id;
          SET @fsm_upgrade = CONCAT(v_id, '/', v_to);
          UPDATE `fsm_{type}` SET definition_version = v_to, current_state = v_target WHERE id = v_id;
          SET @fsm_upgrade = NULL;
          IF v_due IS NOT NULL AND v_old_after <=> v_new_after
             AND CAST(v_old_event AS BINARY) <=> CAST(v_new_event AS BINARY) THEN
            UPDATE fsm_timers SET due_at = v_due, fire_at = v_fire, armed_at = v_armed
             WHERE machine = '{type}' AND timeout_of = v_id;
          END IF;
        END IF;
      END IF;
      COMMIT;
      SET v_started = 0;
      IF v_outcome IS NOT NULL THEN
        SET v_group = CONCAT(v_from, '/', v_state, '/', COALESCE(v_target, ''), '/', v_outcome);
        SET v_groups = JSON_SET(v_groups, CONCAT('$."', v_group, '"'),
                                JSON_ARRAY(v_from, v_state, IF(v_outcome = 'unmapped', NULL, v_target), v_outcome,
                                           COALESCE(JSON_EXTRACT(v_groups, CONCAT('$."', v_group, '"[4]')), 0) + 1));
      END IF;
      SET @fsm_u_last = v_last, @fsm_u_groups = v_groups;
    END IF;
  END WHILE;
  IF NOT v_done THEN  -- the limit was reached: is anything left after v_last?
    SET v_done = NOT EXISTS (SELECT 1 FROM `fsm_{type}` WHERE id > v_last AND definition_version < v_to
                              AND (v_states IS NULL OR JSON_CONTAINS(v_states, JSON_QUOTE(current_state)))
                              AND (v_versions IS NULL OR JSON_CONTAINS(v_versions, CAST(definition_version AS CHAR))));
  END IF;
  IF JSON_LENGTH(v_groups) = 0 THEN
    SELECT NULL AS from_version, NULL AS from_state, NULL AS to_state, NULL AS outcome, 0 AS instances,
           v_to AS to_version, v_last AS last_id, v_done AS done;
  ELSE
    SELECT g.from_version, g.from_state, g.to_state, g.outcome, g.instances,
           v_to AS to_version, v_last AS last_id, v_done AS done
      FROM JSON_TABLE(JSON_EXTRACT(v_groups, '$.*'), '$[*]' COLUMNS (
             from_version BIGINT PATH '$[0]', from_state VARCHAR(64) PATH '$[1]', to_state VARCHAR(64) PATH '$[2]',
             outcome VARCHAR(16) PATH '$[3]', instances BIGINT PATH '$[4]')) AS g
     ORDER BY g.from_version, g.from_state, g.outcome;
  END IF;
END
