-- fsm_locks: durable lock rows with an owner and an expiry, one per lock scope and lookup key.
--
-- scope '*' is the global lock of a lookup key (all machine types); scope = a machine type
-- is that type's local lock. A row is held while unlocked_at IS NULL (or in the future) and
-- expires_at is in the future; machine, instance_id and instance_key name the instance that
-- took it last. Rows are written only by fsm_lock_v1, fsm_renew_lock_v1, fsm_unlock_v1 and
-- fsm_force_unlock_v2; a released row is kept and reused by the next acquisition.
-- advisory_name is the GET_LOCK name taken beside the row; connection_id is the connection
-- that took it (see the view fsm_held_locks_v1 for whether it still holds it).
-- The index fsm_locks_held (unlocked_at, expires_at) finds the locks held now without
-- reading the rows of every account that ever took one (fsm_held_locks_v1, the metrics' and
-- the web console's locks): one range, unlocked_at IS NULL AND expires_at > now.
-- Errors: none of its own.
-- Example: SELECT scope, lookup_key, owner, locked_at, expires_at FROM fsm_locks WHERE unlocked_at IS NULL AND expires_at > UTC_TIMESTAMP(6);
CREATE TABLE IF NOT EXISTS `fsm_locks` (
  `id`            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  `scope`         VARCHAR(48) NOT NULL,
  `lookup_key`    VARCHAR(191) NOT NULL,
  `machine`       VARCHAR(48) NOT NULL,
  `instance_id`   BIGINT UNSIGNED NOT NULL,
  `instance_key`  VARCHAR(191) NOT NULL,
  `owner`         VARCHAR(64) NOT NULL,
  `locked_at`     DATETIME(6) NOT NULL,
  `unlocked_at`   DATETIME(6) NULL,
  `expires_at`    DATETIME(6) NOT NULL,
  `advisory_name` VARCHAR(64) NOT NULL,
  `connection_id` BIGINT UNSIGNED NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `fsm_locks_scope_key` (`scope`, `lookup_key`),
  KEY `fsm_locks_owner` (`owner`),
  KEY `fsm_locks_held` (`unlocked_at`, `expires_at`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
