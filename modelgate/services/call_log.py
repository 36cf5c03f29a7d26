"""Reading the call log (rows are written by storage.usage_writer)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import ColumnElement

from modelgate.services.context import ServiceContext
from modelgate.services.views import CallLogView, Page, newest_first
from modelgate.storage.models import CallLog

MAX_PAGE = 1000


def _utc(value: datetime) -> datetime:
    # Stored times are UTC; SQLite keeps them without offset, so compare like with like.
    if value.tzinfo is None:
        return value
    return value.astimezone(UTC).replace(tzinfo=None)


class CallLogService:
    def __init__(self, ctx: ServiceContext) -> None:
        self.ctx = ctx

    async def query(
        self,
        *,
        application_ids: list[int] | None = None,
        api_key_id: int | None = None,
        model: str | None = None,
        status: int | None = None,
        trace_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 50,
        offset: int = 0,
        before_id: int | None = None,
    ) -> Page:
        """Newest first. `since` is inclusive, `until` exclusive. Page.items are CallLogView.

        `application_ids` restricts the rows to those applications (a USER's own); None = all.
        """
        conditions: list[ColumnElement[bool]] = []
        if application_ids is not None:
            conditions.append(CallLog.application_id.in_(application_ids or [-1]))
        if api_key_id is not None:
            conditions.append(CallLog.api_key_id == api_key_id)
        if model is not None:
            conditions.append(CallLog.model == model)
        if status is not None:
            conditions.append(CallLog.status == status)
        if trace_id is not None:
            conditions.append(CallLog.trace_id == trace_id)
        if since is not None:
            conditions.append(CallLog.created_at >= self._bound(since))
        if until is not None:
            conditions.append(CallLog.created_at < self._bound(until))
        async with self.ctx.tx() as s:
            return await newest_first(s, CallLog, conditions, CallLogView.of, limit, offset, MAX_PAGE,
                                      before_id)

    def _bound(self, value: datetime) -> datetime:
        if self.ctx.db.is_sqlite:
            return _utc(value)
        return value if value.tzinfo else value.replace(tzinfo=UTC)
