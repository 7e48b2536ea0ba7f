-- fsm_{type}_sbi_v1: BEFORE INSERT on the application's table {subject} attached to machine type '{type}'.
--
-- A row inserted with its state column NULL enters the machine's first start state (of the
-- current definition version). Any other state is checked when its instance is created
-- (fsm_{type}_sai_v1, through fsm_{type}_bi_v1: it must be a start state). Runs after the
-- table's own BEFORE INSERT triggers (created after them).
-- Errors: none of its own.
-- Example: INSERT INTO {subject} ({key}) VALUES (42);  -- {state} becomes the start state
CREATE TRIGGER `fsm_{type}_sbi_v1` BEFORE INSERT ON {subject} FOR EACH ROW
BEGIN
  IF NEW.{state} IS NULL THEN
    SET NEW.{state} = (SELECT s.state FROM fsm_states s JOIN fsm_machines m ON m.machine = s.machine
                        WHERE s.machine = '{type}' AND s.version = m.current_version AND s.is_start = 1
                        ORDER BY s.position LIMIT 1);
  END IF;
END
