-- fsm_accounts: the accounts `pyfsm grant` gave least privileges to, so that objects created
-- later (a new machine type's procedures and views, a new revision's routines) are granted
-- to them too.
--
-- role is 'app' (EXECUTE on the public procedures only), 'reporting' (SELECT on the
-- reporting views only) or 'relay' (the outbox rows the Kafka relay reads and marks).
-- Errors: none of its own.
-- Example: SELECT user, host, role FROM fsm_accounts;
CREATE TABLE IF NOT EXISTS `fsm_accounts` (
  `user`       VARCHAR(80) NOT NULL,
  `host`       VARCHAR(255) NOT NULL,
  `role`       VARCHAR(16) NOT NULL,
  `granted_at` DATETIME(6) NOT NULL,
  PRIMARY KEY (`user`, `host`, `role`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
