-- fsm_begin_v1: start the READ COMMITTED transaction of a self-committing procedure (internal).
--
-- Every procedure of pyfsm that commits on its own begins with this. Inside a caller's
-- open transaction SET TRANSACTION fails (1568): that becomes 31016 and the caller's
-- transaction is left alone (nothing was started, so the calling procedure must not roll
-- back: it sets its v_started flag only after this returns).
-- Parameters: none.
-- Result: none.
-- Errors: 31016 called inside an open transaction.
-- Example: CALL fsm_begin_v1(); -- ...; COMMIT;
CREATE PROCEDURE `fsm_begin_v1`()
MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
  BEGIN
    DECLARE EXIT HANDLER FOR 1568
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: called inside an open transaction; commit or roll back first', MYSQL_ERRNO = 31016;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  END;
  START TRANSACTION;
END
