"""Issue 31 item 1: do the zoo's language models have activation outliers (the regime activation-aware pruning targets)?

For each model and training seed, the inputs of every transformer Linear layer are measured
over calibration tokens of the validation split with :func:`sim.prune.outliers.activation_outliers`
(largest over median channel max ``|x|`` and L2 norm, kurtosis, LLM.int8's outlier channels).
Writes the per-layer rows to ``docs/bench/prune/outliers.csv`` and the per-model summary
``outliers.md`` from that file::

    nice -n 10 python -m coevo.figures lm-outliers                      # four LMs, the tiny ones with 3 training seeds
    python -m coevo.figures lm-outliers --report-only

With ``--trajectory MODEL`` it trains MODEL from scratch instead (``--steps-multiplier``,
``--weight-decay``, ``--train-seed``, ``--lr-multiplier``) and measures the same at ``--checkpoints`` steps of the
training (:mod:`coevo.figures._outlier_trajectory`): rows are added to
``outlier-trajectory.csv`` (a run with the same settings replaces its own), and
``outlier-trajectory.md`` compares the runs. ``--report-only`` re-renders that page too when its
data is in ``--out``::

    OMP_NUM_THREADS=1 nice -n 10 python -m coevo.figures lm-outliers --trajectory lm-pydoc-tiny \\
        --steps-multiplier 32 --checkpoints 8 --weight-decay 0.1 --train-seed 0
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

from coevo.figures._common import command_line, figure_parser, read_csv, write_csv, write_markdown
from coevo.figures._outlier_rows import LAYER_FIELDS, layer_from_row
from coevo.sim.prune.outliers import OutlierReport
from coevo.sim.zoo.recipes import AS_RECIPE

NAME = "lm-outliers"
FIELDS = [
    "model",
    "seed",
    "params",
    "val_ppl",
    *LAYER_FIELDS,
    "systematic",
    "top_share",
]


def measure(models: list[str], seeds: dict[str, list[int]], tokens: int) -> list[dict[str, object]]:
    """One row per (model, training seed, distinct Linear input)."""
    from coevo.sim.prune.outliers import activation_outliers
    from coevo.sim.zoo import load

    rows: list[dict[str, object]] = []
    for model in models:
        for seed in seeds.get(model, [0]):
            zm = load(model, train_seed=seed)
            report = activation_outliers(zm.model, zm.loader("val", batch_size=32), tokens=tokens)
            params = sum(p.numel() for p in zm.model.parameters())
            systematic = " ".join(map(str, report.systematic))
            for row in report.as_rows():
                rows.append(
                    {"model": model, "seed": seed, "params": params, "val_ppl": round(zm.baseline["val_perplexity"], 4), **row}
                    | {"systematic": systematic}
                )
            print(model, seed, {k: round(v, 3) for k, v in report.summary().items()}, flush=True)
    return rows


def report(csv_path: Path, md_path: Path, command: str) -> str:
    """The per-model table (medians over layers, then median [min-max] over training seeds), written from ``csv_path``.

    Each run's figures are :meth:`OutlierReport.summary` of its saved layer rows, the same reduction the measurement prints.
    """
    rows = read_csv(csv_path)
    by_run: dict[tuple[str, str], list[dict[str, str]]] = defaultdict(list)
    for row in rows:
        by_run[(row["model"], row["seed"])].append(row)
    per_model: dict[str, list[dict[str, float]]] = defaultdict(list)
    for (model, _seed), layers in by_run.items():
        summary = OutlierReport(tuple(layer_from_row(r) for r in layers)).summary()
        per_model[model].append({**summary, "params": float(layers[0]["params"]), "val_ppl": float(layers[0]["val_ppl"])})

    def cell(runs: list[dict[str, float]], key: str, fmt: str = "{:.2f}") -> str:
        values = [r[key] for r in runs]
        mid = fmt.format(statistics.median(values))
        return mid if len(values) == 1 else f"{mid} [{fmt.format(min(values))}-{fmt.format(max(values))}]"

    lines = [
        "# Activation outliers of the zoo's language models (issue 31, item 1)",
        "",
        "Inputs of every transformer Linear layer (q, k and v read one input and count once), over validation tokens.",
        "Per model: medians over layers, then median [min-max] over training seeds. `max |x|`: the largest input value",
        "in any layer. Outlier channels follow LLM.int8 (|x| >= 6 on >= 6 % of tokens; systematic: in >= 25 % of the",
        "hidden-width inputs, the hidden states LLM.int8 analyses; the FFN contraction's wider input is left out as there).",
        "A Gaussian has kurtosis 3.",
        "",
        "| model | params | seeds | val ppl | max \\|x\\| | absmax max/median | norm max/median | kurtosis (median / max) "
        "| layers with outlier channels | systematic channels |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for model, runs in per_model.items():
        lines.append(
            f"| {model} | {int(runs[0]['params']):,} | {len(runs)} | {cell(runs, 'val_ppl')} | {cell(runs, 'absmax')} "
            f"| {cell(runs, 'absmax_ratio_median')} | {cell(runs, 'norm_ratio_median')} "
            f"| {cell(runs, 'kurtosis_median')} / {cell(runs, 'kurtosis_max')} "
            f"| {cell(runs, 'layers_with_outliers', '{:.0f}')} of {int(runs[0]['layers'])} "
            f"| {cell(runs, 'systematic_channels', '{:.0f}')} |"
        )
    lines += [
        "",
        f"Data: `{csv_path.name}` (one row per layer), measured by `python -m coevo.figures lm-outliers` "
        "(provenance.json names the exact command).",
        "",
    ]
    return write_markdown(md_path, "\n".join(lines), command)


def main(argv: list[str] | None = None) -> int:
    """Measure (unless ``--report-only``), then write outliers.md from outliers.csv; or a ``--trajectory`` run. 2 on a bad option."""
    from coevo.figures import _outlier_trajectory as trajectory

    p = figure_parser(NAME, __doc__)
    p.add_argument("--models", default="lm-pydoc-tiny,lm-pystdlib-tiny,lm-pydoc,lm-pystdlib", help="zoo LMs, comma-separated")
    p.add_argument("--tiny-seeds", default="0,1,2", help="training seeds of the *-tiny models (the others train seed 0 only)")
    p.add_argument("--tokens", type=int, default=16384, help="validation tokens measured per model (per checkpoint)")
    p.add_argument("--trajectory", metavar="MODEL", help="train zoo LM MODEL from scratch and measure it at --checkpoints steps")
    p.add_argument(
        "--steps-multiplier", type=float, default=AS_RECIPE, help="--trajectory: the recipe's steps times this (default %(default)g)"
    )
    p.add_argument("--checkpoints", type=int, default=8, help="--trajectory: evenly spaced measurements, the last step included")
    p.add_argument("--weight-decay", type=float, default=None, help="--trajectory: AdamW weight decay (default: the recipe's)")
    p.add_argument("--train-seed", type=int, default=0, help="--trajectory: initialisation and batch order (default 0)")
    p.add_argument(
        "--lr-multiplier", type=float, default=AS_RECIPE, help="--trajectory: the recipe's peak rate times this (default %(default)g)"
    )
    args = p.parse_args(argv)
    out, command = Path(args.out), command_line(NAME, argv)
    if args.trajectory is not None and not args.report_only:
        settings = trajectory.Settings(
            args.trajectory, args.train_seed, args.steps_multiplier, args.weight_decay, args.checkpoints, args.tokens, args.lr_multiplier
        )
        return trajectory.run(settings, out, command)
    csv_path, md_path = out / "outliers.csv", out / "outliers.md"
    if not args.report_only:
        models = [m for m in args.models.split(",") if m]
        tiny = [int(s) for s in args.tiny_seeds.split(",")]
        rows = measure(models, {m: tiny for m in models if m.endswith("-tiny")}, args.tokens)
        write_csv(csv_path, rows, FIELDS, command=command)
    if args.trajectory is None:
        print(report(csv_path, md_path, command))
    if (out / trajectory.CSV).exists():
        print(trajectory.report(out / trajectory.CSV, out / trajectory.PAGE, command))
    return 0
