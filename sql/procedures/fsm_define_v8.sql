-- fsm_define_v8: store a machine definition, guards included; a changed one becomes a new version.
--
-- The definition is a JSON object:
--   {"states": ["new", "paid", "shipped"],          -- at least one; order matters
--    "start": ["new"],                              -- at least one
--    "final": ["shipped"],                          -- optional; final states have no way out
--    "transitions": [{"event": "pay", "from": ["new"], "to": "paid"},
--                    {"event": "ship", "from": ["paid"], "to": "shipped",    -- guard, guard_name:
--                     "guard": {"path": "$.address", "op": "exists"},       --   optional
--                     "guard_name": "address set"}, ...],
--    "topic": "orders",                             -- optional Kafka topic, or null
--    "options": {"save_after_step": true, "uses_global_lock": false, "uses_local_lock": false,
--                "lock_lease_seconds": 60, "event_data": true},
--    "timeouts": {"new": {"after": "30m", "event": "cancel"}}}   -- optional
-- Options: lock_lease_seconds (1 to 86400, default 60) is how long a lock taken for an
-- instance lasts unless renewed; event_data (default true) says whether outbox rows and so
-- Kafka events carry the instance's data. Unknown option names are refused.
-- Timeouts: a state may have one; entering it arms a timer that sends its event after that
-- long (docs/timers.md). "after" is a whole number of seconds or a string "<n>s", "<n>m",
-- "<n>h" or "<n>d", at most 999999999 seconds; "event" must be allowed from that state (so
-- a final state has none); no other keys. The timers are armed by the type's timer
-- triggers, which only a client can create: tables_ready is 0 until they exist (run
-- `pyfsm sync` or Store.define(), which also arms the timeouts of instances already in
-- such a state).
-- Names are JSON strings (not true, null or numbers) matching [a-z][a-z0-9_]* (states and
-- events at most 64 characters), everywhere they appear ("open " is not "open"); "from" is
-- a list. A new machine type may not take a name pyfsm reserves for its own objects, as
-- fsm_reserved_name_v2 lists them: names of its tables and views (fsm_<name>, fsm_v_<name>),
-- v_* and *_transitions, and names whose per-type procedures would be global ones (account:
-- fsm_account_history_v1). Later revisions extend that list as they add objects; a type
-- defined before a name was reserved keeps it (and gets new versions).
-- Guards: a transition may carry a guard, a condition on the instance's data as it will be
-- after the transition, in pyfsm's guard language (fsm_check_guard_v1 checks it: JSON paths,
-- ==, !=, <, <=, >, >=, in, exists, missing, is_null, all, any, not; docs/guards.md), and a
-- guard_name (1 to 64 characters, no control characters, no spaces at its ends) that errors,
-- listings and diagrams use. A transition has no other keys. Several rules may share (from
-- state, event): they are tried in the order of the transitions, the first whose guard holds
-- is taken, and only the last may be without a guard (the default). Stored in fsm_rules
-- (position, guard, guard_name). A changed guard, name or order makes a new version. The
-- type's transition trigger must be rendered again for guards (`pyfsm sync`): until then a
-- guarded rule of the new version is refused (31031) and tables_ready is 0.
-- The machine is deterministic: one target per (from state, event) and data.
-- Storing a definition equal to the current version changes nothing (changed = 0).
-- Instances keep the version they were created under. A new machine also needs its tables
-- and triggers, which only a client can create (MySQL cannot create triggers from a
-- procedure): run `pyfsm sync` or Store.define() afterwards; tables_ready says whether
-- they exist.
-- The body runs in two blocks, in this order: the JSON types of the names, then validation
-- (the machine name, then whether it is reserved, then the definition) and storage in one
-- transaction. Differs from fsm_define_v7 in guards, branching and the keys of a transition
-- (v7 ignores keys it does not know, so a guard given to it is refused: 31001, by
-- fsm_definitions_bi_v1). tables_ready is 0 while the type's transition trigger
-- (fsm_{type}_bu_v11) was rendered before this version became current
-- (fsm_rendered_ready_v1): `pyfsm sync` renders the new version's rules and guards into it.
-- Parameters: p_machine (a name of at most 48 characters, not reserved), p_definition.
-- Result: one row (machine, version, changed, tables_ready): tables_ready is 0 while the type's
--   tables, or (with timeouts) its timer triggers, are missing, or its transition trigger was
--   rendered for an older current version: run `pyfsm sync <machine>` (Store.define does).
-- Errors: 31001 invalid definition (the message names the problem); 31009 invalid or
--   reserved machine name; 31016 called inside an open transaction.
-- Example: CALL fsm_define_v8('ticket', '{"states":["open","closed"],"start":["open"],"final":["closed"],"transitions":[{"event":"close","from":["open"],"to":"closed"}],"timeouts":{"open":{"after":"2d","event":"close"}}}');
CREATE PROCEDURE `fsm_define_v8`(
  IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_definition LONGTEXT CHARACTER SET utf8mb4)
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  -- names must be JSON strings
  BEGIN
    DECLARE v_i, v_j, v_n INT DEFAULT 0;
    DECLARE v_path VARCHAR(64) CHARACTER SET ascii;
    DECLARE v_list VARCHAR(8) CHARACTER SET ascii;
    DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
    -- Not valid JSON, not an object, lists that are not lists: the third block names those.
    -- (Nested IFs, not AND: JSON_TYPE of invalid JSON is an error, not false.)
    IF JSON_VALID(p_definition) THEN
    IF JSON_TYPE(p_definition) = 'OBJECT' THEN
      -- start and final entries
      SET v_j = 0;
      WHILE v_j < 2 DO
        SET v_list = ELT(v_j + 1, 'start', 'final');
        IF JSON_TYPE(JSON_EXTRACT(p_definition, CONCAT('$.', v_list))) = 'ARRAY' THEN
          SET v_i = 0, v_n = JSON_LENGTH(p_definition, CONCAT('$.', v_list));
          WHILE v_i < v_n DO
            IF JSON_TYPE(JSON_EXTRACT(p_definition, CONCAT('$.', v_list, '[', v_i, ']'))) <> 'STRING' THEN
              SET v_msg = CONCAT('fsm: invalid definition: ', v_list, ' entries must be strings');
              SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31001;
            END IF;
            SET v_i = v_i + 1;
          END WHILE;
        END IF;
        SET v_j = v_j + 1;
      END WHILE;
      -- each transition: an object whose event and to are strings and whose from entries are
      IF JSON_TYPE(JSON_EXTRACT(p_definition, '$.transitions')) = 'ARRAY' THEN
        SET v_i = 0, v_n = JSON_LENGTH(p_definition, '$.transitions');
        WHILE v_i < v_n DO
          SET v_path = CONCAT('$.transitions[', v_i, ']');
          IF JSON_TYPE(JSON_EXTRACT(p_definition, v_path)) <> 'OBJECT'
             OR COALESCE(JSON_TYPE(JSON_EXTRACT(p_definition, CONCAT(v_path, '.event'))), '') <> 'STRING'
             OR COALESCE(JSON_TYPE(JSON_EXTRACT(p_definition, CONCAT(v_path, '.to'))), '') <> 'STRING' THEN
            SET v_msg = CONCAT('fsm: invalid definition: transition ', v_i + 1, ' needs string event and to');
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31001;
          END IF;
          -- event, from, to, and guard with its optional guard_name: nothing else (a misspelt
          -- key must not leave a transition unguarded)
          IF JSON_LENGTH(p_definition, v_path) <> 3 + JSON_CONTAINS_PATH(p_definition, 'one', CONCAT(v_path, '.guard'))
                                                   + JSON_CONTAINS_PATH(p_definition, 'one', CONCAT(v_path, '.guard_name'))
             OR NOT JSON_CONTAINS_PATH(p_definition, 'one', CONCAT(v_path, '.from')) THEN
            SET v_msg = CONCAT('fsm: invalid definition: transition ', v_i + 1, ' has keys other than event, from, to, guard, guard_name');
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31001;
          END IF;
          IF JSON_CONTAINS_PATH(p_definition, 'one', CONCAT(v_path, '.guard_name'))
             AND (JSON_TYPE(JSON_EXTRACT(p_definition, CONCAT(v_path, '.guard_name'))) <> 'STRING'
                  OR NOT JSON_CONTAINS_PATH(p_definition, 'one', CONCAT(v_path, '.guard'))) THEN
            SET v_msg = CONCAT('fsm: invalid definition: transition ', v_i + 1, ' guard_name must be a string beside a guard');
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31001;
          END IF;
          IF JSON_TYPE(JSON_EXTRACT(p_definition, CONCAT(v_path, '.from'))) = 'ARRAY' THEN
            SET v_j = 0;
            WHILE v_j < JSON_LENGTH(p_definition, CONCAT(v_path, '.from')) DO
              IF JSON_TYPE(JSON_EXTRACT(p_definition, CONCAT(v_path, '.from[', v_j, ']'))) <> 'STRING' THEN
                SET v_msg = CONCAT('fsm: invalid definition: transition ', v_i + 1, ' has a from entry that is not a string');
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31001;
              END IF;
              SET v_j = v_j + 1;
            END WHILE;
          END IF;
          SET v_i = v_i + 1;
        END WHILE;
      END IF;
    END IF;
    END IF;
  END;
  -- validate the definition and store it
  BEGIN
    DECLARE v_started TINYINT DEFAULT 0;
    DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
    DECLARE v_cur, v_new INT UNSIGNED;
    DECLARE v_i, v_j, v_n, v_m, v_diff INT;
    DECLARE v_name, v_to VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_text TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_list LONGTEXT CHARACTER SET utf8mb4;
    DECLARE v_topic VARCHAR(249) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_save, v_global, v_local, v_event_data TINYINT;
    DECLARE v_lease INT UNSIGNED;
    DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
    DECLARE v_ready VARCHAR(16) CHARACTER SET utf8mb4;
    DECLARE v_secs BIGINT;
    DECLARE v_spec LONGTEXT CHARACTER SET utf8mb4;
    DECLARE v_guard LONGTEXT CHARACTER SET utf8mb4;
    DECLARE v_guard_name VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_pos INT;
    DECLARE EXIT HANDLER FOR 1406
    BEGIN
      ROLLBACK;
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: invalid definition: a name is too long', MYSQL_ERRNO = 31001;
    END;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
      IF v_started THEN
        ROLLBACK;
      END IF;
      RESIGNAL;
    END;
    IF NOT fsm_valid_name_v1(p_machine, 48) THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: machine name must match [a-z][a-z0-9_]* and have at most 48 characters', MYSQL_ERRNO = 31009;
    END IF;
    IF fsm_reserved_name_v2(p_machine) AND NOT EXISTS (SELECT 1 FROM fsm_machines WHERE machine = p_machine) THEN
      SET v_msg = LEFT(CONCAT('fsm: machine name ', p_machine, ' is reserved'), 128);
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31009;
    END IF;
    IF NOT fsm_is_object_v1(p_definition) THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: invalid definition: not a JSON object', MYSQL_ERRNO = 31001;
    END IF;
    IF COALESCE(JSON_TYPE(JSON_EXTRACT(p_definition, '$.states')), '') <> 'ARRAY'
       OR JSON_LENGTH(p_definition, '$.states') = 0 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: invalid definition: states must be a non-empty list', MYSQL_ERRNO = 31001;
    END IF;
    IF COALESCE(JSON_TYPE(JSON_EXTRACT(p_definition, '$.start')), '') <> 'ARRAY'
       OR JSON_LENGTH(p_definition, '$.start') = 0 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: invalid definition: start must be a non-empty list', MYSQL_ERRNO = 31001;
    END IF;
    IF COALESCE(JSON_TYPE(JSON_EXTRACT(p_definition, '$.final')), 'ARRAY') <> 'ARRAY' THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: invalid definition: final must be a list', MYSQL_ERRNO = 31001;
    END IF;
    IF COALESCE(JSON_TYPE(JSON_EXTRACT(p_definition, '$.transitions')), '') <> 'ARRAY' THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: invalid definition: transitions must be a list', MYSQL_ERRNO = 31001;
    END IF;
    SET v_topic = NULL;
    IF COALESCE(JSON_TYPE(JSON_EXTRACT(p_definition, '$.timeouts')), 'OBJECT') <> 'OBJECT' THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: invalid definition: timeouts must be an object', MYSQL_ERRNO = 31001;
    END IF;
    IF COALESCE(JSON_TYPE(JSON_EXTRACT(p_definition, '$.topic')), 'NULL') <> 'NULL' THEN
      SET v_text = JSON_UNQUOTE(JSON_EXTRACT(p_definition, '$.topic'));
      IF JSON_TYPE(JSON_EXTRACT(p_definition, '$.topic')) <> 'STRING' OR CHAR_LENGTH(v_text) NOT BETWEEN 1 AND 249
         OR CHAR_LENGTH(v_text) <> LENGTH(v_text) OR v_text REGEXP '[^a-zA-Z0-9._-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: invalid definition: topic must be 1-249 of [a-zA-Z0-9._-]', MYSQL_ERRNO = 31001;
      END IF;
      SET v_topic = v_text;
    END IF;
    SET v_save = 1, v_global = 0, v_local = 0;
    IF COALESCE(JSON_TYPE(JSON_EXTRACT(p_definition, '$.options')), 'OBJECT') <> 'OBJECT' THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: invalid definition: options must be an object', MYSQL_ERRNO = 31001;
    END IF;
    IF COALESCE(JSON_TYPE(JSON_EXTRACT(p_definition, '$.options.save_after_step')), 'BOOLEAN') <> 'BOOLEAN'
       OR COALESCE(JSON_TYPE(JSON_EXTRACT(p_definition, '$.options.uses_global_lock')), 'BOOLEAN') <> 'BOOLEAN'
       OR COALESCE(JSON_TYPE(JSON_EXTRACT(p_definition, '$.options.uses_local_lock')), 'BOOLEAN') <> 'BOOLEAN' THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: invalid definition: options must be true or false', MYSQL_ERRNO = 31001;
    END IF;
    IF COALESCE(JSON_TYPE(JSON_EXTRACT(p_definition, '$.options.event_data')), 'BOOLEAN') <> 'BOOLEAN' THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: invalid definition: options must be true or false', MYSQL_ERRNO = 31001;
    END IF;
    SET v_i = 0, v_n = COALESCE(JSON_LENGTH(p_definition, '$.options'), 0);
    WHILE v_i < v_n DO
      SET v_text = JSON_UNQUOTE(JSON_EXTRACT(JSON_KEYS(p_definition, '$.options'), CONCAT('$[', v_i, ']')));
      IF v_text NOT IN ('save_after_step', 'uses_global_lock', 'uses_local_lock', 'lock_lease_seconds', 'event_data') THEN
        SET v_msg = LEFT(CONCAT('fsm: invalid definition: unknown option ', v_text), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31001;
      END IF;
      SET v_i = v_i + 1;
    END WHILE;
    SET v_lease = 60, v_event_data = 1;
    IF JSON_EXTRACT(p_definition, '$.options.lock_lease_seconds') IS NOT NULL THEN
      IF JSON_TYPE(JSON_EXTRACT(p_definition, '$.options.lock_lease_seconds')) NOT IN ('INTEGER', 'UNSIGNED INTEGER')
         OR JSON_EXTRACT(p_definition, '$.options.lock_lease_seconds') NOT BETWEEN 1 AND 86400 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: invalid definition: lock_lease_seconds must be a whole number from 1 to 86400', MYSQL_ERRNO = 31001;
      END IF;
      SET v_lease = JSON_EXTRACT(p_definition, '$.options.lock_lease_seconds');
    END IF;
    IF JSON_UNQUOTE(JSON_EXTRACT(p_definition, '$.options.event_data')) = 'false' THEN SET v_event_data = 0; END IF;
    IF JSON_UNQUOTE(JSON_EXTRACT(p_definition, '$.options.save_after_step')) = 'false' THEN SET v_save = 0; END IF;
    IF JSON_UNQUOTE(JSON_EXTRACT(p_definition, '$.options.uses_global_lock')) = 'true' THEN SET v_global = 1; END IF;
    IF JSON_UNQUOTE(JSON_EXTRACT(p_definition, '$.options.uses_local_lock')) = 'true' THEN SET v_local = 1; END IF;

    CALL fsm_begin_v1();  -- READ COMMITTED; 31016 inside a caller's transaction, left alone
    SET v_started = 1;
    INSERT INTO fsm_machines (machine, current_version, objects_version, created_at, updated_at)
    VALUES (p_machine, 0, NULL, v_now, v_now) ON DUPLICATE KEY UPDATE machine = machine;
    SELECT current_version, objects_version INTO v_cur, v_ready FROM fsm_machines WHERE machine = p_machine FOR UPDATE;
    SET v_new = v_cur + 1;

    -- states, in order, with their start/final flags
    SET v_i = 0, v_n = JSON_LENGTH(p_definition, '$.states');
    WHILE v_i < v_n DO
      SET v_text = JSON_UNQUOTE(JSON_EXTRACT(p_definition, CONCAT('$.states[', v_i, ']')));
      IF JSON_TYPE(JSON_EXTRACT(p_definition, CONCAT('$.states[', v_i, ']'))) <> 'STRING' OR NOT fsm_valid_name_v1(v_text, 64) THEN
        SET v_msg = LEFT(CONCAT('fsm: invalid definition: bad state name ', COALESCE(v_text, 'NULL')), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31001;
      END IF;
      SET v_name = v_text;
      IF EXISTS (SELECT 1 FROM fsm_states WHERE machine = p_machine AND version = v_new AND state = v_name) THEN
        SET v_msg = LEFT(CONCAT('fsm: invalid definition: state ', COALESCE(v_name, 'NULL'), ' listed twice'), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31001;
      END IF;
      INSERT INTO fsm_states (machine, version, state, position, is_start, is_final)
      VALUES (p_machine, v_new, v_name, v_i + 1,
              COALESCE(JSON_CONTAINS(JSON_EXTRACT(p_definition, '$.start'), JSON_QUOTE(v_name)), 0),
              COALESCE(JSON_CONTAINS(JSON_EXTRACT(p_definition, '$.final'), JSON_QUOTE(v_name)), 0));
      SET v_i = v_i + 1;
    END WHILE;
    -- every start and final entry must name a state
    SET v_i = 0, v_n = JSON_LENGTH(p_definition, '$.start');
    SET v_m = COALESCE(JSON_LENGTH(p_definition, '$.final'), 0);
    WHILE v_i < v_n + v_m DO
      SET v_text = IF(v_i < v_n, JSON_UNQUOTE(JSON_EXTRACT(p_definition, CONCAT('$.start[', v_i, ']'))),
                                 JSON_UNQUOTE(JSON_EXTRACT(p_definition, CONCAT('$.final[', v_i - v_n, ']'))));
      IF NOT fsm_valid_name_v1(v_text, 64) OR NOT EXISTS (SELECT 1 FROM fsm_states WHERE machine = p_machine AND version = v_new AND state = v_text) THEN
        SET v_msg = LEFT(CONCAT('fsm: invalid definition: ', IF(v_i < v_n, 'start', 'final'), ' names unknown state ', COALESCE(v_text, 'NULL')), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31001;
      END IF;
      SET v_i = v_i + 1;
    END WHILE;
    -- transitions
    SET v_i = 0, v_n = JSON_LENGTH(p_definition, '$.transitions');
    WHILE v_i < v_n DO
      SET v_text = JSON_UNQUOTE(JSON_EXTRACT(p_definition, CONCAT('$.transitions[', v_i, '].event')));
      IF NOT fsm_valid_name_v1(v_text, 64) THEN
        SET v_msg = LEFT(CONCAT('fsm: invalid definition: transition ', COALESCE(v_i + 1, 'NULL'), ' has a bad event name ', COALESCE(v_text, 'NULL')), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31001;
      END IF;
      SET v_name = v_text;
      SET v_text = JSON_UNQUOTE(JSON_EXTRACT(p_definition, CONCAT('$.transitions[', v_i, '].to')));
      IF NOT fsm_valid_name_v1(v_text, 64) OR NOT EXISTS (SELECT 1 FROM fsm_states WHERE machine = p_machine AND version = v_new AND state = v_text) THEN
        SET v_msg = LEFT(CONCAT('fsm: invalid definition: event ', COALESCE(v_name, 'NULL'), ' goes to unknown state ', COALESCE(v_text, 'NULL')), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31001;
      END IF;
      SET v_to = v_text;
      SET v_guard = JSON_EXTRACT(p_definition, CONCAT('$.transitions[', v_i, '].guard')), v_guard_name = NULL;
      IF v_guard IS NOT NULL THEN
        CALL fsm_check_guard_v1(v_guard, v_i + 1);
        IF JSON_CONTAINS_PATH(p_definition, 'one', CONCAT('$.transitions[', v_i, '].guard_name')) THEN
          SET v_text = JSON_UNQUOTE(JSON_EXTRACT(p_definition, CONCAT('$.transitions[', v_i, '].guard_name')));
          -- no control characters (U+0000-001F, U+007F-009F, read in the UTF-8 bytes' hex: one
          -- pattern for both servers' regular expressions), no spaces at its ends
          IF CHAR_LENGTH(v_text) NOT BETWEEN 1 AND 64 OR v_text LIKE ' %' OR v_text LIKE '% '
             OR HEX(v_text) REGEXP '^(..)*([01].|7F|C2[89].)' THEN
            SET v_msg = LEFT(CONCAT('fsm: invalid definition: transition ', v_i + 1, ' guard_name must be 1 to 64 characters, no control characters or spaces at its ends'), 128);
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31001;
          END IF;
          SET v_guard_name = v_text;
        END IF;
      END IF;
      SET v_list = JSON_EXTRACT(p_definition, CONCAT('$.transitions[', v_i, '].from'));
      IF COALESCE(JSON_TYPE(v_list), '') <> 'ARRAY' OR JSON_LENGTH(v_list) = 0 THEN
        SET v_msg = LEFT(CONCAT('fsm: invalid definition: event ', COALESCE(v_name, 'NULL'), ' needs a non-empty from list'), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31001;
      END IF;
      SET v_j = 0, v_m = JSON_LENGTH(v_list);
      WHILE v_j < v_m DO
        SET v_text = JSON_UNQUOTE(JSON_EXTRACT(v_list, CONCAT('$[', v_j, ']')));
        IF NOT fsm_valid_name_v1(v_text, 64) OR NOT EXISTS (SELECT 1 FROM fsm_states WHERE machine = p_machine AND version = v_new AND state = v_text) THEN
          SET v_msg = LEFT(CONCAT('fsm: invalid definition: event ', COALESCE(v_name, 'NULL'), ' comes from unknown state ', COALESCE(v_text, 'NULL')), 128);
          SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31001;
        END IF;
        IF EXISTS (SELECT 1 FROM fsm_states WHERE machine = p_machine AND version = v_new AND state = v_text AND is_final = 1) THEN
          SET v_msg = LEFT(CONCAT('fsm: invalid definition: final state ', COALESCE(v_text, 'NULL'), ' has outgoing event ', COALESCE(v_name, 'NULL')), 128);
          SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31001;
        END IF;
        -- branching: only the last rule of (from, event) may be without a guard
        IF EXISTS (SELECT 1 FROM fsm_rules WHERE machine = p_machine AND version = v_new AND from_state = v_text AND event = v_name
                      AND guard IS NULL) THEN
          SET v_msg = LEFT(CONCAT('fsm: invalid definition: event ', COALESCE(v_name, 'NULL'), ' from ', COALESCE(v_text, 'NULL'),
                                  IF(v_guard IS NULL, ' defined twice', ' has a rule after its rule without a guard (the default comes last)')), 128);
          SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31001;
        END IF;
        SELECT COUNT(*) + 1 INTO v_pos FROM fsm_rules WHERE machine = p_machine AND version = v_new AND from_state = v_text AND event = v_name;
        INSERT INTO fsm_rules (machine, version, from_state, event, to_state, to_final, position, guard, guard_name)
        SELECT p_machine, v_new, v_text, v_name, v_to, is_final, v_pos, v_guard, v_guard_name FROM fsm_states
         WHERE machine = p_machine AND version = v_new AND state = v_to;
        SET v_j = v_j + 1;
      END WHILE;
      SET v_i = v_i + 1;
    END WHILE;
    -- timeouts: {"<state>": {"after": <seconds> | "<n>[smhd]", "event": "<event allowed from it>"}}
    SET v_i = 0, v_n = COALESCE(JSON_LENGTH(p_definition, '$.timeouts'), 0);
    WHILE v_i < v_n DO
      SET v_text = JSON_UNQUOTE(JSON_EXTRACT(JSON_KEYS(p_definition, '$.timeouts'), CONCAT('$[', v_i, ']')));
      IF NOT fsm_valid_name_v1(v_text, 64) OR NOT EXISTS (SELECT 1 FROM fsm_states WHERE machine = p_machine AND version = v_new AND state = v_text) THEN
        SET v_msg = LEFT(CONCAT('fsm: invalid definition: timeouts name unknown state ', COALESCE(v_text, 'NULL')), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31001;
      END IF;
      SET v_name = v_text;
      SET v_spec = JSON_EXTRACT(p_definition, CONCAT('$.timeouts."', v_name, '"'));
      IF JSON_TYPE(v_spec) <> 'OBJECT' OR JSON_LENGTH(v_spec) <> 2 OR JSON_EXTRACT(v_spec, '$.after') IS NULL
         OR COALESCE(JSON_TYPE(JSON_EXTRACT(v_spec, '$.event')), '') <> 'STRING' THEN
        SET v_msg = LEFT(CONCAT('fsm: invalid definition: the timeout of ', v_name, ' needs after and event, nothing else'), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31001;
      END IF;
      SET v_secs = NULL, v_text = JSON_UNQUOTE(JSON_EXTRACT(v_spec, '$.after'));
      IF JSON_TYPE(JSON_EXTRACT(v_spec, '$.after')) IN ('INTEGER', 'UNSIGNED INTEGER') THEN
        IF JSON_EXTRACT(v_spec, '$.after') BETWEEN 1 AND 999999999 THEN
          SET v_secs = JSON_EXTRACT(v_spec, '$.after');
        END IF;
      ELSEIF JSON_TYPE(JSON_EXTRACT(v_spec, '$.after')) = 'STRING' AND v_text REGEXP '^[0-9]{1,10}[smhd]$' THEN
        SET v_secs = CAST(LEFT(v_text, CHAR_LENGTH(v_text) - 1) AS UNSIGNED)
                     * ELT(FIELD(RIGHT(v_text, 1), 's', 'm', 'h', 'd'), 1, 60, 3600, 86400);
        IF v_secs NOT BETWEEN 1 AND 999999999 THEN
          SET v_secs = NULL;
        END IF;
      END IF;
      IF v_secs IS NULL THEN
        SET v_msg = LEFT(CONCAT('fsm: invalid definition: the timeout of ', v_name, ' must be 1 to 999999999 seconds, or like 30s, 30m, 2h, 7d'), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31001;
      END IF;
      SET v_text = JSON_UNQUOTE(JSON_EXTRACT(v_spec, '$.event'));
      IF NOT fsm_valid_name_v1(v_text, 64)
         OR NOT EXISTS (SELECT 1 FROM fsm_rules WHERE machine = p_machine AND version = v_new AND from_state = v_name AND event = v_text) THEN
        SET v_msg = LEFT(CONCAT('fsm: invalid definition: timeout event ', COALESCE(v_text, 'NULL'), ' is not allowed from ', v_name), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31001;
      END IF;
      UPDATE fsm_states SET timeout_seconds = v_secs, timeout_event = v_text
       WHERE machine = p_machine AND version = v_new AND state = v_name;
      SET v_i = v_i + 1;
    END WHILE;

    -- equal to the current version? Rows present in only one of the two versions differ.
    SELECT COUNT(*) INTO v_diff FROM (
      SELECT state FROM fsm_states WHERE machine = p_machine AND version IN (v_cur, v_new)
      GROUP BY state, position, is_start, is_final, timeout_seconds, timeout_event HAVING COUNT(*) = 1
      UNION ALL
      SELECT event FROM fsm_rules WHERE machine = p_machine AND version IN (v_cur, v_new)
      GROUP BY from_state, event, position, to_state, guard, CAST(guard_name AS BINARY) HAVING COUNT(*) = 1
      UNION ALL
      SELECT machine FROM fsm_definitions WHERE machine = p_machine AND version = v_cur
         AND NOT (topic <=> v_topic AND save_after_step = v_save AND uses_global_lock = v_global AND uses_local_lock = v_local
                  AND lock_lease_seconds = v_lease AND event_data = v_event_data)
    ) d;
    IF v_cur > 0 AND v_diff = 0 THEN
      ROLLBACK;
      SELECT p_machine AS machine, v_cur AS version, 0 AS changed,
             v_ready IS NOT NULL AND fsm_timer_triggers_ready_v1(p_machine)
               AND fsm_rendered_ready_v1(p_machine) AS tables_ready;
    ELSE
      INSERT INTO fsm_definitions (machine, version, body, topic, save_after_step, uses_global_lock, uses_local_lock,
                                   lock_lease_seconds, event_data, created_at)
      VALUES (p_machine, v_new, p_definition, v_topic, v_save, v_global, v_local, v_lease, v_event_data, v_now);
      UPDATE fsm_machines SET current_version = v_new, updated_at = v_now WHERE machine = p_machine;
      COMMIT;
      SELECT p_machine AS machine, v_new AS version, 1 AS changed,
             v_ready IS NOT NULL AND fsm_timer_triggers_ready_v1(p_machine)
               AND fsm_rendered_ready_v1(p_machine) AS tables_ready;
    END IF;
  END;
END
