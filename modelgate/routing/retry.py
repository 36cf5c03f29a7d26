"""Retry by upstream error type (spec 7.5), with the parameters of `gateway.retry.*`.

Three kinds of error:
- retried on the same endpoint with a per-type backoff, then failed over;
- failed over at once, never retried (QUOTA_EXCEEDED, AUTHENTICATION_ERROR);
- final at once, neither retried nor failed over (INVALID_REQUEST, MODEL_NOT_FOUND):
  another channel would get the same illegal request or the same missing model.
"""

from __future__ import annotations

import random

from modelgate.config import RetryPolicy, RetrySettings
from modelgate.errors import ErrorType, UpstreamError

JITTER = 0.2  # each wait is spread over +-20 % so callers do not retry in lockstep

FINAL = frozenset({ErrorType.INVALID_REQUEST, ErrorType.MODEL_NOT_FOUND})


def fails_over(error_type: ErrorType) -> bool:
    """Whether another endpoint or channel is tried after this error."""
    return error_type not in FINAL


class RetryPolicies:
    def __init__(self, settings: RetrySettings, rng: random.Random | None = None) -> None:
        self.settings = settings
        self.rng = rng or random.Random()
        self._by_type: dict[ErrorType, RetryPolicy] = {
            ErrorType.RATE_LIMIT_ERROR: settings.rate_limit_error,
            ErrorType.TIMEOUT_ERROR: settings.timeout_error,
            ErrorType.SERVICE_UNAVAILABLE: settings.service_unavailable,
            ErrorType.UPSTREAM_ERROR: settings.upstream_error,
            ErrorType.NETWORK_ERROR: settings.network_error,
            ErrorType.UNKNOWN_ERROR: settings.unknown_error,
        }

    def max_retries(self, error_type: ErrorType) -> int:
        policy = self._by_type.get(error_type)
        return policy.max_retries if policy else 0

    def delay(self, err: UpstreamError, retry_number: int) -> float | None:
        """Seconds to wait before retry `retry_number` (1-based), or None when no retry is left.

        An upstream Retry-After is honoured as given, up to the policy cap; it is
        not jittered since waiting less than asked would just be refused again.
        """
        policy = self._by_type.get(err.error_type)
        if policy is None or retry_number > policy.max_retries:
            return None
        if err.retry_after is not None:
            return min(err.retry_after, policy.max_delay)
        wait = policy.initial_delay * policy.multiplier ** (retry_number - 1)
        if self.settings.jitter:
            wait *= 1 + self.rng.uniform(-JITTER, JITTER)
        return min(wait, policy.max_delay)
