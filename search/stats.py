"""Small statistics shared by benches and scripts: paired differences over seeds."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def t_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """Mean and half-width of the Student t interval of ``values`` (seeds as the unit).

    The half-width is ``nan`` for fewer than two values (no spread to estimate).
    """
    from scipy import stats  # lazy: scipy.stats costs ~1.5 s of every coevo start-up

    if not values:
        raise ValueError("t_interval needs at least one value")
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, math.nan
    half = float(stats.t.ppf(0.5 + level / 2, len(values) - 1)) * statistics.stdev(values) / math.sqrt(len(values))
    return mean, half


def format_interval(values: Sequence[float], digits: int = 4) -> str:
    """``+0.0012 ± 0.0034`` (mean ± 95 % half-width), the mean alone for one value, ``n/a`` for none."""
    if not values:
        return "n/a"
    mean, half = t_interval(values)
    return f"{mean:+.{digits}f}" if math.isnan(half) else f"{mean:+.{digits}f} ± {half:.{digits}f}"


def excludes_zero(values: Sequence[float]) -> bool:
    """True when the 95 % interval of ``values`` lies strictly on one side of 0."""
    if len(values) < 2:
        return False
    mean, half = t_interval(values)
    return abs(mean) > half
