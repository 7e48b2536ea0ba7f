-- fsm_outbox_lag_v1: how far the Kafka relay is behind.
--
-- Parameters: none.
-- Result: one row:
--   unpublished         events not yet acknowledged by Kafka (parked ones included)
--   parked              of those, events the relay has set aside (too large, or waiting
--                       behind a parked event of their instance; see fsm_outbox.last_error)
--   oldest_id           fsm_outbox.id of the oldest unpublished event (the lowest id), NULL if none
--   oldest_occurred_at  when the oldest unpublished event happened (UTC), NULL if none
--   oldest_age_seconds  seconds from then to now (decimal, 4 places), NULL if none
-- Reads only; runs inside or outside a transaction.
-- Errors: none of its own.
-- Example: CALL fsm_outbox_lag_v1();
CREATE PROCEDURE `fsm_outbox_lag_v1`()
READS SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_count, v_parked BIGINT DEFAULT 0;
  DECLARE v_oldest BIGINT UNSIGNED;
  DECLARE v_occurred DATETIME(6);
  -- the unpublished rows only, from the index fsm_outbox_pending alone (published rows kept
  -- for the retention are never read); then one primary-key read for the oldest one's time
  SELECT COUNT(*), COALESCE(SUM(`parked_at` IS NOT NULL), 0), MIN(`id`) INTO v_count, v_parked, v_oldest
    FROM `fsm_outbox` WHERE `published_at` IS NULL;
  SET v_occurred = (SELECT `occurred_at` FROM `fsm_outbox` WHERE `id` = v_oldest);
  SELECT v_count AS `unpublished`, v_parked AS `parked`, v_oldest AS `oldest_id`,
         v_occurred AS `oldest_occurred_at`,
         TIMESTAMPDIFF(MICROSECOND, v_occurred, v_now) / 1000000 AS `oldest_age_seconds`;
END
