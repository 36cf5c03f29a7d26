"""What the management API needs from the process that mounts it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from modelgate.catalog import Catalog
from modelgate.config import Settings
from modelgate.routing.health import HealthCheckResult
from modelgate.storage.db import Database

if TYPE_CHECKING:
    from modelgate.routing.breaker import Breakers
    from modelgate.services import Services
    from modelgate.shared.redis_link import RedisLink


# Runs a live health check of one channel. Raises GatewayError 404 for an unknown channel.
HealthCheck = Callable[[int], Awaitable[HealthCheckResult]]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class ManagementState:
    db: Database
    services: Services
    settings: Settings
    catalog: Catalog
    breakers: Breakers | None = None  # None: breaker state is reported as unknown
    health_check: HealthCheck | None = None  # None: POST /channels/{id}/health-check answers 503
    clock: Callable[[], datetime] = utc_now  # wall clock (UTC); tests move it by hand
    session_ttl_seconds: float = 12 * 3600.0
    login_max_failures: int = 5  # per username and address
    login_ip_max_failures: int = 20  # per address, whatever the usernames
    login_lock_seconds: float = 300.0
    redis: RedisLink | None = None  # set: login throttles are counted for the whole deployment
