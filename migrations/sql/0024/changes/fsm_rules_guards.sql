-- fsm_rules_guards: rules with guards, several per (state, event) (revision 0024).
--
-- position orders the rules of (machine, version, from_state, event), 1 first (every rule
-- stored before this revision is the only one of its (state, event): 1); guard is the rule's
-- condition on the instance's data (NULL: none), guard_name what errors and diagrams call
-- it. The primary key takes position, so a (state, event) may have several rules. The
-- transition triggers before bu_v11 read a (state, event)'s one rule; a definition can have
-- several only through fsm_define_v8, which this revision installs after the swap.
-- Parameters: none. Applied once by migration 0024.
-- Errors: none of its own.
-- Example: SELECT from_state, event, position, to_state, guard_name FROM fsm_rules WHERE machine = 'order';
ALTER TABLE `fsm_rules`
  ADD COLUMN `position` SMALLINT UNSIGNED NOT NULL DEFAULT 1,
  ADD COLUMN `guard` JSON NULL,
  ADD COLUMN `guard_name` VARCHAR(64) NULL,
  DROP PRIMARY KEY,
  ADD PRIMARY KEY (`machine`, `version`, `from_state`, `event`, `position`)
