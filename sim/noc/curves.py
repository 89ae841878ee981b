"""Delay and throughput vs offered load: sweeps of the NoC simulators and their PNG plot."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from coevo.sim.errors import UserInputError
from coevo.sim.noc.benes import BenesResult, simulate_benes
from coevo.sim.noc.common import NocResult
from coevo.sim.noc.mesh import MeshConfig, MeshResult, MeshStats, simulate_mesh

AnyResult = NocResult[Any, Any]
"""A result of either topology."""


def run(topology: str, **options: Any) -> BenesResult | MeshResult:
    """One simulation of ``benes`` or ``mesh`` with the simulator's own keyword options."""
    if topology == "benes":
        return simulate_benes(**options)
    if topology == "mesh":
        return simulate_mesh(**options)
    raise UserInputError(f"unknown topology {topology!r}; choose benes or mesh")


def sweep(
    topology: str,
    routings: Sequence[str],
    loads: Sequence[float],
    *,
    on_point: Callable[[int, int], None] | None = None,
    **options: Any,
) -> list[AnyResult]:
    """Every routing at every load (same seed, so the curves differ only by routing)."""
    if not routings or not loads:
        raise UserInputError("give at least one routing and one load")
    out: list[AnyResult] = []
    total = len(routings) * len(loads)
    for i, routing in enumerate(routings):
        for j, load in enumerate(loads):
            if on_point is not None:
                on_point(i * len(loads) + j, total)
            result = run(topology, routing=routing, load=load, **options)
            out.append(result)
            if result.stopped_early:
                return out
    return out


def saturation(results: Sequence[AnyResult], zero_load: float, factor: float = 3.0) -> float | None:
    """Lowest offered load whose mean delay exceeds ``factor`` x the zero-load delay (None: never within the sweep)."""
    for r in sorted(results, key=lambda r: r.offered_load):
        if math.isnan(r.mean_delay) or r.mean_delay > factor * zero_load:
            return r.offered_load
    return None


def plot_curves(results: Sequence[AnyResult], title: str, path: Path, *, delay_key: str = "mean_delay") -> Path:
    """Delay (log scale) and throughput vs offered load, one line per routing; mesh results add GT acceptance.

    On a mesh the throughput is best-effort traffic only, so the "offered" guide line is the
    best-effort share of the load.
    """
    gt = all(isinstance(r.stats, MeshStats) for r in results)
    fig, axes = plt.subplots(1, 3 if gt else 2, figsize=(14 if gt else 10, 4))
    left, right = axes[0], axes[1]
    routings = list(dict.fromkeys(r.config.routing for r in results))
    for k, routing in enumerate(routings):
        color = f"C{k}"  # one colour per routing in both panels
        rs = sorted((r for r in results if r.config.routing == routing), key=lambda r: r.offered_load)
        x = [r.offered_load for r in rs]
        left.plot(x, [getattr(r, delay_key) for r in rs], marker="o", color=color, label=f"{routing} mean")
        left.plot(x, [r.p99_delay for r in rs], linestyle=":", color=color, alpha=0.7, label=f"{routing} p99")
        right.plot(x, [r.throughput for r in rs], marker="o", color=color, label=routing)
        if gt:
            axes[2].plot(x, [r.stats.gt_acceptance for r in rs], marker="o", color=color, label=routing)
    lim = max((r.offered_load for r in results), default=1.0)
    share = 1.0 - results[0].config.gt_share if results and isinstance(results[0].config, MeshConfig) else 1.0
    right.plot([0, lim], [0, lim * share], color="grey", linewidth=0.8, linestyle="--", label="offered (best effort)" if gt else "offered")
    left.set_yscale("log")
    left.set_xlabel("offered load (flits/cycle/port)")
    left.set_ylabel("delay (cycles)")
    right.set_xlabel("offered load (flits/cycle/port)")
    right.set_ylabel("best-effort throughput (flits/cycle/node)" if gt else "throughput (flits/cycle/port)")
    if gt:
        axes[2].set_xlabel("offered load (flits/cycle/node)")
        axes[2].set_ylabel("GT acceptance")
        axes[2].set_ylim(0, 1.02)
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
