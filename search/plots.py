"""PNG plots for benchmarks and reports (matplotlib, headless Agg backend)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from coevo.search.metrics import FrontReference
from coevo.search.stats import t_interval


def plot_hv_curves(curves: Mapping[str, Sequence[Sequence[float]]], title: str, path: Path, *, paid: str = "expensive queries") -> Path:
    """HV ratio vs evaluations: one line per label (mean over runs) with a min-max band; ``paid`` names what an evaluation pays for."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for label, runs in curves.items():
        if not runs:
            continue
        n = min(len(r) for r in runs)
        data = np.array([r[:n] for r in runs])
        x = np.arange(1, n + 1)
        ax.plot(x, data.mean(axis=0), label=f"{label} (n={len(runs)})")
        ax.fill_between(x, data.min(axis=0), data.max(axis=0), alpha=0.15)
    ax.set_xlabel(f"evaluations ({paid})")
    ax.set_ylabel("HV ratio (useful region)")
    ax.set_ylim(bottom=max(0.0, ax.get_ylim()[0]))
    return _finish(fig, ax, title, path, legend="lower right")


def plot_fronts(
    ref: FrontReference,
    found: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    title: str,
    path: Path,
    *,
    labels: tuple[str, str] = ("latency (ms)", "test accuracy (%)"),
    all_points: tuple[np.ndarray, np.ndarray] | None = None,
) -> Path:
    """Found fronts (first objective vs second) over the true front, useful region only; ``labels`` are (x, y) axis labels."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    if all_points is not None:
        acc, lat = all_points
        keep = acc >= ref.floor
        ax.scatter(lat[keep], acc[keep], s=2, c="0.85", label="all cells", rasterized=True)
    order = np.argsort(ref.front_second)
    ax.step(ref.front_second[order], ref.front_first[order], where="post", c="k", lw=1.2, label="true front")
    markers = "os^Dvx+*"
    for k, (label, (acc_f, lat_f)) in enumerate(found.items()):
        a, lt = np.asarray(acc_f), np.asarray(lat_f)
        keep = a >= ref.floor
        ax.scatter(lt[keep], a[keep], s=14, marker=markers[k % len(markers)], label=label, alpha=0.8)
    ax.set_xlabel(labels[0])
    ax.set_ylabel(labels[1])
    return _finish(fig, ax, title, path, legend="lower right")


def plot_exploration(shares: Mapping[str, Mapping[str, float]], title: str, path: Path) -> Path:
    """Grouped bars: per proposer, the share of evaluations in each niche."""
    fig, ax = plt.subplots(figsize=(7.2, 4.0))
    labels = list(shares)
    niches = list(next(iter(shares.values())).keys()) if shares else []
    width = 0.8 / max(1, len(labels))
    x = np.arange(len(niches))
    for k, label in enumerate(labels):
        ax.bar(x + k * width, [shares[label].get(n, 0.0) for n in niches], width, label=label)
    ax.set_xticks(x + width * (len(labels) - 1) / 2, niches, fontsize=8)
    ax.set_ylabel("share of evaluations")
    return _finish(fig, ax, title, path, legend="upper right")


def _finish(fig: Figure, ax: Axes, title: str, path: Path, *, legend: str) -> Path:
    ax.grid(alpha=0.3)
    ax.legend(loc=legend, fontsize=8)  # type: ignore[call-overload]  # matplotlib stubs lack the kwargs-only overload
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_budget_curves(
    curves: Mapping[str, Mapping[int, Sequence[float]]],
    title: str,
    path: Path,
    *,
    paid: str = "expensive evaluations",
    ylabel: str = "HV ratio (useful region)",
) -> Path:
    """HV at each budget: per label, the mean over seeds with its Student t 95 % band (``curves[label][budget]``: one value per seed)."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    markers = "os^Dvx+*"
    for k, (label, by_budget) in enumerate(curves.items()):
        points = sorted((b, t_interval(v)) for b, v in by_budget.items() if v)
        if not points:
            continue
        x = np.array([b for b, _ in points], dtype=float)
        mean = np.array([m for _, (m, _) in points])
        half = np.nan_to_num(np.array([h for _, (_, h) in points]))  # one seed: no band
        n = max(len(v) for v in by_budget.values())
        ax.plot(x, mean, marker=markers[k % len(markers)], label=f"{label} (n={n})")
        ax.fill_between(x, mean - half, mean + half, alpha=0.15)
    ax.set_xlabel(f"paid evaluations ({paid})")
    ax.set_ylabel(ylabel)
    low, high = ax.get_ylim()
    ax.set_ylim(max(0.0, low), min(high, 1.05))  # both HVs are ratios to a best front (<= 1): wide bands of few seeds are cut
    return _finish(fig, ax, title, path, legend="lower right")
