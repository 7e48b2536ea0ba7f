-- fsm_attach_v1: check that a table of the application's can carry machine type p_machine, and record it (or only say what it holds).
--
-- The table must be an InnoDB base table of this database (not a view, not pyfsm's own, not
-- system-versioned); p_key its primary key or a NOT NULL unique key of that one column
-- (a composite key is refused), an integer, a CHAR/VARCHAR of at most 191 characters or a
-- BINARY/VARBINARY of at most 95 bytes, not generated; p_state a CHAR, VARCHAR or ENUM
-- column, not generated, not the key, long enough for every state of every definition
-- version, an ENUM holding each of them. No trigger may already have one of the names pyfsm
-- gives the attached type's triggers; no other type may hold the same column; the type
-- must not be attached elsewhere, nor hold instances of its own from before. A refused call
-- changes nothing.
-- With p_dry_run 1 nothing is written: one row per state value of the table's rows (byte for
-- byte, NULL included) with its `rows` and known (1: a state of the machine's current
-- definition version), each carrying the attachment as it would be recorded (an empty table:
-- one row, state, `rows` and known NULL).
-- Without it the attachment is recorded in fsm_attachments (calling it again with the same
-- table and columns changes nothing; p_on_delete may change) and returned. Triggers cannot
-- be created by a routine on MySQL (1295, 1303), so a DBA's attachment is completed by
-- `pyfsm sync <machine>` (or Store.attach), which installs them and reports installed_at.
-- p_lookup names the column whose value is each instance's lookup_key (the key its locks are
-- taken by): an integer, string or binary column, or NULL. p_columns is a JSON array of the
-- columns copied into each instance's data whenever the row is written (what guards test and
-- the outbox carries): plain names of numeric, string, ENUM or date and time columns, or NULL.
-- Parameters: p_machine (an installed type), p_table, p_key, p_state (names as they are, any
--   characters), p_lookup, p_columns (see above), p_on_delete ('refuse' or 'allow'; NULL: 'refuse'), p_dry_run (0 or 1).
-- Result: machine, table_name, key_column, state_column, key_kind, key_type, lookup_column,
--   data_columns, on_delete,
--   installed_at, adopted_at; with p_dry_run also state, `rows`, known (see above).
-- Errors: 31002 unknown machine; 31009 bad p_on_delete; 31034 the table cannot be attached;
--   31035 the key cannot; 31036 the state column (or the lookup column, a copied column) cannot; 31037 a trigger has one of pyfsm's
--   names; 31039 the type or the column is attached already, or the type has instances.
-- Example: CALL fsm_attach_v1('order', 'orders', 'id', 'status', NULL, '["total"]', 'refuse', 1);
CREATE PROCEDURE `fsm_attach_v1`(
  IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_table TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_state TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_lookup TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_columns TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_on_delete TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_dry_run TINYINT)
MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
  DECLARE v_msg VARCHAR(512) CHARACTER SET utf8mb4;
  DECLARE v_n INT;
  DECLARE v_engine, v_kind VARCHAR(64) CHARACTER SET utf8mb4;
  DECLARE v_table_type VARCHAR(64) CHARACTER SET utf8mb4;
  DECLARE v_data_type, v_state_type VARCHAR(64) CHARACTER SET utf8mb4;
  DECLARE v_column_type, v_state_column_type LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_nullable VARCHAR(3) CHARACTER SET utf8mb4;
  DECLARE v_length, v_state_length BIGINT;
  DECLARE v_generated, v_state_generated TINYINT;
  DECLARE v_charset, v_collation VARCHAR(64) CHARACTER SET utf8mb4;
  DECLARE v_missing TEXT CHARACTER SET utf8mb4;
  DECLARE v_on_delete VARCHAR(8) CHARACTER SET utf8mb4 DEFAULT COALESCE(p_on_delete, 'refuse');
  DECLARE v_version INT UNSIGNED;
  CALL fsm_require_machine_v1(p_machine);
  IF v_on_delete NOT IN ('refuse', 'allow') OR p_dry_run IS NULL OR p_dry_run NOT IN (0, 1) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: p_on_delete must be refuse or allow, p_dry_run 0 or 1', MYSQL_ERRNO = 31009;
  END IF;
  IF p_table IS NULL OR p_key IS NULL OR p_state IS NULL OR CHAR_LENGTH(p_table) NOT BETWEEN 1 AND 64
     OR CHAR_LENGTH(p_key) NOT BETWEEN 1 AND 64 OR CHAR_LENGTH(p_state) NOT BETWEEN 1 AND 64 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: the table, key and state column must be names of 1 to 64 characters', MYSQL_ERRNO = 31034;
  END IF;
  SET v_version = (SELECT current_version FROM fsm_machines WHERE machine = p_machine);
  -- the table: byte for byte, so the name recorded is the table's own
  SELECT MIN(ENGINE), MIN(TABLE_TYPE), COUNT(*) INTO v_engine, v_table_type, v_n FROM information_schema.TABLES
   WHERE TABLE_SCHEMA = DATABASE() AND CAST(TABLE_NAME AS BINARY) = CAST(p_table AS BINARY);
  IF v_n = 0 THEN
    SET v_msg = LEFT(CONCAT('fsm: no table ', QUOTE(p_table), ' in database ', DATABASE(),
                            ' (pyfsm attaches tables of its own database only)'), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31034;
  END IF;
  IF v_table_type <> 'BASE TABLE' OR v_engine IS NULL OR v_engine <> 'InnoDB' OR p_table LIKE 'fsm\_%' THEN
    SET v_msg = LEFT(CONCAT('fsm: ', QUOTE(p_table), ' is ',
                            CASE WHEN p_table LIKE 'fsm\_%' THEN 'one of pyfsm''s tables'
                                 WHEN v_table_type <> 'BASE TABLE' THEN CONCAT('a ', LOWER(v_table_type))
                                 ELSE CONCAT('an ', COALESCE(v_engine, 'unknown engine'), ' table') END,
                            ': only InnoDB tables can be attached'), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31034;
  END IF;
  -- the key
  SELECT MIN(DATA_TYPE), MIN(COLUMN_TYPE), MIN(IS_NULLABLE), MIN(CHARACTER_MAXIMUM_LENGTH),
         MAX(COALESCE(GENERATION_EXPRESSION, '') <> ''), MIN(CHARACTER_SET_NAME), MIN(COLLATION_NAME), COUNT(*)
    INTO v_data_type, v_column_type, v_nullable, v_length, v_generated, v_charset, v_collation, v_n
    FROM information_schema.COLUMNS
   WHERE TABLE_SCHEMA = DATABASE() AND CAST(TABLE_NAME AS BINARY) = CAST(p_table AS BINARY)
     AND CAST(COLUMN_NAME AS BINARY) = CAST(p_key AS BINARY);
  IF v_n = 0 THEN
    SET v_msg = LEFT(CONCAT('fsm: ', QUOTE(p_table), ' has no column ', QUOTE(p_key)), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31035;
  END IF;
  SET v_kind = CASE WHEN v_data_type IN ('tinyint', 'smallint', 'mediumint', 'int', 'bigint') THEN 'integer'
                    WHEN v_data_type IN ('char', 'varchar') AND v_length <= 191 THEN 'string'
                    WHEN v_data_type IN ('binary', 'varbinary') AND v_length <= 95 THEN 'binary' END;
  IF v_kind IS NULL OR v_generated THEN
    SET v_msg = LEFT(CONCAT('fsm: key ', QUOTE(p_key), ' is ', IF(v_generated, 'generated', v_column_type),
                            ': keys are integers, strings of at most 191 characters or binary ids of at most 95 bytes'), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31035;
  END IF;
  IF v_nullable <> 'NO' OR NOT EXISTS (
       SELECT 1 FROM information_schema.STATISTICS k
        WHERE k.TABLE_SCHEMA = DATABASE() AND CAST(k.TABLE_NAME AS BINARY) = CAST(p_table AS BINARY)
          AND k.NON_UNIQUE = 0 AND CAST(k.COLUMN_NAME AS BINARY) = CAST(p_key AS BINARY) AND k.SUB_PART IS NULL
          AND NOT EXISTS (SELECT 1 FROM information_schema.STATISTICS o
                           WHERE o.TABLE_SCHEMA = k.TABLE_SCHEMA AND o.TABLE_NAME = k.TABLE_NAME
                             AND o.INDEX_NAME = k.INDEX_NAME AND o.SEQ_IN_INDEX > 1)) THEN
    SET v_msg = LEFT(CONCAT('fsm: key ', QUOTE(p_key), ' is not the primary key or a NOT NULL unique key of that one column',
                            ' (composite keys are not supported)'), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31035;
  END IF;
  -- the state column
  SELECT MIN(DATA_TYPE), MIN(COLUMN_TYPE), MIN(CHARACTER_MAXIMUM_LENGTH), MAX(COALESCE(GENERATION_EXPRESSION, '') <> ''), COUNT(*)
    INTO v_state_type, v_state_column_type, v_state_length, v_state_generated, v_n
    FROM information_schema.COLUMNS
   WHERE TABLE_SCHEMA = DATABASE() AND CAST(TABLE_NAME AS BINARY) = CAST(p_table AS BINARY)
     AND CAST(COLUMN_NAME AS BINARY) = CAST(p_state AS BINARY);
  IF v_n = 0 OR CAST(p_state AS BINARY) = CAST(p_key AS BINARY) OR v_state_generated
     OR v_state_type NOT IN ('char', 'varchar', 'enum') THEN
    SET v_msg = LEFT(CONCAT('fsm: state column ', QUOTE(p_state), ' ',
                            CASE WHEN v_n = 0 THEN CONCAT('is not a column of ', QUOTE(p_table))
                                 WHEN CAST(p_state AS BINARY) = CAST(p_key AS BINARY) THEN 'is the key'
                                 WHEN v_state_generated THEN 'is generated'
                                 ELSE CONCAT('is ', v_state_column_type, ', not CHAR, VARCHAR or ENUM') END), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31036;
  END IF;
  IF v_state_type = 'enum' THEN
    -- state names are [a-z][a-z0-9_]*: each is in the list as 'name' when the ENUM holds it
    SET v_missing = (SELECT GROUP_CONCAT(DISTINCT state ORDER BY state SEPARATOR ', ') FROM fsm_states
                      WHERE machine = p_machine AND LOCATE(CONCAT('''', state, ''''), CAST(v_state_column_type AS BINARY)) = 0);
  ELSE
    SET v_missing = (SELECT GROUP_CONCAT(DISTINCT state ORDER BY state SEPARATOR ', ') FROM fsm_states
                      WHERE machine = p_machine AND CHAR_LENGTH(state) > v_state_length);
  END IF;
  IF v_missing IS NOT NULL THEN
    SET v_msg = LEFT(CONCAT('fsm: state column ', QUOTE(p_state), ' (', v_state_column_type, ') cannot hold ', v_missing), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31036;
  END IF;
  -- the lookup column and the columns copied into the instance's data: plain columns of the table
  IF p_columns IS NOT NULL AND NOT (JSON_VALID(p_columns) AND JSON_TYPE(p_columns) = 'ARRAY' AND JSON_LENGTH(p_columns) <= 32) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: p_columns must be a JSON array of at most 32 column names', MYSQL_ERRNO = 31036;
  END IF;
  BEGIN
    DECLARE v_i INT DEFAULT 0;
    DECLARE v_name TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_type VARCHAR(64) CHARACTER SET utf8mb4;
    DECLARE v_gen TINYINT;
    WHILE v_i <= COALESCE(JSON_LENGTH(p_columns), 0) DO
      -- the lookup column first (v_i 0), then each copied column
      SET v_name = IF(v_i = 0, p_lookup, JSON_UNQUOTE(JSON_EXTRACT(p_columns, CONCAT('$[', v_i - 1, ']'))));
      IF v_name IS NOT NULL OR v_i > 0 THEN
        SELECT MIN(DATA_TYPE), MAX(COALESCE(GENERATION_EXPRESSION, '') <> ''), COUNT(*) INTO v_type, v_gen, v_n
          FROM information_schema.COLUMNS
         WHERE TABLE_SCHEMA = DATABASE() AND CAST(TABLE_NAME AS BINARY) = CAST(p_table AS BINARY)
           AND CAST(COLUMN_NAME AS BINARY) = CAST(v_name AS BINARY);
        IF v_n = 0 OR v_gen OR CAST(v_name AS BINARY) = CAST(p_state AS BINARY)
           OR (v_i > 0 AND NOT (v_name REGEXP '^[A-Za-z_][A-Za-z0-9_]*$'
                                AND v_type IN ('tinyint', 'smallint', 'mediumint', 'int', 'bigint', 'decimal', 'float', 'double',
                                               'char', 'varchar', 'enum', 'date', 'datetime', 'timestamp', 'time', 'year')))
           OR (v_i = 0 AND v_type NOT IN ('tinyint', 'smallint', 'mediumint', 'int', 'bigint', 'char', 'varchar', 'binary', 'varbinary')) THEN
          SET v_msg = LEFT(CONCAT('fsm: ', IF(v_i = 0, 'lookup column ', 'column '), COALESCE(QUOTE(v_name), 'NULL'), ' ',
                                  CASE WHEN v_n = 0 THEN CONCAT('is not a column of ', QUOTE(p_table))
                                       WHEN v_gen THEN 'is generated'
                                       WHEN CAST(v_name AS BINARY) = CAST(p_state AS BINARY) THEN 'is the state column'
                                       WHEN v_i > 0 AND NOT v_name REGEXP '^[A-Za-z_][A-Za-z0-9_]*$' THEN 'is not a plain name (letters, digits, _)'
                                       ELSE CONCAT('is ', v_type, ', which ', IF(v_i = 0, 'a lookup key', 'the data'), ' cannot take') END), 128);
          SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31036;
        END IF;
      END IF;
      SET v_i = v_i + 1;
    END WHILE;
  END;
  -- pyfsm's trigger names, on the table or on fsm_<machine>, taken by a trigger pyfsm did not install
  SET v_missing = (SELECT GROUP_CONCAT(TRIGGER_NAME ORDER BY TRIGGER_NAME SEPARATOR ', ') FROM information_schema.TRIGGERS
                    WHERE TRIGGER_SCHEMA = DATABASE()
                      AND TRIGGER_NAME IN (CONCAT('fsm_', p_machine, '_sbi_v1'), CONCAT('fsm_', p_machine, '_sai_v1'),
                                           CONCAT('fsm_', p_machine, '_sbu_v1'), CONCAT('fsm_', p_machine, '_sbd_v1'),
                                           CONCAT('fsm_', p_machine, '_au_subject_v1'), CONCAT('fsm_', p_machine, '_ai_subject_v1'),
                                           CONCAT('fsm_', p_machine, '_bi_adopt_v1'), CONCAT('fsm_', p_machine, '_bi_adopted_v1'),
                                           CONCAT('fsm_', p_machine, '_bu_copy_v1'))
                      AND NOT EXISTS (SELECT 1 FROM fsm_attachments a WHERE a.machine = p_machine
                                         AND CAST(a.table_name AS BINARY) = CAST(p_table AS BINARY)));
  IF v_missing IS NOT NULL THEN
    SET v_msg = LEFT(CONCAT('fsm: trigger names pyfsm needs are taken: ', v_missing), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31037;
  END IF;
  -- attached already: elsewhere, or this column by another type; a type with instances of its own
  -- a detached attachment may come back on the same table under other column names (a column
  -- renamed meanwhile): its instances are that table's rows, by the same key values
  IF EXISTS (SELECT 1 FROM fsm_attachments WHERE machine = p_machine
                AND NOT (CAST(table_name AS BINARY) = CAST(p_table AS BINARY)
                         AND ((CAST(key_column AS BINARY) = CAST(p_key AS BINARY)
                               AND CAST(state_column AS BINARY) = CAST(p_state AS BINARY))
                              OR detached_at IS NOT NULL))) THEN
    SET v_msg = LEFT(CONCAT('fsm: ', p_machine, ' is attached to ', (SELECT CONCAT(table_name, '.', state_column) FROM fsm_attachments
                            WHERE machine = p_machine), ' already: detach it first'), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31039;
  END IF;
  IF EXISTS (SELECT 1 FROM fsm_attachments WHERE machine <> p_machine AND CAST(table_name AS BINARY) = CAST(p_table AS BINARY)
                AND CAST(state_column AS BINARY) = CAST(p_state AS BINARY)) THEN
    SET v_msg = LEFT(CONCAT('fsm: ', QUOTE(p_state), ' of ', QUOTE(p_table), ' holds the state of ',
                            (SELECT MIN(machine) FROM fsm_attachments WHERE CAST(table_name AS BINARY) = CAST(p_table AS BINARY)
                                AND CAST(state_column AS BINARY) = CAST(p_state AS BINARY)), ' already'), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31039;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM fsm_attachments WHERE machine = p_machine)
     AND EXISTS (SELECT 1 FROM fsm_state_counts WHERE machine = p_machine AND instances <> 0) THEN
    SET v_msg = LEFT(CONCAT('fsm: ', p_machine, ' has instances of its own: attach a type that has none'), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31039;
  END IF;
  SET v_column_type = CASE v_kind WHEN 'string' THEN CONCAT(v_column_type, ' CHARACTER SET ', v_charset, ' COLLATE ', v_collation)
                                  ELSE v_column_type END;
  IF p_dry_run = 1 THEN
    -- the rows per state value: the only dynamic statement, its names quoted ('`' doubled)
    SET @fsm_attach_sql = CONCAT(
          'SELECT ? AS machine, ? AS table_name, ? AS key_column, ? AS state_column, ? AS key_kind, ? AS key_type, ',
          '? AS lookup_column, ? AS data_columns, ? AS on_delete, a.installed_at, a.adopted_at, c.state, c.`rows`, c.known ',
          'FROM (SELECT 1 AS one) o LEFT JOIN fsm_attachments a ON a.machine = ? LEFT JOIN (',
          'SELECT CONVERT(g.b USING utf8mb4) AS state, g.n AS `rows`, ',
          'EXISTS (SELECT 1 FROM fsm_states st WHERE st.machine = ? AND st.version = ? AND CAST(st.state AS BINARY) = g.b) AS known ',
          'FROM (SELECT CAST(s.', fsm_quote_name_v1(p_state), ' AS BINARY) AS b, COUNT(*) AS n FROM ', fsm_quote_name_v1(p_table),
          ' s GROUP BY b) g) c ON 1 = 1 ',
          'ORDER BY c.state'),
        @fsm_attach_1 = p_machine, @fsm_attach_2 = p_table, @fsm_attach_3 = p_key, @fsm_attach_4 = p_state,
        @fsm_attach_5 = v_kind, @fsm_attach_6 = v_column_type, @fsm_attach_7 = v_on_delete, @fsm_attach_8 = v_version,
        @fsm_attach_9 = p_lookup, @fsm_attach_10 = p_columns;
    PREPARE fsm_attach_counts FROM @fsm_attach_sql;
    EXECUTE fsm_attach_counts USING @fsm_attach_1, @fsm_attach_2, @fsm_attach_3, @fsm_attach_4, @fsm_attach_5,
                                    @fsm_attach_6, @fsm_attach_9, @fsm_attach_10, @fsm_attach_7, @fsm_attach_1,
                                    @fsm_attach_1, @fsm_attach_8;
    DEALLOCATE PREPARE fsm_attach_counts;
    SET @fsm_attach_sql = NULL, @fsm_attach_1 = NULL, @fsm_attach_2 = NULL, @fsm_attach_3 = NULL, @fsm_attach_4 = NULL,
        @fsm_attach_5 = NULL, @fsm_attach_6 = NULL, @fsm_attach_7 = NULL, @fsm_attach_8 = NULL,
        @fsm_attach_9 = NULL, @fsm_attach_10 = NULL;
  ELSE
    INSERT INTO fsm_attachments (machine, table_name, key_column, state_column, key_kind, key_type, lookup_column,
                                 data_columns, on_delete, created_at)
    VALUES (p_machine, p_table, p_key, p_state, v_kind, v_column_type, p_lookup, p_columns, v_on_delete, UTC_TIMESTAMP(6))
    ON DUPLICATE KEY UPDATE key_column = VALUES(key_column), state_column = VALUES(state_column),
                            on_delete = VALUES(on_delete), key_kind = VALUES(key_kind), key_type = VALUES(key_type),
                            lookup_column = VALUES(lookup_column), data_columns = VALUES(data_columns);
    SELECT machine, table_name, key_column, state_column, key_kind, key_type, lookup_column, data_columns, on_delete,
           installed_at, adopted_at
      FROM fsm_attachments WHERE machine = p_machine;
  END IF;
END
