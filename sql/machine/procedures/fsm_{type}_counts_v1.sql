-- fsm_{type}_counts_v1: how many instances of {type} are in each state.
--
-- Served by the index (current_state, id). States with no instance are left out.
-- Parameters: none.
-- Result: rows (state, instances), ordered by state.
-- Errors: none of its own.
-- Example: CALL `fsm_{type}_counts_v1`();
CREATE PROCEDURE `fsm_{type}_counts_v1`()
READS SQL DATA SQL SECURITY DEFINER
SELECT current_state AS state, COUNT(*) AS instances FROM `fsm_{type}` GROUP BY current_state ORDER BY current_state
