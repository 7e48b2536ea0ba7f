-- fsm_v_state_counts: how many instances of each machine type are in each state.
--
-- Sums the 16 shards of fsm_state_counts, which the triggers keep in the same transaction
-- as every creation and transition: a few rows per state, whatever the number of
-- instances. Every state of a type's current definition appears, with 0 when empty, and so
-- does any state of an older version that still holds instances; a state no version still
-- has instances in is left out once it is empty (its counter rows stay, at 0: a state a new
-- version renamed or dropped, after `pyfsm upgrade` moved its instances).
-- Errors: none of its own.
-- Example: SELECT state, instances FROM fsm_v_state_counts WHERE machine = 'order' ORDER BY state;
CREATE OR REPLACE SQL SECURITY DEFINER VIEW `fsm_v_state_counts` AS
SELECT x.`machine`, x.`state`, SUM(x.`instances`) AS `instances`
  FROM (SELECT c.`machine`, c.`state`, c.`instances`, 0 AS `current` FROM `fsm_state_counts` c
        UNION ALL
        SELECT s.`machine`, s.`state`, 0, 1 FROM `fsm_states` s
          JOIN `fsm_machines` m ON m.`machine` = s.`machine` AND m.`current_version` = s.`version`) x
 GROUP BY x.`machine`, x.`state`
HAVING SUM(x.`instances`) <> 0 OR MAX(x.`current`) = 1
