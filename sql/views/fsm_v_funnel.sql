-- fsm_v_funnel: how many instances of each type passed through each state.
--
-- instances: distinct instances that ever entered the state (creation included);
-- entries: how many times a state was entered (a loop or a backward move enters again).
-- A move to a newer definition version (history source 'upgrade') is not an entry: an
-- instance moved into a renamed state entered it under its old name.
-- position is the state's place in the type's current definition (NULL for a state that
-- only older versions have). This reads the whole history of each type: an analyst's
-- query, not something to poll. Rebuilt by pyfsm whenever a type is installed.
-- Errors: none of its own.
-- Example: SELECT state, instances, entries FROM fsm_v_funnel WHERE machine = 'order' ORDER BY position;
CREATE OR REPLACE SQL SECURITY DEFINER VIEW `fsm_v_funnel` AS
SELECT '{type}' AS `machine`, f.`state`, s.`position`, f.`instances`, f.`entries`
  FROM (SELECT h.`to_state` AS `state`, COUNT(DISTINCT h.`instance_id`) AS `instances`, COUNT(*) AS `entries`
          FROM `fsm_{type}_transitions` h WHERE h.`source` <> 'upgrade' GROUP BY h.`to_state`) f
  LEFT JOIN `fsm_machines` m ON m.`machine` = '{type}'
  LEFT JOIN `fsm_states` s ON s.`machine` = '{type}' AND s.`version` = m.`current_version` AND s.`state` = f.`state`
