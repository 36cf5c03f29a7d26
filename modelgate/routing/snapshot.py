"""The in-memory view of configuration the hot path reads.

Built from the database by `storage.snapshot_loader` and swapped atomically
(a new object replaces the old), so request handling never queries the
database and never sees a half-updated view.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from modelgate.providers.base import Endpoint


@dataclass(slots=True, frozen=True)
class KeyEntry:
    id: int
    application_id: int
    name: str
    enabled: bool
    rate_capacity: float | None  # None = the global default
    rate_refill_per_second: float | None


@dataclass(slots=True, frozen=True)
class AppEntry:
    id: int
    name: str
    timeout_seconds: float
    enabled: bool
    channel_ids: frozenset[int]


@dataclass(slots=True, frozen=True)
class Route:
    """One model instance on one channel, with the endpoints it can be reached by."""

    model_instance_id: int
    model_id: str
    upstream_model: str
    channel_id: int
    channel_name: str
    priority: int
    weight: int
    provider_id: int
    provider_kind: str
    owned_by: str
    created: int  # Unix seconds
    capabilities: tuple[str, ...]
    endpoints: tuple[Endpoint, ...]


@dataclass(slots=True)
class IpBlacklist:
    addresses: frozenset[str] = frozenset()
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()

    @classmethod
    def from_entries(cls, entries: list[str]) -> "IpBlacklist":
        addresses: set[str] = set()
        networks = []
        for entry in entries:
            net = ipaddress.ip_network(entry, strict=False)
            if net.num_addresses == 1:
                addresses.add(str(net.network_address))
            else:
                networks.append(net)
        return cls(frozenset(addresses), tuple(networks))

    def blocks(self, ip: str | None) -> bool:
        if not ip:
            return False
        if ip in self.addresses:
            return True
        if not self.networks:
            return False
        try:
            addr = ipaddress.ip_address(ip)
        except ValueError:
            return False
        return any(addr in net for net in self.networks)


@dataclass(slots=True)
class Snapshot:
    keys_by_hash: dict[str, KeyEntry] = field(default_factory=dict)
    apps: dict[int, AppEntry] = field(default_factory=dict)
    # routable (enabled, non-deprecated, enabled channel+provider) instances by model id
    routes_by_model: dict[str, list[Route]] = field(default_factory=dict)
    blacklist: IpBlacklist = field(default_factory=IpBlacklist)

    def routes_for(self, app: AppEntry, model: str) -> tuple[list[Route], bool]:
        """Routes of `model` the app may use, and whether the model exists at all."""
        routes = self.routes_by_model.get(model)
        if not routes:
            return [], False
        return [r for r in routes if r.channel_id in app.channel_ids], True

    def models_for(self, app: AppEntry) -> list[Route]:
        seen: dict[str, Route] = {}
        for model_id, routes in self.routes_by_model.items():
            for route in routes:
                if route.channel_id in app.channel_ids:
                    seen.setdefault(model_id, route)
                    break
        return list(seen.values())
