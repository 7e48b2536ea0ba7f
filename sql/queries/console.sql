-- The console's reads (pyfsm/web/reads.py), through the reporting views with a `pyfsm grant
-- --reporting` account (pyfsm/db/queries.py reads every file of this folder; each block is
-- reached by its name).
--
-- Every query reads one machine type's own view (fsm_v_{type}, fsm_v_{type}_transitions) or a
-- global view with the machine in its WHERE, through an index that serves it: a page costs
-- about the rows it shows. Listings are pages by keyset (id < cursor, newest first), never
-- OFFSET. {limit}: the rows a statement may return (a paged listing's size plus one: the extra
-- row says that a next page exists).
-- A {where} slot takes the names of the console_filter_* blocks a page chose, joined by AND.

-- name: console_timer_columns
-- The columns of fsm_v_timers the console shows (a column list, included as
-- {console_timer_columns}, never run on its own).
-- Used by: console_instance_timers, console_timers, console_timer.
timer_id, machine, instance_key, instance_id, kind, state, event, due_at, fire_at, overdue,
overdue_seconds, claimed_by, holds, last_errno, last_error, request_id

-- name: console_timer_log_columns
-- The columns of fsm_v_timer_log the console shows (a column list, included as
-- {console_timer_log_columns}, never run on its own).
-- Used by: console_timer_log.
timer_id, machine, instance_key, kind, state, event, due_at, outcome, transition_id, errno,
reason, done_by, done_at, lag_seconds

-- name: console_filter_true
-- No condition: where a filter chose none (optimized away, the index use stays the same).
-- Parameters: none.
-- Used by: console_instances, console_timers, console_timer_summary, console_timer_log.
1 = 1

-- name: console_filter_state
-- The instance listing's state filter (the index (current_state, id) of the type's table).
-- Parameters: state.
-- Used by: console_instances.
current_state = %s

-- name: console_filter_status
-- The instance listing's status filter (the index (status, id)).
-- Parameters: status.
-- Used by: console_instances.
status = %s

-- name: console_filter_lookup_key
-- The instance listing's account filter (the index on lookup_key).
-- Parameters: lookup_key.
-- Used by: console_instances.
lookup_key = %s

-- name: console_filter_updated_after
-- The instance listing's "updated at or after" filter (within a window of ids).
-- Parameters: updated_after (UTC).
-- Used by: console_instances.
updated_at >= %s

-- name: console_filter_updated_before
-- The instance listing's "updated before" filter (within a window of ids).
-- Parameters: updated_before (UTC).
-- Used by: console_instances.
updated_at < %s

-- name: console_filter_id_from
-- The low end of a window of ids a filter that no index serves searches (the primary key).
-- Parameters: lowest id.
-- Used by: console_instances.
id >= %s

-- name: console_filter_id_below
-- The keyset cursor of the instance listing: the ids below the last page's (the primary key).
-- Parameters: the cursor id.
-- Used by: console_instances.
id < %s

-- name: console_filter_instance_key
-- One instance's rows, by its key.
-- Parameters: instance_key.
-- Used by: console_history.
instance_key = %s

-- name: console_filter_sort_key_below
-- The history's cursor: the transitions older than the last page's.
-- Parameters: sort_key.
-- Used by: console_history.
sort_key < %s

-- name: console_filter_failed
-- The failed instances (the index (status, id) of the type's table).
-- Parameters: none.
-- Used by: console_failed.
i.status = 'failed'

-- name: console_filter_failed_id_below
-- The failed page's keyset cursor.
-- Parameters: the cursor id.
-- Used by: console_failed.
i.id < %s

-- name: console_filter_machine
-- One machine type's rows (the index (machine, ...) of the global view's table).
-- Parameters: machine.
-- Used by: console_timers, console_timer_summary, console_timer_log.
machine = %s

-- name: console_filter_due_now
-- The overdue timers: a range of the index on due_at.
-- Parameters: none.
-- Used by: console_timers, console_timer_summary.
due_at <= UTC_TIMESTAMP(6)

-- name: console_filter_timer_after
-- The timers page's cursor, (due_at, timer_id) > (%s, %s), written so that it is a range of
-- the index on due_at.
-- Parameters: due_at, due_at, timer_id (the last row's).
-- Used by: console_timers.
due_at >= %s AND (due_at > %s OR timer_id > %s)

-- name: console_current_definitions
-- Every type's current definition, for the order of its states.
-- Parameters: none.
-- Result: (machine, body), one row per defined type.
-- Used by: Reads.machines (pyfsm/web/reads.py).
SELECT machine, body FROM fsm_v_definitions WHERE is_current

-- name: console_state_counts
-- The instances per state of every type (the counters).
-- Parameters: none.
-- Result: (machine, state, instances), ordered by machine, state.
-- Used by: Reads.machines (pyfsm/web/reads.py).
SELECT machine, state, instances FROM fsm_v_state_counts ORDER BY machine, state

-- name: console_current_version
-- The type's current definition version, by the definitions' key.
-- Parameters: machine.
-- Result: (version), no row for a type not defined.
-- Used by: Reads.current_version (pyfsm/web/reads.py).
SELECT version FROM fsm_v_definitions WHERE machine = %s AND is_current

-- name: console_current_state
-- An instance's state, by its unique key.
-- Parameters: instance_key.
-- Result: (current_state), no row for no such instance.
-- Used by: Reads.current_state (pyfsm/web/reads.py).
SELECT current_state FROM `fsm_v_{type}` WHERE instance_key = %s

-- name: console_newest_id
-- The type's newest id, by the primary key: one row (where a windowed page starts).
-- Parameters: none.
-- Result: (id), no row for a type without instances.
-- Used by: Reads.instances (pyfsm/web/reads.py).
SELECT id FROM `fsm_v_{type}` ORDER BY id DESC LIMIT 1

-- name: console_instances
-- A page of the type's instances, newest first. queued: a worker runs it or will (its run has
-- a due time), by the unique index (machine, instance_id) of fsm_runs. {where}: the filters
-- chosen, in this order: console_filter_state, console_filter_status,
-- console_filter_lookup_key, console_filter_updated_after, console_filter_updated_before,
-- console_filter_id_from, console_filter_id_below (console_filter_true: none).
-- Parameters: machine, then those of the filters, in order.
-- Result: (id, instance_key, lookup_key, current_state, status, version, updated_at,
-- in_state_since, queued), at most {limit} rows.
-- Used by: Reads.instances (pyfsm/web/reads.py).
SELECT id, instance_key, lookup_key, current_state, status, version, updated_at, in_state_since,
       status = 'running' AND EXISTS (SELECT 1 FROM fsm_v_runs r WHERE r.machine = %s
           AND r.instance_id = i.id AND r.due_at IS NOT NULL) AS queued
FROM `fsm_v_{type}` i WHERE {where} ORDER BY id DESC LIMIT {limit}

-- name: console_instance
-- One instance, every column of the type's view, by its unique key.
-- Parameters: instance_key.
-- Result: the view's row, no row for no such instance.
-- Used by: Reads.instance (pyfsm/web/reads.py).
SELECT * FROM `fsm_v_{type}` WHERE instance_key = %s

-- name: console_history
-- A page of an instance's transitions, newest first, by the index (instance_id, sort_key).
-- {where}: console_filter_instance_key, and console_filter_sort_key_below for a next page.
-- Parameters: instance_key, then the cursor's sort_key (a next page).
-- Result: (transition_id, sort_key, event, from_state, to_state, handler, source, request_id,
-- definition_version, data_before, data_after, metadata, entered_at, left_at,
-- seconds_in_state, is_current), at most {limit} rows.
-- Used by: Reads.instance (pyfsm/web/reads.py).
SELECT transition_id, sort_key, event, from_state, to_state, handler, source, request_id,
       definition_version, data_before, data_after, metadata, entered_at, left_at,
       seconds_in_state, is_current
FROM `fsm_v_{type}_transitions` WHERE {where} ORDER BY sort_key DESC LIMIT {limit}

-- name: console_instance_errors
-- An instance's newest handler errors.
-- Parameters: machine, instance_id.
-- Result: (id, state, handler, attempt, error_type, message, traceback, outcome, next_run_at,
-- created_at), at most 20 rows, newest first.
-- Used by: Reads.instance (pyfsm/web/reads.py).
SELECT id, state, handler, attempt, error_type, message, traceback, outcome, next_run_at,
       created_at FROM fsm_v_errors WHERE machine = %s AND instance_id = %s
ORDER BY id DESC LIMIT 20

-- name: console_instance_run
-- An instance's run, by the unique index (machine, instance_id).
-- Parameters: machine, instance_id.
-- Result: (due_at, claimed_by, attempt, pause_requested, overdue_seconds, updated_at), no row
-- for an instance without a run.
-- Used by: Reads.instance (pyfsm/web/reads.py).
SELECT due_at, claimed_by, attempt, pause_requested, overdue_seconds, updated_at
FROM fsm_v_runs WHERE machine = %s AND instance_id = %s

-- name: console_instance_locks
-- The locks held on an instance's account (its lookup_key), of its type or of every type.
-- Parameters: machine, lookup_key.
-- Result: (kind, scope, lookup_key, instance_key, owner, since, expires_at,
-- advisory_connection), ordered by id.
-- Used by: Reads.instance (pyfsm/web/reads.py).
SELECT kind, scope, lookup_key, instance_key, owner, since, expires_at, advisory_connection
FROM fsm_held_locks_v1 WHERE scope IN ('*', %s) AND lookup_key = %s ORDER BY id

-- name: console_instance_outbox
-- An instance's events not yet published (or parked), oldest first.
-- Parameters: machine, instance_id.
-- Result: (id, event, from_state, topic, sort_key, attempts, last_error, parked_at,
-- occurred_at), at most 50 rows.
-- Used by: Reads.instance (pyfsm/web/reads.py).
SELECT id, event, from_state, topic, sort_key, attempts, last_error, parked_at,
       occurred_at FROM fsm_v_outbox WHERE machine = %s AND instance_id = %s ORDER BY id LIMIT 50

-- name: console_instance_actions
-- The operators' newest actions on an instance.
-- Parameters: machine, instance_key.
-- Result: (id, operator, account, action, detail, requested_at, outcome, errno, message), at
-- most 50 rows, newest first.
-- Used by: Reads.instance (pyfsm/web/reads.py).
SELECT id, operator, account, action, detail, requested_at, outcome, errno, message
FROM fsm_v_operator_log WHERE machine = %s AND instance_key = %s
ORDER BY id DESC LIMIT 50

-- name: console_instance_timers
-- An instance's armed timers by due time, by the index (machine, instance_id).
-- Parameters: machine, instance_id.
-- Result: console_timer_columns, at most 100 rows.
-- Used by: Reads.instance (pyfsm/web/reads.py).
SELECT {console_timer_columns} FROM fsm_v_timers WHERE machine = %s AND instance_id = %s
ORDER BY due_at, timer_id LIMIT 100

-- name: console_operator_action
-- One operator action, by its id (the result a page shows after an action).
-- Parameters: id.
-- Result: (id, operator, action, machine, instance_key, detail, outcome, errno, message), no
-- row for no such action.
-- Used by: Reads.operator_action (pyfsm/web/reads.py).
SELECT id, operator, action, machine, instance_key, detail, outcome, errno, message
FROM fsm_v_operator_log WHERE id = %s

-- name: console_failed
-- A page of a type's failed instances, newest first, each with its last error.
-- {where}: console_filter_failed, and console_filter_failed_id_below for a next page.
-- Parameters: machine, then the cursor id (a next page).
-- Result: (id, instance_key, lookup_key, current_state, updated_at, handler, attempt,
-- error_type, message, failed_at), at most {limit} rows.
-- Used by: Reads.failed (pyfsm/web/reads.py).
SELECT i.id, i.instance_key, i.lookup_key, i.current_state, i.updated_at,
       e.handler, e.attempt, e.error_type, e.message, e.created_at AS failed_at
FROM `fsm_v_{type}` i LEFT JOIN fsm_v_errors e ON e.id = (SELECT MAX(x.id) FROM fsm_v_errors x
    WHERE x.machine = %s AND x.instance_id = i.id)
WHERE {where} ORDER BY i.id DESC LIMIT {limit}

-- name: console_stuck
-- A type's runs due for longer than a bound: nobody picks them up, or their claimer died (a
-- claim is a lease: an expired one is due), oldest first.
-- Parameters: machine, the bound in microseconds.
-- Result: (instance_key, due_at, claimed_by, attempt, overdue_seconds, current_state, status),
-- at most {limit} rows.
-- Used by: Reads.stuck (pyfsm/web/reads.py).
SELECT r.instance_key, r.due_at, r.claimed_by, r.attempt, r.overdue_seconds,
       i.current_state, i.status FROM fsm_v_runs r
JOIN `fsm_v_{type}` i ON i.id = r.instance_id
WHERE r.machine = %s AND r.due_at < UTC_TIMESTAMP(6) - INTERVAL %s MICROSECOND
ORDER BY r.due_at, r.id LIMIT {limit}

-- name: console_queue
-- A type's next runs by due time (claimed ones show their lease's end), by the index
-- (machine, due_at, id).
-- Parameters: machine.
-- Result: (instance_key, due_at, claimed_by, attempt, pause_requested, overdue_seconds), at
-- most {limit} rows.
-- Used by: Reads.queue (pyfsm/web/reads.py).
SELECT instance_key, due_at, claimed_by, attempt, pause_requested, overdue_seconds
FROM fsm_v_runs WHERE machine = %s AND due_at IS NOT NULL ORDER BY due_at, id
LIMIT {limit}

-- name: console_claimers
-- Who holds claims now, through the index on claimed_by.
-- Parameters: none.
-- Result: (claimed_by, machine, runs, first_lease_end), at most 200 rows.
-- Used by: Reads.claimers (pyfsm/web/reads.py).
SELECT claimed_by, machine, COUNT(*) AS runs, MIN(due_at) AS first_lease_end
FROM fsm_v_runs WHERE claimed_by IS NOT NULL GROUP BY claimed_by, machine
ORDER BY claimed_by, machine LIMIT 200

-- name: console_locks
-- The locks held now, the first to expire first.
-- Parameters: none.
-- Result: (kind, scope, lookup_key, machine, instance_key, owner, since, expires_at,
-- advisory_connection), at most 500 rows.
-- Used by: Reads.locks (pyfsm/web/reads.py).
SELECT kind, scope, lookup_key, machine, instance_key, owner, since, expires_at,
       advisory_connection FROM fsm_held_locks_v1 ORDER BY expires_at, id LIMIT 500

-- name: console_timers
-- A page of armed timers by due time (the most overdue first): the index on due_at serves the
-- order, the overdue filter (a range of it) and the cursor. {where}: console_filter_true, then
-- console_filter_machine, console_filter_due_now, console_filter_timer_after as chosen.
-- Parameters: those of the filters, in order.
-- Result: console_timer_columns, at most {limit} rows.
-- Used by: Reads.timers (pyfsm/web/reads.py).
SELECT {console_timer_columns} FROM fsm_v_timers WHERE {where}
ORDER BY due_at, timer_id LIMIT {limit}

-- name: console_timer_summary
-- Armed timers, how many are overdue and held, and the oldest overdue's lateness in seconds
-- (0: none). Counting the armed ones reads every armed timer; the others read the overdue
-- range of the due_at index. {where}: console_filter_true, and console_filter_machine for one
-- type; {where_overdue}: console_filter_due_now, and console_filter_machine for one type.
-- Parameters: machine (one type), machine again (one type).
-- Result: (armed, overdue, held, oldest_overdue_seconds), one row.
-- Used by: Reads.timer_summary (pyfsm/web/reads.py).
SELECT (SELECT COUNT(*) FROM fsm_v_timers WHERE {where}) AS armed,
       COUNT(*) AS overdue, COALESCE(SUM(holds > 0), 0) AS held,
       COALESCE(MAX(overdue_seconds), 0) AS oldest_overdue_seconds
FROM fsm_v_timers WHERE {where_overdue}

-- name: console_timer_log
-- The newest timer outcomes (fired, dropped, cancelled), through the index on done_at, or on
-- (machine, done_at) for one type. {where}: console_filter_true, or console_filter_machine.
-- Parameters: machine (one type).
-- Result: console_timer_log_columns, at most {limit} rows, newest first.
-- Used by: Reads.timer_log (pyfsm/web/reads.py).
SELECT {console_timer_log_columns} FROM fsm_v_timer_log WHERE {where}
ORDER BY done_at DESC, timer_id DESC LIMIT {limit}

-- name: console_timer
-- One armed timer, by its id.
-- Parameters: timer_id.
-- Result: console_timer_columns, no row for no such timer.
-- Used by: Reads.timer (pyfsm/web/reads.py).
SELECT {console_timer_columns} FROM fsm_v_timers WHERE timer_id = %s

-- name: console_outbox_parked
-- The parked events (the relay gave up on them), oldest first.
-- Parameters: none.
-- Result: (id, machine, instance_key, event, from_state, topic, sort_key, attempts,
-- last_error, parked_at, occurred_at), at most 200 rows.
-- Used by: Reads.parked (pyfsm/web/reads.py).
SELECT id, machine, instance_key, event, from_state, topic, sort_key, attempts, last_error,
       parked_at, occurred_at FROM fsm_v_outbox WHERE parked_at IS NOT NULL ORDER BY id LIMIT 200

-- name: console_outbox_oldest
-- The oldest events not yet published.
-- Parameters: none.
-- Result: (id, machine, instance_key, event, from_state, topic, attempts, occurred_at,
-- age_seconds), at most 20 rows.
-- Used by: Reads.oldest_unpublished (pyfsm/web/reads.py).
SELECT id, machine, instance_key, event, from_state, topic, attempts, occurred_at,
       age_seconds FROM fsm_v_outbox WHERE parked_at IS NULL ORDER BY id LIMIT 20

-- name: console_outbox_row
-- One outbox event, by its id (what an action on it names).
-- Parameters: id.
-- Result: (id, machine, instance_key, event, parked_at, last_error), no row for no such event.
-- Used by: Reads.outbox_row (pyfsm/web/reads.py).
SELECT id, machine, instance_key, event, parked_at, last_error FROM fsm_v_outbox WHERE id = %s
