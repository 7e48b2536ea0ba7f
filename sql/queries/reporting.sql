-- The reads of pyfsm/reporting/reads.py, through the reporting views only (what a
-- `pyfsm grant --reporting` account may run): `pyfsm graph`, `pyfsm types` and the console.

-- name: reporting_current_body
-- A type's current definition body.
-- Parameters: machine.
-- Result: (body), no row for a type not defined.
-- Used by: reporting.current_machine (`pyfsm graph`, the console).
SELECT body FROM fsm_v_definitions WHERE machine = %s AND is_current

-- name: reporting_version_body
-- One definition version's body.
-- Parameters: machine, version.
-- Result: (body), no row for a version not defined.
-- Used by: reporting.current_machine with a version (the console's instance page).
SELECT body FROM fsm_v_definitions WHERE machine = %s AND version = %s

-- name: reporting_state_counts
-- Instances per state of one type (the triggers' counters), states with none included.
-- Parameters: machine.
-- Result: (state, instances).
-- Used by: reporting.state_counts (`pyfsm graph --counts`, the console).
SELECT state, instances FROM fsm_v_state_counts WHERE machine = %s

-- name: reporting_edge_counts
-- How often each (from_state, event, to_state) of a type was taken: the whole history (a scan).
-- Parameters: none ({type}: the machine type).
-- Result: (from_state, event, to_state, n).
-- Used by: reporting.edge_counts (`pyfsm graph --counts`).
SELECT from_state, event, to_state, COUNT(*) AS n FROM `fsm_v_{type}_transitions`
WHERE event IS NOT NULL GROUP BY from_state, event, to_state

-- name: reporting_path
-- The states one instance went through, in order (its creation's state first).
-- Parameters: instance key ({type}: the machine type).
-- Result: (to_state), oldest first.
-- Used by: reporting.path.
SELECT to_state FROM `fsm_v_{type}_transitions` WHERE instance_key = %s ORDER BY sort_key

-- name: reporting_path_moves
-- The states one instance went through, in order (its creation's state first), each with its
-- row's source ('upgrade': a move to a newer definition version, not a transition).
-- Parameters: instance key ({type}: the machine type).
-- Result: (to_state, source), oldest first.
-- Used by: reporting.instance_path (`pyfsm graph --instance`).
SELECT to_state, source FROM `fsm_v_{type}_transitions` WHERE instance_key = %s ORDER BY sort_key

-- name: reporting_instance_version
-- The definition version one instance follows, and its type's current one.
-- Parameters: machine, instance key ({type}: the machine type).
-- Result: (definition_version, current_version), no row for no such instance.
-- Used by: reporting.instance_path (`pyfsm graph --instance`).
SELECT definition_version,
       (SELECT version FROM fsm_v_definitions WHERE machine = %s AND is_current) AS current_version
FROM `fsm_v_{type}` WHERE instance_key = %s

-- name: reporting_types
-- Each type's current definition and whether its objects are installed.
-- Parameters: none.
-- Result: (machine, version, body, installed), ordered by machine.
-- Used by: reporting.machine_types (`pyfsm types`).
SELECT machine, version, body, installed FROM fsm_v_definitions WHERE is_current ORDER BY machine

-- name: reporting_instances_per_type
-- Instances per type, from the state counters.
-- Parameters: none.
-- Result: (machine, instances).
-- Used by: reporting.machine_types (`pyfsm types`).
SELECT machine, CAST(SUM(instances) AS SIGNED) AS instances FROM fsm_v_state_counts GROUP BY machine

-- name: reporting_type_objects
-- Which set of objects each type has, its timer triggers, and whether its transition
-- trigger was rendered for its current version. Only the schema owner may read fsm_machines:
-- a reporting account gets 1142 (AccessDenied) and goes without.
-- Parameters: none.
-- Result: (machine, objects_version, timer_triggers, rendered).
-- Used by: reporting.machine_types (`pyfsm types`).
SELECT machine, objects_version, fsm_timer_triggers_ready_v1(machine) AS timer_triggers,
  fsm_rendered_ready_v1(machine) AS rendered FROM fsm_machines
