"""The plan catalog: public plans and per-model prices of the provider kinds.

The built-in catalog (plans.yaml next to this file) is loaded at start-up and
validated; an admin file (MODELGATE_CATALOG_FILE, YAML or JSON, same format)
is merged over it: providers match by `kind`, plans by `planCode`, models by
`id`. Given fields replace built-in ones, new entries are added.
"""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

BUILTIN_FILE = Path(__file__).with_name("plans.yaml")
CATALOG_FILE_ENV = "MODELGATE_CATALOG_FILE"

Capability = Literal["streaming", "functionCalling", "vision", "reasoning"]
CAPABILITIES: tuple[str, ...] = ("streaming", "functionCalling", "vision")
PlanType = Literal["PAY_AS_YOU_GO", "BATCH", "FREE", "ENTERPRISE", "SELF_HOSTED"]


class CatalogError(ValueError):
    """The catalog (built-in or admin file) does not validate."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ModelPrice(_Strict):
    id: str = Field(min_length=1)
    name: str | None = None
    aliases: list[str] = Field(default_factory=list)
    input: float = Field(ge=0)  # per 1M prompt tokens
    output: float = Field(ge=0)  # per 1M completion tokens
    contextWindow: int | None = Field(default=None, gt=0)
    capabilities: list[Capability] = Field(default_factory=list)


class DefaultPrice(_Strict):
    input: float = Field(ge=0)
    output: float = Field(ge=0)
    capabilities: list[Capability] = Field(default_factory=list)


class Plan(_Strict):
    planCode: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    name: str
    type: PlanType
    currency: str = Field(default="USD", min_length=3, max_length=3)
    default: bool = False
    description: str = ""
    derivedFrom: str | None = None
    priceFactor: float | None = Field(default=None, ge=0)
    defaultPrice: DefaultPrice | None = None
    models: list[ModelPrice] = Field(default_factory=list)

    @model_validator(mode="after")
    def _derivation(self) -> Plan:
        if (self.derivedFrom is None) != (self.priceFactor is None):
            raise ValueError("derivedFrom and priceFactor go together")
        return self


class ProviderCatalog(_Strict):
    kind: str = Field(min_length=1)
    name: str
    pricingUrl: str | None = None
    plans: list[Plan] = Field(default_factory=list)


class CatalogFile(_Strict):
    pricesCheckedAt: str
    providers: list[ProviderCatalog]


@dataclass(frozen=True, slots=True)
class PriceMatch:
    provider_kind: str
    plan_code: str
    model_id: str
    input: float
    output: float
    currency: str

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1_000_000


_DATE_SUFFIX = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8})$")


class Catalog:
    """The validated, merged catalog with derived plans expanded and lookup indexes."""

    def __init__(self, data: CatalogFile, sources: list[str]) -> None:
        self.data = data
        self.sources = sources
        self.prices_checked_at = data.pricesCheckedAt
        self.providers: dict[str, ProviderCatalog] = {}
        self.plans: dict[str, tuple[ProviderCatalog, Plan]] = {}
        for provider in data.providers:
            if provider.kind in self.providers:
                raise CatalogError(f"provider kind {provider.kind!r} listed twice")
            self.providers[provider.kind] = provider
            for plan in provider.plans:
                if plan.planCode in self.plans:
                    raise CatalogError(f"planCode {plan.planCode!r} listed twice")
                self.plans[plan.planCode] = (provider, plan)
        self._expand_derived()
        # Price lookup: per provider kind from its default plan; globally the
        # first default plan (in file order) that lists the model.
        self._by_kind: dict[str, dict[str, PriceMatch]] = {}
        self._kind_default: dict[str, PriceMatch] = {}
        self._global: dict[str, PriceMatch] = {}
        for provider in data.providers:
            default = self.default_plan(provider.kind)
            if default is None:
                continue
            index: dict[str, PriceMatch] = {}
            for m in default.models:
                match = PriceMatch(provider.kind, default.planCode, m.id, m.input, m.output, default.currency)
                for name in (m.id, *m.aliases):
                    index.setdefault(name, match)
                    self._global.setdefault(name, match)
            self._by_kind[provider.kind] = index
            if default.defaultPrice is not None:
                self._kind_default[provider.kind] = PriceMatch(
                    provider.kind, default.planCode, "*", default.defaultPrice.input,
                    default.defaultPrice.output, default.currency,
                )

    def _expand_derived(self) -> None:
        for code, (_provider, plan) in self.plans.items():
            if plan.derivedFrom is None:
                continue
            base = self.plans.get(plan.derivedFrom)
            if base is None:
                raise CatalogError(f"plan {code!r} derives from unknown plan {plan.derivedFrom!r}")
            if base[1].derivedFrom is not None:
                raise CatalogError(f"plan {code!r} derives from a derived plan")
            factor = plan.priceFactor or 0.0
            own = {m.id for m in plan.models}
            plan.models.extend(
                m.model_copy(update={"input": round(m.input * factor, 6), "output": round(m.output * factor, 6)})
                for m in base[1].models
                if m.id not in own
            )

    def default_plan(self, kind: str) -> Plan | None:
        provider = self.providers.get(kind)
        if provider is None or not provider.plans:
            return None
        return next((p for p in provider.plans if p.default), provider.plans[0])

    def price_for(self, model: str, provider_kind: str | None = None) -> PriceMatch | None:
        """The list price of a call's model; None when the catalog does not know it."""
        candidates = [model]
        stripped = _DATE_SUFFIX.sub("", model)
        if stripped != model:
            candidates.append(stripped)
        if provider_kind is not None:
            index = self._by_kind.get(provider_kind, {})
            for name in candidates:
                if name in index:
                    return index[name]
            if provider_kind in self._kind_default:
                return self._kind_default[provider_kind]
        for name in candidates:
            if name in self._global:
                return self._global[name]
        return None


def _read(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    loaded = yaml.safe_load(text)  # YAML is a superset of JSON
    if not isinstance(loaded, dict):
        raise CatalogError(f"{path}: the catalog must be a mapping")
    return loaded


def _merge_by(base: list[dict[str, Any]], extra: list[dict[str, Any]], key: str, nested: dict[str, str]) -> None:
    index = {item.get(key): item for item in base}
    for item in extra:
        target = index.get(item.get(key))
        if target is None:
            base.append(item)
            index[item.get(key)] = item
            continue
        for field, value in item.items():
            if field in nested and isinstance(value, list) and isinstance(target.get(field), list):
                sub_key = nested[field]
                _merge_by(target[field], value, sub_key, {"models": "id"} if field == "plans" else {})
            else:
                target[field] = value


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    if "pricesCheckedAt" in extra:
        merged["pricesCheckedAt"] = extra["pricesCheckedAt"]
    _merge_by(merged.setdefault("providers", []), copy.deepcopy(extra.get("providers", [])), "kind",
              {"plans": "planCode"})
    return merged


def load_catalog(extra_file: str | os.PathLike[str] | None = None) -> Catalog:
    """Load the built-in catalog and merge the admin file (argument, else MODELGATE_CATALOG_FILE)."""
    raw = _read(BUILTIN_FILE)
    sources = [str(BUILTIN_FILE)]
    extra = extra_file if extra_file is not None else os.environ.get(CATALOG_FILE_ENV)
    if extra:
        path = Path(extra)
        if not path.is_file():
            raise CatalogError(f"catalog file {path} does not exist")
        raw = merge(raw, _read(path))
        sources.append(str(path))
    try:
        data = CatalogFile.model_validate(raw)
    except ValueError as exc:
        raise CatalogError(f"invalid plan catalog ({', '.join(sources)}): {exc}") from exc
    return Catalog(data, sources)
