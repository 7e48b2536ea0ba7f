-- fsm_machines: one row per machine type.
--
-- current_version  the definition version new instances are created under.
-- objects_version  which set of per-type objects (tables, triggers, routines rendered
--                  from sql/machine) is installed; NULL until `pyfsm sync` or
--                  Store.define() has created them.
-- Errors: none of its own.
-- Example: SELECT machine, current_version, objects_version FROM fsm_machines;
CREATE TABLE IF NOT EXISTS `fsm_machines` (
  `machine`         VARCHAR(48) NOT NULL,
  `current_version` INT UNSIGNED NOT NULL DEFAULT 0,
  `objects_version` VARCHAR(16) NULL,
  `created_at`      DATETIME(6) NOT NULL,
  `updated_at`      DATETIME(6) NOT NULL,
  PRIMARY KEY (`machine`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
