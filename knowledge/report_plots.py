"""The PNG figures of a knowledge-base review report (matplotlib, headless Agg backend)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib import ticker

from coevo.search.metrics import FrontReference, pareto_mask

DPI = 110


def fronts_by_round(
    ref: FrontReference | None,
    rounds: Sequence[int],
    y1: np.ndarray,
    y2: np.ndarray,
    round_of: np.ndarray,
    path: Path,
    *,
    y_label: str,
    x_label: str,
    log_x: bool = False,
) -> Path:
    """The found front after selected rounds (colour = round) over the true front.

    ``log_x`` puts the minimised objective on a log axis (see :func:`use_log_scale`).
    """
    fig, ax = plt.subplots(figsize=(7.2, 4.6))
    if ref is not None:
        order = np.argsort(ref.front_second)
        ax.step(ref.front_second[order], ref.front_first[order], where="post", color="black", lw=1.2, label="true front (benchmark table)")
    ax.scatter(y2, y1, s=6, c="0.8", label="evaluated designs", zorder=1)
    shown = _pick(rounds, 6)
    cmap = plt.get_cmap("viridis")
    for k, r in enumerate(shown):
        upto = round_of <= r
        if not upto.any():
            continue
        mask = pareto_mask(y1[upto], y2[upto])
        f1, f2 = y1[upto][mask], y2[upto][mask]
        o = np.argsort(f2)
        colour = cmap(k / max(1, len(shown) - 1))
        ax.step(f2[o], f1[o], where="post", color=colour, lw=1.4, label=f"found front after round {r}", zorder=2)
        ax.scatter(f2[o], f1[o], s=14, color=colour, zorder=3)
    if ref is not None:
        ax.set_ylim(ref.floor - 1.0, ref.first_max + 0.5)
        # designs under the window (e.g. disconnected cells, fast and useless) must not stretch the x axis
        window = front_x_values(ref, y1, y2)
        lo, hi = float(window.min()), float(window.max())
        ax.set_xlim(*((lo / 1.15, hi * 1.15) if log_x else (lo - 0.04 * (hi - lo), hi + 0.04 * (hi - lo))))
    if log_x:
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda x, _: f"{x:g}"))
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_xlabel(x_label + (", log scale" if log_x else ""))
    ax.set_ylabel(y_label)
    ax.set_title("Found front per round" + (" over the true front" if ref is not None else "") + " (higher-left is better)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    return _save(fig, path)


def front_x_values(ref: FrontReference | None, y1: np.ndarray, y2: np.ndarray) -> np.ndarray:
    """The minimised objective's values :func:`fronts_by_round` shows: the true front, and the
    evaluated designs inside its window of the maximised objective (all of them without a reference)."""
    if ref is None:
        return np.asarray(y2, dtype=float)
    return np.concatenate([np.asarray(y2, dtype=float)[np.asarray(y1) >= ref.floor - 1.0], ref.front_second])


def use_log_scale(values: np.ndarray, *, decades: float = 1.0) -> bool:
    """True when positive ``values`` span more than ``decades`` powers of ten (a linear axis would crowd the small ones).

    Example:
        >>> use_log_scale(np.array([0.011, 2.5, 98.9])), use_log_scale(np.array([1.13, 8.68]))
        (True, False)
    """
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return bool(len(v) and v.min() > 0 and np.log10(v.max() / v.min()) > decades)


def hv_by_round(rounds: Sequence[int], hv: Sequence[float], evaluations: Sequence[int], path: Path) -> Path:
    """HV ratio at the end of each round, with the evaluations spent so far."""
    fig, ax = plt.subplots(figsize=(7.2, 3.6))
    ax.plot(rounds, hv, marker="o", color="tab:blue")
    for r, h, n in zip(rounds, hv, evaluations, strict=True):
        if r == rounds[-1] or r % max(1, len(rounds) // 6) == 0:
            ax.annotate(f"{n} ev.", (r, h), textcoords="offset points", xytext=(0, 7), ha="center", fontsize=7, color="0.35")
    ax.set_xlabel("round")
    ax.set_ylabel("HV ratio (found / true front)")
    ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    ax.set_title("Hypervolume ratio after each round")
    ax.grid(alpha=0.3)
    return _save(fig, path)


def kb_activity(rounds: Sequence[int], counts: Mapping[str, Sequence[int]], path: Path) -> Path:
    """Stacked bars: heuristics created, edited, validated, made unhelpful and refuted per round."""
    fig, ax = plt.subplots(figsize=(7.2, 3.6))
    bottom = np.zeros(len(rounds))
    colours = {
        "created": "tab:blue",
        "edited": "0.7",
        "validated": "tab:green",
        "unhelpful": "tab:orange",
        "refuted": "tab:red",
        "reviewed": "tab:purple",
    }
    for name, values in counts.items():
        v = np.asarray(values, dtype=float)
        ax.bar(rounds, v, bottom=bottom, label=name, color=colours.get(name))
        bottom += v
    ax.set_xlabel("round")
    ax.set_ylabel("heuristic versions")
    ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    ax.set_title("Knowledge-base changes per round")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, axis="y")
    return _save(fig, path)


def exploration(niches: Sequence[str], band_labels: Sequence[str], counts: np.ndarray, path: Path, *, band_label: str = "band") -> Path:
    """Heat map of evaluated designs per niche (rows) and band of the minimised objective (columns)."""
    fig, ax = plt.subplots(figsize=(7.2, 0.5 * len(niches) + 1.6))
    im = ax.imshow(counts, cmap="Blues", aspect="auto")
    for (i, j), v in np.ndenumerate(counts):
        ax.text(j, i, str(int(v)), ha="center", va="center", fontsize=8, color="white" if v > counts.max() * 0.6 else "black")
    ax.set_yticks(range(len(niches)), niches)
    ax.set_xticks(range(len(band_labels)), band_labels, fontsize=7)
    ax.set_xlabel(band_label)
    ax.set_title("Where the evaluations went (niche x band)")
    fig.colorbar(im, ax=ax, label="evaluations")
    return _save(fig, path)


def llm_usage(rounds: Sequence[int], prompt: Sequence[int], completion: Sequence[int], path: Path) -> Path:
    """Prompt and completion tokens per round."""
    fig, ax = plt.subplots(figsize=(7.2, 3.4))
    ax.bar(rounds, prompt, label="prompt tokens", color="tab:blue")
    ax.bar(rounds, completion, bottom=prompt, label="completion tokens", color="tab:orange")
    ax.set_xlabel("round")
    ax.set_ylabel("tokens")
    ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    ax.set_title("LLM tokens per round")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, axis="y")
    return _save(fig, path)


def _pick(rounds: Sequence[int], k: int) -> list[int]:
    if len(rounds) <= k:
        return list(rounds)
    idx = np.unique(np.linspace(0, len(rounds) - 1, k).round().astype(int))
    return [rounds[i] for i in idx]


def _save(fig: plt.Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path
