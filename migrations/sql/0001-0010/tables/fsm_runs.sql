-- fsm_runs: the hot queue of the handler engine, one row per instance it is running.
--
-- An instance the engine runs (pyfsm.Process) has a row here from its start until it is
-- completed or failed; the big instance and history tables stay cold. due_at says when it
-- should run next: NULL when it waits (for an external event, or paused), a past time when
-- it is due, and while a worker or caller runs it, the end of that claim (claimed_by): if
-- the claimer dies, the row becomes due again when the claim runs out. attempt counts the
-- failed attempts of the current step (reset when the state changes); pause_requested
-- asks the claimer to pause at the next step boundary; a claim that ran out without being
-- given back (its worker died or hung) counts as an attempt when the run is claimed again; run_immediately overrides the
-- process's setting for this instance (NULL: the process decides).
-- The claim query (fsm_claim_v1) reads the index (machine, due_at, id) in order with
-- FOR UPDATE SKIP LOCKED, so concurrent workers never wait for, or miss, due rows.
-- Errors: none of its own.
-- Example: SELECT machine, COUNT(*) AS due FROM fsm_runs WHERE due_at <= UTC_TIMESTAMP(6) GROUP BY machine;
CREATE TABLE IF NOT EXISTS `fsm_runs` (
  `id`              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  `machine`         VARCHAR(48) NOT NULL,
  `instance_id`     BIGINT UNSIGNED NOT NULL,
  `instance_key`    VARCHAR(191) NOT NULL,
  `due_at`          DATETIME(6) NULL,
  `claimed_by`      VARCHAR(64) NULL,
  `attempt`         INT UNSIGNED NOT NULL DEFAULT 0,
  `pause_requested` TINYINT(1) NOT NULL DEFAULT 0,
  `run_immediately` TINYINT(1) NULL,
  `created_at`      DATETIME(6) NOT NULL,
  `updated_at`      DATETIME(6) NOT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `fsm_runs_instance` (`machine`, `instance_id`),
  KEY `fsm_runs_claim` (`machine`, `due_at`, `id`),
  KEY `fsm_runs_claimed_by` (`claimed_by`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
