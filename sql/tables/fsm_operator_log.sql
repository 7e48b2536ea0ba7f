-- fsm_operator_log: what operators did through the web console (`pyfsm web --allow-actions`), and how it ended.
--
-- One row per action, written before the action runs (outcome 'requested') by
-- fsm_operator_action_v1 and finished by fsm_operator_outcome_v1 ('done' or 'refused' with
-- the error number): a console that died between the two leaves 'requested', never
-- nothing. operator is the name the operator gave the console; account is the MySQL
-- account that ran the action (USER()). detail holds the action's arguments (event, data,
-- metadata, lookup_key, scope, reason, outbox id, skip). Rows are never changed after
-- their outcome is set.
-- Errors: none of its own.
-- Example: SELECT requested_at, operator, action, machine, instance_key, outcome, errno FROM fsm_operator_log ORDER BY id DESC LIMIT 20;
CREATE TABLE IF NOT EXISTS `fsm_operator_log` (
  `id`           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  `operator`     VARCHAR(64) NOT NULL,
  `account`      VARCHAR(288) NOT NULL,
  `action`       VARCHAR(16) NOT NULL,
  `machine`      VARCHAR(48) NULL,
  `instance_key` VARCHAR(191) NULL,
  `detail`       JSON NOT NULL,
  `requested_at` DATETIME(6) NOT NULL,
  `outcome`      VARCHAR(16) NOT NULL,
  `errno`        INT NULL,
  `message`      VARCHAR(512) NULL,
  `finished_at`  DATETIME(6) NULL,
  PRIMARY KEY (`id`),
  KEY `fsm_operator_log_instance` (`machine`, `instance_key`, `id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
