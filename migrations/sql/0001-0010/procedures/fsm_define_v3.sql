-- fsm_define_v3: store a machine definition (a new version if it changed) — fsm_define_v2 with
-- more reserved names.
--
-- Refuses, besides what fsm_define_v2 refuses, machine names whose tables or views would
-- collide with pyfsm's own objects added since: runs, accounts, state_counts, held_locks_v1,
-- and the reporting views' instances, history, failed, funnel, stuck. Then does exactly
-- what fsm_define_v2 does (see sql/procedures/fsm_define_v2.sql): validates the JSON
-- definition, stores it as version N+1 if it differs from the current one, and answers. A
-- new machine type then needs `pyfsm sync <machine>` (MySQL cannot create triggers from a
-- procedure).
-- Parameters: p_machine (a name of at most 48 characters, not reserved), p_definition (JSON
--   object: states, start, final, transitions, topic, options; see docs/sql-api.md).
-- Result: one row (machine, version, changed, tables_ready).
-- Errors: 31001 invalid definition; 31009 invalid or reserved machine name; 31016 called
--   inside an open transaction.
-- Example: CALL fsm_define_v3('ticket', '{"states":["open","closed"],"start":["open"],"final":["closed"],"transitions":[{"event":"close","from":["open"],"to":"closed"}]}');
CREATE PROCEDURE `fsm_define_v3`(
  IN p_machine TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_definition LONGTEXT CHARACTER SET utf8mb4)
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
  DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
  IF p_machine IN ('runs', 'accounts', 'state_counts', 'held_locks_v1',
                   'instances', 'history', 'failed', 'funnel', 'stuck') THEN
    SET v_msg = LEFT(CONCAT('fsm: machine name ', p_machine, ' is reserved'), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, MYSQL_ERRNO = 31009;
  END IF;
  CALL fsm_define_v2(p_machine, p_definition);
END
