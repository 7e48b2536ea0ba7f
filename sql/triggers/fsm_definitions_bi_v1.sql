-- fsm_definitions_bi_v1: BEFORE INSERT on fsm_definitions — a stored guard is always an enforced one.
--
-- fsm_define_v1 to v7 store the body they are given and ignore the keys of a transition they
-- do not know, so a guard given to one of them would be kept in the body (and shown by
-- dumps and diagrams) without its rule having it. fsm_define_v8 writes the rules, guards
-- included, before the body: a body whose transitions carry a guard or guard_name is refused
-- unless the version's rules hold a guard.
-- Errors: 31001 guards need fsm_define_v8.
-- Example: CALL fsm_define_v7('m', '{"states":["a","b"],"start":["a"],"transitions":[{"event":"go","from":["a"],"to":"b","guard":{"path":"$.x","op":"exists"}}]}'); -- 31001
CREATE TRIGGER `fsm_definitions_bi_v1` BEFORE INSERT ON `fsm_definitions` FOR EACH ROW
BEGIN
  IF JSON_CONTAINS_PATH(NEW.body, 'one', '$.transitions[*].guard', '$.transitions[*].guard_name')
     AND NOT EXISTS (SELECT 1 FROM fsm_rules WHERE machine = NEW.machine AND version = NEW.version AND guard IS NOT NULL) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: invalid definition: guards need fsm_define_v8 (this procedure would drop them)', MYSQL_ERRNO = 31001;
  END IF;
END
