"""The console's actions: the same Store and Relay calls (and so the same procedures) as the
CLI, each recorded in fsm_operator_log with the operator's name.

An action runs through the *actions* account (the app role: EXECUTE on the procedures),
never the reporting account the pages read with. It is recorded before it runs
(fsm_operator_action_v3, outcome 'requested') and finished after (fsm_operator_outcome_v1,
'done' or 'refused' with the error's number), so a console that dies in between leaves a
'requested' row, never nothing. An event sent from the console also carries the operator in
its history row's metadata (``{"operator": ..., "via": "pyfsm web"}``) and the request id
``web-<action id>``, so that its history row names the log row and a repeat cannot apply it twice.
A cancelled timer's reason in fsm_timer_log starts with ``pyfsm web, <operator>``, and its log
row names the timer's machine and instance as the database has them, not as the form said.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import FsmError, InvalidArgument
from ..models import PauseResult, StatusChange
from ..relay.publisher import Relay
from ..schema import routines
from ..schema.routines import Routine
from ..store import Store

ACTIONS = ("send", "enqueue", "pause", "resume", "retry", "force_unlock", "unpark", "cancel_timer")
VIA = "pyfsm web"


@dataclass
class Outcome:
    action_id: int
    ok: bool
    message: str
    errno: int | None = None


def check_operator(name: object) -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > 64 or name != name.strip():
        raise InvalidArgument("operator: give your name (1 to 64 characters, no leading or trailing space)")
    return name


class Actions:
    """Runs actions as the app account; one Store (and one Relay for unpark) of its own."""

    def __init__(self, dsn: str) -> None:
        self.store = Store(dsn, pool_size=4)
        self._relay: Relay | None = None
        self._dsn = dsn

    def close(self) -> None:
        self.store.close()
        if self._relay is not None:
            self._relay.close()

    def run(self, operator: str, action: str, machine: str | None, key: str | None, detail: dict[str, Any]) -> Outcome:
        """Record, run and finish one action; a refused action is an Outcome, not an exception
        (the page shows it), and so is one whose arguments were bad."""
        check_operator(operator)
        if action not in ACTIONS:
            raise InvalidArgument(f"action must be one of {', '.join(ACTIONS)}, got {action!r:.40}")
        if action == "cancel_timer":  # the timer's own instance, for the log (None when it is not armed)
            machine, key = self.timer_instance(detail["timer_id"])
        action_id = int(
            self._call(routines.OPERATOR_ACTION, (operator, action, machine, key, json.dumps(detail)))["action_id"]
        )
        try:
            message = self._perform(action_id, operator, action, machine, key, detail)
        except FsmError as exc:
            self._call(routines.OPERATOR_OUTCOME, (action_id, "refused", exc.errno, str(exc)[:512]))
            return Outcome(action_id, False, str(exc), exc.errno)
        self._call(routines.OPERATOR_OUTCOME, (action_id, "done", None, message[:512]))
        return Outcome(action_id, True, message)

    def _call(self, routine: Routine, args: tuple[Any, ...]) -> dict[str, Any]:
        return self.store.gateway.call_one(routine, args, writes=True)

    def _perform(
        self, action_id: int, operator: str, action: str, machine: str | None, key: str | None, detail: dict[str, Any]
    ) -> str:
        if action == "unpark":
            outbox_id, skip = detail["outbox_id"], bool(detail.get("skip"))
            count = self.relay().unpark(outbox_id, skip=skip)
            return f"{'skipped' if skip else 're-queued'} outbox event {outbox_id}: {count} rows released"
        if action == "cancel_timer":
            given = detail.get("reason")
            cancelled = self.store.cancel_timer(
                detail["timer_id"], f"{VIA}, {operator}{': ' + given if given else ''}"[:255]
            )
            return (
                f"cancelled timer {cancelled.timer_id} ({cancelled.kind} {cancelled.event} of "
                f"{cancelled.machine} {cancelled.instance_key}, due {cancelled.due_at:%Y-%m-%d %H:%M:%S})"
            )
        if action == "force_unlock":
            reason = f"{VIA}, {operator}: {detail['reason']}"[:255]
            released = self.store.force_unlock(detail["lookup_key"], reason=reason, scope=detail.get("scope"))
            return f"released {len(released)} lock(s) of {detail['lookup_key']}"
        assert machine is not None and key is not None
        if action == "send":
            metadata = {**(detail.get("metadata") or {}), "operator": operator, "via": VIA}
            result = self.store.send(
                machine, key, detail["event"], data=detail.get("data"), metadata=metadata, request_id=f"web-{action_id}"
            )
            return f"{detail['event']}: {result.from_state} -> {result.to_state} (row version {result.version})"
        if action == "enqueue":  # an idle instance handed to its process's workers (Store.enqueue)
            run = self.store.enqueue(machine, key)
            due = "waits for an event or a resume" if run.due_at is None else f"due {run.due_at:%Y-%m-%d %H:%M:%S} UTC"
            claimed = f", claimed by {run.claimed_by}" if run.claimed_by else ""
            return f"enqueue: {machine} {key} is queued for the workers of its process ({due}{claimed})"
        simple: dict[str, Callable[[str, str], PauseResult | StatusChange]] = {
            "pause": self.store.pause,
            "resume": self.store.resume,
            "retry": self.store.retry,
        }
        row = simple[action](machine, key)
        pending = " (pauses at the next step boundary)" if isinstance(row, PauseResult) and row.pending else ""
        return f"{action}: {machine} {key} is {row.status} in {row.state}{pending}"

    def timer_instance(self, timer_id: int) -> tuple[str | None, str | None]:
        """(machine, instance key) of an armed timer, through fsm_timers_v1 (the app account's
        read); (None, None) when no timer of that id is armed (the cancel is then refused)."""
        found = self.store.timers(after_id=timer_id - 1, limit=1)
        if found and found[0].timer_id == timer_id:
            return found[0].machine, found[0].instance_key
        return None, None

    def relay(self) -> Relay:
        if self._relay is None:
            self._relay = Relay(self._dsn)
        return self._relay


def parse_json_object(text: str | None, what: str) -> dict[str, Any] | None:
    """An optional JSON object typed into a form."""
    if text is None or not text.strip():
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than json can parse
        raise InvalidArgument(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidArgument(f"{what} must be a JSON object ({{...}}), got {type(value).__name__}")
    return value
