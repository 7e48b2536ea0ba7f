-- fsm_outbox: state changes waiting to be published to Kafka.
--
-- Written by the per-type triggers in the same transaction as the history row, only for
-- instances whose kafka_topic is set. (machine, transition_id) identifies the history row
-- and is the event's stable id. The relay (pyfsm.relay) publishes rows in id order and
-- records published_at; attempts and last_error count failures, and a message that keeps
-- failing is parked (parked_at) until an operator re-queues it.
-- Errors: none of its own.
-- Example: SELECT COUNT(*), MIN(occurred_at) FROM fsm_outbox;
CREATE TABLE IF NOT EXISTS `fsm_outbox` (
  `id`            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  `machine`       VARCHAR(48) NOT NULL,
  `topic`         VARCHAR(249) NOT NULL,
  `instance_id`   BIGINT UNSIGNED NOT NULL,
  `instance_key`  VARCHAR(191) NOT NULL,
  `lookup_key`    VARCHAR(191) NULL,
  `transition_id` BIGINT UNSIGNED NOT NULL,
  `sort_key`      BIGINT UNSIGNED NOT NULL,
  `event`         VARCHAR(64) NULL,
  `from_state`    VARCHAR(64) NULL,
  `to_state`      VARCHAR(64) NOT NULL,
  `data`          JSON NULL,
  `metadata`      JSON NOT NULL,
  `occurred_at`   DATETIME(6) NOT NULL,
  `published_at`  DATETIME(6) NULL,
  `attempts`      INT UNSIGNED NOT NULL DEFAULT 0,
  `last_error`    VARCHAR(1024) NULL,
  `parked_at`     DATETIME(6) NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `fsm_outbox_event` (`machine`, `transition_id`),
  KEY `fsm_outbox_pending` (`published_at`, `parked_at`, `id`),
  KEY `fsm_outbox_instance` (`machine`, `instance_id`, `id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
