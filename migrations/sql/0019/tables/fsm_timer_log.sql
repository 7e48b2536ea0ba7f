-- fsm_timer_log: what became of each timer that left fsm_timers other than by its state being left (revision 0019).
--
-- One row per timer (id is the timer's id), written in the transaction that ended it:
-- outcome 'fired' (transition_id is the history row its event wrote, with request id
-- 'fsm:timer:<id>' and metadata.timer naming it), 'dropped' (its event was not allowed when
-- it came due: errno and reason say why; nothing was sent) or 'cancelled' (fsm_cancel_timer_v1;
-- reason is the canceller's). A state timeout disarmed because the instance left its state
-- is not logged: the history records the move. done_by is the firing worker's owner name.
-- Errors: none of its own.
-- Example: SELECT outcome, COUNT(*), MAX(TIMESTAMPDIFF(MICROSECOND, due_at, done_at)) / 1e6 AS max_lag_s FROM fsm_timer_log WHERE done_at > UTC_TIMESTAMP(6) - INTERVAL 1 HOUR GROUP BY outcome;
CREATE TABLE IF NOT EXISTS `fsm_timer_log` (
  `id`            BIGINT UNSIGNED NOT NULL,
  `machine`       VARCHAR(48) NOT NULL,
  `instance_id`   BIGINT UNSIGNED NOT NULL,
  `instance_key`  VARCHAR(191) NOT NULL,
  `kind`          VARCHAR(16) NOT NULL,
  `state`         VARCHAR(64) NULL,
  `event`         VARCHAR(64) NOT NULL,
  `request_id`    VARCHAR(64) NULL,
  `due_at`        DATETIME(6) NOT NULL,
  `armed_at`      DATETIME(6) NOT NULL,
  `outcome`       VARCHAR(16) NOT NULL,
  `transition_id` BIGINT UNSIGNED NULL,
  `errno`         INT NULL,
  `reason`        VARCHAR(255) NULL,
  `done_by`       VARCHAR(64) NULL,
  `done_at`       DATETIME(6) NOT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `fsm_timer_log_request` (`machine`, `request_id`),
  KEY `fsm_timer_log_done` (`done_at`),
  KEY `fsm_timer_log_machine_done` (`machine`, `done_at`),
  KEY `fsm_timer_log_instance` (`machine`, `instance_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
