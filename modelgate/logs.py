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


def configure_logging(level: str) -> None:
    """Idempotent: the server process and each of its workers call it."""
    # Our format shows no source location; skipping the stack walk that finds it is the
    # optimisation the logging documentation gives for this.
    logging._srcfile = None  # type: ignore[attr-defined]
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    root = logging.getLogger()
    root.setLevel(level.upper())
    if not any(isinstance(h, BufferedStreamHandler) for h in root.handlers):
        handler = BufferedStreamHandler()
        handler.setFormatter(logging.Formatter(FORMAT))
        root.addHandler(handler)
    logging.getLogger("alembic").setLevel(logging.WARNING)  # its per-plugin start-up lines are noise


def flush() -> None:
    for handler in logging.getLogger().handlers:
        handler.flush()
