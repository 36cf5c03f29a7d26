"""Declarative configuration: `modelgate apply -f gateway.yaml` and `modelgate export`.

The file lists providers, channels, applications (with their authorised channels and
named keys' rate limits) and the IP blacklist. Applying it makes what it lists match
the file, in a diff first: create what is missing, update what differs, leave
what the file does not mention (nothing is deleted). Applying the same file twice
changes nothing the second time. Upstream keys are never in the file: each names an
environment variable (`env:`), resolved by whoever applies (the CLI reads its own
environment, also when it applies through a server's API).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from sqlalchemy import select

from modelgate.errors import validation_error
from modelgate.services.blacklist import normalize_cidr
from modelgate.services.channels import DEFAULT_CAPABILITIES, Capability
from modelgate.storage.models import Provider, ProviderKey

_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UpstreamKeySpec(_Spec):
    env: str = Field(description="environment variable holding the upstream key")
    label: str | None = None  # identifies the key across applies; default: the variable's name
    enabled: bool = True

    @field_validator("env")
    @classmethod
    def _env_name(cls, value: str) -> str:
        if not _ENV_NAME.match(value):
            raise ValueError(f"{value!r} is not an environment variable name (A-Z, 0-9, _)")
        return value


class ProviderSpec(_Spec):
    name: str
    kind: str
    baseUrl: str | None = None  # None: the kind's default
    options: dict[str, Any] = Field(default_factory=dict)
    enabled: bool = True
    keys: list[UpstreamKeySpec] = Field(default_factory=list)


class ModelSpec(_Spec):
    id: str  # what callers ask for
    upstream: str | None = None  # what the provider is sent; default: the same
    ownedBy: str | None = None
    capabilities: list[Capability] | None = None


class ChannelSpec(_Spec):
    name: str
    provider: str
    models: list[str | ModelSpec] = Field(default_factory=list)  # "id" or "id=upstream" or an object
    priority: int = 0
    weight: int = Field(default=1, ge=1)
    enabled: bool = True


class KeySpec(_Spec):
    name: str
    rateCapacity: float | None = Field(default=None, gt=0)  # None: the global default
    rateRefillPerSecond: float | None = Field(default=None, gt=0)


class ApplicationSpec(_Spec):
    name: str
    description: str = ""
    timeout: float | None = Field(default=None, gt=0)  # seconds; None: the global default
    enabled: bool = True
    channels: list[str] = Field(default_factory=list)
    keys: list[KeySpec] = Field(default_factory=list)


class BlacklistSpec(_Spec):
    cidr: str
    reason: str = ""


class GatewayConfig(_Spec):
    version: Literal[1] = 1
    providers: list[ProviderSpec] = Field(default_factory=list)
    channels: list[ChannelSpec] = Field(default_factory=list)
    applications: list[ApplicationSpec] = Field(default_factory=list)
    ipBlacklist: list[BlacklistSpec] = Field(default_factory=list)


def parse_config(data: Any) -> GatewayConfig:
    if data is None:
        data = {}
    try:
        config = GatewayConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise validation_error(f"configuration: {where}: {first['msg']}") from None
    for what, items in (("provider", config.providers), ("channel", config.channels),
                        ("application", config.applications)):
        names = [i.name for i in items]
        if len(set(names)) != len(names):
            raise validation_error(f"configuration: a {what} name appears twice")
    return config


def _model(spec: str | ModelSpec) -> ModelSpec:
    if isinstance(spec, ModelSpec):
        return spec
    model_id, sep, upstream = spec.partition("=")
    return ModelSpec(id=model_id.strip(), upstream=upstream.strip() if sep else None)


@dataclass(slots=True)
class Change:
    text: str  # "+ provider mock", "~ channel main: priority 0 -> 1"
    run: Callable[[], Awaitable[Any]] = field(repr=False)


@dataclass(slots=True)
class CreatedKey:
    application: str
    name: str
    plaintext: str


@dataclass(slots=True)
class ApplyResult:
    changes: list[str]
    applied: bool
    created_keys: list[CreatedKey] = field(default_factory=list)


def _show(value: Any) -> str:
    return "(default)" if value is None else repr(value)


class DeclarativeService:
    def __init__(self, services: Any) -> None:
        self.svc = services

    async def apply(self, data: Any, secrets: Mapping[str, str], dry_run: bool = False) -> ApplyResult:
        """Plan every change first (nothing is written if any part is invalid), then run them in order."""
        config = parse_config(data)
        created: list[CreatedKey] = []
        changes = [*await self._providers(config, secrets), *await self._channels(config),
                   *await self._applications(config, created), *await self._blacklist(config)]
        if not dry_run:
            for change in changes:
                await change.run()
        return ApplyResult([c.text for c in changes], not dry_run, created)

    # --- planning ------------------------------------------------------------------

    async def _stored_keys(self) -> dict[int, list[ProviderKey]]:
        async with self.svc.ctx.tx() as s:
            keys = (await s.scalars(select(ProviderKey).order_by(ProviderKey.id))).all()
        out: dict[int, list[ProviderKey]] = {}
        for key in keys:
            out.setdefault(key.provider_id, []).append(key)
        return out

    async def _providers(self, config: GatewayConfig, secrets: Mapping[str, str]) -> list[Change]:
        from modelgate.services.providers import clean_base_url, provider_kind

        svc = self.svc.providers
        existing = {p.name: p for p in await svc.list()}
        stored = await self._stored_keys()
        changes: list[Change] = []
        for spec in config.providers:
            kind = provider_kind(spec.kind)  # 400 for an unknown kind, before anything changes
            base_url = spec.baseUrl if spec.baseUrl is not None else kind.default_base_url
            if base_url is None:
                raise validation_error(f"configuration: provider {spec.name!r} ({spec.kind}) needs a baseUrl")
            base_url = clean_base_url(base_url)
            wanted_keys = []
            for key in spec.keys:
                secret = secrets.get(key.env)
                if not secret:
                    raise validation_error(f"configuration: provider {spec.name!r}: environment variable "
                                           f"{key.env} is not set or empty")
                wanted_keys.append((key.label or key.env, secret.strip(), key.enabled))
            current = existing.get(spec.name)
            name = spec.name
            if current is None:
                changes.append(Change(f"+ provider {name} (kind {spec.kind}, {base_url})",
                                      partial(svc.create, spec.name, spec.kind, base_url=base_url,
                                              options=spec.options, enabled=spec.enabled)))
                for label, secret, enabled in wanted_keys:
                    changes.append(Change(f"+ upstream key {label} of provider {name}",
                                          self._add_key(name, secret, label, enabled)))
                continue
            if current.kind != spec.kind:
                raise validation_error(f"configuration: provider {name!r} exists with kind {current.kind!r}; "
                                       "a provider's kind cannot change (use another name)")
            diffs: dict[str, tuple[Any, Any]] = {}
            if current.base_url != base_url:
                diffs["base_url"] = (current.base_url, base_url)
            if current.options != spec.options:
                diffs["options"] = (current.options, spec.options)
            if current.enabled != spec.enabled:
                diffs["enabled"] = (current.enabled, spec.enabled)
            if diffs:
                changes.append(Change(
                    f"~ provider {name}: " + ", ".join(f"{k} {_show(a)} -> {_show(b)}" for k, (a, b) in diffs.items()),
                    partial(svc.update, name, **{k: b for k, (_, b) in diffs.items()})))
            by_label = {k.label: k for k in stored.get(current.id, [])}
            for label, secret, enabled in wanted_keys:
                have = by_label.get(label)
                if have is None:
                    changes.append(Change(f"+ upstream key {label} of provider {name}",
                                          self._add_key(name, secret, label, enabled)))
                elif self.svc.ctx.box.decrypt(have.secret_encrypted) != secret:
                    changes.append(Change(f"~ upstream key {label} of provider {name}: replaced (new value)",
                                          self._replace_key(name, have.id, secret, label, enabled)))
                elif have.enabled != enabled:
                    changes.append(Change(f"~ upstream key {label} of provider {name}: enabled {have.enabled} -> "
                                          f"{enabled}", partial(svc.set_key_enabled, name, have.id, enabled)))
        return changes

    def _add_key(self, provider: str, secret: str, label: str, enabled: bool) -> Callable[[], Awaitable[Any]]:
        async def run() -> None:
            key = await self.svc.providers.add_key(provider, secret, label=label)
            if not enabled:
                await self.svc.providers.set_key_enabled(provider, key.id, False)
        return run

    def _replace_key(self, provider: str, old_id: int, secret: str, label: str, enabled: bool
                     ) -> Callable[[], Awaitable[Any]]:
        add = self._add_key(provider, secret, label, enabled)

        async def run() -> None:
            await add()
            await self.svc.providers.remove_key(provider, old_id)
        return run

    async def _channels(self, config: GatewayConfig) -> list[Change]:
        svc = self.svc.channels
        existing = {c.name: c for c in await svc.list()}
        known_providers = {p.name for p in await self.svc.providers.list()} | {p.name for p in config.providers}
        changes: list[Change] = []
        for spec in config.channels:
            if spec.provider not in known_providers:
                raise validation_error(f"configuration: channel {spec.name!r}: unknown provider {spec.provider!r}")
            models = [_model(m) for m in spec.models]
            ids = [m.id for m in models]
            if len(set(ids)) != len(ids):
                raise validation_error(f"configuration: channel {spec.name!r}: a model id appears twice")
            current = existing.get(spec.name)
            name = spec.name
            if current is None:
                specs = [self._model_dict(m) for m in models]
                changes.append(Change(
                    f"+ channel {name} on {spec.provider}: " + (", ".join(_model_text(m) for m in models) or "no models"),
                    partial(svc.create, spec.name, spec.provider, specs, priority=spec.priority,
                            weight=spec.weight, enabled=spec.enabled)))
                continue
            diffs = {}
            if current.provider_name != spec.provider:
                diffs["provider"] = (current.provider_name, spec.provider)
            for attr in ("priority", "weight", "enabled"):
                if getattr(current, attr) != getattr(spec, attr):
                    diffs[attr] = (getattr(current, attr), getattr(spec, attr))
            if diffs:
                changes.append(Change(
                    f"~ channel {name}: " + ", ".join(f"{k} {_show(a)} -> {_show(b)}" for k, (a, b) in diffs.items()),
                    partial(svc.update, name, **{k: b for k, (_, b) in diffs.items()})))
            have = {m.model_id: m for m in current.models}
            missing = [m for m in models if m.id not in have]
            if missing:
                changes.append(Change(f"+ models of channel {name}: " + ", ".join(_model_text(m) for m in missing),
                                      partial(svc.add_models, name, [self._model_dict(x) for x in missing])))
            extra = [mid for mid in have if mid not in ids]
            if extra:
                changes.append(Change(f"- models of channel {name}: " + ", ".join(extra),
                                      partial(svc.remove_models, name, extra)))
            for m in models:
                instance = have.get(m.id)
                if instance is None:
                    continue
                update: dict[str, Any] = {}
                if instance.upstream_model != (m.upstream or m.id):
                    update["upstream_model"] = m.upstream or m.id
                if m.capabilities is not None and sorted(instance.capabilities) != sorted(m.capabilities):
                    update["capabilities"] = list(m.capabilities)
                if m.ownedBy is not None and instance.owned_by != m.ownedBy:
                    update["owned_by"] = m.ownedBy
                if update:
                    changes.append(Change(
                        f"~ model {m.id} of channel {name}: " + ", ".join(
                            f"{k} {_show(getattr(instance, k))} -> {_show(v)}" for k, v in update.items()),
                        partial(self.svc.models.update, instance.id, **update)))
        return changes

    @staticmethod
    def _model_dict(m: ModelSpec) -> dict[str, Any]:
        out: dict[str, Any] = {"model_id": m.id, "upstream_model": m.upstream or m.id}
        if m.capabilities is not None:
            out["capabilities"] = list(m.capabilities)
        if m.ownedBy is not None:
            out["owned_by"] = m.ownedBy
        return out

    async def _applications(self, config: GatewayConfig, created: list[CreatedKey]) -> list[Change]:
        svc = self.svc.applications
        existing = {a.name: a for a in await svc.list()}
        channels = {c.name: c.id for c in await self.svc.channels.list()}
        known_channels = set(channels) | {c.name for c in config.channels}
        default_timeout = self.svc.ctx.settings.gateway.default_app_timeout_seconds
        changes: list[Change] = []
        for spec in config.applications:
            unknown = [c for c in spec.channels if c not in known_channels]
            if unknown:
                raise validation_error(f"configuration: application {spec.name!r}: unknown channel {unknown[0]!r}")
            timeout = spec.timeout if spec.timeout is not None else default_timeout
            current = existing.get(spec.name)
            name = spec.name
            live_keys: dict[str, Any] = {}
            if current is None:
                changes.append(Change(f"+ application {name} (timeout {timeout:g}s)",
                                      partial(svc.create, spec.name, description=spec.description,
                                              timeout_seconds=timeout, enabled=spec.enabled)))
                authorised: set[str] = set()
            else:
                diffs: dict[str, tuple[Any, Any]] = {}
                if current.description != spec.description:
                    diffs["description"] = (current.description, spec.description)
                if current.timeout_seconds != timeout:
                    diffs["timeout_seconds"] = (current.timeout_seconds, timeout)
                if current.enabled != spec.enabled:
                    diffs["enabled"] = (current.enabled, spec.enabled)
                if diffs:
                    changes.append(Change(
                        f"~ application {name}: " + ", ".join(f"{k} {_show(a)} -> {_show(b)}"
                                                               for k, (a, b) in diffs.items()),
                        partial(svc.update, name, **{k: b for k, (_, b) in diffs.items()})))
                by_id = {v: k for k, v in channels.items()}
                authorised = {by_id[c] for c in current.channel_ids if c in by_id}
                live_keys = {k.name: k for k in await self.svc.api_keys.list(current.id) if k.name}
            for channel in spec.channels:
                if channel not in authorised:
                    changes.append(Change(f"+ application {name} may use channel {channel}",
                                          partial(svc.authorize_channel, name, channel)))
            for channel in sorted(authorised - set(spec.channels)):
                changes.append(Change(f"- application {name} may no longer use channel {channel}",
                                      partial(svc.revoke_channel, name, channel)))
            for key in spec.keys:
                have = live_keys.get(key.name)
                if have is None:
                    changes.append(Change(f"+ key {key.name} of application {name} (shown once)",
                                          self._create_key(name, key, created)))
                elif (have.rate_capacity, have.rate_refill_per_second) != (key.rateCapacity, key.rateRefillPerSecond):
                    changes.append(Change(
                        f"~ key {key.name} of application {name}: rate limit "
                        f"{_show(have.rate_capacity)}/{_show(have.rate_refill_per_second)} -> "
                        f"{_show(key.rateCapacity)}/{_show(key.rateRefillPerSecond)}",
                        partial(self.svc.api_keys.update_rate_limit, have.id, key.rateCapacity,
                                key.rateRefillPerSecond)))
        return changes

    def _create_key(self, app: str, key: KeySpec, created: list[CreatedKey]) -> Callable[[], Awaitable[Any]]:
        async def run() -> None:
            new = await self.svc.api_keys.create(app, name=key.name, rate_capacity=key.rateCapacity,
                                                 rate_refill=key.rateRefillPerSecond)
            created.append(CreatedKey(app, key.name, new.plaintext))
        return run

    async def _blacklist(self, config: GatewayConfig) -> list[Change]:
        have = {e.cidr for e in await self.svc.blacklist.list()}
        changes = []
        for spec in config.ipBlacklist:
            cidr = normalize_cidr(spec.cidr)
            if cidr not in have:
                have.add(cidr)
                changes.append(Change(f"+ blacklist {cidr}" + (f" ({spec.reason})" if spec.reason else ""),
                                      partial(self.svc.blacklist.add, cidr, reason=spec.reason)))
        return changes

    # --- export ----------------------------------------------------------------------

    async def export(self) -> dict[str, Any]:
        """The current configuration in the apply format; upstream keys as the variables to set."""
        from modelgate.providers.registry import KINDS

        stored = await self._stored_keys()
        providers = []
        async with self.svc.ctx.tx() as s:
            provider_rows = (await s.scalars(select(Provider).order_by(Provider.id))).all()
            for p in provider_rows:
                kind = KINDS.get(p.kind)
                entry: dict[str, Any] = {"name": p.name, "kind": p.kind}
                if kind is None or p.base_url != kind.default_base_url:
                    entry["baseUrl"] = p.base_url
                if p.options:
                    entry["options"] = dict(p.options)
                if not p.enabled:
                    entry["enabled"] = False
                keys = []
                for i, key in enumerate(stored.get(p.id, []), 1):
                    label = key.label or ""
                    env = label if _ENV_NAME.match(label) else _env_for(p.name, i)
                    ref: dict[str, Any] = {"env": env}
                    if label != env:
                        ref["label"] = label or env
                    if not key.enabled:
                        ref["enabled"] = False
                    keys.append(ref)
                if keys:
                    entry["keys"] = keys
                providers.append(entry)
        channels = []
        for c in await self.svc.channels.list():
            entry = {"name": c.name, "provider": c.provider_name, "models": [
                _export_model(m) for m in c.models]}
            if c.priority:
                entry["priority"] = c.priority
            if c.weight != 1:
                entry["weight"] = c.weight
            if not c.enabled:
                entry["enabled"] = False
            channels.append(entry)
        channel_names = {c.id: c.name for c in await self.svc.channels.list()}
        applications = []
        default_timeout = self.svc.ctx.settings.gateway.default_app_timeout_seconds
        for a in await self.svc.applications.list():
            entry = {"name": a.name}
            if a.description:
                entry["description"] = a.description
            if a.timeout_seconds != default_timeout:
                entry["timeout"] = a.timeout_seconds
            if not a.enabled:
                entry["enabled"] = False
            entry["channels"] = [channel_names[i] for i in a.channel_ids if i in channel_names]
            keys = []
            for k in await self.svc.api_keys.list(a.id):
                if not k.name:
                    continue  # only named keys can be matched again by apply
                named_key: dict[str, Any] = {"name": k.name}
                if k.rate_capacity is not None:
                    named_key["rateCapacity"] = k.rate_capacity
                if k.rate_refill_per_second is not None:
                    named_key["rateRefillPerSecond"] = k.rate_refill_per_second
                keys.append(named_key)
            if keys:
                entry["keys"] = keys
            applications.append(entry)
        blacklist = [{"cidr": e.cidr, **({"reason": e.reason} if e.reason else {})}
                     for e in await self.svc.blacklist.list()]
        return {"version": 1, "providers": providers, "channels": channels, "applications": applications,
                "ipBlacklist": blacklist}


def _env_for(provider: str, index: int) -> str:
    base = re.sub(r"[^A-Z0-9]+", "_", provider.upper()).strip("_") or "PROVIDER"
    return f"{base}_KEY_{index}"


def _model_text(m: ModelSpec) -> str:
    return m.id if not m.upstream or m.upstream == m.id else f"{m.id}={m.upstream}"


def _export_model(m: Any) -> Any:
    extra = sorted(m.capabilities) != sorted(DEFAULT_CAPABILITIES) or m.owned_by
    if not extra:
        return m.model_id if m.upstream_model == m.model_id else f"{m.model_id}={m.upstream_model}"
    out: dict[str, Any] = {"id": m.model_id}
    if m.upstream_model != m.model_id:
        out["upstream"] = m.upstream_model
    out["capabilities"] = list(m.capabilities)
    if m.owned_by:
        out["ownedBy"] = m.owned_by
    return out
