-- fsm_{type}_bi_adopt_v1: BEFORE INSERT on fsm_{type}, before fsm_{type}_bi_v1: an adopted row keeps its state.
--
-- Adoption (fsm_{type}_adopt_v1, or the table's update trigger for a row not adopted yet)
-- inserts an instance for an existing row of {subject} in whatever state the row is, with
-- @fsm_source 'adopt'. fsm_{type}_bi_v1 admits start states only, so this trigger keeps the
-- state aside (@fsm_adopt_state) and leaves it NULL for bi_v1, and
-- fsm_{type}_bi_adopted_v1 (after bi_v1) puts it back, checked. Anything else passes.
-- Errors: none of its own.
-- Example: SET @fsm_source = 'adopt'; INSERT INTO `fsm_{type}` (instance_key, current_state) VALUES ('42', 'paid');
CREATE TRIGGER `fsm_{type}_bi_adopt_v1` BEFORE INSERT ON `fsm_{type}` FOR EACH ROW PRECEDES `fsm_{type}_bi_v1`
BEGIN
  IF @fsm_source = 'adopt' THEN
    SET @fsm_adopt_state = NEW.current_state, NEW.current_state = NULL;
  END IF;
END
