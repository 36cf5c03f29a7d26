"""Upstream providers and their encrypted keys."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from sqlalchemy import select

from modelgate.errors import conflict, not_found, validation_error
from modelgate.services.context import ServiceContext, clean_name, fetch
from modelgate.services.views import ProviderKeyView, ProviderView
from modelgate.storage.models import Channel, Provider, ProviderKey


def provider_kind(kind: str):
    # Imported here: the registry pulls in every wire adapter, which the CLI's
    # other commands do not need.
    from modelgate.providers.registry import get_kind

    try:
        return get_kind(kind)
    except KeyError as exc:
        raise validation_error(str(exc.args[0])) from None


def clean_base_url(value: str) -> str:
    value = value.strip() if isinstance(value, str) else ""
    parsed = urlparse(value)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise validation_error("base URL must be an absolute http(s) URL")
    return value.rstrip("/")


def key_hint(secret: str) -> str:
    # Too short a key would give away a large share of itself in 4 characters.
    return secret[-4:] if len(secret) >= 12 else ""


def _options(options: Any) -> dict[str, Any]:
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise validation_error("options must be an object")
    return dict(options)


class ProviderService:
    def __init__(self, ctx: ServiceContext) -> None:
        self.ctx = ctx

    def _new_key(self, secret: str, label: str = "") -> ProviderKey:
        if not isinstance(secret, str) or not secret.strip():
            raise validation_error("an upstream key must be a non-empty string")
        secret = secret.strip()
        return ProviderKey(
            label=label or "", secret_encrypted=self.ctx.box.encrypt(secret), hint=key_hint(secret), enabled=True
        )

    async def create(
        self,
        name: str,
        kind: str,
        base_url: str | None = None,
        options: dict[str, Any] | None = None,
        keys: list[str] | None = None,
        enabled: bool = True,
    ) -> ProviderView:
        name = clean_name(name, "provider name")
        spec = provider_kind(kind)
        if base_url is None:
            if spec.default_base_url is None:
                raise validation_error(f"provider kind {kind!r} needs a base URL")
            base_url = spec.default_base_url
        provider = Provider(
            name=name, kind=spec.name, base_url=clean_base_url(base_url), options=_options(options),
            enabled=enabled, keys=[self._new_key(k) for k in keys or []],
        )
        async with self.ctx.change(f"provider {name!r} already exists") as s:
            s.add(provider)
            await s.flush()
            view = ProviderView.of(provider)
        return view

    async def list(self) -> list[ProviderView]:
        async with self.ctx.tx() as s:
            return [ProviderView.of(p) for p in (await s.scalars(select(Provider).order_by(Provider.id))).all()]

    async def get(self, ref: int | str) -> ProviderView:
        async with self.ctx.tx() as s:
            return ProviderView.of(await fetch(s, Provider, ref, "provider"))

    async def update(
        self,
        ref: int | str,
        *,
        name: str | None = None,
        base_url: str | None = None,
        options: dict[str, Any] | None = None,
        enabled: bool | None = None,
    ) -> ProviderView:
        async with self.ctx.change(f"provider {name!r} already exists") as s:
            provider = await fetch(s, Provider, ref, "provider")
            if name is not None:
                provider.name = clean_name(name, "provider name")
            if base_url is not None:
                provider.base_url = clean_base_url(base_url)
            if options is not None:
                provider.options = _options(options)
            if enabled is not None:
                provider.enabled = bool(enabled)
            await s.flush()
            view = ProviderView.of(provider)
        return view

    async def delete(self, ref: int | str) -> None:
        async with self.ctx.change() as s:
            provider = await fetch(s, Provider, ref, "provider")
            used_by = (await s.scalars(select(Channel.name).where(Channel.provider_id == provider.id))).all()
            if used_by:
                raise conflict(f"provider {provider.name!r} is used by channels {', '.join(used_by)}; delete them first")
            await s.delete(provider)

    async def add_key(self, ref: int | str, secret: str, label: str = "") -> ProviderKeyView:
        key = self._new_key(secret, label)
        async with self.ctx.change() as s:
            provider = await fetch(s, Provider, ref, "provider")
            provider.keys.append(key)
            await s.flush()
            view = ProviderKeyView.of(key)
        return view

    async def _key(self, s, ref: int | str, key_id: int) -> tuple[Provider, ProviderKey]:
        provider = await fetch(s, Provider, ref, "provider")
        for key in provider.keys:
            if key.id == int(key_id):
                return provider, key
        raise not_found(f"upstream key {key_id} of provider {provider.name!r} not found")

    async def remove_key(self, ref: int | str, key_id: int) -> None:
        async with self.ctx.change() as s:
            provider, key = await self._key(s, ref, key_id)
            provider.keys.remove(key)

    async def set_key_enabled(self, ref: int | str, key_id: int, enabled: bool) -> ProviderKeyView:
        async with self.ctx.change() as s:
            _, key = await self._key(s, ref, key_id)
            key.enabled = bool(enabled)
            await s.flush()
            view = ProviderKeyView.of(key)
        return view

    async def enable_key(self, ref: int | str, key_id: int) -> ProviderKeyView:
        return await self.set_key_enabled(ref, key_id, True)

    async def disable_key(self, ref: int | str, key_id: int) -> ProviderKeyView:
        return await self.set_key_enabled(ref, key_id, False)
