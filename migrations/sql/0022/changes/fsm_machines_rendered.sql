-- fsm_machines_rendered: what each type's transition trigger was rendered from (revision 0022).
--
-- fsm_<type>_bu_v9 carries its type's rules inline. rendered_version is the type's current
-- definition version when the trigger was last rendered (fsm_rendered_ready_v1 and
-- fsm_define_v7's tables_ready compare it with current_version), rendered_digest the SHA-1
-- of the trigger's text (`pyfsm sync` renders again only when the text would differ). Both
-- are NULL until the revision's per-type step (or `pyfsm sync`) renders the trigger.
-- Parameters: none. Applied once by migration 0022.
-- Errors: none of its own.
-- Example: SELECT machine, current_version, rendered_version FROM fsm_machines;
ALTER TABLE `fsm_machines`
  ADD COLUMN `rendered_version` INT UNSIGNED NULL,
  ADD COLUMN `rendered_digest` CHAR(40) NULL
