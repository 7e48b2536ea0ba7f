-- fsm_check_guard_v1: refuse a transition's guard that is not in pyfsm's guard language (internal, for fsm_define_v8).
--
-- The language (docs/guards.md; pyfsm.guards checks the same in Python): a condition is an
-- object, either a test {"path": "$.a.b[0]", "op": "==", "value": 1} or {"all": [...]},
-- {"any": [...]} (non-empty lists) or {"not": {...}}, with no other key. path is $ followed
-- by .key (a key of [A-Za-z_][A-Za-z0-9_]*) or [n] parts, at most 16; op is ==, !=, <, <=,
-- >, >=, in (value a list of 1 to 64 literals), exists, missing or is_null (no value); a
-- literal is a number within +/- 2**53 (as a float: both servers compare numbers so), written
-- as JSON writes numbers (MariaDB's JSON_VALID lets "1." through), a string of at most 255
-- characters, true, false or null, and the orderings take numbers and strings only. A guard
-- has at most 64 conditions and 64 literals (in lists included), nested at most 8 deep. The
-- guard is walked breadth first with a queue of (path, depth): no recursion
-- (max_sp_recursion_depth is 0 by default). A JSON function failing on text JSON_VALID let
-- through (MariaDB: "1e") is the guard's problem too: 31001, "not valid JSON".
-- Parameters: p_guard (the guard, JSON), p_transition (its transition's number, from 1, for
--   the message).
-- Result: none.
-- Errors: 31001 the first problem found, named ("fsm: invalid definition: transition 2 guard: ...").
-- Example: CALL fsm_check_guard_v1('{"path": "$.total", "op": ">=", "value": 100}', 1);
CREATE PROCEDURE `fsm_check_guard_v1`(
  IN p_guard LONGTEXT CHARACTER SET utf8mb4,
  IN p_transition INT)
NO SQL SQL SECURITY INVOKER
BEGIN
  DECLARE v_queue LONGTEXT CHARACTER SET utf8mb4 DEFAULT '[["$", 1]]';
  DECLARE v_k, v_j, v_m, v_depth INT DEFAULT 0;
  DECLARE v_at VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_node, v_value, v_item LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_key VARCHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_op VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_type VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_path TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_problem VARCHAR(128) CHARACTER SET utf8mb4;
  DECLARE v_literals INT DEFAULT 0;
  IF NOT COALESCE(JSON_VALID(p_guard), 0) THEN
    SET v_problem = 'not valid JSON';
  END IF;
  walk: BEGIN
  DECLARE EXIT HANDLER FOR SQLEXCEPTION SET v_problem = 'not valid JSON';
  WHILE v_problem IS NULL AND v_k < JSON_LENGTH(v_queue) DO
    SET v_at = JSON_UNQUOTE(JSON_EXTRACT(v_queue, CONCAT('$[', v_k, '][0]'))),
        v_depth = JSON_EXTRACT(v_queue, CONCAT('$[', v_k, '][1]')), v_k = v_k + 1;
    SET v_node = JSON_EXTRACT(p_guard, v_at);
    IF v_k > 64 THEN
      SET v_problem = 'a guard has at most 64 conditions';
    ELSEIF v_depth > 8 THEN
      SET v_problem = 'conditions nest at most 8 deep';
    ELSEIF COALESCE(JSON_TYPE(v_node), '') <> 'OBJECT' THEN
      SET v_problem = 'a condition must be an object';
    ELSEIF JSON_CONTAINS_PATH(v_node, 'one', '$.all', '$.any') THEN
      SET v_key = IF(JSON_CONTAINS_PATH(v_node, 'one', '$.all'), 'all', 'any');
      SET v_value = JSON_EXTRACT(v_node, CONCAT('$.', v_key));
      IF JSON_LENGTH(v_node) <> 1 OR JSON_TYPE(v_value) <> 'ARRAY' OR JSON_LENGTH(v_value) = 0 THEN
        SET v_problem = CONCAT(v_key, ' takes a non-empty list of conditions and nothing beside it');
      ELSE
        SET v_j = 0, v_m = JSON_LENGTH(v_value);
        -- past 65 entries the walk stops with "at most 64" anyway
        WHILE v_j < v_m AND JSON_LENGTH(v_queue) <= 64 DO
          SET v_queue = JSON_ARRAY_APPEND(v_queue, '$', JSON_ARRAY(CONCAT(v_at, '.', v_key, '[', v_j, ']'), v_depth + 1));
          SET v_j = v_j + 1;
        END WHILE;
      END IF;
    ELSEIF JSON_CONTAINS_PATH(v_node, 'one', '$.not') THEN
      IF JSON_LENGTH(v_node) <> 1 THEN
        SET v_problem = 'not takes one condition and nothing beside it';
      ELSE
        SET v_queue = JSON_ARRAY_APPEND(v_queue, '$', JSON_ARRAY(CONCAT(v_at, '.not'), v_depth + 1));
      END IF;
    ELSE
      -- a test
      SET v_op = NULL, v_path = NULL, v_value = JSON_EXTRACT(v_node, '$.value');
      IF JSON_TYPE(JSON_EXTRACT(v_node, '$.op')) = 'STRING' AND CHAR_LENGTH(JSON_UNQUOTE(JSON_EXTRACT(v_node, '$.op'))) <= 16 THEN
        SET v_op = JSON_UNQUOTE(JSON_EXTRACT(v_node, '$.op'));
      END IF;
      IF JSON_TYPE(JSON_EXTRACT(v_node, '$.path')) = 'STRING' THEN
        SET v_path = JSON_UNQUOTE(JSON_EXTRACT(v_node, '$.path'));
      END IF;
      IF v_op IS NULL OR v_path IS NULL THEN
        SET v_problem = 'a test needs path and op, strings (or a condition all, any or not)';
      ELSEIF CAST(v_op AS BINARY) NOT IN ('==', '!=', '<', '<=', '>', '>=', 'in', 'exists', 'missing', 'is_null') THEN
        SET v_problem = LEFT(CONCAT('unknown op ', v_op), 64);
      ELSEIF JSON_LENGTH(v_node) <> IF(CAST(v_op AS BINARY) IN ('exists', 'missing', 'is_null'), 2, 3)
             OR (v_value IS NULL AND CAST(v_op AS BINARY) NOT IN ('exists', 'missing', 'is_null')) THEN
        SET v_problem = CONCAT('op ', v_op, IF(CAST(v_op AS BINARY) IN ('exists', 'missing', 'is_null'),
                               ' takes op and path', ' takes op, path and value'), ', nothing else');
      -- brackets made parentheses: one pattern means the same to MySQL's ICU and MariaDB's PCRE
      -- and no other character anywhere: a regular expression's $ also matches before a final newline
      ELSEIF CHAR_LENGTH(v_path) > 1100
             OR NOT REPLACE(REPLACE(v_path, '[', '('), ']', ')') REGEXP '^[$]([.][A-Za-z_][A-Za-z0-9_]{0,63}|[(][0-9]{1,6}[)])+$'
             OR REPLACE(REPLACE(v_path, '[', '('), ']', ')') REGEXP '[^$.()A-Za-z0-9_]'
             OR v_path LIKE '%(%' OR v_path LIKE '%)%' THEN
        SET v_problem = 'path is not $ followed by .key or [n] parts (keys of [A-Za-z_][A-Za-z0-9_]*)';
      ELSEIF CHAR_LENGTH(v_path) - CHAR_LENGTH(REPLACE(REPLACE(v_path, '.', ''), '[', '')) > 16 THEN
        SET v_problem = 'a path has at most 16 parts';
      ELSEIF CAST(v_op AS BINARY) = 'in' AND (JSON_TYPE(v_value) <> 'ARRAY' OR JSON_LENGTH(v_value) NOT BETWEEN 1 AND 64) THEN
        SET v_problem = 'op in takes a list of 1 to 64 literals';
      ELSEIF CAST(v_op AS BINARY) NOT IN ('exists', 'missing', 'is_null') THEN
        SET v_j = 0, v_m = IF(CAST(v_op AS BINARY) = 'in', JSON_LENGTH(v_value), 1), v_literals = v_literals + v_m;
        IF v_literals > 64 THEN
          SET v_problem = 'a guard has at most 64 literals (in lists included)';
        END IF;
        WHILE v_problem IS NULL AND v_j < v_m DO
          SET v_item = JSON_EXTRACT(v_node, IF(CAST(v_op AS BINARY) = 'in', CONCAT('$.value[', v_j, ']'), '$.value'));
          SET v_type = JSON_TYPE(v_item), v_j = v_j + 1;
          IF v_type IN ('INTEGER', 'UNSIGNED INTEGER', 'DOUBLE', 'DECIMAL') THEN
            IF NOT CAST(v_item AS CHAR CHARACTER SET utf8mb4) REGEXP '^-?(0|[1-9][0-9]*)([.][0-9]+)?([eE][-+]?[0-9]+)?$'
               OR CAST(v_item AS CHAR CHARACTER SET utf8mb4) REGEXP '[^-+.eE0-9]' THEN
              SET v_problem = 'a number must be written as JSON writes numbers';
            ELSEIF ABS(JSON_UNQUOTE(v_item) + 0e0) > 9007199254740992e0 THEN
              SET v_problem = 'a number must be within +/- 2**53';
            END IF;
          ELSEIF v_type = 'STRING' THEN
            IF CHAR_LENGTH(JSON_UNQUOTE(v_item)) > 255 THEN
              SET v_problem = 'a string has at most 255 characters';
            END IF;
          ELSEIF v_type IN ('BOOLEAN', 'NULL') THEN
            IF CAST(v_op AS BINARY) IN ('<', '<=', '>', '>=') THEN
              SET v_problem = CONCAT('op ', v_op, ' compares numbers or strings');
            END IF;
          ELSE
            SET v_problem = 'a literal is a number, a string, true, false or null';
          END IF;
        END WHILE;
      END IF;
    END IF;
  END WHILE;
  END walk;
  IF v_problem IS NOT NULL THEN
    SET v_problem = LEFT(CONCAT('fsm: invalid definition: transition ', p_transition, ' guard: ', v_problem), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_problem, MYSQL_ERRNO = 31001;
  END IF;
END
