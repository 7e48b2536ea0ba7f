-- fsm_valid_name_v1: is p_name a valid pyfsm identifier (machine, state or event name)?
--
-- Valid: lowercase ASCII letter first, then lowercase letters, digits and '_', at most
-- p_max characters. Checked without REGEXP anchors alone because '$' also matches before a
-- trailing newline; the byte comparison with LOWER() rejects upper case under the
-- case-insensitive collations both servers default to.
-- Parameters: p_name (text, may be NULL), p_max (maximum length in characters).
-- Returns: 1 or 0 (0 for NULL).
-- Errors: none.
-- Example: SELECT fsm_valid_name_v1('order_paid', 64), fsm_valid_name_v1('x`; DROP', 64);
CREATE FUNCTION `fsm_valid_name_v1`(p_name TEXT CHARACTER SET utf8mb4, p_max INT)
RETURNS TINYINT DETERMINISTIC NO SQL SQL SECURITY INVOKER
RETURN COALESCE(
  CHAR_LENGTH(p_name) BETWEEN 1 AND p_max
  AND CHAR_LENGTH(p_name) = LENGTH(p_name)
  AND CAST(p_name AS BINARY) = CAST(LOWER(p_name) AS BINARY)
  AND p_name REGEXP '^[a-z]'
  AND p_name NOT REGEXP '[^a-z0-9_]', 0)
