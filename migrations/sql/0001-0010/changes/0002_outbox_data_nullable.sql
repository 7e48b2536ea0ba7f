-- fsm_outbox, revision 0002: data may be NULL.
--
-- An outbox row of a definition with event_data off carries no data (NULL); the relay then
-- publishes "data": null.
-- Errors: none of its own.
-- Example: SELECT COUNT(*) FROM fsm_outbox WHERE data IS NULL;
ALTER TABLE `fsm_outbox` MODIFY COLUMN `data` JSON NULL
