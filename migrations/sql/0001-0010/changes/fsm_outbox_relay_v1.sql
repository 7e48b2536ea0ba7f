-- fsm_outbox_relay_v1: the relay's bookkeeping columns and indexes on fsm_outbox (revision 0003).
--
-- Adds to fsm_outbox, whose rows the triggers write (see tables/fsm_outbox.sql):
--   published_at  DATETIME(6) UTC, set by the relay once the broker acknowledged the event;
--                 NULL while it waits. Published rows are deleted after the relay's retention.
--   attempts      failed publish attempts so far (0 for an event published at the first try).
--   last_error    the last publish error, e.g. 'MSG_SIZE_TOO_LARGE: ...'; NULL if none.
--   parked_at     DATETIME(6) UTC, set when the event can never be published as it is (too
--                 large, invalid), or when it waits behind a parked event of its own
--                 instance. Parked rows are skipped until released (Relay.unpark).
--   index fsm_outbox_pending (published_at, parked_at, id): the relay's "oldest unpublished,
--                 unparked rows in id order", the lag count, parked rows, and retention deletes.
--   index fsm_outbox_instance (machine, instance_id, id): one instance's rows in order.
-- Parameters: none. Applied once by migration 0003.
-- Errors: none of its own.
-- Example: SELECT id, machine, instance_key, attempts, last_error FROM fsm_outbox WHERE published_at IS NULL AND parked_at IS NOT NULL ORDER BY id;
ALTER TABLE `fsm_outbox`
  ADD COLUMN `published_at` DATETIME(6) NULL,
  ADD COLUMN `attempts`     INT UNSIGNED NOT NULL DEFAULT 0,
  ADD COLUMN `last_error`   VARCHAR(1024) NULL,
  ADD COLUMN `parked_at`    DATETIME(6) NULL,
  ADD KEY `fsm_outbox_pending` (`published_at`, `parked_at`, `id`),
  ADD KEY `fsm_outbox_instance` (`machine`, `instance_id`, `id`)
