-- fsm_rules: the allowed transitions of each definition version.
--
-- The primary key (machine, version, from_state, event) is what makes a machine
-- deterministic: at most one target per (state, event). to_final repeats the target's
-- is_final flag so that the transition trigger needs one primary-key lookup, not a join.
-- The second index serves raw UPDATEs of current_state, which look the event up from
-- (from_state, to_state).
-- Errors: none of its own.
-- Example: SELECT from_state, event, to_state FROM fsm_rules WHERE machine = 'order' AND version = 1;
CREATE TABLE IF NOT EXISTS `fsm_rules` (
  `machine`    VARCHAR(48) NOT NULL,
  `version`    INT UNSIGNED NOT NULL,
  `from_state` VARCHAR(64) NOT NULL,
  `event`      VARCHAR(64) NOT NULL,
  `to_state`   VARCHAR(64) NOT NULL,
  `to_final`   TINYINT(1) NOT NULL,
  PRIMARY KEY (`machine`, `version`, `from_state`, `event`),
  KEY `fsm_rules_by_target` (`machine`, `version`, `from_state`, `to_state`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
