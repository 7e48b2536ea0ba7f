-- fsm_is_object_v1: is p_json a valid JSON document whose top level is an object?
--
-- CASE, not AND, so that JSON_TYPE never sees invalid JSON (it raises an error on MySQL).
-- Parameters: p_json (text, may be NULL).
-- Returns: 1 or 0 (0 for NULL).
-- Errors: none.
-- Example: SELECT fsm_is_object_v1('{"a": 1}'), fsm_is_object_v1('[1]'), fsm_is_object_v1('{bad');
CREATE FUNCTION `fsm_is_object_v1`(p_json LONGTEXT CHARACTER SET utf8mb4)
RETURNS TINYINT DETERMINISTIC NO SQL SQL SECURITY INVOKER
RETURN CASE WHEN p_json IS NULL THEN 0
            WHEN JSON_VALID(p_json) THEN JSON_TYPE(p_json) = 'OBJECT'
            ELSE 0 END
