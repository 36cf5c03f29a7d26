"""Channels (a provider with the models it serves) and their model instances."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal, get_args

from sqlalchemy import select

from modelgate.errors import conflict, not_found, validation_error
from modelgate.services.context import ServiceContext, clean_name, fetch
from modelgate.services.views import ChannelView, ModelInstanceView
from modelgate.storage.models import Channel, ModelInstance, Provider

# `reasoning`: a reasoning model behind a chat-completions provider whatever its name
# (`max_completion_tokens`, `reasoning_effort`); OpenAI's and Azure's o-series and gpt-5 are known by name.
Capability = Literal["streaming", "functionCalling", "vision", "reasoning"]
CAPABILITIES: tuple[str, ...] = get_args(Capability)
STATES = ("ACTIVE", "DEPRECATED", "DISABLED")
# Every adapter can stream, so a model reached through the gateway streams unless told otherwise.
DEFAULT_CAPABILITIES = ["streaming"]


def _capabilities(value: Any) -> list[str]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(c, str) for c in value):
        raise validation_error(f"capabilities must be a list drawn from {', '.join(CAPABILITIES)}")
    unknown = [c for c in value if c not in CAPABILITIES]
    if unknown:
        raise validation_error(f"unknown capabilities {unknown}; allowed: {', '.join(CAPABILITIES)}")
    return [c for c in CAPABILITIES if c in value]


def _owned_by(value: Any) -> str | None:
    if value is None or value == "":
        return None
    return clean_name(value, "owned_by")


def model_spec(spec: str | dict[str, Any]) -> dict[str, Any]:
    """Normalise a model given as an id or as {model_id, upstream_model, owned_by, capabilities}."""
    if isinstance(spec, str):
        # "alias=upstream": the gateway id callers use, then the name the provider is sent
        model_id, sep, upstream = spec.partition("=")
        spec = {"model_id": model_id, "upstream_model": upstream} if sep else {"model_id": spec}
    if not isinstance(spec, dict):
        raise validation_error("a model must be an id or an object with model_id")
    unknown = set(spec) - {"model_id", "upstream_model", "owned_by", "capabilities"}
    if unknown:
        raise validation_error(f"unknown model fields: {', '.join(sorted(unknown))}")
    model_id = clean_name(spec.get("model_id"), "model_id")
    out: dict[str, Any] = {"model_id": model_id}
    if spec.get("upstream_model") is not None:
        out["upstream_model"] = clean_name(spec["upstream_model"], "upstream_model")
    if "owned_by" in spec:
        out["owned_by"] = _owned_by(spec["owned_by"])
    if spec.get("capabilities") is not None:
        out["capabilities"] = _capabilities(spec["capabilities"])
    return out


def _instance(spec: dict[str, Any]) -> ModelInstance:
    return ModelInstance(
        model_id=spec["model_id"],
        upstream_model=spec.get("upstream_model", spec["model_id"]),
        owned_by=spec.get("owned_by"),
        capabilities=spec.get("capabilities", list(DEFAULT_CAPABILITIES)),
        state="ACTIVE",
    )


def _specs(models: Any) -> list[dict[str, Any]]:
    if models is None:
        return []
    if isinstance(models, (str, dict)) or not isinstance(models, (list, tuple)):
        raise validation_error("models must be a list")
    specs = [model_spec(x) for x in models]
    ids = [x["model_id"] for x in specs]
    if len(set(ids)) != len(ids):
        raise validation_error("a model id appears twice in the list")
    return specs


def _int(value: Any, what: str, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise validation_error(f"{what} must be an integer")
    if minimum is not None and value < minimum:
        raise validation_error(f"{what} must be at least {minimum}")
    return value


class ChannelService:
    def __init__(self, ctx: ServiceContext) -> None:
        self.ctx = ctx

    async def create(
        self,
        name: str,
        provider: int | str,
        models: list[str | dict[str, Any]] | None = None,
        priority: int = 0,
        weight: int = 1,
        enabled: bool = True,
    ) -> ChannelView:
        name = clean_name(name, "channel name")
        specs = _specs(models)
        async with self.ctx.change(f"channel {name!r} already exists") as s:
            prov = await fetch(s, Provider, provider, "provider")
            channel = Channel(
                name=name, provider=prov, priority=_int(priority, "priority"), weight=_int(weight, "weight", 1),
                enabled=enabled, models=[_instance(x) for x in specs],
            )
            s.add(channel)
            await s.flush()
            view = ChannelView.of(channel)
        return view

    async def list(self) -> list[ChannelView]:
        async with self.ctx.tx() as s:
            return [ChannelView.of(c) for c in (await s.scalars(select(Channel).order_by(Channel.id))).all()]

    async def get(self, ref: int | str) -> ChannelView:
        async with self.ctx.tx() as s:
            return ChannelView.of(await fetch(s, Channel, ref, "channel"))

    async def update(
        self,
        ref: int | str,
        *,
        name: str | None = None,
        provider: int | str | None = None,
        priority: int | None = None,
        weight: int | None = None,
        enabled: bool | None = None,
    ) -> ChannelView:
        async with self.ctx.change(f"channel {name!r} already exists") as s:
            channel = await fetch(s, Channel, ref, "channel")
            if name is not None:
                channel.name = clean_name(name, "channel name")
            if provider is not None:
                channel.provider = await fetch(s, Provider, provider, "provider")
            if priority is not None:
                channel.priority = _int(priority, "priority")
            if weight is not None:
                channel.weight = _int(weight, "weight", 1)
            if enabled is not None:
                channel.enabled = bool(enabled)
            await s.flush()
            view = ChannelView.of(channel)
        return view

    async def delete(self, ref: int | str) -> None:
        async with self.ctx.change() as s:
            await s.delete(await fetch(s, Channel, ref, "channel"))

    async def add_models(self, ref: int | str, models: builtins.list[str | dict[str, Any]]) -> ChannelView:
        specs = _specs(models)
        async with self.ctx.change() as s:
            channel = await fetch(s, Channel, ref, "channel")
            existing = {mi.model_id for mi in channel.models}
            dup = [x["model_id"] for x in specs if x["model_id"] in existing]
            if dup:
                raise conflict(f"channel {channel.name!r} already serves {', '.join(dup)}")
            channel.models.extend(_instance(x) for x in specs)
            await s.flush()
            view = ChannelView.of(channel)
        return view

    async def set_models(self, ref: int | str, models: builtins.list[str | dict[str, Any]]) -> ChannelView:
        """Replace the model list. Kept models keep their id and state; given fields are updated."""
        specs = _specs(models)
        async with self.ctx.change() as s:
            channel = await fetch(s, Channel, ref, "channel")
            by_id = {mi.model_id: mi for mi in channel.models}
            wanted = {x["model_id"] for x in specs}
            for mi in list(channel.models):
                if mi.model_id not in wanted:
                    channel.models.remove(mi)
            for spec in specs:
                kept = by_id.get(spec["model_id"])
                if kept is None:
                    channel.models.append(_instance(spec))
                    continue
                for field in ("upstream_model", "owned_by", "capabilities"):
                    if field in spec:
                        setattr(kept, field, spec[field])
            await s.flush()
            view = ChannelView.of(channel)
        return view

    async def remove_models(self, ref: int | str, model_ids: builtins.list[str]) -> ChannelView:
        async with self.ctx.change() as s:
            channel = await fetch(s, Channel, ref, "channel")
            by_id = {mi.model_id: mi for mi in channel.models}
            missing = [x for x in model_ids if x not in by_id]
            if missing:
                raise not_found(f"channel {channel.name!r} does not serve {', '.join(missing)}")
            for model_id in model_ids:
                channel.models.remove(by_id[model_id])
            await s.flush()
            view = ChannelView.of(channel)
        return view


class ModelInstanceService:
    def __init__(self, ctx: ServiceContext) -> None:
        self.ctx = ctx

    async def list(
        self, channel: int | str | None = None, state: str | None = None, model_id: str | None = None
    ) -> list[ModelInstanceView]:
        async with self.ctx.tx() as s:
            query = select(ModelInstance).order_by(ModelInstance.model_id, ModelInstance.id)
            if channel is not None:
                query = query.where(ModelInstance.channel_id == (await fetch(s, Channel, channel, "channel")).id)
            if state is not None:
                query = query.where(ModelInstance.state == _state(state))
            if model_id is not None:
                query = query.where(ModelInstance.model_id == model_id)
            return [ModelInstanceView.of(mi) for mi in (await s.scalars(query)).all()]

    async def get(self, instance_id: int) -> ModelInstanceView:
        async with self.ctx.tx() as s:
            return ModelInstanceView.of(await self._get(s, instance_id))

    async def _get(self, s, instance_id: int) -> ModelInstance:
        mi = await s.get(ModelInstance, int(instance_id))
        if mi is None:
            raise not_found(f"model instance {instance_id} not found")
        return mi

    async def update(
        self,
        instance_id: int,
        *,
        state: str | None = None,
        owned_by: str | None = None,
        capabilities: Sequence[str] | None = None,
        upstream_model: str | None = None,
    ) -> ModelInstanceView:
        """`owned_by=""` clears the label (the provider kind is shown again)."""
        async with self.ctx.change() as s:
            mi = await self._get(s, instance_id)
            if state is not None and _state(state) != mi.state:
                mi.state = _state(state)
                mi.state_changed_at = datetime.now(UTC)
            if owned_by is not None:
                mi.owned_by = _owned_by(owned_by)
            if capabilities is not None:
                mi.capabilities = _capabilities(capabilities)
            if upstream_model is not None:
                mi.upstream_model = clean_name(upstream_model, "upstream_model")
            await s.flush()
            view = ModelInstanceView.of(mi)
        return view

    async def reactivate(self, instance_id: int) -> ModelInstanceView:
        return await self.update(instance_id, state="ACTIVE")


def _state(value: str) -> str:
    state = str(value).upper()
    if state not in STATES:
        raise validation_error(f"state must be one of {', '.join(STATES)}")
    return state
