"""The service layer shared by the CLI and the management API.

`Services(db, box, settings, on_change)` groups one service per resource.
Every operation is async and returns plain dataclasses (services.views);
errors are modelgate.errors GatewayErrors (404 NOT_FOUND, 409 CONFLICT,
400 VALIDATION_ERROR). `on_change` (sync or async, no arguments) runs after
each committed change to gateway configuration, so the gateway can reload
its snapshot at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelgate.auth.crypto import SecretBox
from modelgate.config import Settings
from modelgate.services.admin_tokens import AdminTokenService
from modelgate.services.api_keys import ApiKeyService
from modelgate.services.applications import ApplicationService
from modelgate.services.audit import AuditService
from modelgate.services.blacklist import BlacklistService
from modelgate.services.breakers import BreakerService
from modelgate.services.call_log import CallLogService
from modelgate.services.channels import ChannelService, ModelInstanceService
from modelgate.services.context import OnChange, ServiceContext
from modelgate.services.providers import ProviderService
from modelgate.services.users import UserService
from modelgate.storage.db import Database

if TYPE_CHECKING:
    from modelgate.services.declarative import DeclarativeService


class Services:
    def __init__(
        self, db: Database, box: SecretBox, settings: Settings, on_change: OnChange | None = None
    ) -> None:
        self.ctx = ServiceContext(db, box, settings, on_change)
        self.users = UserService(self.ctx)
        self.applications = ApplicationService(self.ctx)
        self.api_keys = ApiKeyService(self.ctx)
        self.providers = ProviderService(self.ctx)
        self.channels = ChannelService(self.ctx)
        self.models = ModelInstanceService(self.ctx)
        self.blacklist = BlacklistService(self.ctx)
        self.call_log = CallLogService(self.ctx)
        self.breakers = BreakerService(self.ctx, self.providers, self.channels)
        self.admin_tokens = AdminTokenService(self.ctx)
        self.audit = AuditService(self.ctx)
        self._declarative: DeclarativeService | None = None

    @property
    def declarative(self) -> DeclarativeService:
        """Configuration as code (the CLI and the management API): built on first use, so a serving
        worker never loads its pydantic models."""
        if self._declarative is None:
            from modelgate.services.declarative import DeclarativeService

            self._declarative = DeclarativeService(self)
        return self._declarative

    @property
    def on_change(self) -> OnChange | None:
        return self.ctx.on_change

    @on_change.setter
    def on_change(self, hook: OnChange | None) -> None:
        # The server creates the gateway after the services, then plugs in its refresh.
        self.ctx.on_change = hook


__all__ = ["OnChange", "Services"]
