-- fsm_machines: one row per machine type.
--
-- current_version  the definition version new instances are created under.
-- objects_version  which set of per-type objects (tables, triggers, routines rendered
--                  from sql/machine) is installed; NULL until `pyfsm sync` or
--                  Store.define() has created them.
-- rendered_version the current_version when the transition trigger (fsm_{type}_bu_v9) was
--                  last rendered with the type's rules inline; NULL before
--                  (fsm_rendered_ready_v1, fsm_define_v7's tables_ready).
-- rendered_digest  SHA-1 of that trigger's text: `pyfsm sync` renders it again only when
--                  the text would differ.
-- Errors: none of its own.
-- Example: SELECT machine, current_version, objects_version FROM fsm_machines;
CREATE TABLE IF NOT EXISTS `fsm_machines` (
  `machine`         VARCHAR(48) NOT NULL,
  `current_version` INT UNSIGNED NOT NULL DEFAULT 0,
  `objects_version` VARCHAR(16) NULL,
  `created_at`      DATETIME(6) NOT NULL,
  `updated_at`      DATETIME(6) NOT NULL,
  `rendered_version` INT UNSIGNED NULL,
  `rendered_digest` CHAR(40) NULL,
  PRIMARY KEY (`machine`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
