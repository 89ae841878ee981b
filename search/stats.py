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


SMALL_SAMPLE = 5
"""Fewer paired measurements than this get a small-sample warning in a verdict (a t interval on 2-4
values is wide and leans on normality)."""


def verdict(
    what: str,
    diffs: Sequence[float],
    *,
    unit: str,
    higher_is_better: bool = True,
    null: float = 0.0,
    unit_of_pairing: str = "pairs",
) -> str:
    """One line judging a method against a baseline from paired measurements: mean, 95 % t interval, and a word.

    The word is ``better`` or ``worse`` when the interval lies on one side of ``null`` (0 for
    differences, 1 for ratios), else ``within noise``. The line warns when the sample is small
    (fewer than :data:`SMALL_SAMPLE` pairs; one pair has no interval at all) or when the interval
    is wider than the mean's distance from ``null`` is large (a spread that hides the effect's size).

    Args:
        what: the comparison in words (``protection vs none``).
        diffs: one paired measurement per unit (method minus baseline, or method / baseline).
        unit: the measurement's unit (``points``, ``x``).
        higher_is_better: False when a lower value is the better one (perplexity, latency).
        null: the value of no effect.
        unit_of_pairing: what a pair is (``fault maps``, ``batches``, ``seeds``).

    Example:
        >>> verdict("a vs b", [1.0, 1.2, 0.9, 1.1, 1.0], unit="points")
        'a vs b: +1.04 points [+0.90, +1.18] (95 % t interval, 5 pairs): better'
        >>> verdict("a vs b", [0.5], unit="points")
        'a vs b: +0.50 points (1 pair, no interval): not known whether this exceeds the noise'
    """
    if not diffs:
        raise ValueError("verdict needs at least one paired measurement")
    mean, half = t_interval(diffs)
    n = len(diffs)
    sign = "+" if null == 0 else ""
    if math.isnan(half):
        single = unit_of_pairing.rstrip("s") if unit_of_pairing.endswith("s") else unit_of_pairing
        return f"{what}: {mean:{sign}.2f} {unit} (1 {single}, no interval): not known whether this exceeds the noise"
    low, high = mean - half, mean + half
    head = f"{what}: {mean:{sign}.2f} {unit} [{low:{sign}.2f}, {high:{sign}.2f}] (95 % t interval, {n} {unit_of_pairing})"
    if low > null:
        word = "better" if higher_is_better else "worse"
    elif high < null:
        word = "worse" if higher_is_better else "better"
    else:
        word = "within noise (the interval holds no effect)"
    warnings = []
    if n < SMALL_SAMPLE:
        warnings.append(f"small sample ({n} {unit_of_pairing})")
    if half > 2 * abs(mean - null) and word.startswith("within"):
        warnings.append("wide spread: the interval is more than twice the effect")
    return f"{head}: {word}" + (f"; warning: {', '.join(warnings)}" if warnings else "")


# ---- one run against its own baseline (tools' ``verdict`` field): the test set's own noise


def paired_log_ratio(method_nll: Sequence[float], base_nll: Sequence[float]) -> tuple[float, float, int]:
    """The test-set noise of a perplexity change: mean, 95 % t half-width and count of per-sequence log-ratios.

    ``method_nll`` and ``base_nll`` are the mean token cross-entropies (nats) of two models on the
    same sequences in the same order (``ZooModel.sequence_nll``). Each sequence's difference is its
    log-perplexity ratio; their mean is ``ln(ppl_method / ppl_base)`` when every sequence has the
    same length (the zoo's byte blocks do). The interval treats sequences as independent draws of
    the test text: neighbouring windows of one file are correlated, so it is, if anything, narrow.
    It is the perplexity counterpart of the accuracy's binomial noise: the sampling noise of the
    test set for these two models, not the spread over training seeds.

    Raises:
        ValueError: no sequences, or lists of different lengths.
    """
    if len(method_nll) != len(base_nll) or not method_nll:
        raise ValueError(f"paired_log_ratio needs two equally long, non-empty lists, got {len(method_nll)} and {len(base_nll)}")
    mean, half = t_interval([m - b for m, b in zip(method_nll, base_nll, strict=True)])
    return mean, half, len(method_nll)


LN_PERPLEXITY_RESOLUTION = 1e-4
"""The smallest log-perplexity change a verdict resolves (0.01 %): below it two float32 evaluations of
one model through two code paths already differ (attention's top-k path keeping every key agrees
with the exact one to about 1e-5), so such a change is noise even when the paired interval is narrower."""


def accuracy_noise(a_pct: float, b_pct: float, n: int) -> float:
    """The noise, in points, of the difference of two accuracies (%) measured on the same ``n`` examples.

    Two binomial standard errors of the difference, the two accuracies taken as independent
    (conservative: both are measured on the same examples), and never less than one example
    (``100 / n`` points): a difference of less than one example cannot be a signal.
    """
    if n < 1:
        raise ValueError(f"accuracy_noise needs at least one example, got n={n}")
    p, q = a_pct / 100, b_pct / 100
    two_se = 200 * math.sqrt(max(p * (1 - p) + q * (1 - q), 0.0) / n)
    return max(two_se, 100 / n)


def effect_verdict(what: str, value: float, baseline: float, *, metric: str, n: int | None = None, ln_half: float | None = None) -> str:
    """One line, ``verdict: ...``, judging one run's ``value`` against the ``baseline`` in the same result.

    ``metric`` is ``accuracy`` (%, higher is better; the noise is :func:`accuracy_noise` on the
    ``n`` examples both were measured on) or ``perplexity`` (lower is better; the noise is
    ``ln_half``, the 95 % half-width of the per-sequence log-perplexity difference over the ``n``
    sequences both were measured on, from :func:`paired_log_ratio`, and never below
    :data:`LN_PERPLEXITY_RESOLUTION`). The word is ``negative``
    when the run is worse than its baseline beyond the noise, ``within noise`` inside it,
    ``positive`` when better beyond it.

    Example:
        >>> line = effect_verdict("4-bit vs float", 96.4, 97.0, metric="accuracy", n=500)
        >>> line.partition(" (")[0], line.rpartition(": ")[2]
        ('verdict: 4-bit vs float: -0.60 points', 'within noise, no effect shown')
    """
    if metric == "accuracy":
        if n is None:
            raise ValueError("an accuracy verdict needs n, the number of examples both accuracies were measured on")
        diff = value - baseline
        noise = accuracy_noise(value, baseline, n)
        head = f"{diff:+.2f} points ({value:.2f} vs {baseline:.2f} %; noise {noise:.2f} points: 2 binomial SE on {n} test examples"
        head += ", one run)"
        better, inside = diff > 0, abs(diff) <= noise
    elif metric == "perplexity":
        if ln_half is None or n is None:
            raise ValueError("a perplexity verdict needs ln_half and n: the paired per-sequence interval (paired_log_ratio)")
        diff = 100 * (value / baseline - 1)
        if math.isnan(ln_half):  # one sequence: no spread to estimate
            head = f"{diff:+.2f} % perplexity ({value:.3f} vs {baseline:.3f}; 1 test sequence, no interval)"
            return f"verdict: {what}: {head}: not known whether this exceeds the noise"
        ln_noise = max(ln_half, LN_PERPLEXITY_RESOLUTION)
        noise = 100 * math.expm1(ln_noise)
        head = f"{diff:+.2f} % perplexity ({value:.3f} vs {baseline:.3f}; noise {noise:.2f} %: 95 % t interval of the paired "
        head += f"log-perplexity difference over {n} sequences, one run)"
        better, inside = diff < 0, abs(math.log(value / baseline)) <= ln_noise
    else:
        raise ValueError(f"effect_verdict judges accuracy or perplexity, not {metric!r}")
    if inside:
        word = "within noise, no effect shown"
    else:
        word = "positive: better than the baseline beyond the noise" if better else "negative: worse than the baseline beyond the noise"
    return f"verdict: {what}: {head}: {word}"
