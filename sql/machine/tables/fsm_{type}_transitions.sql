-- fsm_{type}_transitions: the history of machine type '{type}', append-only.
--
-- One row per state change, including the creation of an instance (event and from_state
-- NULL). sort_key equals the instance's version right after the change, so it increases
-- strictly per instance; order by it, never by time. most_recent is 1 on the latest row of
-- each instance and NULL on all others (not 0: UNIQUE allows many NULLs but only one 1).
-- source says who wrote it: 'procedure' (a pyfsm procedure) or 'update' (a raw INSERT or
-- UPDATE on fsm_{type}). left_at is when the instance left to_state (the next row's created_at;
-- NULL on the most recent row). Rows cannot be updated or deleted, except for the most
-- recent row's most_recent and left_at when the next transition is recorded (the history
-- triggers).
-- Errors: see the triggers.
-- Example: SELECT sort_key, event, from_state, to_state, created_at FROM `fsm_{type}_transitions` WHERE instance_id = 1 ORDER BY sort_key;
CREATE TABLE IF NOT EXISTS `fsm_{type}_transitions` (
  `id`                 BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  `instance_id`        BIGINT UNSIGNED NOT NULL,
  `sort_key`           BIGINT UNSIGNED NOT NULL,
  `most_recent`        TINYINT(1) NULL,
  `event`              VARCHAR(64) NULL,
  `from_state`         VARCHAR(64) NULL,
  `to_state`           VARCHAR(64) NOT NULL,
  `handler`            VARCHAR(128) NULL,
  `data_before`        JSON NULL,
  `data_after`         JSON NOT NULL,
  `metadata`           JSON NOT NULL,
  `definition_version` INT UNSIGNED NOT NULL,
  `request_id`         VARCHAR(64) NULL,
  `source`             VARCHAR(16) NOT NULL,
  `created_at`         DATETIME(6) NOT NULL,
  `left_at`            DATETIME(6) NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `fsm_{type}_t_sort` (`instance_id`, `sort_key`),
  UNIQUE KEY `fsm_{type}_t_recent` (`instance_id`, `most_recent`),
  UNIQUE KEY `fsm_{type}_t_request` (`request_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
