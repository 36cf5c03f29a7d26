"""A file in the data directory whose modification time says "the configuration changed".

Gateways and the CLI on one host share the data directory: touching the file after a change
lets sibling workers and a running server apply it within a quarter second, with or without Redis.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from modelgate.config import Settings

log = logging.getLogger(__name__)

CHANGE_MARKER = "config-changed"


def marker_path(settings: Settings) -> Path:
    return Path(settings.data_dir) / CHANGE_MARKER


def touch_change_marker(settings: Settings) -> None:
    marker = marker_path(settings)
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
        os.utime(marker)
    except OSError as exc:
        log.warning("could not touch %s: %r", marker, exc)


def marker_mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None
