-- fsm_account_history_v1: the history of one account (lookup key) across every machine type, a page at a time.
--
-- Each installed type is read through its own indexes: the account's instances by lookup_key,
-- their history by instance_id; each type's rows after the cursor are sorted and cut at
-- p_limit, and those pages are merged. A page reads the history rows of the account's
-- instances (a few hundred for an account with tens of instances), never a whole table,
-- whatever plan the server would pick for the union view fsm_v_history.
-- Rows are ordered by entered_at, then machine (byte order), then transition_id: newest first
-- or oldest first. Within one instance this is the sort_key order. Pass the last row's
-- entered_at, machine and transition_id as the cursor to get the next page (keyset
-- pagination: no OFFSET; rows entered in the same microsecond are neither skipped nor repeated).
-- The statement it runs is fsm_account_history_sql_v1's (a DBA may EXPLAIN it).
-- Parameters: p_lookup_key; p_newest_first (1 or NULL: newest first, 0: oldest first);
--   p_after_at, p_after_machine, p_after_id (the last row of the previous page; all NULL for
--   the first page); p_limit (1-10000).
-- Result: rows with the columns of fsm_v_history (transition_id, machine, instance_key,
--   lookup_key, instance_id, sort_key, event, from_state, to_state, handler, source, request_id,
--   definition_version, data_before, data_after, metadata, entered_at, left_at,
--   seconds_in_state, is_current); no row for an account without history or after the last page.
-- Errors: 31009 lookup key NULL, empty, longer than 191 characters or ending in a space,
--   p_newest_first not 0, 1 or NULL, limit out of range, or a cursor that is partly given,
--   names no valid machine name or has a negative id; 31024 lookup key not valid UTF-8.
-- Example: CALL fsm_account_history_v1('customer-7', 1, NULL, NULL, NULL, 50);
CREATE PROCEDURE `fsm_account_history_v1`(
  IN p_lookup_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_newest_first TINYINT,
  IN p_after_at DATETIME(6),
  IN p_after_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_after_id BIGINT,
  IN p_limit INT)
READS SQL DATA SQL SECURITY DEFINER
BEGIN
  SET @fsm_sql = fsm_account_history_sql_v1(p_lookup_key, p_newest_first, p_after_at, p_after_machine, p_after_id,
                                            p_limit);
  PREPARE fsm_stmt FROM @fsm_sql;
  SET @fsm_sql = NULL;
  EXECUTE fsm_stmt;
  DEALLOCATE PREPARE fsm_stmt;
END
