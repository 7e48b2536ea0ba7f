-- fsm_definitions, revision 0002: two options per definition version.
--
-- lock_lease_seconds: how long a lock taken for an instance of this version lasts unless
-- renewed (fsm_lock_v1's default lease). event_data: whether the outbox rows (and so the
-- Kafka events) of this version carry the instance's data. Rows written before 0002 get
-- the defaults (60 s, data included), which is what they meant.
-- Errors: none of its own.
-- Example: SELECT machine, version, lock_lease_seconds, event_data FROM fsm_definitions;
ALTER TABLE `fsm_definitions`
  ADD COLUMN `lock_lease_seconds` INT UNSIGNED NOT NULL DEFAULT 60,
  ADD COLUMN `event_data` TINYINT(1) NOT NULL DEFAULT 1
