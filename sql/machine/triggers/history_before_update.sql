-- fsm___M___hbu_v4: BEFORE UPDATE on fsm___M___transitions — history is append-only.
--
-- The only changes allowed are the two pyfsm itself makes:
--  * recording a transition (fsm___M___bu_v7), with @fsm_guard = '<instance id>/<time of
--    the transition>': most_recent from 1 to NULL, and left_at from NULL to that time (or to
--    the row's own created_at when the clock stepped back behind it). That UPDATE sets these
--    two columns only, so when the guard names this row's instance and the left_at it is
--    given, it is let through on that one comparison, without comparing every column;
--  * filling in left_at of rows written before revision 0004 (its migration), with
--    @fsm_fill_left_at = 1: left_at from NULL to a time, on a row that is not the most recent.
-- Nothing else may change. The guard is a session variable, so it stops mistakes, not a
-- determined user with UPDATE rights on this table: grant those to no one but the definer
-- of pyfsm's objects (`pyfsm grant` never does).
-- Errors: 31012 history rows cannot be updated.
-- Example: UPDATE `fsm___M___transitions` SET event = 'x' WHERE id = 1;  -- fails with 31012
CREATE TRIGGER `fsm___M___hbu_v4` BEFORE UPDATE ON `fsm___M___transitions` FOR EACH ROW
BEGIN
  -- IS NOT NULL: with no guard and no left_at, <=> alone would match NULL to NULL
  IF NOT (@fsm_guard IS NOT NULL
          AND CAST(@fsm_guard AS BINARY) <=> CAST(CONCAT(OLD.instance_id, '/', NEW.left_at) AS BINARY)
          AND OLD.most_recent <=> 1 AND NEW.most_recent IS NULL AND OLD.left_at IS NULL) THEN
    -- any other change, or this one without the guard: what v3 checked
    -- left_at = GREATEST(time of the transition, created_at): the guard's time, or created_at
    -- with a guard time at or before it (fixed-width text, so the bytes compare as times; as
    -- bytes, since a number in @fsm_guard, the v2 form, would compare as a number)
    IF NOT ((   ((CAST(@fsm_guard AS BINARY) <=> CAST(CONCAT(OLD.instance_id, '/', NEW.left_at) AS BINARY)
                  OR (NEW.left_at <=> OLD.created_at
                      AND CAST(LEFT(@fsm_guard, CHAR_LENGTH(OLD.instance_id) + 1) AS BINARY)
                          <=> CAST(CONCAT(OLD.instance_id, '/') AS BINARY)
                      AND CAST(SUBSTRING(@fsm_guard, CHAR_LENGTH(OLD.instance_id) + 2) AS BINARY)
                          <= CAST(CONCAT(OLD.created_at) AS BINARY)))
                 AND OLD.most_recent <=> 1 AND NEW.most_recent IS NULL AND OLD.left_at IS NULL)
             OR (@fsm_fill_left_at <=> 1 AND OLD.most_recent IS NULL AND NEW.most_recent IS NULL
                 AND OLD.left_at IS NULL AND NEW.left_at >= OLD.created_at))
            AND NEW.id <=> OLD.id AND NEW.instance_id <=> OLD.instance_id AND NEW.sort_key <=> OLD.sort_key
            AND NEW.event <=> OLD.event AND NEW.from_state <=> OLD.from_state AND NEW.to_state <=> OLD.to_state
            AND NEW.handler <=> OLD.handler AND NEW.data_before <=> OLD.data_before
            AND NEW.data_after <=> OLD.data_after AND NEW.metadata <=> OLD.metadata
            AND NEW.definition_version <=> OLD.definition_version AND NEW.request_id <=> OLD.request_id
            AND NEW.source <=> OLD.source AND NEW.created_at <=> OLD.created_at) THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: history rows cannot be updated', MYSQL_ERRNO = 31012;
    END IF;
  END IF;
END
