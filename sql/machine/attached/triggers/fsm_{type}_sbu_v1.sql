-- fsm_{type}_sbu_v1: BEFORE UPDATE on the application's table {subject} attached to machine type '{type}'.
--
-- Rendered for the attached table, its key column {key} and its state column {state}
-- (pyfsm.schema.attached). An UPDATE that leaves the state column as it was, byte for byte,
-- is not a transition and costs one comparison. One that changes it is applied as a raw
-- UPDATE of the type's instance row: `UPDATE fsm_{type} SET current_state = <new state>`,
-- whose trigger (fsm_{type}_bu_v13) checks the rule (the event is @fsm_event when set, else
-- the one event leading to the new state), the locks and the pause, and writes the history,
-- the counters and the outbox row, in this statement. The state column then takes the rule's
-- spelling of the target. A row with no instance yet (attached, not yet adopted) is adopted
-- from its old state first (history source 'adopt'), then moved; if its old value is no state
-- of the machine (NULL included), it is adopted at the new value instead (source 'adopt',
-- metadata {"adopted_from": <old value or null>}), so such rows are put right by an UPDATE,
-- and a new value that is no state either is refused (31038). The key cannot change while
-- attached. @fsm_subject_write = '{type}:<instance key>@<NOW(6)>' says the write comes from the
-- instance table (fsm_{type}_au_subject_v1, for pyfsm's procedures), which has applied it
-- already. The mark names the row and the statement (NOW(6) is the top-level statement's
-- start, the same in every trigger it runs), and it is believed only when the instance holds
-- the new state: a statement that failed with a deadlock inside a trigger leaves the session's
-- variables as they were (MySQL runs no handler then), so a mark may outlive its statement, and
-- a session may fix NOW() with SET TIMESTAMP. A stale @fsm_source 'adopt' is cleared the same
-- way before the row's own transition. An UPDATE that changes neither the state, the key nor a
-- tracked column runs one comparison and no handler.
-- The lookup column and the copied columns (the attachment's lookup_column, data_columns) are
-- copied to the instance's lookup_key and data in the same UPDATE, so the guards judge the row
-- as this write leaves it; an UPDATE that changes only them updates the instance's copy
-- without a transition. Without them those parts are not rendered.
-- Once every row has its instance (an adoption finished with no row left: fsm_attachments'
-- adopted_at), the trigger is created again without the part that adopts a row (pyfsm.attach
-- .adopt, `pyfsm sync`): the statements a trigger may run decide the tables each UPDATE of the
-- table opens and locks, and an INSERT into fsm_{type} brings in that table's insert triggers
-- and theirs. A row without its instance then gets 31033.
-- Runs after the table's own BEFORE UPDATE triggers (created after them), so it checks the
-- state they leave.
-- Errors: 31013 the key changed; the instance trigger's (31005, 31006, 31011, 31018, 31032,
--         ...); 31038 a row not adopted yet is given a value that is no state of the machine.
-- Example: UPDATE {subject} SET {state} = 'paid' WHERE {key} = 42;
CREATE TRIGGER `fsm_{type}_sbu_v1` BEFORE UPDATE ON {subject} FOR EACH ROW
BEGIN
  IF NOT COALESCE(CAST(NEW.{state} AS BINARY) <=> CAST(OLD.{state} AS BINARY) AND {same_key}{same_tracked}, 0) THEN
    BEGIN
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
      SET @fsm_subject_write = NULL, @fsm_metadata = IF(@fsm_source = 'adopt', NULL, @fsm_metadata),
          @fsm_source = IF(@fsm_source = 'adopt', NULL, @fsm_source);
      RESIGNAL;
    END;
    IF NOT COALESCE({same_key}, 0) THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: the key of an attached table cannot change (machine {type})', MYSQL_ERRNO = 31013;
    END IF;
    -- the instance table's trigger moving this row's state, applied already (see above)
    IF NOT (@fsm_subject_write <=> CONCAT('{type}:', {old_instance_key}, '@', NOW(6))
            AND EXISTS (SELECT 1 FROM `fsm_{type}` WHERE instance_key = {old_instance_key}
                          AND CAST(current_state AS BINARY) = CAST(NEW.{state} AS BINARY))) THEN
      /*[tracked*/IF CAST(NEW.{state} AS BINARY) <=> CAST(OLD.{state} AS BINARY) THEN
        -- the lookup column or a copied column changed, not the state: the instance's copy
        -- follows (no transition; a row not adopted yet has none)
        -- marked: the copy trigger (fsm_{type}_bu_copy_v1) must not read the row back, which
        -- still holds its old values in this BEFORE UPDATE
        SET @fsm_source = IF(@fsm_source = 'adopt', NULL, @fsm_source),
            @fsm_subject_write = CONCAT('{type}:', {old_instance_key}, '@', NOW(6));
        UPDATE `fsm_{type}` SET {tracked_set} WHERE instance_key = {old_instance_key};
        SET @fsm_subject_write = NULL;
      ELSE/*tracked]*/
      SET @fsm_source = IF(@fsm_source = 'adopt', NULL, @fsm_source),
          @fsm_subject_write = CONCAT('{type}:', {old_instance_key}, '@', NOW(6)), @fsm_last_to = NULL;
      UPDATE `fsm_{type}` SET current_state = NEW.{state}{tracked_comma_set} WHERE instance_key = {old_instance_key};
      IF @fsm_last_to IS NULL THEN
        /*[adopting*/IF NOT EXISTS (SELECT 1 FROM `fsm_{type}` WHERE instance_key = {old_instance_key}) THEN
          SET @fsm_source = 'adopt';
          IF EXISTS (SELECT 1 FROM fsm_states st JOIN fsm_machines m ON m.machine = st.machine AND m.current_version = st.version
                      WHERE st.machine = '{type}' AND CAST(st.state AS BINARY) = CAST(OLD.{state} AS BINARY)) THEN
            -- not adopted yet: its first history row records the state it had, then it moves
            INSERT INTO `fsm_{type}` (instance_key, current_state{tracked_columns}) VALUES ({old_instance_key}, OLD.{state}{old_tracked_values});
            SET @fsm_source = NULL;
            UPDATE `fsm_{type}` SET current_state = NEW.{state}{tracked_comma_set} WHERE instance_key = {old_instance_key};
          ELSE
            -- a value the machine lacks (NULL included): the row enters the machine at the state
            -- this write gives it, recorded as its adoption with the value it had (a value the
            -- machine lacks again is refused, 31038)
            SET @fsm_metadata = JSON_OBJECT('adopted_from', CONVERT(CAST(OLD.{state} AS BINARY) USING utf8mb4));
            INSERT INTO `fsm_{type}` (instance_key, current_state{tracked_columns}) VALUES ({old_instance_key}, NEW.{state}{new_tracked_values});
            SET @fsm_source = NULL, @fsm_metadata = NULL,
                @fsm_last_to = (SELECT current_state FROM `fsm_{type}` WHERE instance_key = {old_instance_key});
          END IF;
        END IF;/*adopting]*/
        IF @fsm_last_to IS NULL THEN
          SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: no transition was applied to the instance of this row (missing, or in this state already): run pyfsm check', MYSQL_ERRNO = 31033;
        END IF;
      END IF;
      SET NEW.{state} = @fsm_last_to, @fsm_subject_write = NULL;
      /*[tracked*/END IF;/*tracked]*/
    END IF;
    END;
  END IF;
END
