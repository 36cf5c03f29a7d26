"""Usage statistics from the call log: SQL aggregates (SQLite and PostgreSQL), priced from the catalog.

Days are UTC days. A call's cost is its tokens times the list price of its
model in the plan catalog: the model is looked up as the channel sends it
upstream (model_instances.upstream_model), then as the caller named it, under
the provider kind that served the call. Models the catalog does not know cost
0 and are listed in `unpricedModels`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from sqlalchemy import Date, Row, case, cast, func, select

from modelgate.catalog import Catalog
from modelgate.errors import validation_error
from modelgate.storage.db import Database
from modelgate.storage.models import CallLog, ModelInstance

MAX_DAYS = 366
MAX_LIMIT = 100


def _round(amounts: dict[str, float]) -> dict[str, float]:
    return {cur: round(v, 6) for cur, v in sorted(amounts.items())}


class _Totals:
    __slots__ = ("completion", "cost", "errors", "prompt", "requests", "unpriced")

    def __init__(self) -> None:
        self.requests = self.errors = self.prompt = self.completion = 0
        self.cost: dict[str, float] = defaultdict(float)
        self.unpriced: set[str] = set()

    def as_dict(self) -> dict[str, Any]:
        return {
            "requestCount": self.requests, "successCount": self.requests - self.errors,
            "errorCount": self.errors, "promptTokens": self.prompt, "completionTokens": self.completion,
            "totalTokens": self.prompt + self.completion, "cost": _round(self.cost),
            "unpricedModels": sorted(self.unpriced),
        }


class StatsService:
    def __init__(self, db: Database, catalog: Catalog, clock: Callable[[], datetime]) -> None:
        self.db = db
        self.catalog = catalog
        self.clock = clock

    def _today(self) -> date:
        return self.clock().astimezone(UTC).date()

    def _bound(self, day: date) -> datetime:
        start = datetime.combine(day, time.min, tzinfo=UTC)
        # SQLite keeps UTC datetimes without an offset; compare like with like.
        return start.replace(tzinfo=None) if self.db.is_sqlite else start

    def _day_expr(self) -> Any:
        if self.db.is_sqlite:
            return func.date(CallLog.created_at)
        return cast(func.timezone("UTC", CallLog.created_at), Date)

    async def _rows(
        self, first: date, last: date, application_ids: list[int] | None, by_day: bool
    ) -> tuple[Sequence[Row[Any]], dict[tuple[int, str], str]]:
        """Aggregated rows, and (channel id, model id) -> upstream model for pricing them."""
        day = self._day_expr().label("day")
        errors = func.sum(case((CallLog.status >= 400, 1), else_=0))
        group = [CallLog.model, CallLog.provider_kind, CallLog.channel_id]
        columns = [*group, func.count().label("requests"), errors.label("errors"),
                   func.coalesce(func.sum(CallLog.prompt_tokens), 0).label("prompt"),
                   func.coalesce(func.sum(CallLog.completion_tokens), 0).label("completion")]
        if by_day:
            columns.insert(0, day)
            group.insert(0, day)
        query = select(*columns).where(
            CallLog.created_at >= self._bound(first), CallLog.created_at < self._bound(last + timedelta(days=1))
        ).group_by(*group)
        if application_ids is not None:
            query = query.where(CallLog.application_id.in_(application_ids or [-1]))
        async with self.db.session() as s:
            rows = (await s.execute(query)).all()
            upstream = {}
            channel_ids = {r.channel_id for r in rows if r.channel_id is not None}
            if channel_ids:
                found = await s.execute(
                    select(ModelInstance.channel_id, ModelInstance.model_id, ModelInstance.upstream_model)
                    .where(ModelInstance.channel_id.in_(channel_ids))
                )
                upstream = {(c, m): u for c, m, u in found.all()}
        return rows, upstream

    def _price(self, row: Any, upstream: dict[tuple[int, str], str]) -> tuple[str | None, float]:
        """(currency, cost) of an aggregated row; currency None when the model is unknown."""
        names = [upstream.get((row.channel_id, row.model)), row.model]
        for name in names:
            if name is None:
                continue
            match = self.catalog.price_for(name, row.provider_kind)
            if match is not None:
                return match.currency, match.cost(int(row.prompt), int(row.completion))
        return None, 0.0

    def _add(self, totals: _Totals, row: Any, upstream: dict[tuple[int, str], str]) -> None:
        totals.requests += int(row.requests)
        totals.errors += int(row.errors or 0)
        totals.prompt += int(row.prompt)
        totals.completion += int(row.completion)
        currency, cost = self._price(row, upstream)
        if currency is None:
            if row.prompt or row.completion:
                totals.unpriced.add(row.model)
        else:
            totals.cost[currency] += cost

    async def overview(self, application_ids: list[int] | None = None) -> dict[str, Any]:
        """Today's totals (UTC day)."""
        today = self._today()
        totals = _Totals()
        rows, upstream = await self._rows(today, today, application_ids, by_day=False)
        for row in rows:
            self._add(totals, row, upstream)
        return {"date": today.isoformat(), **totals.as_dict()}

    async def trend(self, days: int, application_ids: list[int] | None = None) -> list[dict[str, Any]]:
        """One entry per day, oldest first, ending today; days without calls are zero."""
        if not 1 <= days <= MAX_DAYS:
            raise validation_error(f"days must be 1..{MAX_DAYS}")
        today = self._today()
        first = today - timedelta(days=days - 1)
        per_day: dict[str, _Totals] = {(first + timedelta(days=i)).isoformat(): _Totals() for i in range(days)}
        rows, upstream = await self._rows(first, today, application_ids, by_day=True)
        for row in rows:
            key = row.day.isoformat() if isinstance(row.day, date) else str(row.day)[:10]
            if key in per_day:
                self._add(per_day[key], row, upstream)
        return [{"date": day, **t.as_dict()} for day, t in per_day.items()]

    async def model_usage(
        self, limit: int, days: int = 30, application_ids: list[int] | None = None
    ) -> list[dict[str, Any]]:
        """Top `limit` models of the last `days` days (including today) by total tokens, then requests."""
        if not 1 <= limit <= MAX_LIMIT:
            raise validation_error(f"limit must be 1..{MAX_LIMIT}")
        if not 1 <= days <= MAX_DAYS:
            raise validation_error(f"days must be 1..{MAX_DAYS}")
        today = self._today()
        per_model: dict[str, _Totals] = defaultdict(_Totals)
        rows, upstream = await self._rows(today - timedelta(days=days - 1), today, application_ids, by_day=False)
        for row in rows:
            if row.model:  # calls refused before a model was named are no model's usage
                self._add(per_model[row.model], row, upstream)
        grand = sum(t.prompt + t.completion for t in per_model.values())
        ranked = sorted(per_model.items(), key=lambda kv: (-(kv[1].prompt + kv[1].completion), -kv[1].requests,
                                                           kv[0]))
        out = []
        for model, t in ranked[:limit]:
            entry = {"model": model, **t.as_dict()}
            entry["priced"] = not t.unpriced
            entry["tokenShare"] = round((t.prompt + t.completion) / grand, 6) if grand else 0.0
            del entry["unpricedModels"]
            out.append(entry)
        return out
