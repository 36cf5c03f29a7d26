"""The audit log: admin actions and logins, who, what, when and from where.

Rows hold no request bodies (those may carry passwords or upstream keys): the
action is the method and route template, the target the concrete path.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select

from modelgate.services.context import ServiceContext
from modelgate.services.views import as_utc
from modelgate.storage.models import AuditEntry

log = logging.getLogger(__name__)


@dataclass(slots=True)
class AuditView:
    id: int
    created_at: datetime
    actor: str
    user_id: int | None
    via: str
    action: str
    target: str
    status: int
    client_ip: str | None
    trace_id: str | None

    @classmethod
    def of(cls, e: AuditEntry) -> AuditView:
        return cls(e.id, as_utc(e.created_at), e.actor, e.user_id, e.via, e.action, e.target, e.status,
                   e.client_ip, e.trace_id)


@dataclass(slots=True)
class AuditPage:
    items: list[AuditView]
    total: int
    limit: int
    offset: int


class AuditService:
    def __init__(self, ctx: ServiceContext) -> None:
        self.ctx = ctx

    async def record(self, *, actor: str, via: str, action: str, target: str = "", status: int,
                     user_id: int | None = None, client_ip: str | None = None, trace_id: str | None = None) -> None:
        """Write one row; a failure is logged, never raised (the action itself already happened)."""
        try:
            async with self.ctx.tx() as s:
                s.add(AuditEntry(actor=actor[:128], user_id=user_id, via=via[:32], action=action[:160],
                                 target=target[:255], status=status, client_ip=client_ip, trace_id=trace_id))
        except Exception:
            log.exception("could not write the audit row of %s %s by %s", action, target, actor)

    async def query(self, *, actor: str | None = None, action: str | None = None, since: datetime | None = None,
                    until: datetime | None = None, limit: int = 50, offset: int = 0) -> AuditPage:
        conditions = []
        if actor:
            conditions.append(AuditEntry.actor == actor)
        if action:
            conditions.append(AuditEntry.action.contains(action))
        if since is not None:
            conditions.append(AuditEntry.created_at >= since)
        if until is not None:
            conditions.append(AuditEntry.created_at < until)
        async with self.ctx.tx() as s:
            total = (await s.execute(select(func.count()).select_from(AuditEntry).where(*conditions))).scalar_one()
            rows = (await s.scalars(select(AuditEntry).where(*conditions)
                                    .order_by(AuditEntry.id.desc()).limit(limit).offset(offset))).all()
        return AuditPage([AuditView.of(r) for r in rows], total, limit, offset)
