"""Gateway API keys. Only the sha256 of a key is stored; the plaintext is returned once."""

from __future__ import annotations

from sqlalchemy import select

from modelgate.auth.keys import generate_api_key, hash_api_key, key_prefix
from modelgate.errors import not_found
from modelgate.services.context import ServiceContext, clean_name, fetch, positive
from modelgate.services.views import ApiKeyView, CreatedApiKey
from modelgate.storage.models import ApiKey, Application

ENABLED, DISABLED, DELETED = "ENABLED", "DISABLED", "DELETED"


def _rate(value: float | None, what: str) -> float | None:
    return None if value is None else positive(value, what)


class ApiKeyService:
    def __init__(self, ctx: ServiceContext) -> None:
        self.ctx = ctx

    async def create(
        self,
        application: int | str,
        name: str = "",
        rate_capacity: float | None = None,
        rate_refill: float | None = None,
    ) -> CreatedApiKey:
        if name:
            name = clean_name(name, "key name")
        plaintext = generate_api_key()
        async with self.ctx.change() as s:
            app = await fetch(s, Application, application, "application")
            key = ApiKey(
                application_id=app.id, name=name or "", key_hash=hash_api_key(plaintext),
                prefix=key_prefix(plaintext), status=ENABLED,
                rate_capacity=_rate(rate_capacity, "rate capacity"),
                rate_refill_per_second=_rate(rate_refill, "rate refill"),
            )
            s.add(key)
            await s.flush()
            view = ApiKeyView.of(key)
        return CreatedApiKey(view, plaintext)

    async def list(self, application: int | str | None = None, include_deleted: bool = False) -> list[ApiKeyView]:
        async with self.ctx.tx() as s:
            query = select(ApiKey).order_by(ApiKey.id)
            if application is not None:
                app = await fetch(s, Application, application, "application")
                query = query.where(ApiKey.application_id == app.id)
            if not include_deleted:
                query = query.where(ApiKey.status != DELETED)
            return [ApiKeyView.of(k) for k in (await s.scalars(query)).all()]

    async def get(self, key_id: int) -> ApiKeyView:
        async with self.ctx.tx() as s:
            return ApiKeyView.of(await self._live(s, key_id))

    async def _live(self, s, key_id: int) -> ApiKey:
        key = await s.get(ApiKey, int(key_id))
        if key is None or key.status == DELETED:
            raise not_found(f"API key {key_id} not found")
        return key

    async def _set_status(self, key_id: int, status: str) -> ApiKeyView:
        async with self.ctx.change() as s:
            key = await self._live(s, key_id)
            key.status = status
            await s.flush()
            view = ApiKeyView.of(key)
        return view

    async def enable(self, key_id: int) -> ApiKeyView:
        return await self._set_status(key_id, ENABLED)

    async def disable(self, key_id: int) -> ApiKeyView:
        return await self._set_status(key_id, DISABLED)

    async def delete(self, key_id: int) -> ApiKeyView:
        """Marks the key DELETED for good: it never authenticates again and cannot be re-enabled."""
        return await self._set_status(key_id, DELETED)

    async def update_rate_limit(
        self, key_id: int, rate_capacity: float | None, rate_refill: float | None
    ) -> ApiKeyView:
        """Per-key token bucket; None for either value means the global default."""
        async with self.ctx.change() as s:
            key = await self._live(s, key_id)
            key.rate_capacity = _rate(rate_capacity, "rate capacity")
            key.rate_refill_per_second = _rate(rate_refill, "rate refill")
            await s.flush()
            view = ApiKeyView.of(key)
        return view

    async def rename(self, key_id: int, name: str) -> ApiKeyView:
        async with self.ctx.change() as s:
            key = await self._live(s, key_id)
            key.name = clean_name(name, "key name") if name else ""
            await s.flush()
            view = ApiKeyView.of(key)
        return view
