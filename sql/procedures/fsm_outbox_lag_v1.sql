-- fsm_outbox_lag_v1: how far the Kafka relay is behind.
--
-- Parameters: none.
-- Result: one row:
--   unpublished         events not yet acknowledged by Kafka (parked ones included)
--   parked              of those, events the relay has set aside (too large, or waiting
--                       behind a parked event of their instance; see fsm_outbox.last_error)
--   oldest_id           fsm_outbox.id of the oldest unpublished event, NULL if none
--   oldest_occurred_at  when the oldest unpublished event happened (UTC), NULL if none
--   oldest_age_seconds  seconds from then to now (decimal, microseconds), NULL if none
-- Reads only; runs inside or outside a transaction.
-- Errors: none of its own.
-- Example: CALL fsm_outbox_lag_v1();
CREATE PROCEDURE `fsm_outbox_lag_v1`()
READS SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  SELECT COUNT(*) AS `unpublished`,
         COALESCE(SUM(`parked_at` IS NOT NULL), 0) AS `parked`,
         MIN(`id`) AS `oldest_id`,
         MIN(`occurred_at`) AS `oldest_occurred_at`,
         TIMESTAMPDIFF(MICROSECOND, MIN(`occurred_at`), v_now) / 1000000 AS `oldest_age_seconds`
    FROM `fsm_outbox`
   WHERE `published_at` IS NULL;
END
