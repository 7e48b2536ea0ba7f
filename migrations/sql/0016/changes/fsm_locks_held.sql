-- fsm_locks_held: an index on fsm_locks for the locks held now (revision 0016).
--
-- fsm_locks keeps one row per lock scope and account that ever took a lock (a released row
-- is reused by the next acquisition), so the view fsm_held_locks_v1 (unlocked_at IS NULL
-- AND expires_at > now) read every one of them: 0.5 s at a million accounts, for every
-- metrics scrape and every page of the web console that shows locks. The index
-- (unlocked_at, expires_at) makes that one range over the locks held. Built in place without
-- locking the table (ALGORITHM=INPLACE, LOCK=NONE on both servers): lock calls go on while it
-- is built.
-- Parameters: none. Applied once by migration 0016.
-- Errors: none of its own.
-- Example: EXPLAIN SELECT COUNT(*) FROM fsm_held_locks_v1;
ALTER TABLE `fsm_locks`
  ADD KEY `fsm_locks_held` (`unlocked_at`, `expires_at`),
  ALGORITHM=INPLACE, LOCK=NONE
