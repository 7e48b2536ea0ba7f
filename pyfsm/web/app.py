"""`pyfsm web`: the console as a Starlette application (served by uvicorn, see pyfsm.commands.web).

The pages are plain HTML from Jinja2 templates with autoescaping on (history data is user
data), no JavaScript. Handlers are plain functions: Starlette runs them in its thread pool,
so the blocking database calls never hold up the event loop. Pages read with the reporting
account (:mod:`pyfsm.web.reads`); actions run with the app account (:mod:`pyfsm.web.actions`)
and only when the console was started with ``allow_actions``.
"""

from __future__ import annotations

import contextlib
import shlex
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..checks import check_name
from ..errors import (
    AccessDenied,
    DatabaseUnavailable,
    FsmError,
    GraphvizUnavailable,
    InvalidArgument,
    UnknownInstance,
    UnknownMachine,
)
from ..models import STATUSES, evaluate_events
from ..reporting import diagram
from ..schema.resources import check_machine_name
from ..store import Store
from . import security
from .actions import ACTIONS, Actions, check_operator, parse_json_object
from .reads import Filters, Reads, ago, parse_time

OPERATOR_COOKIE = "pyfsm_operator"


@dataclass(frozen=True)
class ConsoleConfig:
    """``dsn``: the account the pages read with (the reporting role is enough).
    ``actions_dsn``: the account actions run with (the app role); required with ``allow_actions``.
    ``token``: required of every request when set (see :mod:`pyfsm.web.security`).
    ``stuck_after``: seconds a run may stay due before the console calls it stuck."""

    dsn: str | None = None
    actions_dsn: str | None = None
    allow_actions: bool = False
    token: str | None = None
    stuck_after: float = 300.0
    pool_size: int = 8

    def __post_init__(self) -> None:
        if self.allow_actions and not self.actions_dsn:
            raise InvalidArgument(
                "--allow-actions needs the account actions run with: --actions-dsn "
                "(or $PYFSM_ACTIONS_DSN), an app account (`pyfsm grant --app`)"
            )
        if self.token is not None and len(self.token) < 16:
            raise InvalidArgument("--token must have at least 16 characters")
        if not 1 <= self.stuck_after <= 86400 * 30:
            raise InvalidArgument("--stuck-after must be from 1 to 2592000 seconds")


def create_app(config: ConsoleConfig) -> Starlette:
    """The console's ASGI application. Its pools are closed when the application shuts down."""
    store = Store(config.dsn, pool_size=config.pool_size)  # the pages', the schema check's and the metrics' reads
    reads = Reads(store.gateway)
    actions = Actions(config.actions_dsn) if config.allow_actions and config.actions_dsn else None
    templates = Environment(
        loader=FileSystemLoader(str(resources.files("pyfsm.web") / "templates")),
        autoescape=select_autoescape(default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    templates.filters.update(
        q=lambda v: quote(str(v), safe=""),
        ago=ago,
        when=_when,
        js=_pretty,
        sh=shlex.quote,
        sql=_sql_string,
        count=_count,
    )
    console = _Console(config, reads, store, actions, templates)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:  # the pools go with the application
            store.close()
            if actions is not None:
                actions.close()

    routes = [
        Route("/", console.index),
        Route("/m/{machine}", console.machine),
        Route("/m/{machine}/diagram.svg", console.diagram),
        Route("/m/{machine}/i/{key:path}", console.instance),
        Route("/failed", console.failed),
        Route("/stuck", console.stuck),
        Route("/queue", console.queue),
        Route("/locks", console.locks),
        Route("/outbox", console.outbox),
        Route("/timers", console.timers),
        Route("/metrics", console.metrics),
        Route("/confirm", console.confirm),
        Route("/action", console.action, methods=["POST"]),
        Route("/login", console.login, methods=["GET", "POST"]),
        Mount("/static", StaticFiles(packages=[("pyfsm.web", "static")]), name="static"),
    ]

    async def guard(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        started = time.perf_counter()
        open_paths = request.url.path == "/login" or request.url.path.startswith("/static/")
        if not open_paths and not security.authorised(request, config.token):
            if request.url.path == "/metrics" or request.method != "GET":
                response: Response = PlainTextResponse("a token is required (Authorization: Bearer ...)", 401)
            else:
                response = RedirectResponse("/login?" + urlencode({"next": _local(str(request.url.path))}), 303)
        else:
            response = await call_next(request)
        for name, value in security.HEADERS.items():
            response.headers.setdefault(name, value)
        response.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - started) * 1000:.1f}"
        return response

    app = Starlette(routes=routes, lifespan=lifespan, middleware=[Middleware(BaseHTTPMiddleware, dispatch=guard)])
    return app


class _Console:
    def __init__(
        self, config: ConsoleConfig, reads: Reads, store: Store, actions: Actions | None, templates: Environment
    ) -> None:
        self.config, self.reads, self.store, self.actions, self.templates = config, reads, store, actions, templates
        self._registry: Any = None

    # -- rendering --------------------------------------------------------------------------

    def page(self, request: Request, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        csrf = request.cookies.get(security.CSRF_COOKIE) or security.new_csrf_token()
        html = self.templates.get_template(template).render(
            allow_actions=self.actions is not None,
            csrf=csrf,
            path=request.url.path,
            stats_age=self.reads.stats_max_age,
            **values,
        )
        response = HTMLResponse(html, status)
        if csrf != request.cookies.get(security.CSRF_COOKIE):  # a browser's first page: its CSRF cookie
            response.set_cookie(security.CSRF_COOKIE, csrf, httponly=True, samesite="strict")
        return response

    def guarded(self, request: Request, render: Callable[[], Response]) -> Response:
        """Render, or an error page whose status says what went wrong."""
        try:
            return render()
        except UnknownMachine as exc:  # a misspelt type: the page names the installed ones
            explained = self.reads.explained(exc, request.path_params.get("machine"))
            return self.page(request, "error.html", 404, error=explained)
        except UnknownInstance as exc:
            return self.page(request, "error.html", 404, error=exc)
        except InvalidArgument as exc:
            return self.page(request, "error.html", 400, error=exc)
        except AccessDenied as exc:
            return self.page(
                request,
                "error.html",
                403,
                error=exc,
                hint=(
                    "the console's account may not read this: give it the reporting role (`pyfsm grant --reporting`) "
                    "and run `pyfsm migrate` so that it gets the views of revision 0013"
                ),
            )
        except DatabaseUnavailable as exc:
            return self.page(request, "error.html", 503, error=exc)
        except FsmError as exc:
            return self.page(request, "error.html", 500, error=exc)

    # -- pages ------------------------------------------------------------------------------

    def index(self, request: Request) -> Response:
        def render() -> Response:
            self.store.gateway.ensure_schema()  # a schema this pyfsm does not match says so, with the fix
            return self.page(request, "index.html", machines=self.reads.machines(), lag=self.reads.outbox_lag())

        return self.guarded(request, render)

    def machine(self, request: Request) -> Response:
        def render() -> Response:
            name = check_machine_name(request.path_params["machine"])
            p = request.query_params
            key = (p.get("key") or "").strip()
            if key:
                return RedirectResponse(f"/m/{name}/i/{quote(key, safe='')}", 303)
            filters = Filters(
                state=_name_or_none(p.get("state"), "state"),
                status=_choice(p.get("status"), STATUSES, "status"),
                lookup_key=p.get("lookup_key") or None,
                updated_after=parse_time(p.get("updated_after"), "updated after"),
                updated_before=parse_time(p.get("updated_before"), "updated before"),
                before_id=_int_or_none(p.get("before"), "before"),
            )
            machine = self.reads.machine(name)
            page = self.reads.instances(name, filters)
            query = {k: v for k, v in p.items() if v and k != "before"}
            current_version = self.reads.current_version(name)
            versions = self.reads.version_counts(name, current_version)
            # the diagram draws the current definition; states an older version still holds
            # instances in are listed apart (a renamed or dropped state)
            counts, elsewhere = diagram.drawn_counts(machine, self.reads.state_counts(name))
            return self.page(
                request,
                "machine.html",
                name=name,
                machine=machine,
                current_version=current_version,
                unreachable=machine.unreachable_states(),
                counts=counts,
                elsewhere=elsewhere,
                # said on the page instead of linking an image that cannot be drawn here
                diagram_problem=diagram.graphviz_missing(),
                stats=self.reads.stats(name),
                filters=filters,
                # shown only while instances of an older version are left (an upgrade moves them)
                versions=versions if any(v["instances"] and not v["is_current"] for v in versions) else [],
                versions_age=self.reads.version_counts_max_age,
                page=page,
                statuses=STATUSES,
                query=query,
                next_url=None
                if page.next_before is None
                else f"/m/{name}?{urlencode({**query, 'before': page.next_before})}",
                mermaid=diagram.mermaid(machine),
            )

        return self.guarded(request, render)

    def diagram(self, request: Request) -> Response:
        def render() -> Response:
            name = check_machine_name(request.path_params["machine"])
            machine = self.reads.machine(name)
            # the current definition's states only: an older version's are said on the page
            counts, _elsewhere = diagram.drawn_counts(machine, self.reads.state_counts(name))
            try:
                # served as an image, which a browser never lets run script
                svg = diagram.render(diagram.dot(machine, state_counts=counts), "svg")
            except GraphvizUnavailable as exc:  # not installed, or dot failed: its own words
                return PlainTextResponse(str(exc), 404)
            return Response(svg, media_type="image/svg+xml")

        return self.guarded(request, render)

    def instance(self, request: Request) -> Response:
        def render() -> Response:
            name = check_machine_name(request.path_params["machine"])
            key = request.path_params["key"]
            before = _int_or_none(request.query_params.get("history_before"), "history_before")
            machine = self.reads.machine(name)  # first: a type that is not defined is UnknownMachine
            view = self.reads.instance(name, key, history_before=before)
            if view is None:
                raise UnknownInstance(f"no {name} instance has the key {key!r:.200}", machine=name, key=key)
            state, version = view.instance["current_state"], int(view.instance["definition_version"])
            current_version = self.reads.current_version(name)
            # the instance's own definition version: an older one may have other rules and guards
            of_version = machine if version == current_version else self.reads.machine(name, version)
            data = view.instance["data"]  # parsed by Reads.instance
            view.events = evaluate_events(
                (
                    (event, edge.target, edge.guard)
                    for event in of_version.events_from(state)
                    for edge in of_version.rules(state, event)
                ),
                data if isinstance(data, dict) else {},
            )
            failure = None  # what failed it: the newest error of its state (none: ctx.fail() or SQL failed it)
            if view.instance["status"] == "failed":
                failure = next((e for e in view.errors if e["state"] == view.instance["current_state"]), None)
            return self.page(
                request,
                "instance.html",
                name=name,
                key=key,
                v=view,
                failure=failure,
                current_version=current_version,
                result=self._result(request),
            )

        return self.guarded(request, render)

    def failed(self, request: Request) -> Response:
        def render() -> Response:
            machines = self.reads.stats_rows()
            chosen = request.query_params.get("machine")
            shown = [m for m in machines if chosen in (None, "", m["machine"])]
            before = _int_or_none(request.query_params.get("before"), "before")
            pages = [
                (m, self.reads.failed(m["machine"], before if chosen else None)) for m in shown if m["failed"] or chosen
            ]
            return self.page(request, "failed.html", pages=pages, chosen=chosen)

        return self.guarded(request, render)

    def stuck(self, request: Request) -> Response:
        def render() -> Response:
            machines = self.reads.stats_rows()
            # every type, not only those the stats show runs due for: the stats may be 5 s old
            runs = [(m, self.reads.stuck(m["machine"], self.config.stuck_after)) for m in machines]
            return self.page(request, "stuck.html", runs=runs, stuck_after=self.config.stuck_after)

        return self.guarded(request, render)

    def queue(self, request: Request) -> Response:
        def render() -> Response:
            machines = self.reads.stats_rows()
            queues = [(m, self.reads.queue(m["machine"])) for m in machines if m["due"] or m["claimed"]]
            return self.page(request, "queue.html", machines=machines, queues=queues, claimers=self.reads.claimers())

        return self.guarded(request, render)

    def locks(self, request: Request) -> Response:
        return self.guarded(
            request, lambda: self.page(request, "locks.html", locks=self.reads.locks(), result=self._result(request))
        )

    def outbox(self, request: Request) -> Response:
        return self.guarded(
            request,
            lambda: self.page(
                request,
                "outbox.html",
                lag=self.reads.outbox_lag(),
                parked=self.reads.parked(),
                oldest=self.reads.oldest_unpublished(),
                result=self._result(request),
            ),
        )

    def timers(self, request: Request) -> Response:
        def render() -> Response:
            p = request.query_params
            chosen = check_machine_name(p["machine"]) if p.get("machine") else None
            overdue = p.get("overdue") == "1"
            after_id = _int_or_none(p.get("after_id"), "after_id")
            after_due = parse_time(p.get("after_due"), "after_due")
            after = (after_due, after_id) if after_due is not None and after_id is not None else None
            page = self.reads.timers(chosen, overdue=overdue, after=after)
            query = {k: v for k, v in (("machine", chosen), ("overdue", "1" if overdue else None)) if v}
            next_url = (
                None
                if page.next_after is None
                else "/timers?"
                + urlencode({**query, "after_due": page.next_after[0].isoformat(), "after_id": page.next_after[1]})
            )
            installed = [m["machine"] for m in self.reads.stats_rows()]
            return self.page(
                request,
                "timers.html",
                page=page,
                chosen=chosen,
                overdue=overdue,
                machines=installed,
                summary=self.reads.timer_summary(chosen),
                log=self.reads.timer_log(chosen),
                next_url=next_url,
                back="/timers" + ("?" + urlencode(query) if query else ""),
                result=self._result(request),
            )

        return self.guarded(request, render)

    def metrics(self, request: Request) -> Response:
        from ..metrics import server as metrics  # prometheus_client: imported by the route that needs it

        if self._registry is None:
            self._registry = metrics.database_registry(self.store, stuck_after=self.config.stuck_after)
        body, content_type = metrics.exposition(self._registry)
        return Response(body, media_type=content_type)

    def _result(self, request: Request) -> Any:
        action = _int_or_none(request.query_params.get("action"), "action")
        return self.reads.operator_action(action) if action else None

    # -- login ------------------------------------------------------------------------------

    async def login(self, request: Request) -> Response:
        target = _local(request.query_params.get("next") or "/")
        if self.config.token is None:
            return RedirectResponse(target, 303)
        if request.method == "POST":
            form = await request.form()
            if not security.csrf_ok(request, str(form.get("csrf") or "")):
                return self.page(request, "login.html", 403, target=target, error="the form expired: try again")
            if not security.token_matches(str(form.get("token") or ""), self.config.token):
                return self.page(request, "login.html", 401, target=target, error="wrong token")
            response = RedirectResponse(target, 303)
            response.set_cookie(
                security.SESSION_COOKIE, security.session_value(self.config.token), httponly=True, samesite="strict"
            )
            return response
        return self.page(request, "login.html", target=target, error=None)

    # -- actions ----------------------------------------------------------------------------

    def confirm(self, request: Request) -> Response:
        """The confirmation page of an action: what it will do, the operator's name, the arguments."""

        def render() -> Response:
            if self.actions is None:
                return self.page(request, "error.html", 403, error=_actions_off())
            p = request.query_params
            action = _choice(p.get("action"), ACTIONS, "action")
            if action is None:
                raise InvalidArgument("which action? (action=...)")
            fields = ("machine", "key", "lookup_key", "scope", "outbox_id", "timer_id", "back")
            target: dict[str, Any] = {k: p.get(k) for k in fields}
            events: list[str] = []
            if action == "send":
                name = check_machine_name(target["machine"])
                state = self.reads.current_state(name, target["key"] or "")
                if state is None:
                    raise UnknownInstance(f"no {name} instance has the key {target['key']!r:.200}", machine=name)
                events = self.reads.machine(name).events_from(state)
            if action == "unpark":
                found = self.reads.outbox_row(_int(target["outbox_id"], "outbox_id"))
                target["event"] = found
            if action == "cancel_timer":
                target["timer"] = self.reads.timer(_int(target["timer_id"], "timer_id"))
            return self.page(
                request,
                "confirm.html",
                action=action,
                t=target,
                events=events,
                operator=request.cookies.get(OPERATOR_COOKIE, ""),
            )

        return self.guarded(request, render)

    async def action(self, request: Request) -> Response:
        form = await request.form()
        if self.actions is None:
            return self.page(request, "error.html", 403, error=_actions_off())
        if not security.csrf_ok(request, str(form.get("csrf") or "")):
            return self.page(
                request,
                "error.html",
                403,
                error=InvalidArgument(
                    "the form's CSRF token does not match this browser's: reload the page and confirm again"
                ),
            )
        values = {k: str(v) for k, v in form.items()}
        try:
            operator = check_operator(values.get("operator", "").strip())
            action, machine, key, detail, back = _action_arguments(values)
        except FsmError as exc:
            return self.page(request, "error.html", 400, error=exc)
        try:
            outcome = await run_in_threadpool(self.actions.run, operator, action, machine, key, detail)
        except FsmError as exc:  # the log itself could not be written: nothing ran
            return self.page(request, "error.html", 503 if isinstance(exc, DatabaseUnavailable) else 500, error=exc)
        sep = "&" if "?" in back else "?"
        response = RedirectResponse(f"{back}{sep}action={outcome.action_id}", 303)
        response.set_cookie(OPERATOR_COOKIE, quote(operator, safe=""), httponly=True, samesite="strict")
        return response


def _action_arguments(v: dict[str, str]) -> tuple[str, str | None, str | None, dict[str, Any], str]:
    """Check a confirmed action's form: (action, machine, key, detail for the log, page to return to)."""
    action = _choice(v.get("action"), ACTIONS, "action")
    if action is None:
        raise InvalidArgument("which action? (action=...)")
    back = _local(v.get("back") or "/")
    if action == "unpark":
        return (
            action,
            None,
            None,
            {"outbox_id": _int(v.get("outbox_id"), "outbox_id"), "skip": v.get("skip") == "1"},
            back,
        )
    if action == "cancel_timer":  # Actions.run logs the timer's own machine and instance
        timer_id = _int(v.get("timer_id"), "timer_id")
        if timer_id < 1:
            raise InvalidArgument("timer_id must be a positive integer")
        cancel = {"timer_id": timer_id, "reason": v.get("reason", "").strip() or None}
        return action, None, None, cancel, _local(v.get("back") or "/timers")
    if action == "force_unlock":
        reason = v.get("reason", "").strip()
        if not reason:
            raise InvalidArgument("give a reason for releasing the lock (it is recorded in fsm_lock_log)")
        scope = v.get("scope") or None
        if scope not in (None, "*"):
            check_machine_name(scope)
        return (
            action,
            v.get("machine") or None,
            v.get("key") or None,
            {"lookup_key": v.get("lookup_key", ""), "scope": scope, "reason": reason},
            back,
        )
    machine = check_machine_name(v.get("machine"))
    key = v.get("key") or ""
    if not key:
        raise InvalidArgument("which instance? (key=...)")
    back = f"/m/{machine}/i/{quote(key, safe='')}"
    if action != "send":
        return action, machine, key, {}, back
    event = _name_or_none(v.get("event"), "event")
    if event is None:
        raise InvalidArgument("choose the event to send")
    detail: dict[str, Any] = {"event": event}
    data = parse_json_object(v.get("data"), "data")
    metadata = parse_json_object(v.get("metadata"), "metadata")
    if data is not None:
        detail["data"] = data
    if metadata is not None:
        detail["metadata"] = metadata
    return action, machine, key, detail, back


def _actions_off() -> InvalidArgument:
    return InvalidArgument("actions are off: start the console with --allow-actions (and --actions-dsn)")


def _local(target: str) -> str:
    """A redirect target on this console only (never //host or a scheme)."""
    return target if target.startswith("/") and not target.startswith("//") and "\\" not in target else "/"


def _name_or_none(value: str | None, what: str) -> str | None:
    return check_name(what, value) if value else None


def _choice(value: str | None, choices: tuple[str, ...], what: str) -> str | None:
    if not value:
        return None
    if value not in choices:
        raise InvalidArgument(f"{what} must be one of {', '.join(choices)}, got {value!r:.40}")
    return value


def _int(value: str | None, what: str) -> int:
    found = _int_or_none(value, what)
    if found is None:
        raise InvalidArgument(f"{what} is required")
    return found


def _int_or_none(value: str | None, what: str) -> int | None:
    if value is None or value == "":
        return None
    if not value.isdigit() or len(value) > 19:
        raise InvalidArgument(f"{what} must be a positive integer, got {value!r:.40}")
    return int(value)


def _count(n: int, word: str) -> str:
    """``n`` and ``word``, plural unless n is 1: "1 instance", "1,200 instances", "0 instances"."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _sql_string(value: Any) -> str:
    """``value`` as a MySQL string literal, to show in a statement an operator may copy."""
    return "'" + str(value).replace("\\", "\\\\").replace("'", "''") + "'"


def _when(value: Any) -> str:
    return "" if value is None else str(value)[:23]


def _pretty(value: Any) -> str:
    import json

    return json.dumps(value, indent=1, ensure_ascii=False, sort_keys=True, default=str)
