"""Serves the built web console (modelgate/console/dist) for mounting at /console."""

from __future__ import annotations

from pathlib import Path

from starlette.exceptions import HTTPException
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from modelgate.console import DIST


class _SpaFiles(StaticFiles):
    """Unknown paths fall back to index.html so client-side routes survive a reload."""

    async def get_response(self, path: str, scope: Scope):
        try:
            return await super().get_response(path, scope)
        except HTTPException as exc:
            if exc.status_code != 404 or "." in Path(path).name:
                raise
            return await super().get_response("index.html", scope)


def console_app(dist: Path = DIST) -> StaticFiles | None:
    """The console's static files, or None when no build exists."""
    if not (dist / "index.html").is_file():
        return None
    return _SpaFiles(directory=str(dist), html=True)
