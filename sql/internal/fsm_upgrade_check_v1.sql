-- fsm_upgrade_check_v1: check an upgrade's arguments before anything moves; sets @fsm_u_to.
--
-- Shared by fsm_{type}_upgrade_v1 and fsm_{type}_upgrade_plan_v1 (and so by the generic
-- fsm_upgrade_instances_v1 and fsm_upgrade_plan_v1). Every name is checked against
-- [a-z][a-z0-9_]* before it is used in a JSON path, so no key of the map can change a path.
-- Internal.
-- Parameters: p_machine (a valid, installed type); p_to_version (NULL: the type's current
--   version); p_map (NULL or a JSON object {"old state": "new state"}: each key a state of an
--   older version of the type, each value a state of the target version, and no value that is
--   itself a key mapped elsewhere: a map is applied once, so a chain a->b->c or a cycle is
--   refused); p_only (NULL or a JSON object with "states" (an array of state names) and/or
--   "versions" (an array of older version numbers): only instances in those states and
--   versions move).
-- Sets: @fsm_u_to, the target version.
-- Errors: 31030 anything above not so (the message says which); 31031 the target version has
--   state timeouts and the type has no timer triggers yet (run `pyfsm sync <machine>`).
-- Example: CALL fsm_upgrade_check_v1('order', NULL, '{"shipped": "sent"}', NULL);
CREATE PROCEDURE `fsm_upgrade_check_v1`(
  IN p_machine VARCHAR(48) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_to_version BIGINT,
  IN p_map LONGTEXT CHARACTER SET utf8mb4,
  IN p_only LONGTEXT CHARACTER SET utf8mb4)
READS SQL DATA SQL SECURITY INVOKER
BEGIN
  DECLARE v_to BIGINT;
  DECLARE v_keys LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_i, v_n INT DEFAULT 0;
  DECLARE v_key, v_value, v_next LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_item LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  SET @fsm_u_to = NULL;
  SET v_to = COALESCE(p_to_version, (SELECT current_version FROM fsm_machines WHERE machine = p_machine));
  IF NOT EXISTS (SELECT 1 FROM fsm_definitions WHERE machine = p_machine AND version = v_to) THEN
    SET v_msg = LEFT(CONCAT('fsm: ', p_machine, ' has no definition version ', COALESCE(v_to, 'NULL')), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31030;
  END IF;
  IF p_map IS NOT NULL THEN
    IF NOT (CASE WHEN JSON_VALID(p_map) THEN JSON_TYPE(p_map) = 'OBJECT' ELSE 0 END) THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: the state map must be a JSON object {"old state": "new state"}', MYSQL_ERRNO = 31030;
    END IF;
    SET v_keys = JSON_KEYS(p_map), v_n = JSON_LENGTH(JSON_KEYS(p_map)), v_i = 0;
    IF v_n > 1000 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: the state map has more than 1000 entries', MYSQL_ERRNO = 31030;
    END IF;
    -- every key first: a key's name is checked before any path is built from it
    WHILE v_i < v_n DO
      SET v_key = JSON_UNQUOTE(JSON_EXTRACT(v_keys, CONCAT('$[', v_i, ']')));
      IF NOT fsm_valid_name_v1(v_key, 64) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: a key of the state map is not a state name ([a-z][a-z0-9_]*, at most 64 characters)', MYSQL_ERRNO = 31030;
      END IF;
      IF NOT EXISTS (SELECT 1 FROM fsm_states WHERE machine = p_machine AND version < v_to AND state = v_key
                     AND CAST(state AS BINARY) = CAST(v_key AS BINARY)) THEN
        SET v_msg = LEFT(CONCAT('fsm: the state map names ', v_key, ', no state of an older version of ', p_machine), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31030;
      END IF;
      SET v_i = v_i + 1;
    END WHILE;
    SET v_i = 0;
    WHILE v_i < v_n DO
      SET v_key = JSON_UNQUOTE(JSON_EXTRACT(v_keys, CONCAT('$[', v_i, ']')));
      SET v_item = JSON_EXTRACT(p_map, CONCAT('$."', v_key, '"'));
      SET v_value = IF(JSON_TYPE(v_item) = 'STRING', JSON_UNQUOTE(v_item), NULL);
      IF NOT COALESCE(fsm_valid_name_v1(v_value, 64), 0) THEN
        SET v_msg = LEFT(CONCAT('fsm: the state map maps ', v_key, ' to something that is not a state name'), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31030;
      END IF;
      IF NOT EXISTS (SELECT 1 FROM fsm_states WHERE machine = p_machine AND version = v_to AND state = v_value
                     AND CAST(state AS BINARY) = CAST(v_value AS BINARY)) THEN
        SET v_msg = LEFT(CONCAT('fsm: the state map maps ', v_key, ' to ', v_value, ', no state of version ', v_to), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31030;
      END IF;
      SET v_next = JSON_UNQUOTE(JSON_EXTRACT(p_map, CONCAT('$."', v_value, '"')));
      IF v_next IS NOT NULL AND NOT (CAST(v_next AS BINARY) = CAST(v_value AS BINARY)) THEN
        SET v_msg = LEFT(CONCAT('fsm: the state map chains ', v_key, ' -> ', v_value, ' -> ', v_next,
                                ': a map is applied once; map each state to its end'), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31030;
      END IF;
      SET v_i = v_i + 1;
    END WHILE;
  END IF;
  IF p_only IS NOT NULL THEN
    IF NOT (CASE WHEN JSON_VALID(p_only) THEN JSON_TYPE(p_only) = 'OBJECT' ELSE 0 END)
       OR JSON_LENGTH(p_only) <> (JSON_CONTAINS_PATH(p_only, 'one', '$.states') + JSON_CONTAINS_PATH(p_only, 'one', '$.versions'))
       OR NOT COALESCE(JSON_TYPE(JSON_EXTRACT(p_only, '$.states')) = 'ARRAY', 1)
       OR NOT COALESCE(JSON_TYPE(JSON_EXTRACT(p_only, '$.versions')) = 'ARRAY', 1) THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: only must be a JSON object {"states": [names], "versions": [numbers]}', MYSQL_ERRNO = 31030;
    END IF;
    IF COALESCE(JSON_LENGTH(JSON_EXTRACT(p_only, '$.states')), 0) > 1000
       OR COALESCE(JSON_LENGTH(JSON_EXTRACT(p_only, '$.versions')), 0) > 1000 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: only lists more than 1000 states or versions', MYSQL_ERRNO = 31030;
    END IF;
    SET v_i = 0, v_n = COALESCE(JSON_LENGTH(JSON_EXTRACT(p_only, '$.states')), 0);
    WHILE v_i < v_n DO
      SET v_item = JSON_EXTRACT(p_only, CONCAT('$.states[', v_i, ']'));
      IF NOT (JSON_TYPE(v_item) = 'STRING' AND COALESCE(fsm_valid_name_v1(JSON_UNQUOTE(v_item), 64), 0)) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: only.states must list state names ([a-z][a-z0-9_]*)', MYSQL_ERRNO = 31030;
      END IF;
      SET v_i = v_i + 1;
    END WHILE;
    SET v_i = 0, v_n = COALESCE(JSON_LENGTH(JSON_EXTRACT(p_only, '$.versions')), 0);
    WHILE v_i < v_n DO
      SET v_item = JSON_EXTRACT(p_only, CONCAT('$.versions[', v_i, ']'));
      IF NOT (JSON_TYPE(v_item) = 'INTEGER' AND v_item BETWEEN 1 AND v_to - 1) THEN
        SET v_msg = LEFT(CONCAT('fsm: only.versions must list versions of ', p_machine, ' older than ', v_to), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31030;
      END IF;
      SET v_i = v_i + 1;
    END WHILE;
  END IF;
  IF EXISTS (SELECT 1 FROM fsm_states WHERE machine = p_machine AND version = v_to AND timeout_seconds IS NOT NULL)
     AND NOT fsm_timer_triggers_ready_v1(p_machine) THEN
    SET v_msg = LEFT(CONCAT('fsm: ', p_machine, ' version ', v_to, ' has timeouts and no timer triggers yet: run pyfsm sync'), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31031;
  END IF;
  SET @fsm_u_to = v_to;
END
