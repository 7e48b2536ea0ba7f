-- fsm_v_definitions: every version of every machine definition, and which one is current.
--
-- body is the JSON definition (states, start, final, transitions, topic, options) as
-- fsm_define_v3 stored it; is_current marks the version new instances are created under.
-- For reporting accounts and tools (`pyfsm graph`) that may read views only.
-- Errors: none of its own.
-- Example: SELECT machine, version, is_current, created_at FROM fsm_v_definitions WHERE machine = 'order' ORDER BY version;
CREATE OR REPLACE SQL SECURITY DEFINER VIEW `fsm_v_definitions` AS
SELECT d.`machine`, d.`version`, d.`version` = m.`current_version` AS `is_current`, d.`body`, d.`topic`,
       d.`save_after_step`, d.`uses_global_lock`, d.`uses_local_lock`, d.`lock_lease_seconds`, d.`event_data`,
       d.`created_at`, m.`objects_version` IS NOT NULL AS `installed`
  FROM `fsm_definitions` d
  JOIN `fsm_machines` m ON m.`machine` = d.`machine`
