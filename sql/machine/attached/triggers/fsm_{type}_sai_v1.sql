-- fsm_{type}_sai_v1: AFTER INSERT on the application's table {subject} attached to machine type '{type}'.
--
-- Every new row is a new instance: its instance row is created in the same statement
-- (`INSERT INTO fsm_{type}`), whose triggers check that the state is a start state and write
-- the first history row (source 'update', or @fsm_source's), the counters and the outbox
-- row; its lookup_key and data take the lookup column and the copied columns. AFTER the insert: only then is an AUTO_INCREMENT key known.
-- Errors: the instance triggers' (31005 not a start state, 31009 a key ending in a space,
--         31024); 1062 the key's instance exists (the row was deleted and inserted again
--         while detached, or with on_delete 'allow').
-- Example: INSERT INTO {subject} ({key}, {state}) VALUES (42, 'new');
CREATE TRIGGER `fsm_{type}_sai_v1` AFTER INSERT ON {subject} FOR EACH ROW
BEGIN
  -- @fsm_source 'adopt' is adoption's, never a new row's: one left by a statement that failed
  -- with a deadlock (MySQL runs no handler then) must not let this row skip the start check
  SET @fsm_source = IF(@fsm_source = 'adopt', NULL, @fsm_source);
  INSERT INTO `fsm_{type}` (instance_key, current_state{tracked_columns}) VALUES ({new_instance_key}, NEW.{state}{new_tracked_values});
END
