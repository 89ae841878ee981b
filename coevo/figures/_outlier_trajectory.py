"""The trajectory mode of the lm-outliers figure: do activation outliers emerge as a zoo LM trains longer?

``python -m coevo.figures lm-outliers --trajectory MODEL --steps-multiplier K --checkpoints N
--weight-decay W --train-seed S --lr-multiplier L`` trains ``MODEL`` from scratch for K times its
recipe's steps at L times its peak learning rate (:func:`sim.zoo.registry.train_fresh`, not
cached), and at N evenly spaced steps
(:func:`sim.zoo.registry.checkpoint_steps`, the last one included) measures every Linear input
with :func:`sim.prune.outliers.activation_outliers` over validation tokens, and the validation
perplexity. Rows (one per checkpoint and layer, with the run's settings and the commit it ran
from) go to ``outlier-trajectory.csv``; a run with the same settings replaces its earlier rows, any
other run's rows are kept, so one page compares several runs. ``outlier-trajectory.md`` is
rendered from that file alone (:func:`report`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coevo.figures._common import git_revision, read_csv, write_csv, write_markdown
from coevo.figures._outlier_rows import LAYER_FIELDS, layer_from_row
from coevo.sim.prune.outliers import OutlierReport
from coevo.sim.zoo.recipes import AS_RECIPE

CSV = "outlier-trajectory.csv"
PAGE = "outlier-trajectory.md"
RUN_FIELDS = ["model", "train_seed", "steps_multiplier", "weight_decay", "lr_multiplier", "checkpoints", "calib_tokens"]
"""The settings that name a run: rows with equal settings are one run (a rerun replaces them).

``lr_multiplier`` came later: rows saved before it have none and were trained at the recipe's rate (1)."""
FIELDS = [
    *RUN_FIELDS,
    "total_steps",
    "git",
    "step",
    "elapsed_s",
    "params",
    "val_ppl",
    *LAYER_FIELDS,
    "top_share",
    "systematic",
]

RunKey = tuple[str, int, float, float, float, int, int]


def lr_multiplier_of(row: dict[str, Any]) -> float:
    """A row's learning-rate multiplier: 1 for rows saved before the column existed (empty or absent)."""
    return float(row.get("lr_multiplier") or AS_RECIPE)


def run_key(row: dict[str, Any]) -> RunKey:
    """A row's run settings as values (``0.10`` and ``0.1`` are one weight decay)."""
    return (
        str(row["model"]),
        int(row["train_seed"]),
        float(row["steps_multiplier"]),
        float(row["weight_decay"]),
        lr_multiplier_of(row),
        int(row["checkpoints"]),
        int(row["calib_tokens"]),
    )


@dataclass(frozen=True)
class Settings:
    """One trajectory run's options (the command line's)."""

    model: str
    train_seed: int
    steps_multiplier: float
    weight_decay: float | None
    checkpoints: int
    tokens: int
    lr_multiplier: float = AS_RECIPE


def check(settings: Settings) -> tuple[dict[str, Any], tuple[int, ...]]:
    """The fresh recipe and the checkpoint steps of ``settings``; ``ZooError`` (one line) on a bad option, before any work."""
    from coevo.sim.zoo.recipes import ZooError
    from coevo.sim.zoo.registry import checkpoint_steps, fresh_recipe

    if settings.tokens < 1:
        raise ZooError(f"--tokens {settings.tokens}: must be >= 1")
    rec = fresh_recipe(
        settings.model,
        train_seed=settings.train_seed,
        steps_multiplier=settings.steps_multiplier,
        weight_decay=settings.weight_decay,
        lr_multiplier=settings.lr_multiplier,
    )
    return rec, checkpoint_steps(rec["train"]["steps"], settings.checkpoints)


def _printer(label: str) -> Callable[[str, float], None]:
    """A progress callback that prints at each tenth of the training (training reports every 10 steps)."""
    shown = [-1]

    def show(what: str, fraction: float) -> None:
        tenth = int(fraction * 10)
        if tenth > shown[0]:
            shown[0] = tenth
            print(f"{label}: {what}", flush=True)

    return show


def measure(settings: Settings) -> list[dict[str, object]]:
    """Train ``settings.model`` fresh and return one row per (checkpoint, distinct Linear input)."""
    from coevo.sim.prune.outliers import activation_outliers
    from coevo.sim.zoo.registry import ZooModel, parameter_count, splits_of, train_fresh

    rec, steps = check(settings)
    splits, _ = splits_of(rec)
    run: dict[str, object] = {
        "model": settings.model,
        "train_seed": settings.train_seed,
        "steps_multiplier": settings.steps_multiplier,
        "weight_decay": rec["train"]["weight_decay"],
        "lr_multiplier": settings.lr_multiplier,
        "checkpoints": settings.checkpoints,
        "calib_tokens": settings.tokens,
        "total_steps": rec["train"]["steps"],
        "git": git_revision(),
    }
    rows: list[dict[str, object]] = []
    started, measuring = time.perf_counter(), [0.0]

    def at_checkpoint(step: int, model: Any) -> None:
        begun = time.perf_counter()
        zm = ZooModel.from_module(model, "lm", splits, settings.model)
        found = activation_outliers(model, zm.loader("val", batch_size=32), tokens=settings.tokens)
        ppl = zm.evaluate(model, "val")
        elapsed = begun - started - measuring[0]  # training time so far: the earlier checkpoints' measuring left out
        systematic = " ".join(map(str, found.systematic))
        point = {"step": step, "elapsed_s": round(elapsed, 1), "params": parameter_count(model), "val_ppl": round(ppl, 4)}
        rows.extend({**run, **point, **layer, "systematic": systematic} for layer in found.as_rows())
        top = max(layer.top_share for layer in found.layers)
        summary = {k: round(v, 3) for k, v in found.summary().items()}
        print(f"step {step}: val ppl {ppl:.3f}, top share {top:.4f}, {summary}", flush=True)
        measuring[0] += time.perf_counter() - begun

    train_fresh(
        settings.model,
        train_seed=settings.train_seed,
        steps_multiplier=settings.steps_multiplier,
        weight_decay=settings.weight_decay,
        lr_multiplier=settings.lr_multiplier,
        on_step=at_checkpoint,
        checkpoints=steps,
        progress=_printer(settings.model),
    )
    print(f"trained and measured in {time.perf_counter() - started:.0f} s", flush=True)
    return rows


def merge(path: Path, rows: Sequence[dict[str, object]]) -> list[dict[str, object]]:
    """The rows of ``path`` (when it exists) without those of ``rows``' runs, then ``rows``: one run's rows replace its earlier ones."""
    new = {run_key(r) for r in rows}
    kept: list[dict[str, object]] = []
    if path.exists():
        kept = [{**r, "lr_multiplier": lr_multiplier_of(r)} for r in read_csv(path) if run_key(r) not in new]
    return [*kept, *rows]


def run(settings: Settings, out: Path, command: str) -> int:
    """Check the options (2 and one line on stderr when one is bad, nothing written), measure, merge, render; 0."""
    from coevo.sim.zoo.recipes import ZooError

    try:
        check(settings)
    except ZooError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rows = measure(settings)
    path = out / CSV
    write_csv(path, merge(path, rows), FIELDS, command=command)
    print(report(path, out / PAGE, command))
    return 0


# ---------------------------------------------------------------- the page, from the CSV alone


@dataclass(frozen=True)
class Point:
    """One checkpoint of a run, reduced over its layers."""

    step: int
    val_ppl: float
    absmax: float
    absmax_ratio_median: float
    kurtosis_median: float
    kurtosis_max: float
    kurtosis_layer: str
    top_share: float
    top_layer: str
    outlier_channels: int
    hidden_outlier_channels: int
    layers_with_outliers: int
    layers: int
    systematic: int
    elapsed_s: float


def _point(rows: list[dict[str, str]]) -> Point:
    layers = tuple(layer_from_row(r) for r in rows)
    summary = OutlierReport(layers).summary()
    heaviest = max(layers, key=lambda layer: layer.kurtosis)
    concentrated = max(layers, key=lambda layer: layer.top_share)
    return Point(
        step=int(rows[0]["step"]),
        val_ppl=float(rows[0]["val_ppl"]),
        absmax=summary["absmax"],
        absmax_ratio_median=summary["absmax_ratio_median"],
        kurtosis_median=summary["kurtosis_median"],
        kurtosis_max=summary["kurtosis_max"],
        kurtosis_layer=heaviest.layer,
        top_share=concentrated.top_share,
        top_layer=concentrated.layer,
        outlier_channels=int(summary["hidden_outlier_channels"] + summary["other_outlier_channels"]),
        hidden_outlier_channels=int(summary["hidden_outlier_channels"]),
        layers_with_outliers=int(summary["layers_with_outliers"]),
        layers=len(layers),
        systematic=int(summary["systematic_channels"]),
        elapsed_s=float(rows[0]["elapsed_s"]),
    )


def trajectories(rows: list[dict[str, str]]) -> dict[RunKey, tuple[dict[str, str], list[Point]]]:
    """Per run (first-seen order): its first row (the settings) and its checkpoints in step order."""
    by_run: dict[RunKey, dict[int, list[dict[str, str]]]] = {}
    first: dict[RunKey, dict[str, str]] = {}
    for row in rows:
        key = run_key(row)
        first.setdefault(key, row)
        by_run.setdefault(key, {}).setdefault(int(row["step"]), []).append(row)
    return {key: (first[key], [_point(by_step[s]) for s in sorted(by_step)]) for key, by_step in by_run.items()}


def first_peak_last(points: list[Point], value: Callable[[Point], float], fmt: str, lowest: bool = False) -> str:
    """``first → peak (step s) → last`` of ``value`` over the checkpoints; the peak is the lowest with ``lowest``."""
    values = [value(p) for p in points]
    pick = min if lowest else max
    peak = values.index(pick(values))  # the first checkpoint that reaches it
    return f"{fmt.format(values[0])} → {fmt.format(values[peak])} (step {points[peak].step:,}) → {fmt.format(values[-1])}"


def _run_title(first: dict[str, str]) -> str:
    lr = lr_multiplier_of(first)
    return (
        f"{first['model']}, seed {first['train_seed']}, {int(first['total_steps']):,} steps "
        f"(x{float(first['steps_multiplier']):g}), weight decay {float(first['weight_decay']):g}"
        + (f", peak learning rate x{lr:g}" if lr != 1.0 else "")
    )


def _summary_table(runs: dict[RunKey, tuple[dict[str, str], list[Point]]]) -> list[str]:
    lines = [
        "| run | checkpoints | val ppl (first → lowest → last) | max \\|x\\| | kurtosis, max over layers | top share, max over layers "
        "| outlier channels, hidden-width inputs / all | layer of the largest kurtosis / top share at the last checkpoint | training s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for first, points in runs.values():
        last = points[-1]
        lines.append(
            f"| {_run_title(first)} | {len(points)} | {first_peak_last(points, lambda p: p.val_ppl, '{:.3f}', lowest=True)} "
            f"| {first_peak_last(points, lambda p: p.absmax, '{:.2f}')} "
            f"| {first_peak_last(points, lambda p: p.kurtosis_max, '{:.2f}')} "
            f"| {first_peak_last(points, lambda p: 100 * p.top_share, '{:.2f} %')} "
            f"| {first_peak_last(points, lambda p: p.hidden_outlier_channels, '{:.0f}')} / "
            f"{first_peak_last(points, lambda p: p.outlier_channels, '{:.0f}')} "
            f"| `{last.kurtosis_layer}` ({last.kurtosis_max:.2f}) / `{last.top_layer}` ({100 * last.top_share:.2f} %) "
            f"| {last.elapsed_s:.0f} |"
        )
    return lines


def _trajectory_table(first: dict[str, str], points: list[Point]) -> list[str]:
    lines = [
        f"### {_run_title(first)}",
        "",
        f"Commit `{first['git']}`, {int(first['params']):,} parameters, {int(first['calib_tokens']):,} validation tokens measured "
        "at each checkpoint.",
        "",
        "| step | val ppl | max \\|x\\| | absmax max/median (median) | kurtosis median / max | layer of the max kurtosis "
        "| top share, max (layer) | outlier channels, hidden-width inputs / all | layers with outlier channels "
        "| systematic channels |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in points:
        lines.append(
            f"| {p.step:,} | {p.val_ppl:.3f} | {p.absmax:.2f} | {p.absmax_ratio_median:.2f} "
            f"| {p.kurtosis_median:.2f} / {p.kurtosis_max:.2f} | `{p.kurtosis_layer}` | {100 * p.top_share:.2f} % (`{p.top_layer}`) "
            f"| {p.hidden_outlier_channels} / {p.outlier_channels} | {p.layers_with_outliers} of {p.layers} | {p.systematic} |"
        )
    return [*lines, ""]


def report(csv_path: Path, md_path: Path, command: str) -> str:
    """The trajectory page, written from ``csv_path`` alone: a first → peak → last table over runs, then each run's checkpoints."""
    runs = trajectories(read_csv(csv_path))
    lines = [
        "# Activation outliers over training (issue 31, item 1)",
        "",
        "Each run trains a zoo language model from scratch (not the cached model) for its recipe's steps times a",
        "multiplier, with the given AdamW weight decay and training seed, and at evenly spaced checkpoints measures every",
        "transformer Linear input (q, k and v read one input and count once) over validation tokens, as",
        "[outliers.md](outliers.md) does for the trained zoo models. `max |x|`: the largest input value in any layer.",
        "Kurtosis: Pearson's, of all of a layer's input values (3 for a Gaussian). Top share: the share of a layer's input",
        "energy (sum of squares) carried by its largest channel (1/width when all channels have the same norm, 1 when one",
        "channel carries everything). Outlier channels follow LLM.int8 (|x| >= 6 on >= 6 % of tokens), counted over the",
        "hidden-width inputs (attention projections and FFN expansion: the hidden states LLM.int8 analyses) and over all",
        "layers (adding the FFN contraction's 4x wider input, which LLM.int8 leaves out); systematic ones are outlier",
        "channels of the hidden state in >= 25 % of the hidden-width inputs.",
        "",
        "## Runs: first → peak → last checkpoint",
        "",
        "Peak: the largest value over the checkpoints (val ppl: the lowest), with the first step that reached it.",
        "Training s: seconds of training up to the last checkpoint, the checkpoints' measuring left out.",
        "",
        *_summary_table(runs),
        "",
        "## Each run's checkpoints",
        "",
    ]
    for first, points in runs.values():
        lines += _trajectory_table(first, points)
    lines += [
        f"Data: `{csv_path.name}` (one row per checkpoint and layer, with the run's settings and commit), measured by",
        "`python -m coevo.figures lm-outliers --trajectory MODEL ...` (provenance.json names the last command that wrote it).",
        "",
    ]
    return write_markdown(md_path, "\n".join(lines), command)
