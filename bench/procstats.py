"""CPU time and peak memory of a process and all its descendants, from /proc.

The figures come from the kernel's own accounting of the target processes
(utime + stime in /proc/<pid>/stat, VmHWM in /proc/<pid>/status), so the load
generator's work never leaks into them.
"""

from __future__ import annotations

import os
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name sits in parentheses and may hold spaces: split after it.
    return raw[raw.rindex(")") + 2:].split()


def tree_pids(root: int) -> list[int]:
    """`root` and every live descendant."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat_fields(int(entry))
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def cpu_seconds(root: int) -> float:
    """User + system CPU seconds used so far by `root` and its live descendants."""
    total = 0
    for pid in tree_pids(root):
        fields = _stat_fields(pid)
        if fields is not None:
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / CLK_TCK


def cpu_seconds_of(pid: int) -> float:
    """User + system CPU seconds of one process (0 once it is gone)."""
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / CLK_TCK if fields is not None else 0.0


def peak_rss_mb(root: int) -> dict[str, float]:
    """Peak resident memory (VmHWM): the largest process and the sum over the tree."""
    sizes = []
    for pid in tree_pids(root):
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    sizes.append(int(line.split()[1]) / 1024.0)
                    break
        except (FileNotFoundError, ProcessLookupError):
            continue
    return {"sum": round(sum(sizes), 1), "max_process": round(max(sizes, default=0.0), 1),
            "processes": len(sizes)}
