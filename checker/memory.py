"""The memory watch: a search stops as bounded, with what it found, before the kernel kills it.

The limit in force is the container's (the cgroup's ``memory.max``, as containers and CI runners
set it), else what the machine had available when the search started; the environment variable
KCHECK_MEMORY_LIMIT (bytes, or with a K/M/G suffix) sets it explicitly. The search reads the
figure once a block, which costs a read of /proc and nothing per state.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

# stop at this share of the limit: the next block's temporaries (tens of MB) must still fit
SHARE = 0.85
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _parse_size(text: str) -> int:
    """A positive size in bytes (ValueError otherwise: a limit of 0 or less, inf or nan is none
    the watch can measure against)."""
    t = text.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(t[-1:], 1)
    size = float(t[:-1] if mult > 1 else t) * mult
    if not math.isfinite(size) or size < 1:
        raise ValueError(text)
    return int(size)


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def _cgroup_limit():
    """(limit bytes, usage function, cgroup directory) of the innermost memory cgroup with a
    limit, v2 or v1; None when no limit is set. Usage leaves out the inactive file cache, which
    the kernel reclaims before it kills anything."""
    text = _read("/proc/self/cgroup") or ""
    v2, v1 = None, None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[0] == "0" and parts[1] == "":
            v2 = parts[2].lstrip("/")
        elif len(parts) == 3 and "memory" in parts[1].split(","):
            v1 = parts[2].lstrip("/")
    candidates = []
    if v2 is not None:
        candidates += [(Path("/sys/fs/cgroup") / v2, "memory.max", "memory.current", "inactive_file"),
                       (Path("/sys/fs/cgroup"), "memory.max", "memory.current", "inactive_file")]
    if v1 is not None:
        candidates += [(Path("/sys/fs/cgroup/memory") / v1, "memory.limit_in_bytes",
                        "memory.usage_in_bytes", "total_inactive_file"),
                       (Path("/sys/fs/cgroup/memory"), "memory.limit_in_bytes",
                        "memory.usage_in_bytes", "total_inactive_file")]
    for d, lim, cur, inactive in candidates:
        raw = (_read(str(d / lim)) or "").strip()
        if not raw or raw == "max" or int(raw) >= 1 << 60:
            continue

        def usage(d=d, cur=cur, inactive=inactive):
            text = _read(str(d / cur))
            if not text:
                return _rss()
            used = int(text)
            for line in (_read(str(d / "memory.stat")) or "").splitlines():
                k, _, v = line.partition(" ")
                if k == inactive:
                    used -= int(v)
            return used
        return int(raw), usage, d
    return None


def _rss() -> int:
    text = _read("/proc/self/statm")
    return int(text.split()[1]) * _PAGE if text else 0


@dataclass
class MemoryWatch:
    limit: int          # bytes
    source: str         # where the limit comes from, for the message
    usage: object       # () -> bytes in use, measured against the limit
    what: str           # what usage measures
    last: int | None = None   # usage at the previous sample
    jump: int = 0             # the largest rise between two samples so far
    forecast: int = 0         # what the last sample expected the next step to take

    def exceeded(self, coming: int = 0) -> bool:
        """Whether the search must stop now: usage, plus twice the largest rise seen between two
        samples (or ``coming``, the bytes the caller knows its next step takes, if more),
        reaches the share. A level's end (its runs merged with the visited set) rises
        by more than a block does and grows with the level; measured only against the share, a
        search under a 256 MiB cgroup passed from 70 % to the kernel's kill in one step."""
        used = self.usage()
        if self.last is not None:
            self.jump = max(self.jump, used - self.last)
        self.last = used
        self.forecast = max(2 * self.jump, coming)
        return used + self.forecast >= SHARE * self.limit

    def message(self) -> str:
        used = self.usage()
        return (f"stopped at {used / 2**20:,.0f} MB {self.what}, {100 * used / self.limit:.0f}% of "
                f"the {self.limit / 2**20:,.0f} MB {self.source}, where the next step could "
                f"take {self.forecast / 2**20:,.0f} MB more")


def watch() -> MemoryWatch | None:
    """The watch for this process: the explicit limit, else the cgroup's, else the machine's
    available memory; None when none can be read."""
    env = os.environ.get("KCHECK_MEMORY_LIMIT")
    if env:
        try:
            return MemoryWatch(_parse_size(env), "limit set by KCHECK_MEMORY_LIMIT", _rss,
                               "resident")
        except ValueError:
            from kcheck.spec.lang import SpecError
            raise SpecError(f"KCHECK_MEMORY_LIMIT={env!r} is not a size: write a positive number of "
                            f"bytes, or one with K, M, G or T (e.g. 2G)") from None
    cg = _cgroup_limit()
    if cg is not None:
        limit, usage, d = cg
        return MemoryWatch(limit, f"memory limit of cgroup {d}", usage, "used by the cgroup")
    info = _read("/proc/meminfo")
    if info:
        for line in info.splitlines():
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
                return MemoryWatch(avail + _rss(), "memory available when the search started "
                                   "(MemAvailable plus this process)", _rss, "resident")
    return None
