"""`modelgate`: the operator command line. Every change goes through the service layer."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import orjson

from modelgate.config import Settings, load_settings
from modelgate.errors import GatewayError

Handler = Callable[[Any, argparse.Namespace], Awaitable[Any]]


class CliError(Exception):
    """A problem with what the operator typed; printed without a traceback."""


# --- output ---------------------------------------------------------------


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ",".join(_cell(v) for v in value) or "-"
    if hasattr(value, "isoformat"):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return str(value)


def print_table(rows: Sequence[Any], columns: Sequence[tuple[str, Callable[[Any], Any]]]) -> None:
    if not rows:
        print("(none)")
        return
    cells = [[_cell(get(row)) for _, get in columns] for row in rows]
    widths = [max(len(title), *(len(r[i]) for r in cells)) for i, (title, _) in enumerate(columns)]
    print("  ".join(title.ljust(w) for (title, _), w in zip(columns, widths)).rstrip())
    for r in cells:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


def emit(args: argparse.Namespace, data: Any, human: Callable[[], None]) -> None:
    if args.json:
        sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        human()


def _attr(name: str) -> Callable[[Any], Any]:
    return lambda row: getattr(row, name)


USER_COLUMNS = [("ID", _attr("id")), ("USERNAME", _attr("username")), ("ROLE", _attr("role")),
                ("ENABLED", _attr("enabled")), ("CREATED", _attr("created_at"))]
APP_COLUMNS = [("ID", _attr("id")), ("NAME", _attr("name")), ("TIMEOUT_S", _attr("timeout_seconds")),
               ("ENABLED", _attr("enabled")), ("CHANNELS", _attr("channel_ids")),
               ("DESCRIPTION", _attr("description"))]
KEY_COLUMNS = [("ID", _attr("id")), ("APP", _attr("application_id")), ("NAME", _attr("name")),
               ("PREFIX", _attr("prefix")), ("STATUS", _attr("status")), ("RATE_CAP", _attr("rate_capacity")),
               ("RATE_REFILL", _attr("rate_refill_per_second")), ("LAST_USED", _attr("last_used_at"))]
PROVIDER_COLUMNS = [("ID", _attr("id")), ("NAME", _attr("name")), ("KIND", _attr("kind")),
                    ("BASE_URL", _attr("base_url")), ("ENABLED", _attr("enabled")),
                    ("KEYS", lambda p: [f"{k.id}:…{k.hint or '?'}{'' if k.enabled else '(off)'}" for k in p.keys])]
CHANNEL_COLUMNS = [("ID", _attr("id")), ("NAME", _attr("name")), ("PROVIDER", _attr("provider_name")),
                   ("PRIORITY", _attr("priority")), ("WEIGHT", _attr("weight")), ("ENABLED", _attr("enabled")),
                   ("MODELS", lambda c: [m.model_id for m in c.models])]
MODEL_COLUMNS = [("ID", _attr("id")), ("CHANNEL", _attr("channel_id")), ("MODEL", _attr("model_id")),
                 ("UPSTREAM", _attr("upstream_model")), ("STATE", _attr("state")),
                 ("OWNED_BY", _attr("owned_by")), ("CAPABILITIES", _attr("capabilities"))]
BLACKLIST_COLUMNS = [("ID", _attr("id")), ("CIDR", _attr("cidr")), ("REASON", _attr("reason")),
                     ("CREATED", _attr("created_at"))]
CALL_COLUMNS = [("TIME", _attr("created_at")), ("TRACE_ID", _attr("trace_id")), ("KEY", _attr("api_key_id")),
                ("MODEL", _attr("model")), ("STATUS", _attr("status")), ("ERROR", _attr("error_code")),
                ("MS", lambda r: round(r.latency_ms)), ("IN", _attr("prompt_tokens")),
                ("OUT", _attr("completion_tokens"))]


def emit_secret(args: argparse.Namespace, record: dict[str, Any], plaintext: str, heading: str, advice: str) -> None:
    """A secret shown once: alone with --quiet (for `X=$(modelgate ... --quiet)`), else framed."""
    def human() -> None:
        if args.quiet:
            print(plaintext)
            return
        print(heading)
        print(f"\n    {plaintext}\n")
        print(advice)

    emit(args, {**record, "plaintext": plaintext}, human)


def _lister(columns: list) -> Callable[[argparse.Namespace, Any], None]:
    def show(args: argparse.Namespace, rows: Any) -> None:
        emit(args, rows, lambda: print_table(rows, columns))

    return show


def _print_page(page: Any, columns: list) -> None:
    print_table(page.items, columns)
    print(f"({len(page.items)} of {page.total})")


# --- handlers ----------------------------------------------------------------


async def user_create(svc: Any, args: argparse.Namespace) -> None:
    password, generated = args.password, False
    if password is None:
        if sys.stdin.isatty():
            password = getpass.getpass("Password: ")
            if getpass.getpass("Repeat password: ") != password:
                raise CliError("passwords do not match")
        else:
            from modelgate.services.users import generate_password

            password, generated = generate_password(), True
    user = await svc.users.create(args.username, password, role=args.role)
    data = {"user": user, "password": password} if generated else user
    emit(args, data, lambda: print(
        f"Created user {user.username!r} (id {user.id}, {user.role})"
        + (f"\nPassword: {password}\nShown once; store it now." if generated else "")
    ))


async def user_list(svc: Any, args: argparse.Namespace) -> None:
    _lister(USER_COLUMNS)(args, await svc.users.list())


async def user_delete(svc: Any, args: argparse.Namespace) -> None:
    await svc.users.delete(args.user)
    emit(args, {"deleted": args.user}, lambda: print(f"Deleted user {args.user}"))


async def app_create(svc: Any, args: argparse.Namespace) -> None:
    app = await svc.applications.create(args.name, description=args.description, timeout_seconds=args.timeout)
    emit(args, app, lambda: print(f"Created application {app.name!r} (id {app.id}, timeout {app.timeout_seconds:g}s)"))


async def app_list(svc: Any, args: argparse.Namespace) -> None:
    _lister(APP_COLUMNS)(args, await svc.applications.list())


async def app_delete(svc: Any, args: argparse.Namespace) -> None:
    await svc.applications.delete(args.app)
    emit(args, {"deleted": args.app}, lambda: print(f"Deleted application {args.app} and its keys"))


async def app_authorize(svc: Any, args: argparse.Namespace) -> None:
    app = await svc.applications.authorize_channel(args.app, args.channel)
    emit(args, app, lambda: print(f"Application {app.name!r} may use channel {args.channel}"))


async def app_revoke(svc: Any, args: argparse.Namespace) -> None:
    app = await svc.applications.revoke_channel(args.app, args.channel)
    emit(args, app, lambda: print(f"Application {app.name!r} may no longer use channel {args.channel}"))


async def key_create(svc: Any, args: argparse.Namespace) -> None:
    created = await svc.api_keys.create(args.app, name=args.name or "",
                                        rate_capacity=args.rate_capacity, rate_refill=args.rate_refill)

    emit_secret(args, {"key": created.key}, created.plaintext,
                f"Created API key {created.key.id} for application {created.key.application_id}:",
                "Store it now: it cannot be shown again (only its hash is kept).")


async def key_list(svc: Any, args: argparse.Namespace) -> None:
    app = args.app if args.app else None
    _lister(KEY_COLUMNS)(args, await svc.api_keys.list(app, include_deleted=args.all))


def _key_status(action: str) -> Handler:
    async def handler(svc: Any, args: argparse.Namespace) -> None:
        key = await getattr(svc.api_keys, action)(args.id)
        emit(args, key, lambda: print(f"API key {key.id} is now {key.status}"))

    return handler


def _secrets(args: argparse.Namespace) -> list[str]:
    secrets = list(args.key or [])
    for var in args.key_env or []:
        value = os.environ.get(var)
        if not value:
            raise CliError(f"environment variable {var} is not set or empty")
        secrets.append(value)
    return secrets


def _options(pairs: list[str] | None) -> dict[str, Any] | None:
    if not pairs:
        return None
    options: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise CliError(f"--option expects NAME=VALUE, got {pair!r}")
        try:  # numbers, booleans and JSON objects keep their type
            options[name] = orjson.loads(value)
        except orjson.JSONDecodeError:
            options[name] = value
    return options


async def provider_add(svc: Any, args: argparse.Namespace) -> None:
    prov = await svc.providers.create(args.name, args.kind, base_url=args.base_url, options=_options(args.option),
                                      keys=_secrets(args))
    emit(args, prov, lambda: print(
        f"Created provider {prov.name!r} (id {prov.id}, kind {prov.kind}, {prov.base_url}, {len(prov.keys)} key(s))"
    ))


async def provider_list(svc: Any, args: argparse.Namespace) -> None:
    _lister(PROVIDER_COLUMNS)(args, await svc.providers.list())


async def provider_delete(svc: Any, args: argparse.Namespace) -> None:
    await svc.providers.delete(args.provider)
    emit(args, {"deleted": args.provider}, lambda: print(f"Deleted provider {args.provider}"))


async def provider_add_key(svc: Any, args: argparse.Namespace) -> None:
    secrets = _secrets(args)
    if not secrets:
        raise CliError("give --key or --key-env")
    added = [await svc.providers.add_key(args.provider, s, label=args.label or "") for s in secrets]
    emit(args, added, lambda: print("\n".join(f"Added upstream key {k.id} (…{k.hint or '?'})" for k in added)))


async def provider_remove_key(svc: Any, args: argparse.Namespace) -> None:
    await svc.providers.remove_key(args.provider, args.key_id)
    emit(args, {"deleted": args.key_id}, lambda: print(f"Removed upstream key {args.key_id}"))


def provider_kinds(args: argparse.Namespace) -> None:
    from modelgate.providers.registry import KINDS

    kinds = [{"kind": k.name, "label": k.label, "default_base_url": k.default_base_url,
              "key_required": k.key_required, "docs_url": k.docs_url} for k in KINDS.values()]
    emit(args, kinds, lambda: print_table(kinds, [
        ("KIND", lambda k: k["kind"]), ("LABEL", lambda k: k["label"]),
        ("DEFAULT_BASE_URL", lambda k: k["default_base_url"] or "(required)"),
        ("KEY", lambda k: "required" if k["key_required"] else "optional"),
    ]))


def _model_specs(values: list[str] | None, capabilities: list[str] | None) -> list[dict[str, Any]]:
    specs = []
    for value in values or []:
        model_id, sep, upstream = value.partition("=")
        spec: dict[str, Any] = {"model_id": model_id}
        if sep:
            spec["upstream_model"] = upstream
        if capabilities:
            spec["capabilities"] = capabilities
        specs.append(spec)
    return specs


async def channel_add(svc: Any, args: argparse.Namespace) -> None:
    ch = await svc.channels.create(args.name, args.provider, _model_specs(args.model, args.capability),
                                   priority=args.priority, weight=args.weight)
    emit(args, ch, lambda: print(
        f"Created channel {ch.name!r} (id {ch.id}) on provider {ch.provider_name!r}: "
        + (", ".join(m.model_id if m.model_id == m.upstream_model else f"{m.model_id}={m.upstream_model}"
                     for m in ch.models) or "no models")
    ))


async def channel_list(svc: Any, args: argparse.Namespace) -> None:
    _lister(CHANNEL_COLUMNS)(args, await svc.channels.list())


async def channel_delete(svc: Any, args: argparse.Namespace) -> None:
    await svc.channels.delete(args.channel)
    emit(args, {"deleted": args.channel}, lambda: print(f"Deleted channel {args.channel}"))


async def channel_add_model(svc: Any, args: argparse.Namespace) -> None:
    ch = await svc.channels.add_models(args.channel, _model_specs(args.model, args.capability))
    emit(args, ch, lambda: print(f"Channel {ch.name!r} serves {', '.join(m.model_id for m in ch.models)}"))


async def channel_remove_model(svc: Any, args: argparse.Namespace) -> None:
    ch = await svc.channels.remove_models(args.channel, args.model)
    emit(args, ch, lambda: print(f"Channel {ch.name!r} serves {', '.join(m.model_id for m in ch.models) or 'no models'}"))


async def model_list(svc: Any, args: argparse.Namespace) -> None:
    channel = args.channel if args.channel else None
    _lister(MODEL_COLUMNS)(args, await svc.models.list(channel=channel, state=args.state, model_id=args.model))


async def model_set_state(svc: Any, args: argparse.Namespace) -> None:
    mi = await svc.models.update(args.id, state=args.state)
    emit(args, mi, lambda: print(f"Model instance {mi.id} ({mi.model_id}) is now {mi.state}"))


async def breaker_recover(svc: Any, args: argparse.Namespace) -> None:
    channel: int | str = int(args.channel) if args.channel.isdigit() else args.channel
    ids = await svc.breakers.request_recovery(channel, args.endpoint, actor="the CLI")
    emit(args, {"recovered": ids}, lambda: print(
        f"Recovery of {', '.join(ids) or 'no endpoint'} requested; running gateways apply it at their next refresh"))


async def blacklist_add(svc: Any, args: argparse.Namespace) -> None:
    entry = await svc.blacklist.add(args.cidr, reason=args.reason or "")
    emit(args, entry, lambda: print(f"Blacklisted {entry.cidr} (id {entry.id})"))


async def blacklist_remove(svc: Any, args: argparse.Namespace) -> None:
    ref: int | str = int(args.entry) if args.entry.isdigit() else args.entry
    await svc.blacklist.remove(ref)
    emit(args, {"deleted": args.entry}, lambda: print(f"Removed {args.entry} from the blacklist"))


async def blacklist_list(svc: Any, args: argparse.Namespace) -> None:
    _lister(BLACKLIST_COLUMNS)(args, await svc.blacklist.list())


async def calls_list(svc: Any, args: argparse.Namespace) -> None:
    page = await svc.call_log.query(api_key_id=args.key, model=args.model, status=args.status,
                                    trace_id=args.trace_id, limit=args.limit, offset=args.offset)
    emit(args, page, lambda: _print_page(page, CALL_COLUMNS))


TOKEN_COLUMNS = [("ID", _attr("id")), ("NAME", _attr("name")), ("PREFIX", _attr("prefix")), ("ROLE", _attr("role")),
                 ("BY", _attr("created_by")), ("EXPIRES", _attr("expires_at")), ("LAST_USED", _attr("last_used_at")),
                 ("REVOKED", _attr("revoked_at"))]
AUDIT_COLUMNS = [("TIME", _attr("created_at")), ("ACTOR", _attr("actor")), ("VIA", _attr("via")),
                 ("ACTION", _attr("action")), ("TARGET", _attr("target")), ("STATUS", _attr("status")),
                 ("FROM", _attr("client_ip"))]


async def token_create(svc: Any, args: argparse.Namespace) -> None:
    user = await svc.users.get(args.user)
    created = await svc.admin_tokens.create(args.name, args.role, user.id, args.expires_days)

    emit_secret(args, {"token": created.token}, created.plaintext,
                f"Created API token {created.token.id} ({created.token.role}, acting as {user.username}):",
                "Store it now: it cannot be shown again. Send it as `Authorization: Bearer <token>`.")


async def token_list(svc: Any, args: argparse.Namespace) -> None:
    _lister(TOKEN_COLUMNS)(args, await svc.admin_tokens.list())


async def token_revoke(svc: Any, args: argparse.Namespace) -> None:
    token = await svc.admin_tokens.revoke(args.id)
    emit(args, token, lambda: print(f"API token {token.id} ({token.name}) is revoked"))


async def audit_list(svc: Any, args: argparse.Namespace) -> None:
    page = await svc.audit.query(actor=args.actor, action=args.action, limit=args.limit, offset=args.offset)
    emit(args, page, lambda: _print_page(page, AUDIT_COLUMNS))


def _config_env_names(data: Any) -> list[str]:
    providers = data.get("providers") if isinstance(data, dict) else None
    names = []
    for provider in providers if isinstance(providers, list) else []:
        for key in (provider.get("keys") or []) if isinstance(provider, dict) else []:
            if isinstance(key, dict) and isinstance(key.get("env"), str):
                names.append(key["env"])
    return names


def _read_config(path: str) -> tuple[Any, dict[str, str]]:
    """The config document and the values of the environment variables it names (those set)."""
    import yaml

    try:
        text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
        data = yaml.safe_load(text)
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise CliError(f"{path} is not valid YAML: {exc}") from None
    secrets = {name: os.environ[name] for name in _config_env_names(data) if os.environ.get(name)}
    return data, secrets


def _show_apply(args: argparse.Namespace, result: dict[str, Any]) -> None:
    def human() -> None:
        changes = result["changes"]
        if not changes:
            print(f"No changes: the gateway already matches {args.file}.")
            return
        print("\n".join(changes))
        if not result["applied"]:
            print(f"({len(changes)} change(s); dry run: nothing changed)")
            return
        print(f"Applied {len(changes)} change(s).")
        for key in result["createdKeys"]:
            print(f"New key {key['name']} of application {key['application']}: {key['plaintext']}")
        if result["createdKeys"]:
            print("Store new keys now: they cannot be shown again.")

    emit(args, result, human)


async def config_apply(svc: Any, args: argparse.Namespace) -> None:
    data, secrets = _read_config(args.file)
    result = await svc.declarative.apply(data, secrets, dry_run=args.dry_run)
    _show_apply(args, {"changes": result.changes, "applied": result.applied, "createdKeys": [
        {"application": k.application, "name": k.name, "plaintext": k.plaintext} for k in result.created_keys]})


def _write_export(args: argparse.Namespace, data: dict[str, Any]) -> None:
    import yaml

    if args.json:
        emit(args, data, lambda: None)
        return
    text = ("# modelgate configuration (modelgate export); upstream keys: set the named variables\n"
            + yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    if args.output:
        with open(args.output, "w", encoding="utf-8") as out:
            out.write(text)
        print(f"Wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)


async def config_export(svc: Any, args: argparse.Namespace) -> None:
    _write_export(args, await svc.declarative.export())


def remote_apply(args: argparse.Namespace) -> None:
    from modelgate import cli_remote

    data, secrets = _read_config(args.file)
    result = cli_remote.call(args.url, "POST", "/config/apply", {"config": data, "secrets": secrets},
                             query="dryRun=true" if args.dry_run else "")
    _show_apply(args, result)


def remote_export(args: argparse.Namespace) -> None:
    from modelgate import cli_remote

    _write_export(args, cli_remote.call(args.url, "GET", "/config/export"))


REMOTE = {config_apply: remote_apply, config_export: remote_export}


# --- commands that manage the process or schema -------------------------------


async def _migrate(settings: Settings) -> None:
    from modelgate.storage.db import Database

    db = Database.from_settings(settings)
    try:
        await db.migrate()
    finally:
        await db.dispose()


async def _prepare(settings: Settings) -> str | None:
    from modelgate.server import prepare  # what `serve` runs first: migrate, then the first admin

    return await prepare(settings)


async def _rotate_key(settings: Settings, new_value: str) -> int:
    """Re-encrypt every stored upstream key under `new_value`; in local mode the key file follows."""
    import base64

    from modelgate.auth.crypto import SecretBox, derive_key, key_file, load_encryption_key
    from modelgate.storage.db import Database
    from modelgate.storage.sealed import reseal, sealed_count

    new_raw = derive_key(new_value)
    db = Database.from_settings(settings)
    try:
        old = SecretBox(load_encryption_key(settings, may_generate=not await sealed_count(db)))
        count = await reseal(db, old, SecretBox(new_raw))
    finally:
        await db.dispose()
    if not settings.encryption_key:
        path = key_file(settings)
        tmp = path.with_suffix(".new")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(base64.urlsafe_b64encode(new_raw).decode() + "\n")
        os.replace(tmp, path)
    return count


async def _with_services(settings: Settings, handler: Handler, args: argparse.Namespace) -> None:
    from sqlalchemy import inspect

    from modelgate.auth.crypto import load_secret_box
    from modelgate.services import Services
    from modelgate.shared.config_version import ConfigVersion
    from modelgate.shared.redis_link import RedisLink
    from modelgate.storage.db import Database

    db = Database.from_settings(settings)
    # Running gateways learn of the CLI's changes through Redis at once (else at their next refresh).
    link = RedisLink(settings) if settings.redis_url else None
    try:
        async with db.engine.connect() as conn:
            migrated = await conn.run_sync(lambda c: inspect(c).has_table("alembic_version"))
        if not migrated:
            raise CliError("the database is not initialised; run `modelgate init` first")
        announce = ConfigVersion(link).announce if link is not None else None
        changed: list[bool] = []

        def on_change() -> Awaitable[None] | None:
            changed.append(True)
            return announce() if announce is not None else None

        services = Services(db, load_secret_box(settings), settings, on_change=on_change)
        status = 500
        try:
            await handler(services, args)
            status = 200
            if changed:  # a gateway on this host (same data_dir) applies it within a quarter second
                from modelgate.shared.change_marker import touch_change_marker

                touch_change_marker(settings)
        except GatewayError as err:
            status = err.status
            raise
        finally:
            action = getattr(args, "action", None)
            if action not in READ_ONLY_ACTIONS and args.command != "export" and not getattr(args, "dry_run", False):
                await services.audit.record(actor=f"cli ({_os_user()})", via="cli", status=status,
                                            action=" ".join(filter(None, ("cli", args.command, action))),
                                            target=_target(args))
    finally:
        await db.dispose()
        if link is not None:
            await link.close()


READ_ONLY_ACTIONS = frozenset({"list", "kinds"})


def _os_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name in this environment (some containers)
        return str(os.getuid())


def _target(args: argparse.Namespace) -> str:
    """The objects a CLI change named, without secrets (keys and passwords are left out)."""
    names = ("name", "username", "app", "channel", "provider", "user", "id", "key_id", "cidr", "entry", "file")
    return " ".join(f"{n}={getattr(args, n)}" for n in names if getattr(args, n, None) not in (None, ""))


# --- parser ---------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    # The global options are accepted before or after the subcommand. Below the top
    # level their default is SUPPRESS, so a subcommand does not reset what was given earlier.
    def global_options(suppress: bool) -> argparse.ArgumentParser:
        p = argparse.ArgumentParser(add_help=False)
        extra: dict[str, Any] = {"default": argparse.SUPPRESS} if suppress else {}
        p.add_argument("--config", metavar="FILE",
                       help="YAML config file (default: $MODELGATE_CONFIG or ./modelgate.yaml)", **extra)
        p.add_argument("--json", action="store_true", help="machine-readable JSON output", **extra)
        p.add_argument("--url", metavar="URL", help="act on a running gateway through its management API "
                       "(apply, export), with the token in $MODELGATE_TOKEN", **extra)
        return p

    common = global_options(suppress=True)
    parser = argparse.ArgumentParser(prog="modelgate", description="modelgate model gateway",
                                     parents=[global_options(suppress=False)])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def group(name: str, help_text: str) -> argparse._SubParsersAction:
        p = sub.add_parser(name, help=help_text, parents=[common])
        return p.add_subparsers(dest="action", required=True, metavar="ACTION")

    def cmd(parent: argparse._SubParsersAction, name: str, handler: Any, help_text: str, *, direct: bool = False):
        p = parent.add_parser(name, help=help_text, parents=[common])
        p.set_defaults(handler=handler, direct=direct)
        return p

    cmd(sub, "serve", None, "run the gateway server").set_defaults(special="serve")
    cmd(sub, "migrate", None, "create or upgrade the database schema").set_defaults(special="migrate")
    cmd(sub, "init", None, "migrate and create the first admin user").set_defaults(special="init")
    cmd(sub, "generate-key", None, "print a new random ENCRYPTION_KEY").set_defaults(special="generate-key")
    p = cmd(sub, "rotate-key", None, "re-encrypt every stored upstream key under a new ENCRYPTION_KEY")
    p.set_defaults(special="rotate-key")
    new_key = p.add_mutually_exclusive_group(required=True)
    new_key.add_argument("--new-key-env", metavar="VAR", help="read the new key from $VAR (keeps it out of shell history)")
    new_key.add_argument("--generate", action="store_true", help="generate the new key and print it once")

    users = group("user", "console users")
    p = cmd(users, "create", user_create, "create a console user")
    p.add_argument("--username", required=True)
    p.add_argument("--role", default="USER", type=str.upper, choices=["ADMIN", "USER"])
    p.add_argument("--password", help="prompted for (or generated when not on a terminal) if absent")
    cmd(users, "list", user_list, "list users")
    cmd(users, "delete", user_delete, "delete a user").add_argument("user", metavar="NAME_OR_ID")

    apps = group("app", "applications")
    p = cmd(apps, "create", app_create, "create an application")
    p.add_argument("--name", required=True)
    p.add_argument("--timeout", type=float, help="seconds for a whole call (default from settings)")
    p.add_argument("--description", default="")
    cmd(apps, "list", app_list, "list applications")
    cmd(apps, "delete", app_delete, "delete an application and its keys").add_argument("app", metavar="NAME_OR_ID")
    for name, handler, text in (("authorize", app_authorize, "allow an application to use a channel"),
                                ("revoke", app_revoke, "withdraw a channel from an application")):
        p = cmd(apps, name, handler, text)
        p.add_argument("--app", required=True, metavar="NAME_OR_ID")
        p.add_argument("--channel", required=True, metavar="NAME_OR_ID")

    keys = group("key", "gateway API keys")
    p = cmd(keys, "create", key_create, "create an API key (shown once)")
    p.add_argument("--app", required=True, metavar="NAME_OR_ID")
    p.add_argument("--name")
    p.add_argument("--rate-capacity", type=float, help="token bucket size (default: global setting)")
    p.add_argument("--rate-refill", type=float, help="tokens per second (default: global setting)")
    p.add_argument("--quiet", action="store_true", help="print only the key")
    p = cmd(keys, "list", key_list, "list API keys (prefix only)")
    p.add_argument("--app", metavar="NAME_OR_ID")
    p.add_argument("--all", action="store_true", help="include deleted keys")
    for name, action, text in (("enable", "enable", "enable a key"), ("disable", "disable", "disable a key"),
                               ("delete", "delete", "delete a key for good")):
        cmd(keys, name, _key_status(action), text).add_argument("id", type=int)

    providers = group("provider", "upstream providers")
    p = cmd(providers, "add", provider_add, "add a provider")
    p.add_argument("--name", required=True)
    p.add_argument("--kind", required=True, help="see `modelgate provider kinds`")
    p.add_argument("--base-url")
    p.add_argument("--key", action="append", help="upstream key (repeatable)")
    p.add_argument("--key-env", action="append", metavar="VAR", help="read an upstream key from $VAR (repeatable)")
    p.add_argument("--option", action="append", metavar="NAME=VALUE", help="kind-specific option (repeatable)")
    cmd(providers, "list", provider_list, "list providers (keys shown by hint only)")
    cmd(providers, "kinds", provider_kinds, "list the built-in provider kinds", direct=True)
    cmd(providers, "delete", provider_delete, "delete a provider").add_argument("provider", metavar="NAME_OR_ID")
    p = cmd(providers, "add-key", provider_add_key, "add upstream keys to a provider")
    p.add_argument("--provider", required=True, metavar="NAME_OR_ID")
    p.add_argument("--key", action="append")
    p.add_argument("--key-env", action="append", metavar="VAR")
    p.add_argument("--label")
    p = cmd(providers, "remove-key", provider_remove_key, "remove an upstream key")
    p.add_argument("--provider", required=True, metavar="NAME_OR_ID")
    p.add_argument("key_id", type=int)

    channels = group("channel", "channels (a provider with the models it serves)")
    p = cmd(channels, "add", channel_add, "add a channel")
    p.add_argument("--name", required=True)
    p.add_argument("--provider", required=True, metavar="NAME_OR_ID")
    p.add_argument("--model", action="append", metavar="ID[=UPSTREAM]", help="model served (repeatable)")
    p.add_argument("--capability", action="append", choices=["streaming", "functionCalling", "vision", "reasoning"],
                   help="capability of the given models (repeatable; default streaming)")
    p.add_argument("--priority", type=int, default=0, help="lower is tried first")
    p.add_argument("--weight", type=int, default=1, help="share within one priority")
    cmd(channels, "list", channel_list, "list channels")
    cmd(channels, "delete", channel_delete, "delete a channel").add_argument("channel", metavar="NAME_OR_ID")
    for name, handler, text in (("add-model", channel_add_model, "add models to a channel"),
                                ("remove-model", channel_remove_model, "remove models from a channel")):
        p = cmd(channels, name, handler, text)
        p.add_argument("--channel", required=True, metavar="NAME_OR_ID")
        p.add_argument("--model", action="append", required=True, metavar="ID[=UPSTREAM]" if name == "add-model" else "ID")
        if name == "add-model":
            p.add_argument("--capability", action="append", choices=["streaming", "functionCalling", "vision", "reasoning"])

    models = group("model", "model instances and their lifecycle state")
    p = cmd(models, "list", model_list, "list model instances")
    p.add_argument("--channel", metavar="NAME_OR_ID")
    p.add_argument("--state", type=str.upper, choices=["ACTIVE", "DEPRECATED", "DISABLED"])
    p.add_argument("--model")
    p = cmd(models, "set-state", model_set_state, "set a model instance's state (ACTIVE re-activates)")
    p.add_argument("id", type=int)
    p.add_argument("state", type=str.upper, choices=["ACTIVE", "DEPRECATED", "DISABLED"])

    blacklist = group("blacklist", "IP blacklist")
    p = cmd(blacklist, "add", blacklist_add, "block an address or CIDR network")
    p.add_argument("cidr")
    p.add_argument("--reason")
    cmd(blacklist, "remove", blacklist_remove, "unblock (by id or address)").add_argument("entry")
    cmd(blacklist, "list", blacklist_list, "list blocked addresses")

    breakers = group("breaker", "circuit breakers of upstream endpoints")
    p = cmd(breakers, "recover", breaker_recover, "force the breakers of a channel's endpoints closed")
    p.add_argument("--channel", required=True, metavar="NAME_OR_ID")
    p.add_argument("--endpoint", metavar="ID", help="only this endpoint (e.g. p1:k2)")

    p = cmd(sub, "apply", config_apply, "make the gateway match a configuration file (diff first)")
    p.add_argument("-f", "--file", required=True, help="gateway.yaml, or - for standard input")
    p.add_argument("--dry-run", action="store_true", help="only show the changes")
    p = cmd(sub, "export", config_export, "write the configuration in the apply format, without secrets")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE (default standard output)")

    tokens = group("token", "management API tokens (Authorization: Bearer mgt_...)")
    p = cmd(tokens, "create", token_create, "create a token (shown once)")
    p.add_argument("--name", required=True)
    p.add_argument("--role", default="ADMIN", type=str.upper, choices=["ADMIN", "USER"])
    p.add_argument("--user", default="admin", metavar="NAME_OR_ID", help="the admin it acts as (default admin)")
    p.add_argument("--expires-days", type=float, help="expire after this many days (default never)")
    p.add_argument("--quiet", action="store_true", help="print only the token")
    cmd(tokens, "list", token_list, "list tokens (prefix only)")
    cmd(tokens, "revoke", token_revoke, "revoke a token at once").add_argument("id", type=int)

    audit = group("audit", "the audit log of admin actions and logins")
    p = cmd(audit, "list", audit_list, "newest first")
    p.add_argument("--actor")
    p.add_argument("--action", help="part of the action, e.g. providers")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--offset", type=int, default=0)

    calls = group("calls", "the call log")
    p = cmd(calls, "list", calls_list, "newest calls first")
    p.add_argument("--key", type=int, help="API key id")
    p.add_argument("--model")
    p.add_argument("--status", type=int)
    p.add_argument("--trace-id")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--offset", type=int, default=0)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from modelgate.auth.crypto import ConfigError
    from modelgate.cli_remote import RemoteError

    args = build_parser().parse_args(argv)
    try:
        settings = load_settings(args.config)
        special = getattr(args, "special", None)
        if special == "serve":
            import modelgate.server

            if args.config:  # server workers load their settings again; point them at the same file
                os.environ["MODELGATE_CONFIG"] = os.path.abspath(args.config)

            modelgate.server.run(settings)
        elif special == "migrate":
            asyncio.run(_migrate(settings))
            emit(args, {"migrated": True}, lambda: print("Database schema is up to date."))
        elif special == "init":
            password = asyncio.run(_prepare(settings))
            emit(args, {"admin_password": password}, lambda: print(
                f"Created the first console user: admin / {password}\nThis password is shown once; change it after logging in."
                if password else "Database ready; users already exist, no admin created."
            ))
        elif special == "generate-key":
            from modelgate.auth.crypto import generate_key

            key = generate_key()
            emit(args, {"encryption_key": key}, lambda: print(key))
        elif special == "rotate-key":
            from modelgate.auth.crypto import generate_key

            new_value = generate_key() if args.generate else os.environ.get(args.new_key_env or "", "")
            if not new_value:
                raise CliError(f"environment variable {args.new_key_env} is not set or empty")
            count = asyncio.run(_rotate_key(settings, new_value))
            where = ("Set ENCRYPTION_KEY to the new key on every instance and restart them; until then running "
                     "instances keep the upstream keys they loaded but cannot load changes."
                     if settings.encryption_key else "The local key file now holds the new key; restart the gateway.")
            data = {"resealed": count, **({"encryption_key": new_value} if args.generate else {})}
            emit(args, data, lambda: print(
                f"Re-encrypted {count} upstream key(s) under the new key. {where}"
                + (f"\nNew ENCRYPTION_KEY (shown once): {new_value}" if args.generate else "")))
        elif args.direct:
            args.handler(args)
        elif getattr(args, "url", None):
            if args.handler not in REMOTE:
                raise CliError(f"--url works with: {', '.join(sorted(h.__name__.split('_')[1] for h in REMOTE))}")
            REMOTE[args.handler](args)
        else:
            asyncio.run(_with_services(settings, args.handler, args))
    except GatewayError as err:
        return _fail(args, err.code, f"error ({err.code}): {err.message}", err.message)
    except (CliError, RemoteError) as err:
        return _fail(args, "ERROR", f"error: {err}", str(err))
    except ConfigError as err:
        # Printed bare: operators and scripts look for the code itself (ENCRYPTION_KEY_MISSING).
        return _fail(args, str(err).split(":")[0], str(err), str(err))
    return 0


def _fail(args: argparse.Namespace, code: str, human: str, message: str) -> int:
    if args.json:
        sys.stdout.write(orjson.dumps({"error": {"code": code, "message": message}}).decode() + "\n")
    else:
        print(human, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
