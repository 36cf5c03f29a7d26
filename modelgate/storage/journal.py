"""The call-log journal: accepted rows appended to a local file before they are batched to the database.

Each writer (one per gateway process) owns a directory `<root>/w-<pid>-<random>/` holding an
exclusive `flock` on its `lock` file for as long as the process lives; the kernel releases it when
the process dies, however it dies. Rows go to numbered segment files, one JSON array per line.

A segment is allocated on disk when it is opened (`posix_fallocate`: a full disk is an error then,
never a SIGBUS on a copy) and mapped shared; a row is copied into the mapping. Once `append` returns,
the row is in the kernel's page cache and survives the process being killed (not a crash of the
machine itself: there is no fsync per row). A copy rather than a `write(2)` per row: no syscall on
the hot path, and none that lets go of the GIL while the database thread wants it.

A segment is closed when it is full, a minute after it was opened (so that rows committed long ago,
then maybe removed by retention, are not replayed after a crash) or when the writer asks (to replay its
own rows after an outage); a closed segment is cut to its rows. A segment per flush, created and
deleted, cost 1.6 % of a saturated worker's time (allocation, unmapping, unlink; the journal's whole
cost was about 5 % of throughput, measured with bench.durability, and is now under 1 %): a flush
deletes the closed segments whose rows are committed and leaves the open one. Its committed rows are
replayed too after a kill, and skipped by the database (`ON CONFLICT (trace_id) DO NOTHING`).

A directory whose lock can be taken belongs to a dead writer: the next writer to start replays and
deletes it.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import mmap
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

log = logging.getLogger(__name__)

LOCK = "lock"
SUFFIX = ".jsonl"
SEGMENT_BYTES = 1 << 20  # about 6,500 rows
SEGMENT_SECONDS = 60.0


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


# For a shared file mapping the pages stay in the file and the page cache; reading them again maps them back.
_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)


def _allocate(fd: int, size: int) -> None:
    """Reserve a segment's blocks now: a full disk then fails here, not as a SIGBUS on a copy."""
    if hasattr(os, "posix_fallocate"):
        os.posix_fallocate(fd, 0, size)
    else:  # macOS has no posix_fallocate
        os.pwrite(fd, bytes(size), 0)


class _Segment:
    """One mapped segment file and how far it is written."""

    def __init__(self, path: Path, size: int, opened: float) -> None:
        self.opened = opened
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            _allocate(self.fd, size)
            self.map = mmap.mmap(self.fd, size)
        except BaseException:
            os.close(self.fd)
            with contextlib.suppress(OSError):
                path.unlink()
            raise
        self.size = size
        self.used = 0
        self.released = 0  # the written pages up to here are out of this process's memory

    def release_written(self) -> None:
        """Unmap the whole pages written so far from this process (the file keeps them): a mapped
        segment otherwise counts up to its size in every worker's resident memory."""
        end = self.used - self.used % mmap.PAGESIZE
        if end > self.released and _DONTNEED is not None:
            self.map.madvise(_DONTNEED, self.released, end - self.released)
            self.released = end

    def close(self) -> None:
        """Unmap and cut the file to its rows (the unused allocation goes back to the disk)."""
        self.map.close()
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, self.used)
        os.close(self.fd)


class CallJournal:
    def __init__(self, root: Path, max_bytes: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.root = root
        self._clock = clock
        self.max_bytes = max_bytes
        root.mkdir(parents=True, exist_ok=True)
        name = f"w-{os.getpid()}-{secrets.token_hex(4)}"
        # Locked under a hidden name first, so no other writer can take it for an orphan.
        hidden = root / f".{name}"
        hidden.mkdir()
        self._lock_fd = _try_lock(hidden / LOCK)
        self.dir = root / name
        hidden.rename(self.dir)
        self._number = 0
        self._segment: _Segment | None = None
        self.bytes = 0  # in segments not yet deleted
        self._segment_bytes: dict[int, int] = {0: 0}
        self.full = False
        self.failed = False

    def _close_segment(self) -> None:
        if self._segment is not None:
            self._segment.close()
            self._segment = None

    def _next_segment(self) -> None:
        """Close the open segment; the next row starts a new one."""
        self._close_segment()
        self._number += 1
        self._segment_bytes[self._number] = 0

    def append(self, line: bytes) -> bool:
        """Write one row line; False when it could not be journaled (over `max_bytes`, or a disk error)."""
        size = len(line)
        if self.bytes + size > self.max_bytes:
            self.full = True
            return False
        segment = self._segment
        if segment is None or segment.used + size > segment.size:
            if segment is not None:  # full: go on in the next file
                self._next_segment()
            try:
                segment = self._segment = _Segment(self.dir / _segment_name(self._number),
                                                   max(SEGMENT_BYTES, size), self._clock())
            except OSError as exc:
                if not self.failed:
                    log.error("call-log journal: allocating a segment in %s failed (%r); rows are kept in "
                              "memory only", self.dir, exc)
                    self.failed = True
                return False
        end = segment.used + size
        segment.map[segment.used:end] = line
        segment.used = end
        self.failed = False
        self.bytes += size
        self._segment_bytes[self._number] += size
        return True

    def seal(self, force: bool = False) -> int:
        """Close the open segment if it is old enough (or `force`); returns the number of the last closed
        segment: every row in it and before it was appended before this call."""
        segment = self._segment
        if segment is not None:
            if force or self._clock() - segment.opened >= SEGMENT_SECONDS:
                self._next_segment()
            else:
                segment.release_written()
        return self._number - 1

    def segments_through(self, number: int) -> list[Path]:
        return [path for n in sorted(self._segment_bytes) if n <= number
                if (path := self.dir / _segment_name(n)).exists()]

    def discard_through(self, number: int) -> None:
        """The rows of segments up to `number` are in the database: delete those files."""
        for n in [n for n in self._segment_bytes if n <= number]:
            with contextlib.suppress(FileNotFoundError):
                (self.dir / _segment_name(n)).unlink()
            self.bytes -= self._segment_bytes.pop(n)
        self.full = self.bytes >= self.max_bytes

    def close(self, keep: bool) -> None:
        """Stop journaling; the directory is removed unless it still holds unwritten rows (`keep`)."""
        self._close_segment()
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
    """The complete lines of a segment and the count of torn ones (a copy cut by a kill). The file of a
    killed writer still holds its unused allocation, which reads as NUL bytes."""
    data = path.read_bytes().rstrip(b"\0")
    lines = data.split(b"\n")
    torn = 1 if lines and lines[-1] else 0
    return [line for line in lines[:-1] if line], torn
