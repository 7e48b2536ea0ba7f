-- fsm_v_outbox: the events waiting for the Kafka relay, and the ones it parked.
--
-- One row per outbox event not yet published (published events are left out): its
-- instance, transition and topic, when it happened, how often the relay tried it, and
-- parked_at / last_error for an event the relay set aside (see fsm_unpark_v1). age_seconds
-- counts from occurred_at to now. A MERGE view over the index (published_at, parked_at, id):
-- parked events are WHERE parked_at IS NOT NULL, the lag is MIN(id).
-- For reporting accounts (`pyfsm grant --reporting`) and the web console.
-- Errors: none of its own.
-- Example: SELECT id, machine, instance_key, event, topic, attempts, last_error, parked_at FROM fsm_v_outbox WHERE parked_at IS NOT NULL ORDER BY id LIMIT 20;
CREATE OR REPLACE ALGORITHM = MERGE SQL SECURITY DEFINER VIEW `fsm_v_outbox` AS
SELECT o.`id`, o.`machine`, o.`topic`, o.`instance_id`, o.`instance_key`, o.`lookup_key`, o.`transition_id`,
       o.`sort_key`, o.`event`, o.`from_state`, o.`to_state`, o.`occurred_at`, o.`attempts`, o.`last_error`,
       o.`parked_at`, TIMESTAMPDIFF(MICROSECOND, o.`occurred_at`, UTC_TIMESTAMP(6)) * 0.000001 AS `age_seconds`
  FROM `fsm_outbox` o
 WHERE o.`published_at` IS NULL
