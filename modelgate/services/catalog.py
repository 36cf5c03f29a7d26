"""Read views of the plan catalog for the management API and the console."""

from __future__ import annotations

from typing import Any

from modelgate.catalog import CAPABILITIES, Catalog, ModelPrice, Plan, ProviderCatalog
from modelgate.errors import not_found, validation_error

PRICE_UNIT = "per 1M tokens"


def _model(m: ModelPrice, currency: str) -> dict[str, Any]:
    return {
        "id": m.id, "name": m.name or m.id, "aliases": list(m.aliases), "inputPrice": m.input,
        "outputPrice": m.output, "currency": currency, "contextWindow": m.contextWindow,
        "capabilities": list(m.capabilities),
    }


class CatalogService:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    def _plan_summary(self, provider: ProviderCatalog, plan: Plan) -> dict[str, Any]:
        return {
            "planCode": plan.planCode, "providerKind": provider.kind, "providerName": provider.name,
            "name": plan.name, "type": plan.type, "currency": plan.currency, "default": plan is
            self.catalog.default_plan(provider.kind), "description": plan.description,
            "modelCount": len(plan.models), "pricesCheckedAt": self.catalog.prices_checked_at,
        }

    def providers(self) -> list[dict[str, Any]]:
        from modelgate.providers.registry import KINDS

        out = []
        for provider in self.catalog.data.providers:
            default = self.catalog.default_plan(provider.kind)
            kind = KINDS.get(provider.kind)
            out.append({
                "kind": provider.kind, "name": provider.name, "pricingUrl": provider.pricingUrl,
                "supported": kind is not None,  # the gateway has an adapter for this kind
                "defaultBaseUrl": kind.default_base_url if kind else None,
                "keyRequired": kind.key_required if kind else True,
                "defaultPlanCode": default.planCode if default else None,
                "planCodes": [p.planCode for p in provider.plans],
                "modelCount": len(default.models) if default else 0,
            })
        return out

    def plans(self, provider_kind: str | None = None, plan_type: str | None = None) -> list[dict[str, Any]]:
        out = []
        for provider in self.catalog.data.providers:
            if provider_kind is not None and provider.kind != provider_kind:
                continue
            for plan in provider.plans:
                if plan_type is not None and plan.type != plan_type.upper():
                    continue
                out.append(self._plan_summary(provider, plan))
        return out

    def _get(self, plan_code: str) -> tuple[ProviderCatalog, Plan]:
        found = self.catalog.plans.get(plan_code)
        if found is None:
            raise not_found(f"plan {plan_code!r} not found")
        return found

    def plan(self, plan_code: str) -> dict[str, Any]:
        provider, plan = self._get(plan_code)
        detail = self._plan_summary(provider, plan)
        detail["derivedFrom"] = plan.derivedFrom
        detail["priceFactor"] = plan.priceFactor
        detail["defaultPrice"] = (
            {"inputPrice": plan.defaultPrice.input, "outputPrice": plan.defaultPrice.output,
             "capabilities": list(plan.defaultPrice.capabilities)} if plan.defaultPrice else None
        )
        detail["models"] = [_model(m, plan.currency) for m in plan.models]
        return detail

    def pricing(self, plan_code: str) -> dict[str, Any]:
        provider, plan = self._get(plan_code)
        return {
            "planCode": plan.planCode, "providerKind": provider.kind, "currency": plan.currency,
            "unit": PRICE_UNIT, "pricesCheckedAt": self.catalog.prices_checked_at,
            "prices": [
                {"model": m.id, "inputPrice": m.input, "outputPrice": m.output} for m in plan.models
            ],
        }

    def models(self, keyword: str | None = None, capability: str | None = None) -> list[dict[str, Any]]:
        """Every model of the catalog once per provider, priced from the provider's default plan
        when listed there (else from the first plan listing it), with all plans offering it."""
        if capability is not None and capability not in CAPABILITIES:
            raise validation_error(f"capability must be one of {', '.join(CAPABILITIES)}")
        needle = (keyword or "").strip().lower()
        out = []
        for provider in self.catalog.data.providers:
            default = self.catalog.default_plan(provider.kind)
            ordered = sorted(provider.plans, key=lambda p: p is not default)
            seen: dict[str, dict[str, Any]] = {}
            for plan in ordered:
                for m in plan.models:
                    entry = seen.get(m.id)
                    if entry is None:
                        entry = _model(m, plan.currency)
                        entry.update(providerKind=provider.kind, providerName=provider.name,
                                     planCode=plan.planCode, plans=[])
                        seen[m.id] = entry
                    entry["plans"].append(plan.planCode)
            for entry in seen.values():
                if capability is not None and capability not in entry["capabilities"]:
                    continue
                haystack = " ".join([entry["id"], entry["name"], provider.kind, provider.name, *entry["aliases"]])
                if needle and needle not in haystack.lower():
                    continue
                out.append(entry)
        return out
