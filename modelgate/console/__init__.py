"""The web console's sources (web/) and its build (dist/), served by modelgate.api.console."""

from pathlib import Path

DIST = Path(__file__).resolve().parent / "dist"
