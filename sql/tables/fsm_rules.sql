-- fsm_rules: the allowed transitions of each definition version.
--
-- The rules of (machine, version, from_state, event) are tried in position order (1 first):
-- the first whose guard holds is taken, so a machine is deterministic: one target per
-- (state, event) and data. guard is the rule's condition on the instance's data (pyfsm's
-- guard language, NULL for none; only the last rule of a (state, event) may have none) and
-- guard_name what errors and diagrams call it (fsm_define_v8 writes both). to_final repeats
-- the target's is_final flag so that the transition trigger needs one primary-key lookup,
-- not a join.
-- The second index serves raw UPDATEs of current_state, which look the event up from
-- (from_state, to_state).
-- Errors: none of its own.
-- Example: SELECT from_state, event, position, to_state, guard_name FROM fsm_rules WHERE machine = 'order' AND version = 1;
CREATE TABLE IF NOT EXISTS `fsm_rules` (
  `machine`    VARCHAR(48) NOT NULL,
  `version`    INT UNSIGNED NOT NULL,
  `from_state` VARCHAR(64) NOT NULL,
  `event`      VARCHAR(64) NOT NULL,
  `to_state`   VARCHAR(64) NOT NULL,
  `to_final`   TINYINT(1) NOT NULL,
  `position`   SMALLINT UNSIGNED NOT NULL DEFAULT 1,
  `guard`      JSON NULL,
  `guard_name` VARCHAR(64) NULL,
  PRIMARY KEY (`machine`, `version`, `from_state`, `event`, `position`),
  KEY `fsm_rules_by_target` (`machine`, `version`, `from_state`, `to_state`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
