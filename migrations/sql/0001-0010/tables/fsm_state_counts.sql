-- fsm_state_counts: how many instances of each machine type are in each state, kept by the triggers.
--
-- Counting a state of a million-row instance table with COUNT(*) reads every index entry
-- of that state; this table answers in a few rows instead. The insert trigger adds 1 to the
-- new instance's state, the transition trigger moves 1 from the old state to the new one,
-- in the same transaction as the transition. Each (machine, state) is split over 16 shards
-- (instance id % 16) so that concurrent transitions of different instances rarely wait on
-- the same counter row; a state's count is the SUM over its shards (fsm_v_state_counts,
-- fsm_counts_v2). Written only by pyfsm's triggers and migrations.
-- Errors: none of its own.
-- Example: SELECT state, SUM(instances) FROM fsm_state_counts WHERE machine = 'order' GROUP BY state;
CREATE TABLE IF NOT EXISTS `fsm_state_counts` (
  `machine`   VARCHAR(48) NOT NULL,
  `state`     VARCHAR(64) NOT NULL,
  `shard`     TINYINT UNSIGNED NOT NULL,
  `instances` BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (`machine`, `state`, `shard`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
