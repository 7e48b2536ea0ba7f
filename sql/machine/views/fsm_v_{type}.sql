-- fsm_v_{type}: the current state of every instance of {type}, and since when it is in it.
--
-- One row per instance: its key, lookup_key, state, status, data, version, and
-- in_state_since / seconds_in_state from its most recent history row (found through
-- UNIQUE(instance_id, most_recent), one index lookup per row). When that row is a move to a
-- newer definition version (source 'upgrade', fsm_{type}_upgrade_v1), the instance did not
-- enter its state then: in_state_since is the time of its last row that is not such a move
-- (read only for those instances), so a stuck instance stays stuck across an upgrade. A MERGE view: a WHERE on
-- current_state, status, instance_key or lookup_key uses the instance table's indexes.
-- For reporting accounts (`pyfsm grant --reporting`); see docs/reporting.md.
-- Errors: none of its own.
-- Example: SELECT instance_key, current_state, seconds_in_state FROM `fsm_v_{type}` WHERE current_state = 'paid' ORDER BY id LIMIT 50;
CREATE OR REPLACE ALGORITHM = MERGE SQL SECURITY DEFINER VIEW `fsm_v_{type}` AS
SELECT i.`id`, '{type}' AS `machine`, i.`instance_key`, i.`lookup_key`, i.`current_state`, i.`status`, i.`data`,
       i.`version`, i.`definition_version`, i.`resume_from_step`, i.`kafka_topic`,
       i.`uses_global_lock`, i.`uses_local_lock`, i.`last_retry_at`, i.`created_at`, i.`updated_at`,
       IF(h.`source` = 'upgrade', (SELECT MAX(p.`created_at`) FROM `fsm_{type}_transitions` p
                                   WHERE p.`instance_id` = i.`id` AND p.`source` <> 'upgrade'),
          h.`created_at`) AS `in_state_since`,
       TIMESTAMPDIFF(MICROSECOND,
                     IF(h.`source` = 'upgrade', (SELECT MAX(p.`created_at`) FROM `fsm_{type}_transitions` p
                                                 WHERE p.`instance_id` = i.`id` AND p.`source` <> 'upgrade'),
                        h.`created_at`),
                     UTC_TIMESTAMP(6)) * 0.000001 AS `seconds_in_state`
  FROM `fsm_{type}` i
  LEFT JOIN `fsm_{type}_transitions` h ON h.`instance_id` = i.`id` AND h.`most_recent` = 1
