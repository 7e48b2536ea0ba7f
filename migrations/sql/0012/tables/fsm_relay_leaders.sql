-- fsm_relay_leaders: which Kafka relay publishes a database's outbox, on every server of a cluster.
--
-- One row per relay lock name (one per database). The relay that holds the row (holder,
-- until expires_at) is the only one publishing; it renews the row while it leads and
-- resigns it when it stops (fsm_relay_lead_v1, fsm_relay_resign_v1). A row, unlike
-- GET_LOCK, is seen by every server of a Galera cluster (or the replicas of a primary),
-- so relays started on several nodes still have one leader. term grows by one each time
-- the leadership changes hands; server is @@hostname:@@port#@@server_id of the server the
-- leader's connection is on, and connection_id that connection.
-- Errors: none of its own.
-- Example: SELECT name, holder, term, server, since, expires_at FROM fsm_relay_leaders;
CREATE TABLE IF NOT EXISTS `fsm_relay_leaders` (
  `name`          VARCHAR(64) NOT NULL,
  `holder`        VARCHAR(128) NOT NULL,
  `term`          BIGINT UNSIGNED NOT NULL,
  `server`        VARCHAR(300) NOT NULL,
  `connection_id` BIGINT UNSIGNED NOT NULL,
  `since`         DATETIME(6) NOT NULL,
  `renewed_at`    DATETIME(6) NOT NULL,
  `expires_at`    DATETIME(6) NOT NULL,
  PRIMARY KEY (`name`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
