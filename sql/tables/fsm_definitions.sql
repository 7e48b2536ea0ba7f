-- fsm_definitions: every stored version of every machine definition, never changed once written.
--
-- body is the definition as JSON (see fsm_define_v4); topic and the three options are copied
-- into each instance at creation, so instances keep what their version said.
-- Errors: none of its own.
-- Example: SELECT version, created_at, body FROM fsm_definitions WHERE machine = 'order' ORDER BY version;
CREATE TABLE IF NOT EXISTS `fsm_definitions` (
  `machine`          VARCHAR(48) NOT NULL,
  `version`          INT UNSIGNED NOT NULL,
  `body`             JSON NOT NULL,
  `topic`            VARCHAR(249) NULL,
  `save_after_step`  TINYINT(1) NOT NULL,
  `uses_global_lock` TINYINT(1) NOT NULL,
  `uses_local_lock`  TINYINT(1) NOT NULL,
  `created_at`       DATETIME(6) NOT NULL,
  `lock_lease_seconds` INT UNSIGNED NOT NULL DEFAULT 60,
  `event_data`       TINYINT(1) NOT NULL DEFAULT 1,
  PRIMARY KEY (`machine`, `version`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
