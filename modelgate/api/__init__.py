"""The management API under /api/v1 (see modelgate.api.app)."""

from modelgate.api.app import API_PREFIX, create_management_app
from modelgate.api.state import EndpointCheck, HealthCheckResult, ManagementState

__all__ = ["API_PREFIX", "EndpointCheck", "HealthCheckResult", "ManagementState", "create_management_app"]
