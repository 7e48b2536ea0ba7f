-- The queries of the definitions and the installed types that the Store and the Gateway run
-- (pyfsm/db/queries.py reads every file of this folder; each block is reached by its name).

-- name: types_defined
-- The defined machine types and whether their objects are installed, for UnknownMachine's
-- message (the owner's and the reporting accounts may read fsm_v_definitions).
-- Parameters: none.
-- Result: (machine, installed), ordered by machine.
-- Used by: Gateway.types (pyfsm/gateway.py), the console's explanation of a missing type.
SELECT machine, installed FROM fsm_v_definitions WHERE is_current ORDER BY machine

-- name: type_objects_version
-- The object set a type's tables, triggers and procedures were installed with (NULL: not yet).
-- Parameters: machine.
-- Result: (objects_version), no row for a type never defined.
-- Used by: Store.define (pyfsm/store.py), to bring an older pyfsm's objects up to date.
SELECT objects_version FROM fsm_machines WHERE machine = %s
