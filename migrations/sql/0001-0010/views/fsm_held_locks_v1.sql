-- fsm_held_locks_v1: every lock held right now, with its owner, since when, until when, and
-- the connection that holds its advisory (GET_LOCK) lock.
--
-- kind is 'global' (scope '*') or 'local' (scope = the machine type). advisory_connection is
-- IS_USED_LOCK() of the lock's advisory name: NULL when no connection holds it any more
-- (the holder died: the row stays held until expires_at), a connection id otherwise (see
-- information_schema.PROCESSLIST, or KILL it).
-- Errors: none of its own.
-- Example: SELECT kind, lookup_key, machine, instance_key, owner, since, expires_at, advisory_connection FROM fsm_held_locks_v1 ORDER BY since;
CREATE VIEW `fsm_held_locks_v1` AS
SELECT l.`id`, IF(l.`scope` = '*', 'global', 'local') AS `kind`, l.`scope`, l.`lookup_key`, l.`machine`,
       l.`instance_id`, l.`instance_key`, l.`owner`, l.`locked_at` AS `since`, l.`expires_at`,
       l.`connection_id`, IS_USED_LOCK(l.`advisory_name`) AS `advisory_connection`, l.`advisory_name`
  FROM `fsm_locks` l
 WHERE l.`unlocked_at` IS NULL AND l.`expires_at` > UTC_TIMESTAMP(6)
