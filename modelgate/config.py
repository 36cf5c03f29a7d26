"""Settings: safe defaults, then an optional YAML config file, then environment variables.

Every leaf setting has an environment name made from its dotted path, upper
case with dots as underscores: `gateway.retry.upstream_error.max_retries` is
`GATEWAY_RETRY_UPSTREAM_ERROR_MAX_RETRIES`. A few well-known names are kept
short: SERVER_PORT, DATABASE_URL, REDIS_URL, ENCRYPTION_KEY, MODELGATE_ENV.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, field

# msgspec, not pydantic: every worker loads the settings, and pydantic with the settings as its models
# cost a serving process 9 MB (bench.agent, RSS at start); msgspec is on the hot path anyway.


class Section(msgspec.Struct, kw_only=True):
    """A group of settings."""


class RetryPolicy(Section):
    max_retries: int
    initial_delay: float  # seconds before the first retry
    multiplier: float = 2.0  # 1.0 = fixed interval
    max_delay: float = 60.0


def _policy(max_retries: int, initial: float, multiplier: float = 2.0, max_delay: float = 60.0) -> Any:
    return field(default_factory=lambda: RetryPolicy(
        max_retries=max_retries, initial_delay=initial, multiplier=multiplier, max_delay=max_delay
    ))


class RetrySettings(Section):
    """Spec 7.5. Types not listed here are never retried."""

    jitter: bool = True  # up to +-20 % on each wait, so clients do not retry in lockstep
    rate_limit_error: RetryPolicy = _policy(5, 2.0, 2.0, 60.0)
    timeout_error: RetryPolicy = _policy(2, 0.2, 2.0, 2.0)
    service_unavailable: RetryPolicy = _policy(3, 5.0, 1.0, 5.0)
    upstream_error: RetryPolicy = _policy(3, 1.0, 2.0, 30.0)
    network_error: RetryPolicy = _policy(3, 0.5, 2.0, 10.0)
    unknown_error: RetryPolicy = _policy(2, 1.0, 2.0, 10.0)


class BreakerSettings(Section):
    consecutive_failures: int = 5
    failure_rate: float = 0.5
    min_calls: int = 20
    window_seconds: float = 60.0
    recovery_seconds: float = 30.0
    half_open_calls: int = 3
    # A HALF_OPEN trial that has not reported within this time gives its slot back.
    half_open_trial_timeout_seconds: float = 120.0


class FailoverSettings(Section):
    strategy: Literal["FAIL_OVER"] = "FAIL_OVER"
    cooldown_seconds: float = 30.0  # a failed key or channel is skipped this long


class LifecycleSettings(Section):
    not_found_threshold: int = 3
    not_found_window_seconds: float = 86400.0
    probe_interval_seconds: float = 3600.0  # 0 disables the scheduled probe


class RateLimitSettings(Section):
    capacity: float = 120.0
    refill_per_second: float = 2.0


class GatewaySettings(Section):
    retry: RetrySettings = field(default_factory=RetrySettings)
    breaker: BreakerSettings = field(default_factory=BreakerSettings)
    failover: FailoverSettings = field(default_factory=FailoverSettings)
    lifecycle: LifecycleSettings = field(default_factory=LifecycleSettings)
    rate_limit: RateLimitSettings = field(default_factory=RateLimitSettings)
    cache_refresh_seconds: float = 5.0  # how often the configuration version is checked (Redis) or reloaded
    full_refresh_seconds: float = 60.0  # with Redis: reload everything this often even without a change
    default_app_timeout_seconds: float = 120.0
    # A token count (count_tokens, input_tokens) waits for the provider's own count at most this long
    # (and never past the application timeout), then answers the local estimate: an agent waits for it.
    count_timeout_seconds: float = 10.0
    stream_keepalive_seconds: float = 15.0
    trust_forwarded_for: bool = False  # honour X-Forwarded-For only behind a known proxy


class UpstreamSettings(Section):
    """Per-attempt limits and the connection pool (all per worker process)."""

    connect_timeout_seconds: float = 10.0  # TCP + TLS connect of one attempt
    # Streams: from sending the request to the first upstream event. Streaming upstreams answer
    # within seconds, so a hung one is failed over long before the application timeout.
    stream_first_byte_timeout_seconds: float = 30.0
    # Non-streamed calls: from sending the request to the first byte of the answer (its headers
    # arrive only once the whole generation is done, so this is longer; whitespace some proxies
    # send to keep a slow answer open is not the answer). 0 = only the application timeout.
    response_timeout_seconds: float = 90.0
    # Then from that first byte to the last: a finished answer arrives at once, so an upstream
    # dripping its body is failed over within seconds. 0 = only the application timeout.
    body_timeout_seconds: float = 10.0
    max_body_bytes: int = 64 * 1024 * 1024  # a non-streamed answer; beyond: UPSTREAM_ERROR
    max_event_bytes: int = 16 * 1024 * 1024  # one stream event (or NDJSON line); beyond: UPSTREAM_ERROR
    # Calls in flight per worker; beyond, new calls get a fast 429 (the gateway is full). Also
    # lowered at start to what the open-file limit allows (two sockets per call).
    max_in_flight: int = 8000
    pool_size: int = 8192  # 0 = no limit; above max_in_flight so no call waits for a connection
    pool_size_per_host: int = 0  # 0 = no per-host limit (one upstream often serves most calls)


class UsageSettings(Section):
    """The call-log writer (storage/usage_writer.py); bounds and guarantees in docs/decisions.md."""

    flush_interval_seconds: float = 0.5
    batch_size: int = 500
    db_timeout_seconds: float = 5.0  # connect, each statement, and the pool wait of the writer
    # At shutdown the writer tries this long to write what is pending; the rest stays in the journal.
    shutdown_flush_seconds: Annotated[float, Meta(gt=0, le=3600)] = 10.0
    max_pending_rows: int = 100_000  # per table, in memory; call rows beyond it wait in the journal
    journal: bool = True  # append accepted call rows to data_dir/call-journal before writing them
    journal_max_bytes: int = 1 << 30  # beyond it rows are kept in memory only
    retention_days: int = 90  # call log and resilience events; 0 keeps them for ever
    retention_batch_rows: int = 5_000  # rows deleted per transaction
    retention_interval_seconds: float = 3600.0


class TelemetrySettings(Section):
    """OpenTelemetry traces (docs/observability.md); off while otlp_endpoint is unset."""

    otlp_endpoint: str | None = None  # OTLP/HTTP collector, e.g. http://collector:4318
    service_name: str = "modelgate"
    sample_ratio: Annotated[float, Meta(ge=0.0, le=1.0)] = 1.0


class ServerSettings(Section):
    host: str = "0.0.0.0"
    port: int = 8080
    workers: int = 1
    implementation: Literal["uvicorn", "granian"] = "uvicorn"
    drain_seconds: float = 30.0  # on shutdown, in-flight calls and streams get this long to finish
    # After SIGTERM, /readyz answers 503 "draining" this long while the server still accepts, so a
    # load balancer's health check takes the instance out before it stops listening (deploy/ sets 5).
    drain_notice_seconds: Annotated[float, Meta(ge=0, le=600)] = 0.0


class Settings(Section):
    env: Literal["local", "production"] = "local"
    data_dir: str = "./data"
    database_url: str | None = None  # None = SQLite file in data_dir
    database_timeout_seconds: float = 30.0  # connect, statement and pool wait (PostgreSQL)
    redis_url: str | None = None
    redis_prefix: str = "modelgate:"  # keeps deployments sharing one Redis apart
    redis_timeout_seconds: float = 0.25  # connect and per-command limit: a hung Redis must not stall calls
    redis_retry_seconds: float = 2.0  # after a Redis failure, per-instance state is used this long before retrying
    encryption_key: str | None = None
    log_level: str = "INFO"
    log_format: Literal["text", "json"] = "text"  # json: one object per line, with the trace id
    metrics_token: str | None = None  # when set, GET /metrics needs `Authorization: Bearer <token>`
    catalog_file: str | None = None  # the admin's additions to the built-in plan catalog
    server: ServerSettings = field(default_factory=ServerSettings)
    gateway: GatewaySettings = field(default_factory=GatewaySettings)
    upstream: UpstreamSettings = field(default_factory=UpstreamSettings)
    usage: UsageSettings = field(default_factory=UsageSettings)
    telemetry: TelemetrySettings = field(default_factory=TelemetrySettings)

    @property
    def production(self) -> bool:
        return self.env == "production"

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{Path(self.data_dir).resolve() / 'modelgate.db'}"


class ConfigError(Exception):
    """Start-up configuration is unusable; str(err) starts with a code and is printed before exiting."""


def _fields(model: type[Section]) -> dict[str, Any]:
    """Each setting of a section, by name, with its type (a section's class for a nested section)."""
    return {info.name: info.type for info in msgspec.structs.fields(model)}


def _is_section(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, Section)


def unknown_keys(model: type[Section], tree: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted paths in `tree` that name no setting (typos such as `gateway.retyr.jitter`)."""
    unknown = []
    fields = _fields(model)
    for key, value in tree.items():
        if not isinstance(key, str) or key not in fields:
            unknown.append(f"{prefix}{key}")
            continue
        if _is_section(fields[key]) and isinstance(value, dict):
            unknown.extend(unknown_keys(fields[key], value, f"{prefix}{key}."))
    return unknown


# Short, conventional environment names for the most used settings.
ENV_ALIASES = {
    "SERVER_PORT": "server.port",
    "SERVER_HOST": "server.host",
    "SERVER_WORKERS": "server.workers",
    "DATABASE_URL": "database_url",
    "REDIS_URL": "redis_url",
    "ENCRYPTION_KEY": "encryption_key",
    "MODELGATE_ENV": "env",
    "MODELGATE_DATA_DIR": "data_dir",
    "LOG_LEVEL": "log_level",
    "LOG_FORMAT": "log_format",
    "METRICS_TOKEN": "metrics_token",
    "MODELGATE_CATALOG_FILE": "catalog_file",
    "OTEL_EXPORTER_OTLP_ENDPOINT": "telemetry.otlp_endpoint",
    "OTEL_SERVICE_NAME": "telemetry.service_name",
}


def _leaves(model: type[Section], prefix: str = "") -> dict[str, Any]:
    """Every leaf setting's dotted path, with its type."""
    leaves = {}
    for name, annotation in _fields(model).items():
        if _is_section(annotation):
            leaves.update(_leaves(annotation, f"{prefix}{name}."))
        else:
            leaves[prefix + name] = annotation
    return leaves


# Words for yes and no in environment variables, beyond the true/false/1/0 msgspec reads.
_BOOL_WORDS = {"yes": "true", "y": "true", "on": "true", "t": "true",
               "no": "false", "n": "false", "off": "false", "f": "false"}


def _from_environment(value: str, annotation: Any) -> str:
    return _BOOL_WORDS.get(value.strip().lower(), value) if annotation is bool else value


def _set_path(tree: dict[str, Any], dotted: str, value: Any) -> None:
    node = tree
    *parents, leaf = dotted.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value


def _deep_merge(base: dict[str, Any], override: dict[str, Any]) -> None:
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _deep_merge(base[key], value)
        else:
            base[key] = value


def load_settings(config_file: str | None = None, environ: dict[str, str] | None = None) -> Settings:
    environ = dict(os.environ if environ is None else environ)
    # Start from the defaults so a partial override keeps the rest of its section.
    tree: dict[str, Any] = msgspec.to_builtins(Settings())
    path = config_file or environ.get("MODELGATE_CONFIG")
    if path is None and Path("modelgate.yaml").is_file():
        path = "modelgate.yaml"
    if path:
        import yaml  # only for a config file

        loaded = yaml.safe_load(Path(path).read_text()) or {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"CONFIG_INVALID: config file {path} must hold a mapping")
        unknown = unknown_keys(Settings, loaded)
        if unknown:
            raise ConfigError(f"CONFIG_UNKNOWN_KEY: {path} sets {', '.join(unknown)}, which "
                              f"{'is not a setting' if len(unknown) == 1 else 'are not settings'}")
        _deep_merge(tree, loaded)
    leaves = _leaves(Settings)
    for env_name, dotted in ENV_ALIASES.items():
        if env_name in environ:
            _set_path(tree, dotted, _from_environment(environ[env_name], leaves[dotted]))
    for dotted, annotation in leaves.items():
        env_name = dotted.upper().replace(".", "_")
        if env_name in environ and env_name not in ENV_ALIASES:
            _set_path(tree, dotted, _from_environment(environ[env_name], annotation))
    try:
        # Not strict: environment variables are strings ("8080", "false").
        return msgspec.convert(tree, Settings, strict=False)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"CONFIG_INVALID: {exc}") from None
