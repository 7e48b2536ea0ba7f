-- fsm_{type}_bu_copy_v1: BEFORE UPDATE on fsm_{type}, before fsm_{type}_bu_v13: the copied columns of {subject} stay the row's.
--
-- Created only for a type attached with copied columns (the attachment's data_columns). Its
-- instances' data holds those columns as the row has them, so that guards judge the row and
-- outbox rows carry it. A write of the data that does not come from the table (Store.send's
-- data or data_patch, a handler's step, a DBA's UPDATE of fsm_{type}) would replace or drop
-- them: they are set again from the row, in the same statement, before the transition
-- trigger judges the guards. A write from the table's own trigger (@fsm_subject_write naming
-- this instance and this statement, see fsm_{type}_sbu_v1) carries the row as that write
-- leaves it already.
-- Errors: none of its own.
-- Example: CALL fsm_{type}_send_v5('42', 'pay', '{"total": 1000}', ...);  -- data.total stays the row's
CREATE TRIGGER `fsm_{type}_bu_copy_v1` BEFORE UPDATE ON `fsm_{type}` FOR EACH ROW PRECEDES `fsm_{type}_bu_v13`
BEGIN
  IF NOT (NEW.data <=> OLD.data) AND NOT (@fsm_subject_write <=> CONCAT('{type}:', NEW.instance_key, '@', NOW(6))) THEN
    SET NEW.data = COALESCE((SELECT JSON_SET(COALESCE(NEW.data, '{}'), {copy_pairs}) FROM {subject} s
                              WHERE s.{key} = {subject_key}), NEW.data);
  END IF;
END
