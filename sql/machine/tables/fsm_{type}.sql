-- fsm_{type}: the instances of machine type '{type}' (rendered per type by pyfsm).
--
-- One row per instance. current_state, version and updated_at are maintained by the
-- trigger fsm_{type}_bu_v7: every change of current_state must be an allowed transition and
-- is recorded in fsm_{type}_transitions. Columns left NULL on INSERT are filled from the
-- machine's current definition by fsm_{type}_bi_v1.
-- Errors: see the triggers.
-- Example: SELECT instance_key, current_state, status, version FROM `fsm_{type}` WHERE current_state = 'paid' ORDER BY id LIMIT 20;
CREATE TABLE IF NOT EXISTS `fsm_{type}` (
  `id`                 BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  `machine`            VARCHAR(48) NOT NULL DEFAULT '{type}',
  `instance_key`       VARCHAR(191) NOT NULL,
  `lookup_key`         VARCHAR(191) NULL,
  `current_state`      VARCHAR(64) NULL,
  `status`             VARCHAR(16) NOT NULL DEFAULT 'running',
  `resume_from_step`   VARCHAR(64) NULL,
  `save_after_step`    TINYINT(1) NULL,
  `kafka_topic`        VARCHAR(249) NULL,
  `data`               JSON NULL,
  `created_at`         DATETIME(6) NULL,
  `updated_at`         DATETIME(6) NULL,
  `uses_global_lock`   TINYINT(1) NULL,
  `uses_local_lock`    TINYINT(1) NULL,
  `unlocked_at`        DATETIME(6) NULL,
  `last_retry_at`      DATETIME(6) NULL,
  `definition_version` INT UNSIGNED NOT NULL DEFAULT 0,
  `version`            BIGINT UNSIGNED NOT NULL DEFAULT 0,
  PRIMARY KEY (`id`),
  UNIQUE KEY `fsm_{type}_key` (`instance_key`),
  KEY `fsm_{type}_state` (`current_state`, `id`),
  KEY `fsm_{type}_status` (`status`, `id`),
  KEY `fsm_{type}_lookup` (`lookup_key`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
