-- fsm_{type}_fire_v2: send an event to an instance of {type}, nothing else given (Store.send without options).
--
-- CALL fsm_{type}_fire_v2(k, e) answers exactly as CALL fsm_{type}_send_v5(k, e, NULL, NULL,
-- NULL, NULL, NULL, NULL, NULL): the same result row, the same refusals with the same
-- numbers, at a lower cost. It is fire_v1 with one statement where that had two or more: its
-- context is one variable, @fsm_source 'fire/<event>', which fsm_{type}_bu_v13 reads and clears,
-- and the trigger leaves the result in one variable, @fsm_last, instead of four (each user
-- variable set inside a routine is a statement of its own). It takes two parameters and
-- tests only what its UPDATE needs. On an instance that exists a DBA's @fsm_metadata,
-- @fsm_handler and @fsm_request_id are neither read nor cleared (send_v5 clears them); after
-- it @fsm_last_transition_id and @fsm_last_status are set as after any transition, and
-- @fsm_last_instance_id, @fsm_last_from, @fsm_last_to and @fsm_last_version are not (read its
-- result row). Handed to send_v5, with nothing written: at once, a NULL key or event or a key
-- ending in a space (send_v5 names it); after a rollback, a key with no instance (send_v5
-- creates one in a start state that allows the event, or says 31003). Every other refusal it
-- answers itself, in send_v5's order.
-- Parameters: p_key, p_event (both required).
-- Result: one row (transition_id, instance_id, from_state, to_state, version, status, created,
--   replayed), as fsm_{type}_send_v5's.
-- Errors: those of fsm_{type}_send_v5 (31028 no such event, 31003, 31016 called inside an
--   open transaction, 31005 not allowed, 31032 refused by a guard, 31009 invalid argument,
--   31011 paused, 31012, 31018 locked, 31024, 1213 deadlock: call again, 1205).
-- Example: CALL `fsm_{type}_fire_v2`('k-1', 'pay');
CREATE PROCEDURE `fsm_{type}_fire_v2`(
  IN p_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_event TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
MODIFIES SQL DATA SQL SECURITY DEFINER
proc: BEGIN
  -- 0: nothing begun; 1: this procedure's transaction; 2: handed to send_v5, whose answer stands
  DECLARE v_stage TINYINT DEFAULT 0;
  DECLARE v_errno INT;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    -- first: on MySQL any statement before it clears the condition it reads (send_v5's note)
    GET DIAGNOSTICS CONDITION 1 v_errno = MYSQL_ERRNO;
    SET @fsm_source = NULL;
    IF v_stage = 1 THEN
      ROLLBACK;
    END IF;
    IF v_stage < 2 THEN
      -- send_v5's error path, in its order: the event's name, then the error's own meaning
      BEGIN
        DECLARE v_dv INT UNSIGNED;
        DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
        IF (v_errno = 1568 AND v_stage = 0) OR NOT COALESCE(fsm_valid_name_v1(p_event, 64), 0) THEN
          -- one check names a bad key or event: send_v5 tests the key before it begins (here
          -- only what the UPDATE needs was), and a name that is no rule's on any error
          CALL fsm_check_args_v1(p_key, p_event, NULL, NULL, NULL, NULL, NULL);
        END IF;
        IF v_errno = 1568 AND v_stage = 0 THEN
          SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: called inside an open transaction; commit or roll back first', MYSQL_ERRNO = 31016;
        END IF;
        IF v_errno = 1062 THEN
          -- with the row lock held and no request id, only history written outside pyfsm collides
          SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: history unique key violated; history was written outside pyfsm', MYSQL_ERRNO = 31012;
        END IF;
        IF v_errno = 31005 THEN
          -- is the event one of the type's at all (in the instance's definition version)? As send_v5 asks it.
          SET v_dv = (SELECT definition_version FROM `fsm_{type}` WHERE instance_key = p_key);
          IF NOT EXISTS (SELECT 1 FROM fsm_rules WHERE machine = '{type}' AND version = v_dv AND event = p_event
                            AND CAST(event AS BINARY) = CAST(p_event AS BINARY)) THEN
            SET v_msg = LEFT(CONCAT('fsm: {type} has no event ', p_event, ' (definition version ', COALESCE(v_dv, 'NULL'),
                                    '); its events: ', COALESCE((SELECT GROUP_CONCAT(DISTINCT event ORDER BY event SEPARATOR ', ')
                                      FROM fsm_rules WHERE machine = '{type}' AND version = v_dv), 'none')), 128);
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31028;
          END IF;
        END IF;
      END;
    END IF;
    RESIGNAL;
  END;
  -- What the UPDATE below needs: an event (else it would not be a transition) and a key
  -- without trailing spaces (utf8mb4_bin would find 'k1' for 'k1 '). Any other bad argument
  -- finds no row and goes to send_v5, which names it.
  IF NOT COALESCE(p_event IS NOT NULL AND p_key NOT LIKE '% ', 0) THEN
    SET v_stage = 2;
    CALL `fsm_{type}_send_v5`(p_key, p_event, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    LEAVE proc;
  END IF;
  -- READ COMMITTED, as send_v5 begins it; inside the caller's transaction this is 1568 (31016 above)
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  SET v_stage = 1, @fsm_source = CONCAT('fire/', p_event);
  UPDATE `fsm_{type}` SET data = data WHERE instance_key = p_key;
  -- the trigger took the context (it clears it before its first write): the event is applied
  IF @fsm_source IS NULL THEN
    COMMIT;
    -- @fsm_last: 'transition id/instance id/version/status/from/to' (bu_v12)
    SELECT CAST(SUBSTRING_INDEX(@fsm_last, '/', 1) AS UNSIGNED) AS transition_id,
           CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(@fsm_last, '/', 2), '/', -1) AS UNSIGNED) AS instance_id,
           SUBSTRING_INDEX(SUBSTRING_INDEX(@fsm_last, '/', 5), '/', -1) AS from_state,
           SUBSTRING_INDEX(@fsm_last, '/', -1) AS to_state,
           CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(@fsm_last, '/', 3), '/', -1) AS UNSIGNED) AS version,
           SUBSTRING_INDEX(SUBSTRING_INDEX(@fsm_last, '/', 4), '/', -1) AS status, 0 AS created, 0 AS replayed;
    LEAVE proc;
  END IF;
  -- no instance: the trigger did not run, so the context is still set; send_v5 creates it (or refuses)
  SET @fsm_source = NULL, v_stage = 2;
  ROLLBACK;
  CALL `fsm_{type}_send_v5`(p_key, p_event, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
END
