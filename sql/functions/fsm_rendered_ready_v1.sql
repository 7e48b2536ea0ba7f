-- fsm_rendered_ready_v1: was a machine type's transition trigger rendered for its current definition version?
--
-- fsm_{type}_bu_v9 carries the rules of the type's definition versions inline (those that
-- held instances when it was rendered, and the one that was current then), and `pyfsm sync`
-- (or Store.define) records the current version it rendered for in
-- fsm_machines.rendered_version. A version defined since is still enforced (the trigger looks
-- its rules up in fsm_rules), at a higher price, until the type is synced again.
-- fsm_define_v7 reports the answer in tables_ready. Internal.
-- Parameters: p_machine (a valid machine name).
-- Returns: 1 when the trigger was rendered for the current version, else 0 (also for a type
--   not yet synced, or unknown).
-- Errors: none.
-- Example: SELECT fsm_rendered_ready_v1('order');
CREATE FUNCTION `fsm_rendered_ready_v1`(p_machine VARCHAR(48) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
RETURNS TINYINT NOT DETERMINISTIC READS SQL DATA SQL SECURITY INVOKER
RETURN COALESCE((SELECT rendered_version = current_version FROM fsm_machines WHERE machine = p_machine), 0)
