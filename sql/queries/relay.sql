-- The statements the Kafka relay runs (pyfsm/relay/): reading the outbox in batches, marking,
-- parking and deleting its rows, and the advisory lock of its leadership. The relay runs them
-- on its own pool's raw connections (its own transactions); the leadership's row of
-- fsm_relay_leaders and the unparking are routines of the registry (pyfsm/schema/routines.py).
-- An IN list of ids, topics or (machine, instance_id) pairs is one parameter: a list (of
-- tuples), which PyMySQL renders as `(v1,v2,...)` (`((m1,i1),(m2,i2))`), the same text as a
-- list of %s; the relay never passes an empty one.

-- name: relay_fetch
-- The next batch: the oldest outbox rows that pass {conditions} (relay_outbox_pending, and
-- maybe a topic condition), in id order, with `blocked`: an earlier event of the row's instance
-- is parked (read through the index fsm_outbox_instance), in the same snapshot as the rows.
-- Parameters: those of the conditions in their order (relay_outbox_pending has none), then the
-- limit (the batch size, or 1 for a failed topic's trial).
-- Result: (id, machine, topic, instance_id, instance_key, lookup_key, transition_id, sort_key,
-- event, from_state, to_state, data, metadata, occurred_at, blocked), ordered by id.
-- Used by: Relay._fetch (pyfsm/relay/publisher.py), on a pooled connection (autocommit).
SELECT `id`, `machine`, `topic`, `instance_id`, `instance_key`, `lookup_key`, `transition_id`, `sort_key`,
  `event`, `from_state`, `to_state`, `data`, `metadata`, `occurred_at`,
  EXISTS (SELECT 1 FROM `fsm_outbox` p
    WHERE p.`machine` = o.`machine` AND p.`instance_id` = o.`instance_id` AND p.`id` < o.`id`
    AND p.`published_at` IS NULL AND p.`parked_at` IS NOT NULL) AS `blocked`
FROM `fsm_outbox` o WHERE {conditions}
ORDER BY o.`id` LIMIT %s

-- name: relay_outbox_pending
-- Condition of relay_fetch, always first: the row is neither published nor parked.
-- Parameters: none.
-- Used by: Relay._fetch.
o.`published_at` IS NULL AND o.`parked_at` IS NULL

-- name: relay_outbox_topic
-- Condition of relay_fetch: the row's topic is the one failed topic tried alone.
-- Parameters: topic.
-- Used by: Relay._fetch.
o.`topic` = %s

-- name: relay_outbox_not_topics
-- Condition of relay_fetch: the row's topic is none of the topics waiting after a failure.
-- Parameters: the topics, one list parameter (see the top of this file).
-- Used by: Relay._fetch.
o.`topic` NOT IN %s

-- name: relay_hold_roots
-- In the transaction of Relay._hold: the parked, unpublished rows of the given instances,
-- locked (FOR UPDATE) so that an unpark (fsm_unpark_v1, which locks them too) is serialised
-- with the hold: the first row of each instance is the event the others wait behind.
-- Parameters: the (machine, instance_id) pairs, one list-of-tuples parameter (see the top of
-- this file).
-- Result: (id, machine, instance_id, transition_id), ordered by id.
-- Used by: Relay._hold (pyfsm/relay/publisher.py), after conn.begin().
SELECT `id`, `machine`, `instance_id`, `transition_id` FROM `fsm_outbox`
WHERE `published_at` IS NULL AND `parked_at` IS NOT NULL
AND (`machine`, `instance_id`) IN %s
ORDER BY `id` FOR UPDATE

-- name: relay_hold
-- In the same transaction: park the fetched rows of an instance behind its parked event
-- ("held"), those still neither published nor parked.
-- Parameters: last_error (`held: waits behind parked event ...`), the ids (one list
-- parameter, at most ID_CHUNK of them).
-- Used by: Relay._hold.
UPDATE `fsm_outbox` SET `parked_at` = UTC_TIMESTAMP(6), `last_error` = %s
WHERE `id` IN %s AND `published_at` IS NULL AND `parked_at` IS NULL

-- name: relay_mark_published
-- The rows Kafka acknowledged: published now (idempotent: a repeat changes nothing).
-- Parameters: the ids (one list parameter, at most ID_CHUNK of them).
-- Used by: Relay._settle (pyfsm/relay/publisher.py), autocommit.
UPDATE `fsm_outbox` SET `published_at` = UTC_TIMESTAMP(6)
WHERE `id` IN %s AND `published_at` IS NULL

-- name: relay_park
-- A row that can never be published as it is: parked, with one more attempt and the error.
-- Parameters: last_error (at most 1024 characters), id.
-- Used by: Relay._settle, autocommit.
UPDATE `fsm_outbox` SET `parked_at` = UTC_TIMESTAMP(6), `attempts` = `attempts` + 1,
  `last_error` = %s WHERE `id` = %s AND `published_at` IS NULL

-- name: relay_count_failure
-- Rows whose publishing failed and will be retried: one more attempt and the error.
-- Parameters: last_error (at most 1024 characters), the ids (one list parameter, at most
-- ID_CHUNK of them).
-- Used by: Relay._settle, autocommit.
UPDATE `fsm_outbox` SET `attempts` = `attempts` + 1, `last_error` = %s
WHERE `id` IN %s AND `published_at` IS NULL

-- name: relay_delete_published
-- One chunk of the published rows older than the retention (the index on published_at).
-- Parameters: retention in microseconds, chunk size (DELETE_CHUNK).
-- Used by: Relay._delete_published (Relay.step, Relay.cleanup), autocommit, chunk after chunk.
DELETE FROM `fsm_outbox`
WHERE `published_at` < UTC_TIMESTAMP(6) - INTERVAL %s MICROSECOND LIMIT %s

-- name: relay_parked
-- The parked events, oldest first: the ones that failed and the ones held behind them.
-- Parameters: none.
-- Result: (id, machine, instance_key, transition_id, sort_key, event, topic, attempts,
-- last_error, parked_at), ordered by id.
-- Used by: Relay.parked (`pyfsm relay --parked`).
SELECT `id`, `machine`, `instance_key`, `transition_id`, `sort_key`, `event`, `topic`,
  `attempts`, `last_error`, `parked_at` FROM `fsm_outbox`
WHERE `published_at` IS NULL AND `parked_at` IS NOT NULL ORDER BY `id`

-- name: relay_holds_lock
-- Between renewals of the leadership: whether this connection still holds the relay's
-- advisory lock.
-- Parameters: lock name.
-- Result: (1 when held by this connection; 0 or NULL when not).
-- Used by: Leadership._still_advisory (pyfsm/relay/leadership.py), on the leader's connection.
SELECT IS_USED_LOCK(%s) = CONNECTION_ID()

-- name: relay_get_lock
-- Take the relay's advisory lock, waiting up to standby_wait seconds (a standby waits here).
-- Parameters: lock name, seconds to wait.
-- Result: (1 when had, 0 on timeout, NULL on an error).
-- Errors: 1235 where the server refuses GET_LOCK (MariaDB on Galera): the row alone decides.
-- Used by: Leadership._get_lock (pyfsm/relay/leadership.py).
SELECT GET_LOCK(%s, %s)

-- name: relay_release_lock
-- Free the relay's advisory lock (another server's relay leads, or this one resigns).
-- Parameters: lock name.
-- Used by: Leadership._take and Leadership.resign (pyfsm/relay/leadership.py).
SELECT RELEASE_LOCK(%s)
