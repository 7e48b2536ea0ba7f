-- fsm_lock_log: what fsm_force_unlock_v2 released, by whom and why; never changed once written.
--
-- One row per forced release: the lock's scope and lookup key, the owner and instance it
-- was taken from, its expiry at that moment, the MySQL account that forced it (USER()) and
-- the reason given.
-- Errors: none of its own.
-- Example: SELECT released_at, scope, lookup_key, owner, released_by, reason FROM fsm_lock_log ORDER BY id DESC LIMIT 20;
CREATE TABLE IF NOT EXISTS `fsm_lock_log` (
  `id`           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  `scope`        VARCHAR(48) NOT NULL,
  `lookup_key`   VARCHAR(191) NOT NULL,
  `machine`      VARCHAR(48) NOT NULL,
  `instance_key` VARCHAR(191) NOT NULL,
  `owner`        VARCHAR(64) NOT NULL,
  `expires_at`   DATETIME(6) NOT NULL,
  `released_at`  DATETIME(6) NOT NULL,
  `released_by`  VARCHAR(288) NOT NULL,
  `reason`       VARCHAR(255) NOT NULL,
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
