"""Shared pieces of the NoC simulators: traffic patterns, injection processes, results, stopping."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from coevo.sim.errors import UserInputError

WARMUP_MAX = 2000
"""Warm-up: statistics skip the first 10 % of a run's cycles, at most this many (so a run stopped early still measures)."""

ProgressFn = Callable[[int, int], bool]
"""``(cycle, total) -> keep going``: called every few thousand cycles; returning False stops the run early."""


class Clock:
    """The cycles of one simulation: progress callbacks, stopping early, Ctrl-C and wall time, in one place.

    Usage::

        clock = Clock(cycles, progress)
        with clock:  # Ctrl-C inside the block ends the run (suppressed); ``stopped`` says so
            for t in clock:
                ...
        clock.done, clock.stopped, clock.wall_s
    """

    def __init__(self, cycles: int, progress: ProgressFn | None) -> None:
        self.cycles, self.progress = cycles, progress
        self.done = 0
        """Cycles fully simulated."""
        self.stopped = False
        self.wall_s = 0.0
        self._started = 0.0

    def __iter__(self) -> Iterator[int]:
        for t in range(self.cycles):
            if self.progress is not None and t % 2000 == 0 and not self.progress(t, self.cycles):
                self.stopped = True
                return
            yield t
            self.done = t + 1
        if self.progress is not None:  # the last cycle too, so a progress line ends at 100 %, not at the last multiple of 2000
            self.progress(self.cycles, self.cycles)

    def __enter__(self) -> Clock:
        self._started = time.perf_counter()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> bool:
        self.wall_s = time.perf_counter() - self._started
        if kind is KeyboardInterrupt:  # Ctrl-C: stop here and report what was measured
            self.stopped = True
            return True
        return False


def check_load(load: float) -> None:
    """Offered load is a fraction of a port's capacity."""
    if not 0 < load <= 1:
        raise UserInputError(f"load must be in (0, 1] (a fraction of a port's flits per cycle), got {load}")


class Injector:
    """Packet arrivals of one source: Bernoulli per cycle (``poisson``) or two-state on/off bursts (``bursty``).

    Both give ``rate`` packets per cycle on average. A bursty source is a two-state Markov
    chain: ON cycles inject with probability ``p_on = min(1, 4 rate)``, OFF cycles inject
    nothing; ON lasts ``burst / p_on`` cycles on average (``burst`` packets a burst) and OFF
    long enough that the source is ON ``rate / p_on`` of the time.
    """

    def __init__(self, process: str, rate: float, rng: random.Random, burst: float = 8.0) -> None:
        if process not in ("poisson", "bursty"):
            raise UserInputError(f"unknown injection process {process!r}; choose poisson or bursty")
        self.process, self.rate, self.rng = process, rate, rng
        self.on = False
        self.p_on = min(1.0, 4 * rate)
        share = rate / self.p_on if self.p_on > 0 else 0.0
        mean_on = max(burst / self.p_on, 1.0)  # cycles per ON period for ``burst`` packets
        self.leave_on = 1.0 / mean_on
        self.leave_off = 1.0 / max(mean_on * (1 - share) / max(share, 1e-12), 1.0) if share < 1 else 1.0

    def arrivals(self) -> bool:
        """Whether a packet arrives this cycle."""
        if self.process == "poisson":
            return self.rng.random() < self.rate
        if self.on:
            if self.rng.random() < self.leave_on:
                self.on = False
        elif self.rng.random() < self.leave_off:
            self.on = True
        return self.on and self.rng.random() < self.p_on


def destination(pattern: str, src: int, n: int, rng: random.Random, *, k: int = 0, perm: Sequence[int] | None = None) -> int:
    """Destination of a packet from ``src`` among ``n`` nodes (``k``: mesh side for spatial patterns).

    Patterns: ``uniform`` (any other node), ``permutation`` (a fixed random permutation),
    ``transpose`` ((x, y) -> (y, x)), ``tornado`` ((x, y) -> (x + k/2 - 1, y) mod k),
    ``hotspot`` (a quarter of the packets to node ``n // 2 + k // 2``, the rest uniform).
    """
    if pattern == "uniform":
        d = rng.randrange(n - 1)
        return d + (d >= src)
    if pattern == "permutation":
        assert perm is not None
        return perm[src]
    if pattern in ("transpose", "tornado", "hotspot"):
        if k <= 0:
            raise UserInputError(f"traffic {pattern!r} needs a mesh (spatial coordinates)")
        x, y = src % k, src // k
        if pattern == "transpose":
            return x * k + y
        if pattern == "tornado":
            return y * k + (x + max(k // 2 - 1, 1)) % k
        hot = (k // 2) * k + k // 2
        if src != hot and rng.random() < 0.25:
            return hot
        d = rng.randrange(n - 1)
        return d + (d >= src)
    raise UserInputError(f"unknown traffic pattern {pattern!r}; choose uniform, permutation, transpose, tornado or hotspot")


def derangement(n: int, rng: random.Random) -> list[int]:
    """A random permutation with no fixed point (permutation traffic never sends to itself)."""
    while True:
        perm = list(range(n))
        rng.shuffle(perm)
        if all(i != p for i, p in enumerate(perm)):
            return perm


class NocConfig(Protocol):
    """What a simulation was asked for: each topology's record (``BenesConfig``, ``MeshConfig``) has these and its own."""

    @property
    def topology(self) -> str:
        """``benes`` or ``mesh``."""

    @property
    def routing(self) -> str:
        """The routing algorithm."""

    @property
    def traffic(self) -> str:
        """The traffic pattern."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form, ``topology`` first."""


class NocStats(Protocol):
    """What a topology measures beyond the common metrics (``BenesStats``, ``MeshStats``)."""

    @property
    def zero_load(self) -> float:
        """The zero-load delay (cycles) that saturation is judged against."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""


C = TypeVar("C", bound=NocConfig)
S = TypeVar("S", bound=NocStats)


@dataclass(frozen=True)
class NocResult(Generic[C, S]):
    """Metrics of one NoC simulation: the common ones, and the topology's own in ``stats``.

    Attributes:
        config: what was simulated (the topology's config record).
        cycles: cycles simulated (fewer than asked when stopped early).
        offered_load: the load asked for.
        delivered_packets: packets delivered after the warm-up.
        throughput: delivered flits per cycle per port (or node).
        mean_delay: mean packet delay, cycles (nan when nothing was delivered).
        p99_delay: 99th percentile of the packet delay, cycles.
        wall_s: wall-clock seconds of the run.
        stats: the topology's own metrics (``BenesStats``, ``MeshStats``).
        stopped_early: the run was stopped (progress callback or Ctrl-C).
    """

    config: C
    cycles: int
    offered_load: float
    delivered_packets: int
    throughput: float
    mean_delay: float
    p99_delay: float
    wall_s: float
    stats: S
    stopped_early: bool = False

    @property
    def cycles_per_s(self) -> float:
        """Simulated cycles per wall-clock second."""
        return self.cycles / self.wall_s if self.wall_s > 0 else math.inf

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form: the config, the common metrics, then the topology's own."""
        return {
            **self.config.as_dict(),
            "cycles": self.cycles,
            "offered_load": self.offered_load,
            "delivered_packets": self.delivered_packets,
            "throughput": round(self.throughput, 5),
            "mean_delay": round(self.mean_delay, 3),
            "p99_delay": round(self.p99_delay, 3),
            "cycles_per_s": round(self.cycles_per_s),
            "stopped_early": self.stopped_early,
            **self.stats.as_dict(),
        }


def delay_stats(delays: Sequence[float]) -> tuple[float, float]:
    """(mean, p99) of packet delays; (nan, nan) when nothing was delivered."""
    if not delays:
        return math.nan, math.nan
    arr = np.asarray(delays, dtype=float)
    return float(arr.mean()), float(np.percentile(arr, 99))
