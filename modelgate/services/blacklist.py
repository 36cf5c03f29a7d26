"""IP blacklist: single addresses or CIDR networks."""

from __future__ import annotations

import ipaddress

from sqlalchemy import select

from modelgate.errors import not_found, validation_error
from modelgate.services.context import ServiceContext
from modelgate.services.views import BlacklistEntryView
from modelgate.storage.models import IpBlacklistEntry


def normalize_cidr(value: str) -> str:
    """One canonical text per network, so duplicates are caught by the unique column."""
    try:
        net = ipaddress.ip_network(str(value).strip(), strict=False)
    except ValueError:
        raise validation_error(f"{value!r} is not an IP address or CIDR network") from None
    return str(net.network_address) if net.num_addresses == 1 else str(net)


class BlacklistService:
    def __init__(self, ctx: ServiceContext) -> None:
        self.ctx = ctx

    async def add(self, cidr: str, reason: str = "") -> BlacklistEntryView:
        cidr = normalize_cidr(cidr)
        entry = IpBlacklistEntry(cidr=cidr, reason=(reason or "")[:255])
        async with self.ctx.change(f"{cidr} is already blacklisted") as s:
            s.add(entry)
            await s.flush()
            view = BlacklistEntryView.of(entry)
        return view

    async def list(self) -> list[BlacklistEntryView]:
        async with self.ctx.tx() as s:
            rows = (await s.scalars(select(IpBlacklistEntry).order_by(IpBlacklistEntry.id))).all()
            return [BlacklistEntryView.of(e) for e in rows]

    async def remove(self, ref: int | str) -> None:
        """Remove by entry id or by the address/network itself."""
        async with self.ctx.change() as s:
            entry = await s.get(IpBlacklistEntry, ref) if isinstance(ref, int) else None
            if entry is None and isinstance(ref, str):
                query = select(IpBlacklistEntry).where(IpBlacklistEntry.cidr == normalize_cidr(ref))
                entry = (await s.execute(query)).scalar_one_or_none()
            if entry is None:
                raise not_found(f"blacklist entry {ref!r} not found")
            await s.delete(entry)
