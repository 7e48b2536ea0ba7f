-- fsm_schema_version_v1: the revision of pyfsm's schema in this database.
--
-- Lets an account that may only EXECUTE procedures (`pyfsm grant --app`) check, as
-- pyfsm does on its first call, that the schema matches the library.
-- Parameters: none.
-- Result: one row (revision), e.g. '0004'.
-- Errors: none of its own.
-- Example: CALL fsm_schema_version_v1();
CREATE PROCEDURE `fsm_schema_version_v1`()
READS SQL DATA SQL SECURITY DEFINER
SELECT `version_num` AS `revision` FROM `fsm_alembic_version`
