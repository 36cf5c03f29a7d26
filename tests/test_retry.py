"""Retry policies per error type: spec 7.5 with the defaults of gateway.retry.*."""

from __future__ import annotations

import random

import pytest

from modelgate.config import RetrySettings, load_settings
from modelgate.errors import ErrorType
from modelgate.routing.retry import JITTER, RetryPolicies, fails_over
from tests.resilience_fakes import upstream


def waits(policies: RetryPolicies, kind: ErrorType, retry_after: float | None = None) -> list[float]:
    """Every wait the policy grants, in order, until it says stop."""
    out: list[float] = []
    err = upstream(kind, retry_after)
    while (wait := policies.delay(err, len(out) + 1)) is not None:
        out.append(wait)
    return out


@pytest.fixture
def exact() -> RetryPolicies:
    return RetryPolicies(RetrySettings(jitter=False))


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        # at most 5 retries, first 2 s, exponential (x2), capped at 60 s
        (ErrorType.RATE_LIMIT_ERROR, [2.0, 4.0, 8.0, 16.0, 32.0]),
        # quick retry
        (ErrorType.TIMEOUT_ERROR, [0.2, 0.4]),
        # fixed interval, 3 retries, 5 s apart
        (ErrorType.SERVICE_UNAVAILABLE, [5.0, 5.0, 5.0]),
        # exponential, 3 retries, first 1 s, factor 2
        (ErrorType.UPSTREAM_ERROR, [1.0, 2.0, 4.0]),
        (ErrorType.NETWORK_ERROR, [0.5, 1.0, 2.0]),
        (ErrorType.UNKNOWN_ERROR, [1.0, 2.0]),
        # no retry (failover follows for the first two, nothing for the last two)
        (ErrorType.QUOTA_EXCEEDED, []),
        (ErrorType.AUTHENTICATION_ERROR, []),
        (ErrorType.INVALID_REQUEST, []),
        (ErrorType.MODEL_NOT_FOUND, []),
    ],
)
def test_default_waits_per_error_type(exact: RetryPolicies, kind: ErrorType, expected: list[float]) -> None:
    assert waits(exact, kind) == pytest.approx(expected)
    assert exact.max_retries(kind) == len(expected)


def test_rate_limit_backoff_is_capped_at_60_seconds() -> None:
    settings = RetrySettings(jitter=False)
    settings.rate_limit_error.initial_delay = 10.0
    assert waits(RetryPolicies(settings), ErrorType.RATE_LIMIT_ERROR) == [10.0, 20.0, 40.0, 60.0, 60.0]


def test_upstream_retry_after_is_honoured_within_the_cap(exact: RetryPolicies) -> None:
    assert waits(exact, ErrorType.RATE_LIMIT_ERROR, retry_after=7) == [7.0] * 5
    assert waits(exact, ErrorType.RATE_LIMIT_ERROR, retry_after=300) == [60.0] * 5
    assert waits(exact, ErrorType.SERVICE_UNAVAILABLE, retry_after=2) == [2.0] * 3


def test_retry_after_is_not_jittered() -> None:
    jittered = RetryPolicies(RetrySettings(), random.Random(1))
    assert waits(jittered, ErrorType.RATE_LIMIT_ERROR, retry_after=7) == [7.0] * 5


def test_jitter_is_on_by_default_bounded_and_reproducible_with_a_seed() -> None:
    assert RetrySettings().jitter is True
    first = waits(RetryPolicies(RetrySettings(), random.Random(42)), ErrorType.UPSTREAM_ERROR)
    again = waits(RetryPolicies(RetrySettings(), random.Random(42)), ErrorType.UPSTREAM_ERROR)
    assert first == again
    assert len(first) == 3
    for wait, base in zip(first, [1.0, 2.0, 4.0], strict=True):
        assert base * (1 - JITTER) <= wait <= base * (1 + JITTER)
    assert first != [1.0, 2.0, 4.0]


def test_jittered_wait_never_exceeds_the_cap() -> None:
    policies = RetryPolicies(RetrySettings(), random.Random(7))
    for _ in range(200):
        for n in range(1, 6):
            wait = policies.delay(upstream(ErrorType.RATE_LIMIT_ERROR), n)
            assert wait is not None and wait <= 60.0


def test_failover_classes() -> None:
    assert fails_over(ErrorType.QUOTA_EXCEEDED) and fails_over(ErrorType.AUTHENTICATION_ERROR)
    assert fails_over(ErrorType.RATE_LIMIT_ERROR) and fails_over(ErrorType.UPSTREAM_ERROR)
    assert not fails_over(ErrorType.INVALID_REQUEST)
    assert not fails_over(ErrorType.MODEL_NOT_FOUND)


def test_parameters_come_from_the_environment() -> None:
    settings = load_settings(environ={
        "GATEWAY_RETRY_UPSTREAM_ERROR_MAX_RETRIES": "5",
        "GATEWAY_RETRY_UPSTREAM_ERROR_INITIAL_DELAY": "0.5",
        "GATEWAY_RETRY_JITTER": "false",
    })
    policies = RetryPolicies(settings.gateway.retry)
    assert waits(policies, ErrorType.UPSTREAM_ERROR) == [0.5, 1.0, 2.0, 4.0, 8.0]


def test_parameters_come_from_the_config_file(tmp_path) -> None:
    path = tmp_path / "modelgate.yaml"
    path.write_text(
        "gateway:\n  retry:\n    jitter: false\n    service_unavailable:\n      max_retries: 2\n"
        "      initial_delay: 3\n"
    )
    policies = RetryPolicies(load_settings(str(path), environ={}).gateway.retry)
    assert waits(policies, ErrorType.SERVICE_UNAVAILABLE) == [3.0, 3.0]
