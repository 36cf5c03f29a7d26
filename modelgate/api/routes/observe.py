"""Plan catalog, statistics, call log and resilience events."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from modelgate.api.deps import Admin, Session, State, owned_application_ids
from modelgate.api.envelope import Envelope, ok
from modelgate.api.schemas import (
    INT32_MAX,
    Id,
    CallLogOut,
    CallLogPage,
    CatalogModelListOut,
    CatalogProviderOut,
    EventOut,
    EventPage,
    ModelUsageOut,
    PlanDetailOut,
    PlanOut,
    PricingOut,
    StatsOut,
    TrendPointOut,
)
from modelgate.services.call_log import CallLogService
from modelgate.services.catalog import CatalogService
from modelgate.services.events import EventService
from modelgate.services.stats import StatsService

catalog_router = APIRouter(prefix="/plan-catalogs", tags=["plan-catalog"])
stats_router = APIRouter(prefix="/stats", tags=["stats"])
logs_router = APIRouter(tags=["call-log"])
events_router = APIRouter(prefix="/resilience", tags=["resilience"])


def _catalog(request: Request) -> CatalogService:
    return request.app.state.catalog_service


def _stats(request: Request) -> StatsService:
    return request.app.state.stats_service


# Literal paths are declared before /{planCode} so they win.
@catalog_router.get("/providers", response_model=Envelope[list[CatalogProviderOut]])
async def catalog_providers(request: Request, session: Session) -> Response:
    return ok(request, _catalog(request).providers())


@catalog_router.get("/models", response_model=Envelope[list[CatalogModelListOut]],
                    summary="Models of the catalog; filter by keyword and capability")
async def catalog_models(request: Request, session: Session, keyword: str | None = None,
                         capability: str | None = None) -> Response:
    return ok(request, _catalog(request).models(keyword, capability))


@catalog_router.get("", response_model=Envelope[list[PlanOut]])
async def catalog_plans(request: Request, session: Session, providerKind: str | None = None,
                        type: str | None = None) -> Response:
    return ok(request, _catalog(request).plans(providerKind, type))


@catalog_router.get("/{planCode}", response_model=Envelope[PlanDetailOut])
async def catalog_plan(planCode: str, request: Request, session: Session) -> Response:
    return ok(request, _catalog(request).plan(planCode))


@catalog_router.get("/{planCode}/pricing", response_model=Envelope[PricingOut])
async def catalog_pricing(planCode: str, request: Request, session: Session) -> Response:
    return ok(request, _catalog(request).pricing(planCode))


@stats_router.get("", response_model=Envelope[StatsOut], summary="Today's (UTC) requests, tokens, errors, cost")
async def stats(request: Request, session: Session, mg: State) -> Response:
    return ok(request, await _stats(request).overview(await owned_application_ids(mg, session)))


@stats_router.get("/trend", response_model=Envelope[list[TrendPointOut]], summary="Per UTC day, zero-filled")
async def trend(request: Request, session: Session, mg: State, days: int = 7) -> Response:
    return ok(request, await _stats(request).trend(days, await owned_application_ids(mg, session)))


@stats_router.get("/model-usage", response_model=Envelope[list[ModelUsageOut]],
                  summary="Top models by tokens over the last `days` days")
async def model_usage(request: Request, session: Session, mg: State, limit: int = 10, days: int = 30) -> Response:
    return ok(request, await _stats(request).model_usage(limit, days, await owned_application_ids(mg, session)))


@logs_router.get("/call-logs", response_model=Envelope[CallLogPage], summary="Calls, newest first")
async def call_logs(
    request: Request, session: Session, mg: State,
    keyId: Id | None = None, applicationId: Id | None = None, model: str | None = None,
    status: int | None = Query(default=None, ge=100, le=599), traceId: str | None = None, since: datetime | None = None,
    until: datetime | None = None, limit: int = Query(default=50, ge=1, le=1000), offset: int = Query(default=0, ge=0, le=INT32_MAX),
    beforeId: Id | None = Query(default=None, description="the rows after this one (nextBeforeId of the last page)"),
) -> Response:
    allowed = await owned_application_ids(mg, session)
    service: CallLogService = mg.services.call_log
    # Scoped to applications: a USER sees their own applications' calls only.
    ids = allowed
    if applicationId is not None:
        ids = [applicationId] if allowed is None or applicationId in allowed else []
    page = await service.query(application_ids=ids, api_key_id=keyId, model=model, status=status, trace_id=traceId,
                               since=since, until=until, limit=limit, offset=offset, before_id=beforeId)
    return ok(request, CallLogPage(items=[CallLogOut.of(r) for r in page.items], total=page.total,
                                   limit=page.limit, offset=page.offset, hasMore=page.has_more,
                                   totalExact=page.total_exact, nextBeforeId=page.next_before_id))


@events_router.get("/events", response_model=Envelope[EventPage], summary="Failover / breaker events, newest first")
async def events(
    request: Request, admin: Admin, mg: State, type: str | None = None, channelId: Id | None = None,
    limit: int = Query(default=50, ge=1, le=500), offset: int = Query(default=0, ge=0, le=INT32_MAX),
    beforeId: Id | None = Query(default=None, description="the rows after this one (nextBeforeId of the last page)"),
) -> Response:
    service: EventService = request.app.state.event_service
    page = await service.list(event_type=type, channel_id=channelId, limit=limit, offset=offset, before_id=beforeId)
    return ok(request, EventPage(
        items=[EventOut(id=e.id, createdAt=e.created_at, type=e.event_type, traceId=e.trace_id,
                        channelId=e.channel_id, endpointId=e.endpoint, model=e.model, errorType=e.error_type,
                        detail=e.detail) for e in page.items],
        total=page.total, limit=page.limit, offset=page.offset, hasMore=page.has_more, totalExact=page.total_exact,
        nextBeforeId=page.next_before_id,
    ))
