-- fsm_attachments: one row per machine type attached to a table of the application's own.
--
-- Written by fsm_attach_v1 (which checks the table, its key and its state column first) and
-- by pyfsm when it installs or removes the attached type's triggers (Store.attach,
-- Store.detach, `pyfsm attach`, `pyfsm detach`, `pyfsm sync`).
-- machine        the type; its instance table fsm_<machine> keeps the bookkeeping, one row per row of the table.
-- table_name     the application's table, in pyfsm's database; key_column its primary key or a NOT NULL
--                unique key of one column; state_column the column that holds the state.
-- key_kind       'integer', 'string' or 'binary': how a key is written as the instance key (decimal
--                digits, the text itself, lower-case hexadecimal); key_type its column type.
-- lookup_column  the column whose value is the instance's lookup_key (the key of its locks), or NULL.
-- data_columns   a JSON array of the columns copied into the instance's data at each write of the row
--                (what guards test and outbox rows carry), or NULL.
-- on_delete      'refuse' (a row under the machine is not deleted) or 'allow' (it goes; its
--                instance and history stay).
-- installed_at   when the triggers were installed (NULL: recorded by a DBA's fsm_attach_v1, not
--                installed yet: `pyfsm sync <machine>` installs them); detached_at when they were removed.
-- adopted_at     when the last adoption finished with every row adopted.
-- Errors: none of its own.
-- Example: SELECT machine, table_name, key_column, state_column, installed_at FROM fsm_attachments;
CREATE TABLE IF NOT EXISTS `fsm_attachments` (
  `machine`      VARCHAR(48) NOT NULL,
  `table_name`   VARCHAR(64) NOT NULL,
  `key_column`   VARCHAR(64) NOT NULL,
  `state_column` VARCHAR(64) NOT NULL,
  `key_kind`     VARCHAR(8) NOT NULL,
  `key_type`     VARCHAR(255) NOT NULL,
  `lookup_column` VARCHAR(64) NULL,
  `data_columns` TEXT NULL,
  `on_delete`    VARCHAR(8) NOT NULL DEFAULT 'refuse',
  `created_at`   DATETIME(6) NOT NULL,
  `installed_at` DATETIME(6) NULL,
  `detached_at`  DATETIME(6) NULL,
  `adopted_at`   DATETIME(6) NULL,
  PRIMARY KEY (`machine`),
  UNIQUE KEY `fsm_attachments_column` (`table_name`, `state_column`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
