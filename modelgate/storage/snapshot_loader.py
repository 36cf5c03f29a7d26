"""Build the in-memory `Snapshot` the hot path reads, from the database.

Runs every `gateway.cache_refresh_seconds` and after each configuration
change, so it reads each table once with plain Core selects (seven queries,
no per-row lazy loads) inside one read transaction for a consistent view.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import UTC, datetime
from types import MappingProxyType

from sqlalchemy import select

from modelgate.auth.crypto import DecryptionError, SecretBox
from modelgate.config import Settings
from modelgate.providers.base import Endpoint
from modelgate.routing.snapshot import AppEntry, IpBlacklist, KeyEntry, Route, Snapshot
from modelgate.storage.db import Database
from modelgate.storage.sealed import mismatch
from modelgate.storage.models import (
    ApiKey,
    Application,
    ApplicationChannel,
    Channel,
    IpBlacklistEntry,
    ModelInstance,
    Provider,
    ProviderKey,
)

log = logging.getLogger(__name__)


def _unix(value: datetime | None) -> int:
    if value is None:
        return 0
    if value.tzinfo is None:  # SQLite returns naive UTC
        value = value.replace(tzinfo=UTC)
    return int(value.timestamp())


async def load_snapshot(db: Database, box: SecretBox, settings: Settings) -> Snapshot:
    """Only ENABLED gateway keys are included (disabled and deleted keys must fail auth);
    every application is included with its `enabled` flag for the gateway to check."""
    from modelgate.providers.registry import KINDS

    a, ak, p, pk, c, mi = (
        Application.__table__, ApiKey.__table__, Provider.__table__, ProviderKey.__table__,
        Channel.__table__, ModelInstance.__table__,
    )
    async with db.engine.connect() as conn, conn.begin():
        key_rows = (await conn.execute(
            select(ak.c.id, ak.c.key_hash, ak.c.application_id, ak.c.name, ak.c.rate_capacity,
                   ak.c.rate_refill_per_second).where(ak.c.status == "ENABLED")
        )).all()
        app_rows = (await conn.execute(
            select(a.c.id, a.c.name, a.c.timeout_seconds, a.c.enabled)
        )).all()
        grants = (await conn.execute(select(ApplicationChannel.__table__))).all()
        provider_rows = (await conn.execute(
            select(p.c.id, p.c.kind, p.c.base_url, p.c.options).where(p.c.enabled.is_(True))
        )).all()
        provider_keys = (await conn.execute(
            select(pk.c.id, pk.c.provider_id, pk.c.secret_encrypted)
            .where(pk.c.enabled.is_(True)).order_by(pk.c.id)
        )).all()
        instance_rows = (await conn.execute(
            select(mi.c.id, mi.c.model_id, mi.c.upstream_model, mi.c.owned_by, mi.c.capabilities,
                   mi.c.created_at, c.c.id.label("channel_id"), c.c.name.label("channel_name"),
                   c.c.priority, c.c.weight, c.c.provider_id)
            .join(c, c.c.id == mi.c.channel_id)
            .where(mi.c.state == "ACTIVE", c.c.enabled.is_(True))
            .order_by(c.c.priority, c.c.id, mi.c.id)
        )).all()
        blacklist = (await conn.execute(select(IpBlacklistEntry.__table__.c.cidr))).scalars().all()

    keys_by_hash = {
        r.key_hash: KeyEntry(r.id, r.application_id, r.name, True, r.rate_capacity, r.rate_refill_per_second)
        for r in key_rows
    }
    channels_of: dict[int, set[int]] = defaultdict(set)
    for g in grants:
        channels_of[g.application_id].add(g.channel_id)
    apps = {
        r.id: AppEntry(r.id, r.name, r.timeout_seconds, r.enabled, frozenset(channels_of.get(r.id, ())))
        for r in app_rows
    }

    secrets_of: dict[int, list[tuple[int, str]]] = defaultdict(list)
    undecryptable: list[int] = []
    for key in provider_keys:
        try:
            secrets_of[key.provider_id].append((key.id, box.decrypt(key.secret_encrypted)))
        except DecryptionError:
            undecryptable.append(key.id)
    if undecryptable:  # calling upstreams without their keys would be worse than keeping the last view
        raise mismatch(undecryptable)

    endpoints_of: dict[int, tuple[Endpoint, ...]] = {}
    kind_of: dict[int, str] = {}
    for provider in provider_rows:
        kind = KINDS.get(provider.kind)
        if kind is None:
            log.error("provider %s has unknown kind %r; its channels are not routable",
                      provider.id, provider.kind)
            continue
        options = MappingProxyType(dict(provider.options or {}))
        keys = secrets_of.get(provider.id, [])
        if not keys and not kind.needs_key(options):
            keys = [(0, "")]
        endpoints_of[provider.id] = tuple(
            Endpoint(f"p{provider.id}:k{key_id}", provider.id, key_id, provider.kind, provider.base_url, secret,
                     options)
            for key_id, secret in keys
        )
        kind_of[provider.id] = provider.kind

    routes_by_model: dict[str, list[Route]] = defaultdict(list)
    for r in instance_rows:
        endpoints = endpoints_of.get(r.provider_id)
        if not endpoints:
            continue
        routes_by_model[r.model_id].append(Route(
            model_instance_id=r.id, model_id=r.model_id, upstream_model=r.upstream_model,
            channel_id=r.channel_id, channel_name=r.channel_name, priority=r.priority, weight=r.weight,
            provider_id=r.provider_id, provider_kind=kind_of[r.provider_id],
            owned_by=r.owned_by or kind_of[r.provider_id], created=_unix(r.created_at),
            capabilities=tuple(r.capabilities or ()), endpoints=endpoints,
        ))

    return Snapshot(
        keys_by_hash=keys_by_hash, apps=apps, routes_by_model=dict(routes_by_model),
        blacklist=IpBlacklist.from_entries(list(blacklist)),
    )
