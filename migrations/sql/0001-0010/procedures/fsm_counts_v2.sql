-- fsm_counts_v2: how many instances of a machine type are in each state, from the counters.
--
-- Reads fsm_state_counts (kept by the triggers in the same transaction as every creation
-- and transition): a few rows per state whatever the number of instances, where
-- fsm_counts_v1 reads every index entry. States with no instance are left out, as in v1.
-- Parameters: p_machine.
-- Result: rows (state, instances), ordered by state.
-- Errors: 31002 unknown machine (or its tables are not installed); 31009 invalid machine name.
-- Example: CALL fsm_counts_v2('order');
CREATE PROCEDURE `fsm_counts_v2`(IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
READS SQL DATA SQL SECURITY DEFINER
BEGIN
  CALL fsm_require_machine_v1(p_machine);
  SELECT `state`, CAST(SUM(`instances`) AS SIGNED) AS `instances`
    FROM fsm_state_counts WHERE `machine` = p_machine
   GROUP BY `state` HAVING SUM(`instances`) > 0 ORDER BY `state`;
END
