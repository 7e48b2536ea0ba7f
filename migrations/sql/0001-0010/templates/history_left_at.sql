-- fsm___M___transitions.left_at: when the instance left the state this history row entered.
--
-- Set by the transition trigger (v3) in the same UPDATE that turns most_recent off, so
-- "time spent in each state" is one row's left_at - created_at, not a search for the next
-- row (sort_key has gaps: updates that are not transitions bump the version too). NULL on
-- the most recent row. Added by revision 0004 (instantly: a new last column); rows older
-- than it are filled in by that migration.
-- Errors: none of its own.
-- Example: SELECT to_state, created_at, left_at FROM `fsm___M___transitions` WHERE instance_id = 1 ORDER BY sort_key;
ALTER TABLE `fsm___M___transitions` ADD COLUMN `left_at` DATETIME(6) NULL
