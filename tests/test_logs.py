"""logs.info: the per-call line written without a LogRecord is the line logging itself writes."""

from __future__ import annotations

import io
from collections.abc import Iterator
import logging
import time

import orjson
import pytest

from modelgate import logs
from modelgate.logs import FORMAT, BufferedStreamHandler, EscapingFormatter, JsonFormatter
from modelgate.tracing import current_trace_id

NOW = 1_795_000_000.0469  # a time whose milliseconds (046) need the padding
ARGS = ("0190c0de-0000-7000-8000-000000000001", 3, "gpt-4o", 7, 200, 12, 5, 1.25)
MESSAGE = "call trace_id=%s key=%s model=%s channel=%s status=%s tokens=%s/%s latency_ms=%.1f"


@pytest.fixture
def handler(monkeypatch: pytest.MonkeyPatch) -> Iterator[BufferedStreamHandler]:
    """Our handler writing to memory, and a fixed clock for logging's records and for logs.info alike.
    Each test puts it alone on the root logger (`alone`): pytest adds its capture handler as the test
    starts."""
    handler = BufferedStreamHandler()
    handler.stream = io.StringIO()
    handler.setFormatter(EscapingFormatter())
    monkeypatch.setattr(time, "time", lambda: NOW)
    level = logging.root.level
    logging.root.setLevel(logging.INFO)  # setLevel, not the attribute: loggers cache what is enabled
    yield handler
    logging.root.setLevel(level)


def alone(monkeypatch: pytest.MonkeyPatch, *handlers: logging.Handler) -> None:
    monkeypatch.setattr(logging.root, "handlers", list(handlers))


def _lines(handler: BufferedStreamHandler) -> list[str]:
    written = handler.stream.getvalue()
    handler.stream.seek(0)
    handler.stream.truncate()
    return written.splitlines()


def _records_built(monkeypatch: pytest.MonkeyPatch) -> list[logging.LogRecord]:
    built: list[logging.LogRecord] = []
    factory = logging.getLogRecordFactory()

    def counting(*args: object, **kwargs: object) -> logging.LogRecord:
        record = factory(*args, **kwargs)
        built.append(record)
        return record

    monkeypatch.setattr(logging, "_logRecordFactory", counting)
    return built


def test_the_text_line_is_the_line_of_pythons_default_formatter(handler, monkeypatch):
    alone(monkeypatch, handler)
    logger = logging.getLogger("modelgate.gateway")
    built = _records_built(monkeypatch)
    logs.info(logger, MESSAGE, *ARGS)
    assert built == []  # written without a record
    record = logging.LogRecord(logger.name, logging.INFO, __file__, 1, MESSAGE, ARGS, None)
    assert _lines(handler) == [logging.Formatter(FORMAT).format(record)]
    logger.info(MESSAGE, *ARGS)  # logging's own path through the same handler
    assert _lines(handler) == [logging.Formatter(FORMAT).format(record)]


def test_the_text_line_escapes_a_forged_line_as_logging_does(handler, monkeypatch):
    alone(monkeypatch, handler)
    logger = logging.getLogger("modelgate.gateway")
    forged = ("x\n2026-01-01 INFO modelgate.gateway forged\r\x00",)
    logs.info(logger, "call refused model=%s", *forged)
    logger.info("call refused model=%s", *forged)
    fast, slow = _lines(handler)
    assert fast == slow
    assert fast.endswith("INFO modelgate.gateway call refused model=x\\n2026-01-01 INFO modelgate.gateway forged\\r\\x00")


def test_the_json_line_is_the_json_formatters_line_with_the_trace_id(handler, monkeypatch):
    alone(monkeypatch, handler)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("modelgate.gateway")
    built = _records_built(monkeypatch)
    token = current_trace_id.set(ARGS[0])
    try:
        logs.info(logger, MESSAGE, *ARGS)
        assert built == []
        logger.info(MESSAGE, *ARGS)
    finally:
        current_trace_id.reset(token)
    fast, slow = _lines(handler)
    assert fast == slow
    assert orjson.loads(fast) == {"time": "2026-11-18T11:06:40.046+00:00", "level": "INFO", "logger": logger.name,
                                  "message": MESSAGE % ARGS, "trace_id": ARGS[0]}


def test_a_filter_another_handler_or_a_level_gets_loggings_own_path(handler, monkeypatch):
    alone(monkeypatch, handler)
    logger = logging.getLogger("modelgate.gateway")
    seen: list[str] = []

    class Refuse(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            seen.append(record.getMessage())
            return False

    monkeypatch.setattr(logger, "filters", [Refuse()])
    logs.info(logger, "call trace_id=%s", "a")
    assert seen == ["call trace_id=a"] and _lines(handler) == []
    monkeypatch.setattr(logger, "filters", [])

    other: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            other.append(record.getMessage())

    alone(monkeypatch, handler, Collect())
    logs.info(logger, "call trace_id=%s", "b")
    assert other == ["call trace_id=b"] and len(_lines(handler)) == 1
    alone(monkeypatch, handler)

    logging.root.setLevel(logging.WARNING)
    logs.info(logger, "call trace_id=%s", "c")
    assert _lines(handler) == []
