"""Peak resident memory of a block of code, measured by the kernel (not estimated).

Why RSS and not tracemalloc: tracemalloc sees Python's allocator only, and torch's CPU tensors come from its own
allocator (malloc), so it is blind to activations and gradients. torch's profiler memory view counts tensor
allocations but not the allocator's fragmentation or anything outside tensors. The kernel's resident-set
high-water mark (``VmHWM``) counts everything the process touched. On Linux, writing ``5`` to
``/proc/self/clear_refs`` resets that mark to the current RSS, so the peak of one block is
``VmHWM after - VmRSS before``. Where that reset is not allowed the mark cannot be reset and the whole process's
``ru_maxrss`` is reported instead (``resettable`` False): run each measured method in a fresh process then
(:mod:`sim.zoqat.job` does).
"""

from __future__ import annotations

import resource
import sys
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

_STATUS = Path("/proc/self/status")
_CLEAR = Path("/proc/self/clear_refs")


def _status_kb(key: str) -> int | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def rss_mb() -> float:
    """Current resident set size in MiB (0 where /proc is missing)."""
    kb = _status_kb("VmRSS")
    return (kb or 0) / 1024


def max_rss_mb() -> float:
    """The process's resident high-water mark in MiB since start or the last reset (``ru_maxrss`` as fallback)."""
    kb = _status_kb("VmHWM")
    if kb is None:
        raw = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        kb = raw // 1024 if sys.platform == "darwin" else raw  # bytes on macOS, KiB on Linux
    return kb / 1024


def reset_peak() -> bool:
    """Reset the resident high-water mark to the current RSS; False where the kernel does not allow it."""
    try:
        _CLEAR.write_text("5")
    except OSError:
        return False
    return True


@dataclass
class PeakMemory:
    """Context manager: the resident memory a block adds at its peak.

    Attributes (set on exit):
        before_mb: RSS when the block started.
        peak_mb: the process's RSS high-water mark during the block (since start when not resettable).
        resettable: whether the mark was reset at the block's start (else ``peak_mb`` covers the process's life).
    """

    before_mb: float = 0.0
    peak_mb: float = 0.0
    resettable: bool = False

    @property
    def added_mb(self) -> float:
        """Peak minus RSS at the start: the memory the block itself needed at most."""
        return max(0.0, self.peak_mb - self.before_mb)

    def __enter__(self) -> PeakMemory:
        self.resettable = reset_peak()
        self.before_mb = rss_mb()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.peak_mb = max_rss_mb()
