-- fsm_fire_timers_v3: fire the timers that are due, oldest due first: claim them with SKIP LOCKED, send each one's event once.
--
-- What pyfsm's workers and `pyfsm timers run` call in a loop; a DBA may call it too (from a
-- MySQL EVENT, say). Two transactions. The first claims up to p_limit timers of every type
-- whose fire_at has passed (SELECT ... FOR UPDATE SKIP LOCKED, so callers running at once
-- take disjoint timers and never wait for each other), marks them claimed by p_owner and
-- moves their fire_at p_claim_seconds on, and commits; it also takes back what an earlier
-- call of the same owner left claimed (a call that failed between its two transactions:
-- a deadlock inside a transition trigger cannot be handled in a procedure and ends the
-- call, and a lost connection too), so that a caller that calls again fires those at once
-- rather than when their claim ends.
-- Order: the claim takes the oldest due first (fire_at, then id: a timer's fire_at is its
-- due_at until it is held). The second transaction fires the timers of one instance in the
-- order they fell due (due_at, then id: the order they were armed), so that a scheduled
-- event due before a state timeout is sent first, and the timeout, whose state the event
-- left, is cancelled by the transition rather than fired; the instances of a batch are taken
-- in (machine, instance) order, which keeps concurrent callers from deadlocking, and all of
-- them commit together. A held timer (below) waits for its fire_at, so a timer of the same
-- instance due after it may fire first.
-- The second transaction: per timer it locks the instance row (before the timer row, as a
-- transition's timer trigger does), checks the timer is still armed and still this call's
-- (a transition, a cancel or another call of the same owner may have removed it
-- meanwhile: then it is skipped), and sends
-- its event through the type's transition trigger (as fsm_{type}_send_v2 does) with request
-- id 'fsm:timer:<id>' and metadata {"timer": {"id", "kind", "due_at", "state"}} added to the
-- scheduled metadata. The timer is deleted and logged in fsm_timer_log in that same
-- transaction: a caller that dies before its COMMIT leaves the timer armed (and claimed
-- until fire_at), so another call fires it later, and never twice.
-- Outcomes: 'fired'; 'dropped' when the event is not allowed from the instance's state when
-- it comes due (31005, or 31028), or refused by the rules' guards (31032), or a state timeout whose instance is no longer in that
-- state: logged with the error, nothing sent; 'held' when the instance is paused (31011) or
-- locked by another owner (31018), or on any other error (the instance could not be locked
-- in time, 1205, say: the batch's other timers go on): the timer stays armed, fire_at
-- moves 1, 2, 4 ... up to 60 seconds on (fsm_resume_v2 makes a resumed instance's held
-- timers due again at once), last_errno and last_error say why.
-- The fired transitions' state counters are moved in one statement before the commit, in
-- key order, so that calls running at once rarely deadlock. A deadlock this procedure can
-- handle rolls the second transaction back whole and starts it over (3 times at most); one
-- inside a transition trigger ends the call with 1213 (pyfsm's Store calls again, and the
-- call takes back the claims). Either way nothing of the failed transaction was fired.
-- Parameters: p_owner (1 to 64 of [A-Za-z0-9._:-], the caller's name, kept in done_by and
--   claimed_by: give each process of its own a name of its own; calls of one owner share
--   their claims, which is safe, a timer still fires once),
--   p_limit (1 to 1000 timers), p_claim_seconds (0.1 to 86400: how long a claim lasts).
-- Result: one row per timer handled (timer_id, machine, instance_key, kind, event, due_at as
--   text, outcome, transition_id, errno, lag_seconds: how long after due_at it was handled).
-- Errors: 31009 invalid argument; 31016 called inside an open transaction; 1213 deadlocked
--   3 times (nothing was fired; retry later).
-- Differs from fsm_fire_timers_v2 (deprecated) in the order within an instance only: v2
-- fired one instance's timers in the order they were armed (a state timeout armed on create
-- fired before an event scheduled later but due earlier, which it then refused).
-- Example: CALL fsm_fire_timers_v3('dba-cron', 100, 30);
CREATE PROCEDURE `fsm_fire_timers_v3`(
  IN p_owner TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_limit INT,
  IN p_claim_seconds DECIMAL(12,3))
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_started, v_done, v_finished, v_any_prepared TINYINT DEFAULT 0;
  DECLARE v_try INT DEFAULT 0;
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_until DATETIME(6);
  DECLARE v_token VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_id BIGINT UNSIGNED;
  -- the result rows, as JSON objects separated by commas: appended as text (JSON_ARRAY_APPEND
  -- would parse the whole array again for each timer)
  DECLARE v_results LONGTEXT CHARACTER SET utf8mb4 DEFAULT '';
  -- what the fired transitions moved in the state counters, [machine, state, shard, +1 or -1]
  -- entries, applied in key order just before the commit (the triggers leave them to this
  -- call, @fsm_count_later): taken transition by transition, the counter rows of two firers
  -- crossed and deadlocked (bench/bench_timers.py, 4 firers)
  DECLARE v_counts LONGTEXT CHARACTER SET utf8mb4 DEFAULT '';
  DECLARE v_due_timers CURSOR FOR
    SELECT id FROM fsm_timers WHERE fire_at <= v_now ORDER BY fire_at, id LIMIT p_limit FOR UPDATE SKIP LOCKED;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    IF v_started THEN
      ROLLBACK;
    END IF;
    SET @fsm_event = NULL, @fsm_metadata = NULL, @fsm_handler = NULL, @fsm_request_id = NULL,
        @fsm_source = NULL, @fsm_guard = NULL, @fsm_t_id = NULL, @fsm_t_state = NULL;
    RESIGNAL;
  END;
  IF p_owner IS NULL OR CHAR_LENGTH(p_owner) NOT BETWEEN 1 AND 64 OR p_owner REGEXP '[^A-Za-z0-9._:-]' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: owner must be 1 to 64 characters of [A-Za-z0-9._:-]', MYSQL_ERRNO = 31009;
  END IF;
  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 OR p_claim_seconds IS NULL
     OR p_claim_seconds NOT BETWEEN 0.1 AND 86400 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: limit must be 1 to 1000 and claim_seconds 0.1 to 86400', MYSQL_ERRNO = 31009;
  END IF;
  SET v_until = DATE_ADD(v_now, INTERVAL ROUND(p_claim_seconds * 1000000) MICROSECOND);
  SET v_token = p_owner;

  -- 1. claim
  CALL fsm_begin_v1();  -- READ COMMITTED; 31016 inside a caller's transaction, left alone
  SET v_started = 1;
  -- what an earlier call of this owner claimed and did not fire: ours again
  UPDATE fsm_timers SET fire_at = v_until WHERE claimed_by = v_token;
  OPEN v_due_timers;
  claim: LOOP
    FETCH v_due_timers INTO v_id;
    IF v_done THEN
      LEAVE claim;
    END IF;
    UPDATE fsm_timers SET claimed_by = v_token, fire_at = v_until WHERE id = v_id;
  END LOOP;
  CLOSE v_due_timers;
  COMMIT;
  SET v_started = 0;

  -- 2. fire, in a transaction started over after a deadlock
  WHILE v_finished = 0 AND v_try < 3 DO
    SET v_try = v_try + 1;
    BEGIN
      DECLARE v_machine, v_prepared VARCHAR(48) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL;
      DECLARE v_instance, v_tid BIGINT UNSIGNED;
      DECLARE v_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
      DECLARE v_kind VARCHAR(16) CHARACTER SET utf8mb4;
      DECLARE v_state, v_event VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
      DECLARE v_metadata LONGTEXT CHARACTER SET utf8mb4;
      DECLARE v_request VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
      DECLARE v_due, v_armed, v_at DATETIME(6);
      DECLARE v_errno INT;
      DECLARE v_msg TEXT CHARACTER SET utf8mb4;
      DECLARE v_outcome VARCHAR(16) CHARACTER SET utf8mb4;
      DECLARE v_mine INT;
      DECLARE v_holds INT UNSIGNED;
      DECLARE v_items_done TINYINT DEFAULT 0;
      DECLARE v_claimed CURSOR FOR
        SELECT id, machine, instance_id, instance_key, kind, state, event, metadata, request_id, due_at, armed_at
          FROM fsm_timers WHERE claimed_by = v_token ORDER BY machine, instance_id, due_at, id;
      DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_items_done = 1;
      DECLARE EXIT HANDLER FOR 1213
      BEGIN
        -- the server rolled the whole transaction back: start over with what is still claimed
        ROLLBACK;
        SET v_started = 0, v_results = '', v_counts = '';
        SET @fsm_event = NULL, @fsm_metadata = NULL, @fsm_handler = NULL, @fsm_request_id = NULL,
            @fsm_source = NULL, @fsm_guard = NULL;
      END;
      CALL fsm_begin_v1();
      SET v_started = 1;
      OPEN v_claimed;
      item: LOOP
        FETCH v_claimed INTO v_id, v_machine, v_instance, v_key, v_kind, v_state, v_event, v_metadata, v_request,
                             v_due, v_armed;
        IF v_items_done THEN
          LEAVE item;
        END IF;
        SET v_errno = NULL, v_msg = NULL, v_tid = NULL, v_outcome = NULL;
        -- the instance first, then the timer: the order of a transition and its timer trigger.
        -- An instance that cannot be locked (a lock wait timeout, its table gone) holds this
        -- timer only: the others of the batch go on.
        BEGIN
          DECLARE CONTINUE HANDLER FOR SQLEXCEPTION
          BEGIN
            GET DIAGNOSTICS CONDITION 1 v_errno = MYSQL_ERRNO, v_msg = MESSAGE_TEXT;
            IF v_errno = 1213 THEN
              RESIGNAL;
            END IF;
          END;
          IF NOT (v_machine <=> v_prepared) THEN
            -- the machine name comes from fsm_timers, written only by pyfsm's triggers and procedures
            SET v_prepared = NULL, v_any_prepared = 1;
            SET @fsm_sql = CONCAT('SELECT MAX(current_state) INTO @fsm_t_state FROM `fsm_', v_machine, '` WHERE id = ? FOR UPDATE');
            PREPARE fsm_timer_lock FROM @fsm_sql;
            SET @fsm_sql = CONCAT('UPDATE `fsm_', v_machine, '` SET data = data WHERE id = ?');
            PREPARE fsm_timer_send FROM @fsm_sql;
            SET @fsm_sql = NULL;
            IF v_errno IS NULL THEN
              SET v_prepared = v_machine;
            END IF;
          END IF;
          IF v_errno IS NULL THEN
            SET @fsm_t_id = v_instance, @fsm_t_state = NULL;
            EXECUTE fsm_timer_lock USING @fsm_t_id;
          END IF;
        END;
        SELECT COUNT(*), MAX(holds) INTO v_mine, v_holds FROM fsm_timers WHERE id = v_id AND claimed_by = v_token FOR UPDATE;
        IF v_mine = 1 THEN
          SET v_at = GREATEST(UTC_TIMESTAMP(6), v_now);
          IF v_errno IS NOT NULL THEN
            SET v_outcome = 'held';
          ELSEIF v_kind = 'timeout' AND NOT (CAST(@fsm_t_state AS BINARY) <=> CAST(v_state AS BINARY)) THEN
            SET v_outcome = 'dropped', v_errno = 31005,
                v_msg = CONCAT('fsm: ', v_machine, ' ', v_key, ' is no longer in ', v_state);
          ELSE
            SET @fsm_event = v_event,
                @fsm_metadata = JSON_SET(COALESCE(v_metadata, '{}'), '$.timer',
                  JSON_OBJECT('id', CAST(v_id AS UNSIGNED), 'kind', v_kind, 'due_at', DATE_FORMAT(v_due, '%Y-%m-%d %H:%i:%s.%f'), 'state', v_state)),
                @fsm_handler = NULL, @fsm_request_id = CONCAT('fsm:timer:', v_id), @fsm_source = 'procedure',
                @fsm_count_later = 1, @fsm_last_transition_id = NULL;
            BEGIN
              DECLARE CONTINUE HANDLER FOR SQLEXCEPTION
              BEGIN
                GET DIAGNOSTICS CONDITION 1 v_errno = MYSQL_ERRNO, v_msg = MESSAGE_TEXT;
                IF v_errno = 1213 THEN
                  RESIGNAL;
                END IF;
              END;
              EXECUTE fsm_timer_send USING @fsm_t_id;
            END;
            SET @fsm_event = NULL, @fsm_metadata = NULL, @fsm_handler = NULL, @fsm_request_id = NULL,
                @fsm_source = NULL, @fsm_guard = NULL, @fsm_count_later = NULL;
            IF v_errno IS NULL THEN
              SET v_outcome = 'fired', v_tid = @fsm_last_transition_id;
              IF NOT (CAST(@fsm_last_from AS BINARY) <=> CAST(@fsm_last_to AS BINARY)) THEN
                SET v_counts = CONCAT(v_counts, IF(v_counts = '', '', ','),
                                      JSON_ARRAY(v_machine, @fsm_last_to, v_instance % 16, 1), ',',
                                      JSON_ARRAY(v_machine, @fsm_last_from, v_instance % 16, -1));
              END IF;
            ELSEIF v_errno IN (31005, 31028, 31032) THEN
              SET v_outcome = 'dropped';
            ELSE
              SET v_outcome = 'held';
            END IF;
          END IF;
          IF v_outcome = 'held' THEN
            UPDATE fsm_timers SET claimed_by = NULL, holds = holds + 1, last_errno = v_errno, last_error = LEFT(v_msg, 255),
                   fire_at = DATE_ADD(v_at, INTERVAL LEAST(60, POW(2, LEAST(v_holds, 6))) SECOND)
             WHERE id = v_id;
          ELSE
            -- a state timeout was deleted by the timer trigger already (a transition re-entering
            -- the state armed a new timer, of a new id)
            DELETE FROM fsm_timers WHERE id = v_id;
            INSERT INTO fsm_timer_log (id, machine, instance_id, instance_key, kind, state, event, request_id, due_at,
                                       armed_at, outcome, transition_id, errno, reason, done_by, done_at)
            VALUES (v_id, v_machine, v_instance, v_key, v_kind, v_state, v_event, v_request, v_due,
                    v_armed, v_outcome, v_tid, v_errno, LEFT(v_msg, 255), LEFT(p_owner, 64), v_at);
          END IF;
          SET v_results = CONCAT(v_results, IF(v_results = '', '', ','), JSON_OBJECT(
            'id', v_id, 'machine', v_machine, 'key', v_key, 'kind', v_kind, 'event', v_event,
            'due_at', DATE_FORMAT(v_due, '%Y-%m-%d %H:%i:%s.%f'), 'outcome', v_outcome, 'tid', v_tid, 'errno', v_errno,
            'lag', TIMESTAMPDIFF(MICROSECOND, v_due, v_at) / 1000000));
        END IF;
      END LOOP;
      CLOSE v_claimed;
      IF v_counts <> '' THEN
        INSERT INTO fsm_state_counts (machine, state, shard, instances)
        SELECT d.machine, d.state, d.shard, d.delta FROM (
          SELECT c.machine, c.state, c.shard, SUM(c.delta) AS delta
            FROM JSON_TABLE(CONCAT('[', v_counts, ']'), '$[*]' COLUMNS (
                   machine VARCHAR(48) PATH '$[0]', state VARCHAR(64) PATH '$[1]', shard INT PATH '$[2]',
                   delta INT PATH '$[3]')) AS c
           GROUP BY c.machine, c.state, c.shard) AS d
         WHERE d.delta <> 0
         ORDER BY d.machine, d.state, d.shard
        ON DUPLICATE KEY UPDATE instances = instances + d.delta;
      END IF;
      COMMIT;
      SET v_started = 0, v_finished = 1;
    END;
  END WHILE;
  SET @fsm_t_id = NULL, @fsm_t_state = NULL;
  IF v_finished = 0 THEN
    -- given up: the timers stay claimed until fire_at, then any call takes them again
    SIGNAL SQLSTATE '40001' SET MESSAGE_TEXT = 'fsm: firing timers deadlocked 3 times; the timers it claimed fire when their claim ends', MYSQL_ERRNO = 1213;
  END IF;
  IF v_any_prepared THEN
    BEGIN
      DECLARE CONTINUE HANDLER FOR 1243 BEGIN END;  -- a PREPARE that failed left nothing to free
      DEALLOCATE PREPARE fsm_timer_lock;
      DEALLOCATE PREPARE fsm_timer_send;
    END;
  END IF;
  SELECT r.timer_id, r.machine, r.instance_key, r.kind, r.event, r.due_at, r.outcome, r.transition_id, r.errno,
         r.lag_seconds
    FROM JSON_TABLE(CONCAT('[', v_results, ']'), '$[*]' COLUMNS (
           timer_id BIGINT UNSIGNED PATH '$.id',
           machine VARCHAR(48) PATH '$.machine',
           instance_key VARCHAR(191) PATH '$.key',
           kind VARCHAR(16) PATH '$.kind',
           event VARCHAR(64) PATH '$.event',
           due_at VARCHAR(26) PATH '$.due_at',
           outcome VARCHAR(16) PATH '$.outcome',
           transition_id BIGINT UNSIGNED PATH '$.tid',
           errno INT PATH '$.errno',
           lag_seconds DECIMAL(20,6) PATH '$.lag')) AS r;
END
