-- fsm_{type}_hbu_v5: BEFORE UPDATE on fsm_{type}_transitions — history is append-only.
--
-- The only changes allowed are the two pyfsm itself makes:
--  * recording a transition (fsm_{type}_bu_v7), with @fsm_guard = '<instance id>/<time of
--    the transition>': most_recent from 1 to NULL, and left_at from NULL to that time (or to
--    the row's own created_at when the clock stepped back behind it). That UPDATE sets these
--    two columns only, so when the guard names this row's instance and the left_at it is
--    given, it is let through on that one comparison, without comparing every column;
--  * filling in left_at of rows written before revision 0004 (its migration), with
--    @fsm_fill_left_at = 1: left_at from NULL to a time, on a row that is not the most recent.
-- Nothing else may change. Every test is wrapped in COALESCE(..., 0): a NULL anywhere (no
-- guard, left_at left NULL) refuses. v4 compared the guard with <=>, so with no guard and
-- left_at left NULL, NULL <=> NULL let `SET most_recent = NULL` through and left an instance
-- without a most recent row. Text and JSON columns are compared as bytes (utf8mb4_bin pads
-- with spaces: 'a' = 'a ' would let a trailing space through). The guard is a session
-- variable, so it stops mistakes, not a determined user with UPDATE rights on this table:
-- grant those to no one but the definer of pyfsm's objects (`pyfsm grant` never does).
-- Errors: 31012 history rows cannot be updated.
-- Example: UPDATE `fsm_{type}_transitions` SET most_recent = NULL WHERE most_recent = 1;  -- fails with 31012
CREATE TRIGGER `fsm_{type}_hbu_v5` BEFORE UPDATE ON `fsm_{type}_transitions` FOR EACH ROW
BEGIN
  -- the common path: fsm_{type}_bu_v7's own flip, named by its guard (as bytes: a number in
  -- @fsm_guard, the v2 form, would compare as a number)
  IF NOT COALESCE(CAST(@fsm_guard AS BINARY) = CAST(CONCAT(OLD.instance_id, '/', NEW.left_at) AS BINARY)
                  AND OLD.most_recent = 1 AND NEW.most_recent IS NULL AND OLD.left_at IS NULL, 0) THEN
    -- the two other changes pyfsm makes, each with every other column unchanged:
    --  * the flip with left_at = created_at, the guard's time at or before it (the clock
    --    stepped back; fixed-width text, so the bytes compare as times);
    --  * fill_left_at's, on a row that is not the most recent
    IF NOT COALESCE(
         ((NEW.left_at = OLD.created_at AND OLD.most_recent = 1 AND NEW.most_recent IS NULL AND OLD.left_at IS NULL
           AND CAST(LEFT(@fsm_guard, CHAR_LENGTH(OLD.instance_id) + 1) AS BINARY) = CAST(CONCAT(OLD.instance_id, '/') AS BINARY)
           AND CAST(SUBSTRING(@fsm_guard, CHAR_LENGTH(OLD.instance_id) + 2) AS BINARY) <= CAST(CONCAT(OLD.created_at) AS BINARY))
          OR (@fsm_fill_left_at = 1 AND OLD.most_recent IS NULL AND NEW.most_recent IS NULL
              AND OLD.left_at IS NULL AND NEW.left_at >= OLD.created_at))
         AND NEW.id <=> OLD.id AND NEW.instance_id <=> OLD.instance_id AND NEW.sort_key <=> OLD.sort_key
         AND CAST(NEW.event AS BINARY) <=> CAST(OLD.event AS BINARY)
         AND CAST(NEW.from_state AS BINARY) <=> CAST(OLD.from_state AS BINARY)
         AND CAST(NEW.to_state AS BINARY) <=> CAST(OLD.to_state AS BINARY)
         AND CAST(NEW.handler AS BINARY) <=> CAST(OLD.handler AS BINARY)
         AND CAST(NEW.data_before AS BINARY) <=> CAST(OLD.data_before AS BINARY)
         AND CAST(NEW.data_after AS BINARY) <=> CAST(OLD.data_after AS BINARY)
         AND CAST(NEW.metadata AS BINARY) <=> CAST(OLD.metadata AS BINARY)
         AND NEW.definition_version <=> OLD.definition_version
         AND CAST(NEW.request_id AS BINARY) <=> CAST(OLD.request_id AS BINARY)
         AND CAST(NEW.source AS BINARY) <=> CAST(OLD.source AS BINARY) AND NEW.created_at <=> OLD.created_at, 0) THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: history rows cannot be updated', MYSQL_ERRNO = 31012;
    END IF;
  END IF;
END
