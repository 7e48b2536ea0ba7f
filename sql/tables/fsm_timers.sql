-- fsm_timers: the armed timers, state timeouts and scheduled events (revision 0019).
--
-- One row per timer that has not fired, been dropped or been cancelled yet. kind 'timeout':
-- armed by the type's timer triggers (fsm_{type}_ai_timer_v1, _au_timer_v1) when an instance
-- enters a state with a timeout, in the transition's own transaction, and deleted when it
-- leaves that state (timeout_of = instance_id: one per instance). kind 'scheduled': armed by
-- fsm_send_at_v1, kept until it fires or is cancelled, whatever the instance does meanwhile.
-- due_at is when it is due; fire_at when a worker may next take it: due_at, or later while a
-- worker holds its claim (claimed_by, until fire_at) or after a hold (the instance paused or
-- locked: holds counts them, last_errno/last_error say why). fsm_fire_timers_v1 claims rows
-- whose fire_at has passed with SKIP LOCKED. A timer that fired, was dropped or cancelled
-- leaves this table for fsm_timer_log in the same transaction.
-- Errors: none of its own.
-- Example: SELECT machine, instance_key, kind, event, due_at FROM fsm_timers WHERE due_at <= UTC_TIMESTAMP(6) ORDER BY due_at LIMIT 20;
CREATE TABLE IF NOT EXISTS `fsm_timers` (
  `id`            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  `machine`       VARCHAR(48) NOT NULL,
  `instance_id`   BIGINT UNSIGNED NOT NULL,
  `instance_key`  VARCHAR(191) NOT NULL,
  `kind`          VARCHAR(16) NOT NULL,
  `timeout_of`    BIGINT UNSIGNED NULL,
  `state`         VARCHAR(64) NULL,
  `event`         VARCHAR(64) NOT NULL,
  `metadata`      JSON NULL,
  `request_id`    VARCHAR(64) NULL,
  `due_at`        DATETIME(6) NOT NULL,
  `fire_at`       DATETIME(6) NOT NULL,
  `armed_at`      DATETIME(6) NOT NULL,
  `armed_version` BIGINT UNSIGNED NOT NULL,
  `claimed_by`    VARCHAR(64) NULL,
  `holds`         INT UNSIGNED NOT NULL DEFAULT 0,
  `last_errno`    INT NULL,
  `last_error`    VARCHAR(255) NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `fsm_timers_timeout` (`machine`, `timeout_of`),
  UNIQUE KEY `fsm_timers_request` (`machine`, `request_id`),
  KEY `fsm_timers_fire` (`fire_at`, `id`),
  KEY `fsm_timers_due` (`due_at`),
  KEY `fsm_timers_instance` (`machine`, `instance_id`),
  KEY `fsm_timers_kind` (`machine`, `kind`),
  KEY `fsm_timers_claimed` (`claimed_by`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
