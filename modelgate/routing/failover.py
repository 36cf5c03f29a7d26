"""The FAIL_OVER strategy: the order in which one call tries its candidates.

Routes (model instance on a channel) go by priority, lower first; routes of
equal priority are shuffled with probability proportional to their weight, so
traffic is shared by weight while each call still has every route to fall back
on. Within a route, its endpoints (upstream keys) start at a rotating offset
so keys share the load. An endpoint that just failed with a failover-type
error cools down: it moves behind every other candidate for
`cooldown_seconds`, and is still tried when nothing else is left. A channel
whose keys all cool down therefore drops behind the other channels.
With Redis, cooldowns are announced to every process (`modelgate.shared.cooldowns`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from itertools import groupby
from typing import Callable

from modelgate.config import FailoverSettings
from modelgate.providers.base import Endpoint
from modelgate.routing.events import Clock
from modelgate.routing.snapshot import Route


@dataclass(slots=True, frozen=True)
class Candidate:
    route: Route
    endpoint: Endpoint


class FailoverPlanner:
    def __init__(self, settings: FailoverSettings, clock: Clock, rng: random.Random | None = None) -> None:
        self.settings = settings
        self.clock = clock
        self.rng = rng or random.Random()
        self._rotation: dict[int, int] = {}  # channel id -> offset of the next call's first key
        self._cooldown_until: dict[str, float] = {}  # endpoint id -> monotonic time
        # Told of each cooldown started or ended here, to share it (endpoint id, seconds; 0 = ended).
        self.on_change: Callable[[str, float], None] | None = None

    def order_routes(self, routes: list[Route]) -> list[Route]:
        if len(routes) < 2:  # the common case, on the hot path
            return routes
        ordered: list[Route] = []
        for _, group in groupby(sorted(routes, key=lambda r: r.priority), key=lambda r: r.priority):
            ordered.extend(self._weighted_shuffle(list(group)))
        return ordered

    def _weighted_shuffle(self, routes: list[Route]) -> list[Route]:
        if len(routes) < 2:
            return routes
        # Efraimidis-Spirakis: sorting by u^(1/w) draws without replacement by weight.
        # Weight 0 means "only when the others fail": such routes keep their order at the end.
        weighted = [r for r in routes if r.weight > 0]
        spare = [r for r in routes if r.weight <= 0]
        keyed = sorted(weighted, key=lambda r: self.rng.random() ** (1.0 / r.weight), reverse=True)
        return keyed + spare

    def _rotated(self, route: Route) -> tuple[Endpoint, ...]:
        endpoints = route.endpoints
        if len(endpoints) < 2:
            return endpoints
        offset = self._rotation.get(route.channel_id, 0) % len(endpoints)
        self._rotation[route.channel_id] = offset + 1
        return endpoints[offset:] + endpoints[:offset]

    def candidates(self, routes: list[Route]) -> list[Candidate]:
        fresh: list[Candidate] = []
        cooling: list[Candidate] = []
        for route in self.order_routes(routes):
            for endpoint in self._rotated(route):
                (cooling if self.cooling(endpoint.id) else fresh).append(Candidate(route, endpoint))
        return fresh + cooling

    def cooling(self, endpoint_id: str) -> bool:
        until = self._cooldown_until.get(endpoint_id)
        if until is None:
            return False
        if self.clock.monotonic() >= until:
            del self._cooldown_until[endpoint_id]
            return False
        return True

    def cool_down(self, endpoint_id: str, seconds: float | None = None, announce: bool = True) -> None:
        seconds = self.settings.cooldown_seconds if seconds is None else seconds
        self._cooldown_until[endpoint_id] = self.clock.monotonic() + seconds
        if announce and self.on_change is not None:
            self.on_change(endpoint_id, seconds)

    def recovered(self, endpoint_id: str, announce: bool = True) -> None:
        """A success ends the cooldown early."""
        if self._cooldown_until.pop(endpoint_id, None) is not None and announce and self.on_change is not None:
            self.on_change(endpoint_id, 0.0)
