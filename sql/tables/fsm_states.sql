-- fsm_states: the states of each definition version.
--
-- position is the order the definition lists the states in (1-based); when several start
-- states allow an event, the one listed first wins. timeout_seconds and timeout_event are
-- the state's timeout (the definition's "timeouts", revision 0019): an instance entering
-- the state arms a timer that sends timeout_event after timeout_seconds (NULL: none).
-- Errors: none of its own.
-- Example: SELECT state, is_start, is_final FROM fsm_states WHERE machine = 'order' AND version = 1 ORDER BY position;
CREATE TABLE IF NOT EXISTS `fsm_states` (
  `machine`  VARCHAR(48) NOT NULL,
  `version`  INT UNSIGNED NOT NULL,
  `state`    VARCHAR(64) NOT NULL,
  `position` INT UNSIGNED NOT NULL,
  `is_start` TINYINT(1) NOT NULL,
  `is_final` TINYINT(1) NOT NULL,
  `timeout_seconds` INT UNSIGNED NULL,
  `timeout_event` VARCHAR(64) NULL,
  PRIMARY KEY (`machine`, `version`, `state`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
