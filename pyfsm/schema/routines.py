"""The one registry of the stored procedures pyfsm's Python calls: name with version and
parameters, in order.

Every call site takes its routine from here (``routines.SEND.call_sql(machine)``), so a new
version of a procedure is one line in this file (and its SQL file and migration).
``tests/server/test_routines.py`` checks every entry against what a fresh install creates:
the name exists and its parameters are these, in this order.

Per-type procedures (``fsm_{type}_send_v4``) are written with ``{type}``; :meth:`Routine.name_for`
fills in the machine type, which callers have validated (``check_machine_name``) before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

#: How per-type routine names mark the machine type.
TYPE_MARK = "{type}"


@dataclass(frozen=True)
class Routine:
    """A stored procedure: ``name`` (``fsm_x_vN``, or ``fsm_{type}_x_vN`` for a per-type one)
    and its parameters in order."""

    name: str
    params: tuple[str, ...]
    per_type: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "per_type", TYPE_MARK in self.name)

    @property
    def suffix(self) -> str:
        """What follows ``fsm_{type}_`` in a per-type name (``send_v4``)."""
        return self.name.removeprefix(f"fsm_{TYPE_MARK}_")

    def name_for(self, machine: str | None = None) -> str:
        """The routine's name in the database (a per-type one needs its machine type)."""
        if not self.per_type:
            return self.name
        if machine is None:
            raise ValueError(f"{self.name} is a per-type procedure: name the machine type")
        return self.name.replace(TYPE_MARK, machine)

    def call_sql(self, machine: str | None = None) -> str:
        """``CALL `name`(%s, ...)`` with one placeholder per parameter."""
        return _call_sql(self.name_for(machine), len(self.params))


@lru_cache(maxsize=1024)
def _call_sql(name: str, nargs: int) -> str:
    return f"CALL `{name}`({', '.join(['%s'] * nargs)})"


def _r(name: str, *params: str) -> Routine:
    return Routine(name, tuple(params))


# -- definitions --------------------------------------------------------------------------
DEFINE = _r("fsm_define_v8", "p_machine", "p_definition")
DEFINITION = _r("fsm_definition_v1", "p_machine", "p_version")

# -- one instance, per type (rendered from sql/machine when a type is installed) ----------------
CREATE = _r("fsm_{type}_create_v1", "p_key", "p_state", "p_data", "p_metadata", "p_request_id", "p_lookup_key")
SEND = _r(
    "fsm_{type}_send_v5",
    "p_key",
    "p_event",
    "p_data",
    "p_metadata",
    "p_expected_version",
    "p_request_id",
    "p_handler",
    "p_lookup_key",
    "p_data_patch",
)
#: SEND with key and event alone, at a lower cost (the same answers): Store.send without options
FIRE = _r("fsm_{type}_fire_v2", "p_key", "p_event")
SEND_MANY = _r("fsm_{type}_send_many_v3", "p_items")
GET = _r("fsm_{type}_get_v1", "p_key")
#: the rules an instance may take now, their guards and its data (Store.allowed_events tests them)
ALLOWED_EVENTS = _r("fsm_{type}_allowed_events_v1", "p_key")
HISTORY = _r("fsm_{type}_history_v1", "p_key")
IN_STATE = _r("fsm_{type}_in_state_v1", "p_state", "p_after_id", "p_limit")
STEP = _r(
    "fsm_{type}_step_v2",
    "p_key",
    "p_owner",
    "p_expected_version",
    "p_steps",
    "p_status",
    "p_continue",
    "p_claim_seconds",
    "p_requeue_seconds",
    "p_data",
)
STEPS = _r("fsm_{type}_steps_v1", "p_owner", "p_claim_seconds", "p_items")

# -- locks ------------------------------------------------------------------------------------
LOCK = _r("fsm_lock_v2", "p_machine", "p_key", "p_owner", "p_lease_seconds")
RENEW_LOCK = _r("fsm_renew_lock_v1", "p_owner", "p_lease_seconds")
UNLOCK = _r("fsm_unlock_v1", "p_owner")
LOCK_HOLDERS = _r("fsm_lock_holders_v1", "p_machine", "p_key")
LOCKS = _r("fsm_locks_v1", "p_lookup_key")
FORCE_UNLOCK = _r("fsm_force_unlock_v2", "p_scope", "p_lookup_key", "p_reason")
SET_LOCKING = _r("fsm_set_locking_v1", "p_machine", "p_key", "p_global", "p_local")

# -- the handler engine -------------------------------------------------------------------------
CLAIM = _r("fsm_claim_v1", "p_machine", "p_owner", "p_limit", "p_claim_seconds", "p_key")
RENEW_CLAIMS = _r("fsm_renew_claims_v1", "p_owner", "p_machine", "p_instance_ids", "p_claim_seconds")
RELEASE_CLAIMS = _r("fsm_release_claims_v1", "p_owner", "p_machine", "p_keep_ids")
STEP_FAILED = _r(
    "fsm_step_failed_v1",
    "p_machine",
    "p_key",
    "p_owner",
    "p_expected_version",
    "p_handler",
    "p_attempt",
    "p_error_type",
    "p_message",
    "p_traceback",
    "p_retry_in_seconds",
    "p_failure_event",
)
PAUSE = _r("fsm_pause_v1", "p_machine", "p_key")
RESUME = _r("fsm_resume_v2", "p_machine", "p_key")
RETRY = _r("fsm_retry_v1", "p_machine", "p_key")
ENQUEUE = _r("fsm_enqueue_v2", "p_machine", "p_key", "p_delay_seconds", "p_run_immediately")
FAILED = _r("fsm_failed_v1", "p_machine", "p_after_id", "p_limit")
ERRORS = _r("fsm_errors_v1", "p_machine", "p_key")
RUN_INFO = _r("fsm_run_info_v1", "p_machine", "p_key")

# -- timers: state timeouts and scheduled events -------------------------------------------------
SEND_AT = _r("fsm_send_at_v2", "p_machine", "p_key", "p_event", "p_at", "p_after_seconds", "p_metadata", "p_request_id")
CANCEL_TIMER = _r("fsm_cancel_timer_v1", "p_timer_id", "p_reason")
FIRE_TIMERS = _r("fsm_fire_timers_v3", "p_owner", "p_limit", "p_claim_seconds")
TIMERS = _r("fsm_timers_v1", "p_machine", "p_key", "p_overdue", "p_after_id", "p_limit")
ARM_TIMEOUTS = _r("fsm_arm_timeouts_v1", "p_machine")

# -- changing machines: instances moved to a newer definition version ----------------------------
UPGRADE = _r("fsm_{type}_upgrade_v1", "p_to_version", "p_map", "p_only", "p_after_id", "p_limit")
UPGRADE_PLAN = _r("fsm_{type}_upgrade_plan_v1", "p_to_version", "p_map", "p_only")
VERSION_COUNTS = _r("fsm_instances_per_version_v1", "p_machine")

# -- machines on the application's own tables ---------------------------------------------------------
ATTACH = _r(
    "fsm_attach_v1", "p_machine", "p_table", "p_key", "p_state", "p_lookup", "p_columns", "p_on_delete", "p_dry_run"
)
#: created for an attached type only (pyfsm.schema.attached), not with the type's other objects
ADOPT = _r("fsm_{type}_adopt_v1", "p_after", "p_limit")

# -- reads across types and reporting ---------------------------------------------------------------
INSTANCES_IN_STATE = _r("fsm_instances_in_state_v1", "p_state", "p_after_machine", "p_after_id", "p_limit")
ACCOUNT_HISTORY = _r(
    "fsm_account_history_v1", "p_lookup_key", "p_newest_first", "p_after_at", "p_after_machine", "p_after_id", "p_limit"
)
COUNTS = _r("fsm_counts_v2", "p_machine")
STATE_AT = _r("fsm_state_at_v1", "p_machine", "p_key", "p_at")
STATS = _r("fsm_stats_v3")
SCHEMA_VERSION = _r("fsm_schema_version_v1")

# -- the relay ------------------------------------------------------------------------------------
OUTBOX_LAG = _r("fsm_outbox_lag_v1")
RELAY_LEAD = _r("fsm_relay_lead_v1", "p_name", "p_holder", "p_lease_seconds")
RELAY_RESIGN = _r("fsm_relay_resign_v1", "p_name", "p_holder")
UNPARK = _r("fsm_unpark_v1", "p_outbox_id", "p_skip")

# -- the web console's audit log ------------------------------------------------------------------
OPERATOR_ACTION = _r("fsm_operator_action_v3", "p_operator", "p_action", "p_machine", "p_key", "p_detail")
OPERATOR_OUTCOME = _r("fsm_operator_outcome_v1", "p_action_id", "p_outcome", "p_errno", "p_message")

#: Every routine above, by name.
ALL: tuple[Routine, ...] = tuple(v for v in globals().values() if isinstance(v, Routine))
BY_NAME: dict[str, Routine] = {r.name: r for r in ALL}
#: The per-type procedures the Store calls: an account with EXECUTE rights only is denied one
#: that does not exist (1370), as it is denied any routine it has no right on.
PER_TYPE_SUFFIXES = frozenset(
    r.suffix for r in (CREATE, SEND, FIRE, SEND_MANY, GET, ALLOWED_EVENTS, HISTORY, IN_STATE, UPGRADE, UPGRADE_PLAN)
)
