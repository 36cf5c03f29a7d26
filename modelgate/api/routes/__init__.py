"""Routers of the management API, one module per area."""
