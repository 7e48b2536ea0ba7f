-- fsm_begin_v1: start the READ COMMITTED transaction of a self-committing procedure (internal).
--
-- Every procedure of pyfsm that commits on its own begins with this. Inside a caller's
-- open transaction SET TRANSACTION fails (1568): that becomes 31016 and the caller's
-- transaction is left alone (nothing was started, so the calling procedure must not roll
-- back: it sets its v_started flag only after this returns).
--
-- On MariaDB it first turns innodb_snapshot_isolation off for the session, once per session
-- (@pyfsm_snapshot_isolation_off remembers it), as pyfsm's own connections do: MariaDB 11.6+
-- turns it on by default, and then a statement whose trigger read the rules and then moves a
-- state counter row another transaction committed since fails with 1020, READ COMMITTED or
-- not, and the server rolls the whole transaction back. The batch procedures (send_many,
-- steps, fire_timers, upgrade) end a batch on 1213 and 1205 only; with the check off, 1020
-- never reaches them, whoever calls. The setting stays off for the calling session. Dynamic
-- SQL, because MySQL has no such variable and refuses a routine that names it (1193); a
-- MariaDB before 10.6.18 has none either (1193 at run time, then 1243: ignored).
-- Revision 0026 replaced this procedure in place (same name, parameters and errors).
-- Parameters: none.
-- Result: none.
-- Errors: 31016 called inside an open transaction.
-- Example: CALL fsm_begin_v1(); -- ...; COMMIT;
CREATE PROCEDURE `fsm_begin_v1`()
MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
  IF @pyfsm_snapshot_isolation_off IS NULL THEN
    IF @@version LIKE '%MariaDB%' THEN
      BEGIN
        DECLARE EXIT HANDLER FOR 1193, 1243 SET @pyfsm_sql = NULL;  -- no such variable (then no statement)
        SET @pyfsm_sql = 'SET SESSION innodb_snapshot_isolation = OFF';
        PREPARE pyfsm_snapshot_isolation_off FROM @pyfsm_sql;
        EXECUTE pyfsm_snapshot_isolation_off;
        DEALLOCATE PREPARE pyfsm_snapshot_isolation_off;
        SET @pyfsm_sql = NULL;
      END;
    END IF;
    SET @pyfsm_snapshot_isolation_off = 1;
  END IF;
  BEGIN
    DECLARE EXIT HANDLER FOR 1568
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: called inside an open transaction; commit or roll back first', MYSQL_ERRNO = 31016;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  END;
  START TRANSACTION;
END
