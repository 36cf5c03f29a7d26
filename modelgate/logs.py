"""Application log set-up: one line per record on stderr, written through a buffer.

Every inference call writes a log line (with its trace id). Python's handlers
write and flush record by record, which made the write system call a
measurable share of the hot path; `BufferedStreamHandler` is hand-written to
batch those writes. Warnings and errors are flushed at once, the rest by the
runtime every half second and at exit.
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime

import orjson

from modelgate.safetext import escape_controls
from modelgate.tracing import current_trace_id

FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


class BufferedStreamHandler(logging.StreamHandler):  # type: ignore[type-arg]
    def __init__(self) -> None:
        stream = open(sys.stderr.fileno(), "w", buffering=1 << 16, encoding="utf-8", errors="backslashreplace",
                      closefd=False)
        super().__init__(stream)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.stream.write(self.format(record) + self.terminator)
            if record.levelno >= logging.WARNING:
                self.stream.flush()
        except Exception:
            self.handleError(record)


class EscapingFormatter(logging.Formatter):
    """Control characters of the message are escaped: a client value with a newline cannot forge a
    line. The traceback, appended after the message, keeps its own lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escape_controls(record.message)
        return super().formatMessage(record)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, trace_id (when the record has one)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        trace_id = current_trace_id.get()
        if trace_id is not None:
            line["trace_id"] = trace_id
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


def configure_logging(level: str, fmt: str = "text") -> None:
    """Idempotent: the server process and each of its workers call it."""
    # Our format shows no source location; skipping the stack walk that finds it is the
    # optimisation the logging documentation gives for this.
    logging._srcfile = None  # type: ignore[attr-defined]
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    root = logging.getLogger()
    root.setLevel(level.upper())
    handler = next((h for h in root.handlers if isinstance(h, BufferedStreamHandler)), None)
    if handler is None:
        handler = BufferedStreamHandler()
        root.addHandler(handler)
    handler.setFormatter(JsonFormatter() if fmt == "json" else EscapingFormatter(FORMAT))
    logging.getLogger("alembic").setLevel(logging.WARNING)  # its per-plugin start-up lines are noise


def flush() -> None:
    for handler in logging.getLogger().handlers:
        handler.flush()
