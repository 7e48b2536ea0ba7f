"""`pyfsm` commands on the schema: migrate, check, install (define), sync, grant."""

from __future__ import annotations

import argparse
import secrets
from pathlib import Path
from typing import Any

from .. import attach_health, db
from ..attach import DEFAULT_BATCH
from ..attach_health import AttachmentHealth
from ..definition import Machine
from ..definition_file import AttachSection, Definition, load_definitions
from ..engine.process import Process
from ..errors import FsmError, InvalidArgument
from ..schema import install as schema
from ..schema.grants import Account, exists, grant
from ..store import Store
from .attachments import adopt_with_progress, adoption_lines, describe
from .attachments import left_behind as rows_left_behind
from .common import Add, Progress, emit, env_password, load, plain, progress_flag, table

DEFINITION_SUFFIXES = (".yaml", ".yml", ".json")


def cmd_migrate(args: argparse.Namespace) -> None:
    settings = db.parse_dsn(args.dsn)
    created = schema.migrate(settings)  # creates the database first if the server has none of that name
    lines = [f"created database `{settings.database}` ({db.DATABASE_CHARSET})"] if created else []
    emit(
        args,
        {"revision": schema.HEAD_REVISION, "database_created": created},
        [*lines, f"pyfsm schema is at {schema.HEAD_REVISION}"],
    )


def cmd_check(args: argparse.Namespace) -> None:
    conn = db.connect(db.parse_dsn(args.dsn), timeouts=True)
    try:
        schema.check(conn)
        deprecated = schema.deprecated_present(conn)
        attachments = attach_health.check(conn)
    finally:
        conn.close()
    found = [
        {
            "name": name,
            "replaced_by": replaced_by,
            "deprecated_in": entry.deprecated_in,
            "removed_in": entry.removed_in,
            "level": "info",
        }
        for name, replaced_by, entry in deprecated
    ]
    lines = [f"pyfsm schema is at {schema.HEAD_REVISION}, as this pyfsm needs"]
    notes: list[dict[str, Any]] = []
    if attachments is None:  # the application's and reporting accounts may not read fsm_attachments
        text = "attached types not checked: this account may not read fsm_attachments (run it as the schema owner)"
        notes.append({"level": "info", "kind": "attachments_not_checked", "message": text})
        lines.append(f"info: {text}")
    else:
        lines += attachment_lines(attachments)
        if not all(a.ok for a in attachments):
            args.exit_code = 1
    if found:  # information, not a fault: every database has them, fresh or upgraded, until they go
        releases = sorted({d["removed_in"] for d in found})
        removes = f"{' and '.join(releases)} {'removes' if len(releases) == 1 else 'remove'}"
        text = (
            f"{len(found)} deprecated procedures are installed for compatibility (in every database, fresh or "
            f"migrated, until pyfsm {removes} them); nothing to do unless your own code or SQL calls "
            'them: then call the replacement instead (docs/sql-api.md, "Versions and retirement")'
        )
        notes.append({"level": "info", "kind": "deprecated_procedures", "count": len(found), "message": text})
        lines.append(f"info: {text}:")
        lines += [
            f"  {d['name']}: use {d['replaced_by']} (deprecated in {d['deprecated_in']}, removed in {d['removed_in']})"
            for d in found
        ]
    emit(
        args,
        {
            "revision": schema.HEAD_REVISION,
            "ok": attachments is None or all(a.ok for a in attachments),
            "notes": notes,
            "deprecated": found,
            "attachments": None if attachments is None else [attachment_fields(a) for a in attachments],
        },
        lines,
    )


def attachment_lines(attachments: list[AttachmentHealth]) -> list[str]:
    """One line per attached type (its table, key and state column, whether installed and
    adopted), then one line per problem, ``error: `` or ``warning: `` first."""
    lines = []
    for health in attachments:
        a = health.attachment
        status = {
            "installed": "installed" + (", every row adopted" if a.adopted else ""),
            "recorded": "recorded, not installed",
            "detached": "detached (its instances and history stay)",
        }[health.status]
        verdict = "" if health.status == "detached" else ": ok" if not health.problems else ""
        lines.append(f"attached: {describe(a)}: {status}{verdict}")
        lines += [f"{p.level}: {p.message}" for p in health.problems]
    return lines


def attachment_fields(health: AttachmentHealth) -> dict[str, Any]:
    return {
        **plain(health.attachment),
        "status": health.status,
        "ok": health.ok,
        "problems": [plain(p) for p in health.problems],
    }


def definitions_from(source: str) -> list[Definition]:
    """The machines a source names, each with its attach section: a definition file, or
    module.path:attribute (a Machine or Process, no attach section)."""
    if source.lower().endswith(DEFINITION_SUFFIXES) or Path(source).is_file():
        return load_definitions(source)
    found = load(source, Machine, Process)
    return [Definition(found.machine if isinstance(found, Process) else found)]


def cmd_install(args: argparse.Namespace) -> None:
    # all valid before any is stored
    definitions = [(source, d) for source in args.source for d in definitions_from(source)]
    results = []
    lines: list[str] = []
    bar = Progress(len(definitions), "installing", enabled=args.progress)
    with Store(args.dsn) as store:
        for n, (source, definition) in enumerate(definitions, 1):
            machine = definition.machine
            result = store.define(machine)
            results.append(
                {"machine": result.machine, "version": result.version, "changed": result.changed, "source": source}
            )
            lines.append(
                f"{result.machine}: version {result.version} "
                f"({'new version' if result.changed else 'unchanged'}) from {source}"
            )
            if result.version > 1:  # older versions may hold instances the new one does not move
                behind, line = left_behind(store, machine, result.version)
                results[-1].update(behind)
                lines += [line] if line else []
            if definition.attach is not None:
                fields, more, rows_left = attach_section(store, machine.name, definition.attach, args.progress)
                results[-1].update(fields)
                lines += more
                args.exit_code = 1 if rows_left else getattr(args, "exit_code", 0)
            bar.update(n)
    bar.close()
    if args.command == "define" and len(results) == 1 and not args.json:  # the 0.1 output, kept for scripts
        args.json = True
        emit(args, {k: results[0][k] for k in ("machine", "version", "changed")})
        return
    emit(args, results, lines)


def attach_section(
    store: Store, machine: str, section: AttachSection, progress: bool | None
) -> tuple[dict[str, Any], list[str], bool]:
    """A definition file's attach section applied as `pyfsm attach` does it: attach, then
    adopt the existing rows (unless ``adopt: false``, or the type was attached to this table
    already with every row adopted: the triggers have given each row since its instance).
    --json's fields, the lines, and whether rows were left without an instance (exit 1)."""
    before = store.attachment(machine)
    attachment = store.attach(
        machine,
        table=section.table,
        key=section.key,
        state=section.state,
        lookup=section.lookup,
        columns=section.columns,
        on_delete=section.on_delete,
    )
    lines = [f"  {describe(attachment)}: attached"]
    report = None
    if not section.adopt:
        lines.append(f"  existing rows not adopted (adopt: false): `pyfsm adopt {machine}` adopts them")
    elif before is not None and before.installed and before.adopted and before == attachment:
        lines.append("  attached so already, every row adopted: nothing to adopt")
    else:
        report = adopt_with_progress(store, machine, DEFAULT_BATCH, progress)
        lines += [f"  {line}" for line in adoption_lines(attachment, report)]
    fields = {"attachment": plain(attachment), "adoption": plain(report)}
    return fields, lines, report is not None and rows_left_behind(report)


def left_behind(store: Store, machine: Machine, version: int) -> tuple[dict[str, Any], str | None]:
    """The instances that stay on versions older than ``version`` (the current one) and the
    `pyfsm upgrade` that moves them, naming with ``--map OLD=NEW`` each state of theirs this
    version lacks (the upgrade's dry run says which): --json's fields and the line, or None
    when none stay. Counting reads the type's instance table; a failure to read is said in the
    line and does not fail the install, which is done."""
    try:
        counts = [c for c in store.version_counts(machine.name) if c.version != version and c.instances]
        if not counts:
            return {"older_instances": 0, "older_versions": [], "upgrade": None}, None
        plan = store.upgrade_instances(machine.name, dry_run=True)
    except FsmError as exc:
        return (
            {},
            f"  (instances on older versions not counted: {type(exc).__name__}: {exc}; `pyfsm stats` counts them)",
        )
    unmapped = sorted({g.from_state for g in plan.groups if g.outcome == "unmapped"})
    command = " ".join(["pyfsm upgrade", machine.name, *(f"--map {state}=NEW" for state in unmapped)])
    older = sum(c.instances for c in counts)
    per_version = ", ".join(f"version {c.version}: {c.instances}" for c in counts)
    choose = f", NEW one of {', '.join(machine.states)}" if unmapped else ""
    fields = {
        "older_instances": older,
        "older_versions": [{"version": c.version, "instances": c.instances} for c in counts],
        "upgrade": command,
    }
    line = (
        f"  {older} {'instance stays' if older == 1 else 'instances stay'} on older versions ({per_version}): "
        f"`{command}` moves them to version {version}{choose} (add --dry-run to see where each goes first)"
    )
    return fields, line


def cmd_sync(args: argparse.Namespace) -> None:
    with Store(args.dsn) as store:
        store.sync(args.machine)
    emit(
        args,
        {"machine": args.machine, "installed": True},
        f"tables, triggers, procedures and views of {args.machine} are installed",
    )


def cmd_grant(args: argparse.Namespace) -> None:
    wanted = [Account.parse(text, role) for role in ("app", "reporting", "relay") for text in getattr(args, role) or []]
    if not wanted:
        raise InvalidArgument("name at least one account: --app, --reporting or --relay (user or user@host)")
    password = env_password(args.password_env)
    conn = db.connect(db.parse_dsn(args.dsn), timeouts=True)
    try:
        schema.check(conn)
        passwords: dict[str, str] = {}
        generated: dict[str, str] = {}
        for account in wanted:
            key = f"{account.user}@{account.host}"
            if password is not None:
                passwords[key] = password
            elif (args.create or args.print_only) and not exists(conn, account):  # existing ones keep theirs
                # --print runs nothing: the CREATE USER it shows needs a password, which it shows as '***'
                passwords[key] = generated[key] = secrets.token_urlsafe(18)
        statements, created = grant(
            conn, wanted, passwords=passwords, set_existing=password is not None, dry_run=args.print_only
        )
    finally:
        conn.close()
    accounts = [
        {
            "user": a.user,
            "host": a.host,
            "role": a.role,
            "created": a in created,
            **(
                {"password": generated[f"{a.user}@{a.host}"]}
                if f"{a.user}@{a.host}" in generated and not args.print_only
                else {}
            ),
        }
        for a in wanted
    ]
    if args.print_only:
        # an account that does not exist yet is created by the first statement: with which
        # password is up to the run (--create or --password-env), so the print says so
        missing = [f"{a.user}@{a.host}" for a in created if f"{a.user}@{a.host}" in generated and not args.create]
        notes = [
            f"-- {key} does not exist: running this needs --create (a generated password) or --password-env VAR"
            for key in missing
        ]
        emit(args, {"statements": statements, "missing_accounts": missing}, [*notes, *(s + ";" for s in statements)])
        return
    lines = table(accounts, ["user", "host", "role", "created", "password"])
    if generated:
        lines.append("(generated passwords are shown once: store them now)")
    emit(args, {"accounts": accounts, "statements": statements}, lines)


def register(add: Add) -> None:
    add(
        "migrate",
        cmd_migrate,
        "install or upgrade pyfsm's schema (creates the DSN's database if the server has none of that name)",
        "pyfsm migrate --dsn mysql://root@127.0.0.1/app",
    )
    add(
        "check",
        cmd_check,
        "check that the schema matches this pyfsm and that each attached type still fits its table (exit status "
        "1 if one does not), and list deprecated procedures still installed",
        "pyfsm check",
    )
    for name, text in (
        (
            "install",
            "store machine definitions (YAML/JSON files or Python objects) and create their "
            "tables, triggers, procedures and views",
        ),
        ("define", "the same as install (kept from pyfsm 0.1)"),
    ):
        p = add(
            name,
            cmd_install,
            text,
            "pyfsm install examples/order.yaml\n"
            "  pyfsm install machines.json myapp.machines:refund myapp.processes:checkout",
        )
        p.add_argument(
            "source",
            nargs="+",
            help="a .yaml/.yml/.json definition file, or module.path:attribute of a pyfsm.Machine or pyfsm.Process",
        )
        progress_flag(p)
    add(
        "sync",
        cmd_sync,
        "create the tables, triggers and views of a machine a DBA defined in SQL, or render a "
        "version a DBA added into its transition trigger (`pyfsm types` says when)",
        "pyfsm sync order",
    ).add_argument("machine", help="machine name")
    g = add(
        "grant",
        cmd_grant,
        "create least-privilege accounts: app (EXECUTE the procedures only), reporting "
        "(SELECT the views only), relay (the outbox only); run as the schema owner",
        "PW=s3cret pyfsm grant --app shop_app --reporting analyst@10.0.% --password-env PW\n"
        "  pyfsm grant --app shop_app --create          # generates and prints a password\n"
        "  pyfsm grant --app shop_app --print           # only print the SQL",
    )
    for role, text in (
        ("app", "an application account: user or user@host (host default %%)"),
        ("reporting", "a reporting account"),
        ("relay", "a Kafka relay account"),
    ):
        g.add_argument(f"--{role}", action="append", metavar="USER[@HOST]", help=text)
    g.add_argument(
        "--password-env",
        metavar="VAR",
        help="the accounts' password, from this environment variable: "
        "missing accounts are created with it, existing ones get it",
    )
    g.add_argument(
        "--create",
        action="store_true",
        help="create missing accounts with generated passwords (printed once); existing accounts keep theirs",
    )
    g.add_argument("--print", dest="print_only", action="store_true", help="print the SQL instead of running it")
