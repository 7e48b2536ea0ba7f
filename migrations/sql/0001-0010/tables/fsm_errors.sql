-- fsm_errors: every handler failure the engine recorded; never changed once written.
--
-- One row per failed attempt of a step: the exception's type and message, a bounded
-- excerpt of its traceback (the last 4,000 characters), the attempt number, whether it
-- will be retried and when (next_run_at), or what happened instead (outcome: 'retry',
-- 'failed' or 'failure_event').
-- Errors: none of its own.
-- Example: SELECT created_at, instance_key, state, handler, attempt, error_type, message FROM fsm_errors WHERE machine = 'order' ORDER BY id DESC LIMIT 20;
CREATE TABLE IF NOT EXISTS `fsm_errors` (
  `id`           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  `machine`      VARCHAR(48) NOT NULL,
  `instance_id`  BIGINT UNSIGNED NOT NULL,
  `instance_key` VARCHAR(191) NOT NULL,
  `state`        VARCHAR(64) NOT NULL,
  `handler`      VARCHAR(128) NOT NULL,
  `attempt`      INT UNSIGNED NOT NULL,
  `error_type`   VARCHAR(255) NOT NULL,
  `message`      VARCHAR(1000) NOT NULL,
  `traceback`    TEXT NOT NULL,
  `outcome`      VARCHAR(16) NOT NULL,
  `next_run_at`  DATETIME(6) NULL,
  `created_at`   DATETIME(6) NOT NULL,
  PRIMARY KEY (`id`),
  KEY `fsm_errors_instance` (`machine`, `instance_id`, `id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
