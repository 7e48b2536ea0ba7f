-- fsm_{type}_upgrade_plan_v1: the dry run of an upgrade of {type}: where each instance of an older version would go, and which must wait or cannot move. Writes nothing.
--
-- Reads the instance table once (a consistent read, no lock), grouped by (definition
-- version, state). Each group's state maps to itself in the target version, or to what the
-- map says; a group whose state has neither is 'unmapped' (cannot move until the map names
-- a state for it). Of the others, instances whose run a worker holds a claim on now are
-- 'claimed' and those whose lookup key's lock is held 'locked' (both wait: the next run
-- moves them), the rest 'move'. fsm_{type}_upgrade_v1 decides the same way, per instance,
-- under the row lock.
-- Parameters: p_to_version (NULL: the type's current version), p_map, p_only (as
--   fsm_{type}_upgrade_v1; checked by fsm_upgrade_check_v1).
-- Result: rows (from_version, from_state, to_state, outcome, instances, to_version), outcome
--   'move', 'claimed', 'locked' or 'unmapped' (to_state NULL), ordered by from_version,
--   from_state, outcome; no row when no instance is of an older version.
-- Errors: 31030, 31031 (fsm_upgrade_check_v1).
-- Example: CALL `fsm_{type}_upgrade_plan_v1`(NULL, '{"shipped": "sent"}', NULL);
CREATE PROCEDURE `fsm_{type}_upgrade_plan_v1`(
  IN p_to_version BIGINT,
  IN p_map LONGTEXT CHARACTER SET utf8mb4,
  IN p_only LONGTEXT CHARACTER SET utf8mb4)
READS SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_to BIGINT;
  DECLARE v_states, v_versions LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  CALL fsm_upgrade_check_v1('{type}', p_to_version, p_map, p_only);
  SET v_to = @fsm_u_to, v_states = JSON_EXTRACT(p_only, '$.states'), v_versions = JSON_EXTRACT(p_only, '$.versions');
  SELECT p.from_version, p.from_state, p.to_state, p.outcome, p.instances, v_to AS to_version FROM (
    SELECT g.from_version, g.from_state, t.state AS to_state, o.outcome,
           CASE WHEN t.state IS NULL THEN IF(o.outcome = 'unmapped', g.instances, 0)
                WHEN o.outcome = 'move' THEN g.instances - g.claimed - g.locked
                WHEN o.outcome = 'claimed' THEN g.claimed
                WHEN o.outcome = 'locked' THEN g.locked
                ELSE 0 END AS instances
      FROM (
        SELECT i.definition_version AS from_version, i.current_state AS from_state, COUNT(*) AS instances,
               SUM(r.instance_id IS NOT NULL) AS claimed,
               SUM(r.instance_id IS NULL AND (i.uses_global_lock OR i.uses_local_lock) AND i.lookup_key IS NOT NULL
                   AND EXISTS (SELECT 1 FROM fsm_locks l WHERE l.lookup_key = i.lookup_key
                                 AND ((l.scope = '*' AND i.uses_global_lock) OR (l.scope = '{type}' AND i.uses_local_lock))
                                 AND l.unlocked_at IS NULL AND l.expires_at > v_now)) AS locked
          FROM `fsm_{type}` i
          LEFT JOIN fsm_runs r ON r.machine = '{type}' AND r.instance_id = i.id
                              AND r.claimed_by IS NOT NULL AND r.due_at > v_now
         WHERE i.definition_version < v_to
           AND (v_states IS NULL OR JSON_CONTAINS(v_states, JSON_QUOTE(i.current_state)))
           AND (v_versions IS NULL OR JSON_CONTAINS(v_versions, CAST(i.definition_version AS CHAR)))
         GROUP BY i.definition_version, i.current_state) AS g
      -- the group's state is a state name ([a-z][a-z0-9_]*): safe in a path
      LEFT JOIN fsm_states t ON t.machine = '{type}' AND t.version = v_to
            AND CAST(t.state AS BINARY) = CAST(COALESCE(JSON_UNQUOTE(JSON_EXTRACT(p_map, CONCAT('$."', g.from_state, '"'))),
                                                          g.from_state) AS BINARY)
      CROSS JOIN (SELECT 'move' AS outcome UNION ALL SELECT 'claimed' UNION ALL SELECT 'locked'
                  UNION ALL SELECT 'unmapped') AS o) AS p
   WHERE p.instances > 0
   ORDER BY p.from_version, p.from_state, p.outcome;
END
