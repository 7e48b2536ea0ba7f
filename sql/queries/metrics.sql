-- The statements of the Prometheus collector (pyfsm/metrics/database.py): the snapshot of one
-- scrape and the per-event count of new history, through what a reporting account may read.
-- Each is one SELECT of parts joined by UNION ALL (pyfsm.db.queries.union_all): a fixed part, then one
-- part per installed type ({type}), then the timers' parts; all in the collector's one
-- connection, after CALL fsm_stats_v2() and CALL fsm_outbox_lag_v1() (routines of the registry).

-- name: metrics_snapshot
-- The snapshot's first part, rows (what, machine, label, value): the instances per state (the
-- triggers' counters of fsm_v_state_counts) and the locks held by kind (fsm_held_locks_v1).
-- Parameters: none.
-- Result: ('instances', machine, state, instances) rows, then ('locks', '', kind, count) rows.
-- Used by: DatabaseCollector (pyfsm/metrics/database.py: _snapshot_sql), first of the parts.
SELECT 'instances' AS what, machine, state AS label, instances AS value FROM fsm_v_state_counts
UNION ALL SELECT 'locks', '', kind, COUNT(*) FROM fsm_held_locks_v1 GROUP BY kind

-- name: metrics_snapshot_type
-- The snapshot's part for one installed type: its highest history id (metrics_max_transition_id),
-- its runs due for more than stuck_after seconds and the seconds its oldest due run has been
-- due, each a range of fsm_runs's index (machine, due_at, id) through fsm_v_runs. A claim is a
-- lease: a run whose claim ran out has a due_at in the past and is due. UTC_TIMESTAMP(6) is the
-- statement's start throughout. {type}: the type; {stuck_us}: stuck_after in microseconds.
-- Parameters: none.
-- Result: ('max_transition_id', type, '', id), ('stuck', type, '', count),
-- ('oldest_due_seconds', type, '', seconds or NULL).
-- Used by: DatabaseCollector (_snapshot_sql), once per installed type.
SELECT 'max_transition_id', '{type}', '', {metrics_max_transition_id}
UNION ALL SELECT 'stuck', '{type}', '', (SELECT COUNT(*) FROM fsm_v_runs WHERE machine = '{type}'
  AND due_at < UTC_TIMESTAMP(6) - INTERVAL {stuck_us} MICROSECOND)
UNION ALL SELECT 'oldest_due_seconds', '{type}', '', (SELECT TIMESTAMPDIFF(MICROSECOND, MIN(due_at),
  UTC_TIMESTAMP(6)) * 0.000001 FROM fsm_v_runs WHERE machine = '{type}' AND due_at <= UTC_TIMESTAMP(6))

-- name: metrics_max_transition_id
-- The highest history id of a type ({type}), through its reporting view: a scalar subquery.
-- MAX(transition_id) on the view is a scan: the view joins each history row to its instance,
-- and the optimizer reads the instances first (MariaDB 10.11: every instance's status index,
-- then a lookup per instance). STRAIGHT_JOIN keeps the view's own order, history first, so
-- ORDER BY ... DESC LIMIT 1 reads the history's primary key backwards and stops at the first
-- row (one history row, one instance row: EXPLAIN shows `h index PRIMARY`, `i eq_ref PRIMARY`).
-- STRAIGHT_JOIN is the same on MySQL 8.
-- Parameters: none.
-- Result: the id (NULL: no history).
-- Used by: metrics_snapshot_type.
(SELECT STRAIGHT_JOIN transition_id FROM `fsm_v_{type}_transitions` ORDER BY transition_id DESC LIMIT 1)

-- name: metrics_snapshot_timers
-- The snapshot's timer parts. The armed timers by type and kind read every armed timer (no
-- counters exist for them). The overdue ones are one range of the index on due_at, read once
-- for three samples per type (a held timer is always overdue: it was tried when due). The
-- lags of the timers fired in the last {window_seconds} seconds (the newest {lag_rows}) are a
-- range of the index on done_at. The last row gives where this scrape counts timer outcomes up
-- to (metrics_timer_log_upto), in microseconds since 1970-01-01.
-- Parameters: none ({window_seconds}, {lag_rows}, {settle_us}: ints).
-- Result: ('timers_armed', machine, kind, count) rows, ('timers_overdue' | 'timers_held' |
-- 'timers_oldest_overdue_seconds', machine, '', value) rows, ('timer_lag', machine, '',
-- seconds) rows, ('timer_log_upto', '', '', microseconds).
-- Used by: DatabaseCollector (_snapshot_sql), after the parts per type.
SELECT 'timers_armed', machine, kind, COUNT(*) FROM fsm_v_timers GROUP BY machine, kind
UNION ALL SELECT x.what, o.machine, '', CASE x.what WHEN 'timers_overdue' THEN o.n WHEN 'timers_held' THEN o.held
  ELSE TIMESTAMPDIFF(MICROSECOND, o.oldest, UTC_TIMESTAMP(6)) * 0.000001 END
  FROM (SELECT machine, COUNT(*) AS n, SUM(holds > 0) AS held, MIN(due_at) AS oldest FROM fsm_v_timers
  WHERE due_at <= UTC_TIMESTAMP(6) GROUP BY machine) o CROSS JOIN (SELECT 'timers_overdue' AS what
  UNION ALL SELECT 'timers_held' UNION ALL SELECT 'timers_oldest_overdue_seconds') x
UNION ALL SELECT 'timer_lag', machine, '', lag_seconds FROM (SELECT machine, lag_seconds FROM fsm_v_timer_log
  WHERE done_at > UTC_TIMESTAMP(6) - INTERVAL {window_seconds} SECOND AND outcome = 'fired'
  ORDER BY done_at DESC LIMIT {lag_rows}) w
UNION ALL SELECT 'timer_log_upto', '', '', TIMESTAMPDIFF(MICROSECOND, '1970-01-01', {metrics_timer_log_upto})

-- name: metrics_timer_log_upto
-- Where timer outcomes are counted up to: {settle_us} microseconds before the statement's start
-- (a firing call's done_at is its start: its rows commit a little later). An expression.
-- Parameters: none ({settle_us}: an int).
-- Used by: metrics_snapshot_timers, metrics_snapshot_timer_outcomes.
UTC_TIMESTAMP(6) - INTERVAL {settle_us} MICROSECOND

-- name: metrics_snapshot_timer_outcomes
-- The snapshot's last part from the second scrape on: the timer outcomes logged since the
-- previous scrape counted up to (a range of the index on done_at), up to metrics_timer_log_upto.
-- Parameters: the previous scrape's timer_log_upto, as text (YYYY-MM-DD hh:mm:ss.ffffff).
-- Result: ('timer_outcomes', machine, outcome, count) rows.
-- Used by: DatabaseCollector (_snapshot_sql), last of the parts.
SELECT 'timer_outcomes', machine, outcome, COUNT(*) FROM fsm_v_timer_log
WHERE done_at > %s AND done_at <= {metrics_timer_log_upto} GROUP BY machine, outcome

-- name: metrics_events_type
-- One type's ({type}) new history rows by event: the {limit} lowest ids of ({after}, {upto}]
-- (a range of the history's primary key; STRAIGHT_JOIN: the join to the instance is one
-- primary-key lookup per row). A creation has no event: ''.
-- Parameters: none ({after}, {upto}, {limit}: ints).
-- Result: (machine, event, n, last_id) rows.
-- Used by: DatabaseCollector (_events_sql), one part per type with new history, joined by
-- UNION ALL (pyfsm.db.queries.union_all).
SELECT '{type}', COALESCE(event, ''), COUNT(*), MAX(transition_id) FROM (SELECT STRAIGHT_JOIN
  transition_id, event FROM `fsm_v_{type}_transitions` WHERE transition_id > {after} AND transition_id
  <= {upto} ORDER BY transition_id LIMIT {limit}) t GROUP BY event
