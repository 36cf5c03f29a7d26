"""Configuration changes reach every instance: a version counter in Redis plus pub/sub.

A change bumps `{prefix}config-version` and publishes on `{prefix}config-changed`.
Subscribers reload at once; as a back-up every instance compares the counter
every `gateway.cache_refresh_seconds` (one GET instead of reloading every
table) and reloads everything every `gateway.full_refresh_seconds` anyway.
"""

from __future__ import annotations

import logging

from modelgate.shared.redis_link import RedisLink, RedisUnavailable

log = logging.getLogger("modelgate.config_version")

VERSION_KEY = "config-version"
CHANGE_CHANNEL = "config-changed"


class ConfigVersion:
    def __init__(self, link: RedisLink) -> None:
        self.link = link
        self.key = link.key(VERSION_KEY)
        self.channel = link.key(CHANGE_CHANNEL)

    async def announce(self) -> None:
        """After a committed change: bump the counter, then wake the subscribers."""

        async def bump(r):  # one round trip
            async with r.pipeline(transaction=False) as pipe:
                pipe.incr(self.key)
                pipe.publish(self.channel, b"changed")
                await pipe.execute()

        try:
            await self.link.run(bump)
        except RedisUnavailable:
            log.warning("a configuration change could not be announced through Redis; other instances see it "
                        "at their next full refresh")

    async def current(self) -> int | None:
        """The deployment's configuration version; None when Redis cannot tell."""
        try:
            value = await self.link.run(lambda r: r.get(self.key))
        except RedisUnavailable:
            return None
        return int(value or 0)
