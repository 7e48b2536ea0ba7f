-- fsm_define_v4: store a machine definition (a new version if it changed) — fsm_define_v3
-- that refuses names which are not JSON strings.
--
-- v3 read the names of start and final states, events and transition ends with
-- JSON_UNQUOTE, so JSON true, false, null or a number became the names 'true', 'false',
-- 'null', '5', and the stored body was one pyfsm's own reader refuses. v4 first checks that
-- every entry of start and final and every transition's event, to and from entries is a
-- JSON string (states are checked by v2 already), then does exactly what fsm_define_v3
-- does: refuses reserved machine names, validates the definition, stores it as version
-- N+1 if it differs from the current one, and answers. A new machine type then needs
-- `pyfsm sync <machine>` (MySQL cannot create triggers from a procedure).
-- Parameters: p_machine (a name of at most 48 characters, not reserved), p_definition (JSON
--   object: states, start, final, transitions, topic, options; see docs/sql-api.md).
-- Result: one row (machine, version, changed, tables_ready).
-- Errors: 31001 invalid definition; 31009 invalid or reserved machine name; 31016 called
--   inside an open transaction.
-- Example: CALL fsm_define_v4('ticket', '{"states":["open","closed"],"start":["open"],"final":["closed"],"transitions":[{"event":"close","from":["open"],"to":"closed"}]}');
CREATE PROCEDURE `fsm_define_v4`(
  IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_definition LONGTEXT CHARACTER SET utf8mb4)
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_i, v_j, v_n INT DEFAULT 0;
  DECLARE v_path VARCHAR(64) CHARACTER SET ascii;
  DECLARE v_list VARCHAR(8) CHARACTER SET ascii;
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  -- Not valid JSON, not an object, lists that are not lists: fsm_define_v2 names those.
  -- (Nested IFs, not AND: JSON_TYPE of invalid JSON is an error, not false.)
  IF JSON_VALID(p_definition) THEN
  IF JSON_TYPE(p_definition) = 'OBJECT' THEN
    -- start and final entries
    SET v_j = 0;
    WHILE v_j < 2 DO
      SET v_list = ELT(v_j + 1, 'start', 'final');
      IF JSON_TYPE(JSON_EXTRACT(p_definition, CONCAT('$.', v_list))) = 'ARRAY' THEN
        SET v_i = 0, v_n = JSON_LENGTH(p_definition, CONCAT('$.', v_list));
        WHILE v_i < v_n DO
          IF JSON_TYPE(JSON_EXTRACT(p_definition, CONCAT('$.', v_list, '[', v_i, ']'))) <> 'STRING' THEN
            SET v_msg = CONCAT('fsm: invalid definition: ', v_list, ' entries must be strings');
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31001;
          END IF;
          SET v_i = v_i + 1;
        END WHILE;
      END IF;
      SET v_j = v_j + 1;
    END WHILE;
    -- each transition: an object whose event and to are strings and whose from entries are
    IF JSON_TYPE(JSON_EXTRACT(p_definition, '$.transitions')) = 'ARRAY' THEN
      SET v_i = 0, v_n = JSON_LENGTH(p_definition, '$.transitions');
      WHILE v_i < v_n DO
        SET v_path = CONCAT('$.transitions[', v_i, ']');
        IF JSON_TYPE(JSON_EXTRACT(p_definition, v_path)) <> 'OBJECT'
           OR COALESCE(JSON_TYPE(JSON_EXTRACT(p_definition, CONCAT(v_path, '.event'))), '') <> 'STRING'
           OR COALESCE(JSON_TYPE(JSON_EXTRACT(p_definition, CONCAT(v_path, '.to'))), '') <> 'STRING' THEN
          SET v_msg = CONCAT('fsm: invalid definition: transition ', v_i + 1, ' needs string event and to');
          SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31001;
        END IF;
        IF JSON_TYPE(JSON_EXTRACT(p_definition, CONCAT(v_path, '.from'))) = 'ARRAY' THEN
          SET v_j = 0;
          WHILE v_j < JSON_LENGTH(p_definition, CONCAT(v_path, '.from')) DO
            IF JSON_TYPE(JSON_EXTRACT(p_definition, CONCAT(v_path, '.from[', v_j, ']'))) <> 'STRING' THEN
              SET v_msg = CONCAT('fsm: invalid definition: transition ', v_i + 1, ' has a from entry that is not a string');
              SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31001;
            END IF;
            SET v_j = v_j + 1;
          END WHILE;
        END IF;
        SET v_i = v_i + 1;
      END WHILE;
    END IF;
  END IF;
  END IF;
  CALL fsm_define_v3(p_machine, p_definition);
END
