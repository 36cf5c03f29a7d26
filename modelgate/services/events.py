"""Reading the resilience event stream (written by the routing layer's event sink)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


from modelgate.errors import validation_error
from modelgate.services.views import Page, as_utc, newest_first
from modelgate.storage.db import Database
from modelgate.storage.models import ResilienceEvent

EVENT_TYPES = (
    "RETRY_EXHAUSTED", "FAILOVER", "BREAKER_OPENED", "BREAKER_HALF_OPEN", "BREAKER_CLOSED", "BREAKER_FORCED",
    "MODEL_DEPRECATED",
)
MAX_PAGE = 500


@dataclass(slots=True)
class EventView:
    id: int
    created_at: datetime
    event_type: str
    trace_id: str | None
    channel_id: int | None
    endpoint: str | None
    model: str | None
    error_type: str | None
    detail: str

    @classmethod
    def of(cls, e: ResilienceEvent) -> EventView:
        return cls(e.id, as_utc(e.created_at), e.event_type, e.trace_id, e.channel_id, e.endpoint, e.model,
                   e.error_type, e.detail)


class EventService:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def list(
        self,
        *,
        event_type: str | None = None,
        channel_id: int | None = None,
        limit: int = 50,
        offset: int = 0,
        before_id: int | None = None,
    ) -> Page:
        """Newest first; Page.items are EventView."""
        conditions = []
        if event_type is not None:
            kind = event_type.upper()
            if kind not in EVENT_TYPES:
                raise validation_error(f"type must be one of {', '.join(EVENT_TYPES)}")
            conditions.append(ResilienceEvent.event_type == kind)
        if channel_id is not None:
            conditions.append(ResilienceEvent.channel_id == channel_id)
        async with self.db.session() as s:
            return await newest_first(s, ResilienceEvent, conditions, EventView.of, limit, offset, MAX_PAGE,
                                      before_id)
