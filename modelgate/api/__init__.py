"""The management API under /api/v1 (see modelgate.api.app)."""

from modelgate.api.app import API_PREFIX, create_management_app
from modelgate.api.state import ManagementState
from modelgate.routing.health import EndpointCheck, HealthCheckResult

__all__ = ["API_PREFIX", "EndpointCheck", "HealthCheckResult", "ManagementState", "create_management_app"]
