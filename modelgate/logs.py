"""Application log set-up: one line per record on stderr, written through a buffer.

Every inference call writes a log line (with its trace id). Python's handlers
write and flush record by record, which made the write system call a
measurable share of the hot path; `BufferedStreamHandler` is hand-written to
batch those writes. Warnings and errors are flushed at once, the rest by the
runtime every half second and at exit.

The gateway's own per-call lines go through `info`: where only that handler would
see the record, it writes the same line without building one (the logging machinery
cost 18–25 µs of a loaded worker's 300 µs per call, against 12 µs so); anywhere
else (another handler, a filter, a level) it is `logger.info`.
"""

from __future__ import annotations

import logging
import sys
import time
from datetime import UTC, datetime
from typing import Any

import orjson

from modelgate.safetext import escape_controls
from modelgate.tracing import current_trace_id

FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


class BufferedStreamHandler(logging.StreamHandler):
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

    def write_line(self, line: str) -> None:
        """A line formatted by this handler's formatter (`info`), under the lock `handle` takes."""
        with self.lock:  # type: ignore[union-attr]
            self.stream.write(line + self.terminator)


class EscapingFormatter(logging.Formatter):
    """Control characters of the message are escaped: a client value with a newline cannot forge a
    line. The traceback, appended after the message, keeps its own lines."""

    default_msec_format: str  # logging's own, never unset here

    def __init__(self, fmt: str = FORMAT) -> None:
        super().__init__(fmt)
        self._second: tuple[int, str] = (-1, "")  # one tuple: threads read it whole

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escape_controls(record.message)
        return super().formatMessage(record)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return super().formatTime(record, datefmt) if datefmt else self._stamp(record.created)

    def _stamp(self, created: float) -> str:
        """logging's default asctime (local time, then milliseconds); the part up to the second is
        formatted once a second."""
        second = int(created)
        cached = self._second
        if cached[0] != second:
            cached = self._second = (second, time.strftime(self.default_time_format, self.converter(created)))
        return self.default_msec_format % (cached[1], int((created - second) * 1000))

    def line(self, created: float, level: str, name: str, message: str) -> str | None:
        """The line `format` gives a record without an exception; None for another format."""
        if self._fmt != FORMAT:
            return None
        return f"{self._stamp(created)} {level} {name} {escape_controls(message)}"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, trace_id (when the record has one)."""

    def format(self, record: logging.LogRecord) -> str:
        line = self._object(record.created, record.levelname, record.name, record.getMessage())
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()

    def line(self, created: float, level: str, name: str, message: str) -> str | None:
        return orjson.dumps(self._object(created, level, name, message), default=str).decode()

    @staticmethod
    def _object(created: float, level: str, name: str, message: str) -> dict[str, object]:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds"),
            "level": level,
            "logger": name,
            "message": message,
        }
        trace_id = current_trace_id.get()
        if trace_id is not None:
            line["trace_id"] = trace_id
        return line


def info(logger: logging.Logger, msg: str, *args: object) -> None:
    """`logger.info(msg, *args)`, written directly where the record would reach only our handler."""
    handler = _sole_handler(logger)
    if handler is not None:
        line = handler.formatter.line(  # type: ignore[union-attr]
            time.time(), logging.getLevelName(logging.INFO), logger.name, msg % args if args else msg)
        if line is not None:
            try:
                handler.write_line(line)
                return
            except Exception:
                pass  # logging's own path reports it (Handler.handleError)
    logger.info(msg, *args)


def _sole_handler(logger: logging.Logger) -> BufferedStreamHandler | None:
    """Our handler, where an INFO record of `logger` would go to it alone, unfiltered."""
    if not logger.isEnabledFor(logging.INFO):
        return None
    node: Any = logger
    while node is not logging.root:
        if node is None or node.filters or node.handlers or not node.propagate:
            return None
        node = node.parent
    handlers = node.handlers
    if node.filters or len(handlers) != 1:
        return None
    handler = handlers[0]
    if type(handler) is not BufferedStreamHandler or handler.filters or handler.level > logging.INFO:
        return None
    return handler if isinstance(handler.formatter, (EscapingFormatter, JsonFormatter)) else None


def configure_logging(level: str, fmt: str = "text") -> None:
    """Idempotent: the server process and each of its workers call it."""
    # Our format shows no source location; skipping the stack walk that finds it is the
    # optimisation the logging documentation gives for this.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    root = logging.getLogger()
    root.setLevel(level.upper())
    handler = next((h for h in root.handlers if isinstance(h, BufferedStreamHandler)), None)
    if handler is None:
        handler = BufferedStreamHandler()
        root.addHandler(handler)
    handler.setFormatter(JsonFormatter() if fmt == "json" else EscapingFormatter())
    logging.getLogger("alembic").setLevel(logging.WARNING)  # its per-plugin start-up lines are noise


def flush() -> None:
    for handler in logging.getLogger().handlers:
        handler.flush()
