-- fsm_quote_name_v1: a name as a quoted identifier, for the few statements a procedure builds (backticks doubled).
--
-- Parameters: p_name (any text).
-- Returns: `p_name`, with each ` in it doubled; NULL for NULL.
-- Errors: none.
-- Example: SELECT fsm_quote_name_v1('order items');  -- `order items`
CREATE FUNCTION `fsm_quote_name_v1`(p_name TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
RETURNS TEXT CHARACTER SET utf8mb4 DETERMINISTIC NO SQL SQL SECURITY INVOKER
RETURN CONCAT('`', REPLACE(p_name, '`', '``'), '`')
