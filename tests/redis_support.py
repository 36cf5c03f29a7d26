"""Local Redis for tests: skip with a reason when absent; a unique key prefix per test, removed after."""

from __future__ import annotations

import uuid

import pytest

REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379
REDIS_URL = f"redis://{REDIS_HOST}:{REDIS_PORT}/0"


async def require_redis() -> None:
    import redis.asyncio as aioredis

    client = aioredis.from_url(REDIS_URL, socket_connect_timeout=1, socket_timeout=1)
    try:
        await client.ping()
    except Exception as exc:
        pytest.skip(f"Redis at {REDIS_HOST}:{REDIS_PORT} is not reachable: {exc}")
    finally:
        await client.aclose()


def unique_prefix() -> str:
    return f"mgtest-{uuid.uuid4().hex[:10]}:"


async def drop_prefix(prefix: str) -> None:
    import redis.asyncio as aioredis

    client = aioredis.from_url(REDIS_URL, socket_connect_timeout=1, socket_timeout=2)
    try:
        keys = [k async for k in client.scan_iter(match=f"{prefix}*", count=500)]
        if keys:
            await client.delete(*keys)
    except Exception:
        pass
    finally:
        await client.aclose()
