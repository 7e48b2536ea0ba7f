-- fsm_unpark_v1: release a parked outbox event, and the events of its instance held behind it.
--
-- The Kafka relay parks an event it cannot publish (too large, rejected) and every later
-- event of the same instance behind it, so that consumers never see event N+1 without N.
-- Without p_skip the parked rows of that instance become pending again and the relay tries
-- them (after, say, the size limit was raised). With p_skip the event p_outbox_id is given
-- up: marked published without being published, its last_error kept with a 'skipped: '
-- prefix; the events held behind it are released. Only the first parked event of an
-- instance may be skipped. One transaction, under row locks on the parked rows, so that it
-- serialises with a relay parking rows of the same instance.
-- Parameters: p_outbox_id (fsm_outbox.id of a parked event); p_skip (1: give it up, 0: retry).
-- Result: one row (released): how many outbox rows were released.
-- Errors: 31009 invalid argument; 31016 called inside an open transaction; 31026 no parked
--   event has that id; 31027 p_skip, but the event waits behind an earlier parked event of
--   its instance (skip that one, or release both without p_skip).
-- Example: CALL fsm_unpark_v1(1234, 0);
CREATE PROCEDURE `fsm_unpark_v1`(
  IN p_outbox_id BIGINT UNSIGNED,
  IN p_skip TINYINT)
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_started TINYINT DEFAULT 0;
  DECLARE v_released BIGINT DEFAULT 0;
  DECLARE v_machine VARCHAR(48) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_instance, v_first BIGINT UNSIGNED;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    IF v_started THEN
      ROLLBACK;
    END IF;
    RESIGNAL;
  END;
  IF p_outbox_id IS NULL OR p_outbox_id < 1 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: outbox id must be a positive integer', MYSQL_ERRNO = 31009;
  END IF;
  IF p_skip IS NULL OR p_skip NOT IN (0, 1) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: skip must be 0 or 1', MYSQL_ERRNO = 31009;
  END IF;
  CALL fsm_begin_v1();
  SET v_started = 1;
  SELECT `machine`, `instance_id` INTO v_machine, v_instance FROM `fsm_outbox`
   WHERE `id` = p_outbox_id AND `published_at` IS NULL AND `parked_at` IS NOT NULL FOR UPDATE;
  IF v_instance IS NULL THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: no parked event has that outbox id', MYSQL_ERRNO = 31026;
  END IF;
  SELECT MIN(`id`) INTO v_first FROM `fsm_outbox`
   WHERE `machine` = v_machine AND `instance_id` = v_instance AND `published_at` IS NULL AND `parked_at` IS NOT NULL
     FOR UPDATE;
  IF p_skip AND v_first <> p_outbox_id THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: that event waits behind an earlier parked event of its instance; skip that one first', MYSQL_ERRNO = 31027;
  END IF;
  IF p_skip THEN
    UPDATE `fsm_outbox` SET `published_at` = UTC_TIMESTAMP(6),
           `last_error` = LEFT(CONCAT('skipped: ', COALESCE(`last_error`, '')), 1024)
     WHERE `id` = p_outbox_id;
    SET v_released = ROW_COUNT();
  END IF;
  UPDATE `fsm_outbox` SET `parked_at` = NULL
   WHERE `machine` = v_machine AND `instance_id` = v_instance AND `published_at` IS NULL AND `parked_at` IS NOT NULL;
  SET v_released = v_released + ROW_COUNT();
  COMMIT;
  SELECT v_released AS released;
END
