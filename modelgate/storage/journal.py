"""The call-log journal: accepted rows appended to a local file before they are batched to the database.

Each writer (one per gateway process) owns a directory `<root>/w-<pid>-<random>/` holding an
exclusive `flock` on its `lock` file for as long as the process lives; the kernel releases it when
the process dies, however it dies. Rows go to numbered segment files, one JSON object per line,
written with one `write(2)` each: once `append` returns, the row survives the process being killed
(not a crash of the machine itself: there is no fsync per row). The writer rotates to a new segment
at every flush and deletes the segments whose rows are committed. A directory whose lock can be
taken belongs to a dead writer: the next writer to start replays and deletes it.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

LOCK = "lock"
SUFFIX = ".jsonl"


def _segment_name(number: int) -> str:
    return f"{number:012d}{SUFFIX}"


def _try_lock(path: Path) -> int | None:
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


class CallJournal:
    def __init__(self, root: Path, max_bytes: int) -> None:
        self.root = root
        self.max_bytes = max_bytes
        root.mkdir(parents=True, exist_ok=True)
        name = f"w-{os.getpid()}-{secrets.token_hex(4)}"
        # Locked under a hidden name first, so no other writer can take it for an orphan.
        hidden = root / f".{name}"
        hidden.mkdir()
        self._lock_fd = _try_lock(hidden / LOCK)
        self.dir = root / name
        hidden.rename(self.dir)
        self._segment = 0
        self._fd = self._open(0)
        self.bytes = 0  # in segments not yet deleted
        self._segment_bytes: dict[int, int] = {0: 0}
        self.full = False
        self.failed = False

    def _open(self, number: int) -> int:
        return os.open(self.dir / _segment_name(number), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def append(self, line: bytes) -> bool:
        """Write one row line; False when it could not be journaled (over `max_bytes`, or a disk error)."""
        if self.bytes + len(line) > self.max_bytes:
            self.full = True
            return False
        try:
            os.write(self._fd, line)
        except OSError as exc:
            if not self.failed:
                log.error("call-log journal: writing %s failed (%r); rows are kept in memory only", self.dir, exc)
                self.failed = True
            return False
        self.failed = False
        self.bytes += len(line)
        self._segment_bytes[self._segment] += len(line)
        return True

    def rotate(self) -> int:
        """Start a new segment; returns the number of the one just closed."""
        closed = self._segment
        self._segment += 1
        new_fd = self._open(self._segment)
        os.close(self._fd)
        self._fd = new_fd
        self._segment_bytes[self._segment] = 0
        return closed

    def segments_through(self, number: int) -> list[Path]:
        return [self.dir / _segment_name(n) for n in sorted(self._segment_bytes) if n <= number]

    def discard_through(self, number: int) -> None:
        """The rows of segments up to `number` are in the database: delete those files."""
        for n in [n for n in self._segment_bytes if n <= number]:
            with contextlib.suppress(FileNotFoundError):
                (self.dir / _segment_name(n)).unlink()
            self.bytes -= self._segment_bytes.pop(n)
        self.full = self.bytes >= self.max_bytes

    def close(self, keep: bool) -> None:
        """Stop journaling; the directory is removed unless it still holds unwritten rows (`keep`)."""
        os.close(self._fd)
        if not keep:
            shutil.rmtree(self.dir, ignore_errors=True)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None


class Orphan:
    """The journal of a writer that is gone, locked by us while we replay it."""

    def __init__(self, path: Path, lock_fd: int) -> None:
        self.path = path
        self._lock_fd = lock_fd

    def segments(self) -> list[Path]:
        return sorted(self.path.glob(f"*{SUFFIX}"))

    def done(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        os.close(self._lock_fd)

    def release(self) -> None:
        os.close(self._lock_fd)


def orphans(root: Path, own: Path | None = None) -> Iterator[Orphan]:
    """Journal directories of writers that are no longer running, each locked for the caller."""
    if not root.is_dir():
        return
    for path in sorted(root.glob("w-*")):
        if path == own or not path.is_dir():
            continue
        fd = _try_lock(path / LOCK)
        if fd is not None:
            yield Orphan(path, fd)


def read_lines(path: Path) -> tuple[list[bytes], int]:
    """The complete lines of a segment and the count of torn ones (a write cut by a kill)."""
    data = path.read_bytes()
    lines = data.split(b"\n")
    torn = 1 if lines and lines[-1] else 0
    return [line for line in lines[:-1] if line], torn
