-- fsm_stats_v3: one line per installed machine type: instances per status, queue, outbox.
--
-- The statuses are the ones every reader of pyfsm shows (docs/reporting.md): running (a handler
-- runs the instance or will: it has a run in fsm_runs with a due time, due or claimed), idle
-- (not done, and no handler runs it: stored status 'running' without such a run; it moves when
-- an event is sent), waiting, paused, failed, completed.
-- instances is the sum of fsm_state_counts; the stored statuses running/waiting/paused/failed
-- are counted through each type's (status, id) index, running is split by a join from the
-- type's runs in fsm_runs (the hot queue: few rows) to the instances, idle is the rest
-- (completed = instances - the others, not read);
-- due/claimed come from the engine's queue fsm_runs through its (machine, due_at, id) index;
-- unpublished / oldest_unpublished_at from the relay's outbox. Cheap enough to poll for
-- dashboards: it reads no history and no completed instance.
-- A claim is a lease: a claimed run's due_at is when the claim runs out. So due counts every
-- run whose due_at has passed, claims that ran out included (a dead worker's: any worker may
-- take it), and claimed only the claims still running. fsm_stats_v1 counted a claim that ran
-- out as claimed and not due; pyfsm's metrics and web console count as this one does.
-- Differs from fsm_stats_v2 (deprecated) in running, which v2 counted by the stored status (so
-- every instance no handler runs was running there), and the idle column, which v2 lacks.
-- Parameters: none.
-- Result: rows (machine, current_version, instances, running, idle, waiting, paused, failed,
--   completed, due, claimed, unpublished, oldest_unpublished_at), ordered by machine; none
--   when no type is installed.
-- Errors: none of its own.
-- Example: CALL fsm_stats_v3();
CREATE PROCEDURE `fsm_stats_v3`()
READS SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_done TINYINT DEFAULT 0;
  DECLARE v_machine VARCHAR(48) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_sql LONGTEXT CHARACTER SET utf8mb4 DEFAULT '';
  DECLARE c CURSOR FOR SELECT machine FROM fsm_machines WHERE objects_version IS NOT NULL ORDER BY machine;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
  OPEN c;
  read_loop: LOOP
    FETCH c INTO v_machine;
    IF v_done THEN
      LEAVE read_loop;
    END IF;
    IF NOT fsm_valid_name_v1(v_machine, 48) THEN
      ITERATE read_loop;  -- never splice a name that is not an identifier
    END IF;
    SET v_sql = CONCAT(v_sql, IF(v_sql = '', '', ' UNION ALL '),
      'SELECT m.machine, m.current_version, c.instances, q.running, s.running - q.running AS idle, ',
      's.waiting, s.paused, s.failed, c.instances - s.running - s.waiting - s.paused - s.failed AS completed, ',
      '(SELECT COUNT(*) FROM fsm_runs r WHERE r.machine = m.machine AND r.due_at <= UTC_TIMESTAMP(6)) AS due, ',
      '(SELECT COUNT(*) FROM fsm_runs r WHERE r.machine = m.machine AND r.due_at > UTC_TIMESTAMP(6) ',
      'AND r.claimed_by IS NOT NULL) AS claimed, o.unpublished, o.oldest_unpublished_at ',
      'FROM fsm_machines m, ',
      '(SELECT CAST(COALESCE(SUM(instances), 0) AS SIGNED) AS instances FROM fsm_state_counts ',
      'WHERE machine = ''', v_machine, ''') c, ',
      '(SELECT COUNT(*) AS unpublished, MIN(occurred_at) AS oldest_unpublished_at FROM fsm_outbox ',
      'WHERE published_at IS NULL AND machine = ''', v_machine, ''') o, ',
      '(SELECT CAST(COALESCE(SUM(status = ''running''), 0) AS SIGNED) AS running, ',
      'CAST(COALESCE(SUM(status = ''waiting''), 0) AS SIGNED) AS waiting, ',
      'CAST(COALESCE(SUM(status = ''paused''), 0) AS SIGNED) AS paused, ',
      'CAST(COALESCE(SUM(status = ''failed''), 0) AS SIGNED) AS failed ',
      'FROM `fsm_', v_machine, '` WHERE status IN (''running'', ''waiting'', ''paused'', ''failed'')) s, ',
      '(SELECT COUNT(*) AS running FROM fsm_runs r JOIN `fsm_', v_machine, '` i ON i.id = r.instance_id ',
      'WHERE r.machine = ''', v_machine, ''' AND r.due_at IS NOT NULL AND i.status = ''running'') q ',
      'WHERE m.machine = ''', v_machine, '''');
  END LOOP;
  CLOSE c;
  IF v_sql = '' THEN
    SELECT machine, current_version, 0 AS instances, 0 AS running, 0 AS idle, 0 AS waiting, 0 AS paused, 0 AS failed,
           0 AS completed, 0 AS due, 0 AS claimed, 0 AS unpublished, NULL AS oldest_unpublished_at
      FROM fsm_machines WHERE FALSE;
  ELSE
    SET @fsm_sql = CONCAT(v_sql, ' ORDER BY machine');
    PREPARE fsm_stmt FROM @fsm_sql;
    EXECUTE fsm_stmt;
    DEALLOCATE PREPARE fsm_stmt;
    SET @fsm_sql = NULL;
  END IF;
END
