"""Applications (what a gateway key is bound to) and their authorised channels."""

from __future__ import annotations

from sqlalchemy import select

from modelgate.services.context import ServiceContext, clean_name, fetch, positive
from modelgate.services.views import ApplicationView
from modelgate.storage.models import Application, Channel, User


class ApplicationService:
    def __init__(self, ctx: ServiceContext) -> None:
        self.ctx = ctx

    async def create(
        self,
        name: str,
        description: str = "",
        timeout_seconds: float | None = None,
        enabled: bool = True,
        owner_id: int | None = None,
    ) -> ApplicationView:
        name = clean_name(name, "application name")
        if timeout_seconds is None:
            timeout_seconds = self.ctx.settings.gateway.default_app_timeout_seconds
        app = Application(
            name=name, description=description or "", timeout_seconds=positive(timeout_seconds, "timeout"),
            enabled=enabled, owner_id=owner_id, channels=[],
        )
        async with self.ctx.change(f"application {name!r} already exists") as s:
            if owner_id is not None:
                await fetch(s, User, int(owner_id), "user")
            s.add(app)
            await s.flush()
            view = ApplicationView.of(app)
        return view

    async def list(self) -> list[ApplicationView]:
        async with self.ctx.tx() as s:
            rows = (await s.scalars(select(Application).order_by(Application.id))).all()
            return [ApplicationView.of(a) for a in rows]

    async def get(self, ref: int | str) -> ApplicationView:
        async with self.ctx.tx() as s:
            return ApplicationView.of(await fetch(s, Application, ref, "application"))

    async def update(
        self,
        ref: int | str,
        *,
        name: str | None = None,
        description: str | None = None,
        timeout_seconds: float | None = None,
        enabled: bool | None = None,
    ) -> ApplicationView:
        async with self.ctx.change(f"application {name!r} already exists") as s:
            app = await fetch(s, Application, ref, "application")
            if name is not None:
                app.name = clean_name(name, "application name")
            if description is not None:
                app.description = description
            if timeout_seconds is not None:
                app.timeout_seconds = positive(timeout_seconds, "timeout")
            if enabled is not None:
                app.enabled = bool(enabled)
            await s.flush()
            view = ApplicationView.of(app)
        return view

    async def delete(self, ref: int | str) -> None:
        """Deletes the application and (by cascade) its keys."""
        async with self.ctx.change() as s:
            await s.delete(await fetch(s, Application, ref, "application"))

    async def authorize_channel(self, app_ref: int | str, channel_ref: int | str) -> ApplicationView:
        async with self.ctx.change() as s:
            app = await fetch(s, Application, app_ref, "application")
            channel = await fetch(s, Channel, channel_ref, "channel")
            if channel not in app.channels:
                app.channels.append(channel)
            await s.flush()
            view = ApplicationView.of(app)
        return view

    async def revoke_channel(self, app_ref: int | str, channel_ref: int | str) -> ApplicationView:
        async with self.ctx.change() as s:
            app = await fetch(s, Application, app_ref, "application")
            channel = await fetch(s, Channel, channel_ref, "channel")
            if channel in app.channels:
                app.channels.remove(channel)
            await s.flush()
            view = ApplicationView.of(app)
        return view
