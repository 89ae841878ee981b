"""Class-based mixed-precision quantization vs uniform, HAWQ-trace and magnitude at the same average bits (issue 31).

On the zoo's ``cnn-digits-cv`` (a small CNN on scikit-learn's digits, 5-fold cross-validation:
the five folds' test splits are all 1,797 images), every method gets the same average-bits
budget, the same straight-through fine-tuning (up to ``--epochs`` epochs, the best val epoch
kept) and the same seeds. A seed is the seed of everything: the trained float model (its
initialisation and batch order, one model per fold), the fine-tuning (shuffle, optimiser) and
HAWQ's Hutchinson probes. Test accuracy is pooled over the folds (every image tested once per
seed and method) and measured after the choices made on each fold's val split; round-to-nearest
(RTN, no fine-tuning) is reported at the same widths.

    nice -n 10 python -m coevo.figures quant            # ~10-20 min on 2 busy cores
    nice -n 10 python -m coevo.figures quant --search   # + coevo bench --problem quant on cnn-digits
    python -m coevo.figures quant --report-only         # re-render quant.md from quant.csv
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from coevo.figures._common import command_line, figure_parser, read_csv, weighted_means, write_csv, write_markdown
from coevo.search.stats import excludes_zero, format_interval
from coevo.sim.errors import UserInputError
from coevo.sim.quant.config import METHODS, QuantConfig

NAME = "quant"
MODEL = QuantConfig.compare_model
SEARCH_MODEL = "cnn-digits"  # the quant problem's model for a page whose own model the problem does not offer

FIELDS = [
    "model",
    "method",
    "target_bits",
    "seed",
    "fold",
    "test_n",
    "avg_bits",
    "val_float",
    "val_rtn",
    "val_after",
    "test_float",
    "test_rtn",
    "test_after",
    "best_epoch",
    "wall_s",
]
NUMERIC = ("avg_bits", "val_float", "val_rtn", "val_after", "test_float", "test_rtn", "test_after", "wall_s")


def measure(args: argparse.Namespace, path: Path, command: str) -> None:
    """Every method at every budget, seed and fold; the rows go to ``path``."""
    from coevo.sim.quant import quantize
    from coevo.sim.zoo import folds, load

    torch.set_num_threads(1)
    rows: list[dict[str, Any]] = []
    for seed in range(args.seeds):
        for fold in range(folds(args.model)):
            zm = load(args.model, train_seed=seed, fold=fold if folds(args.model) > 1 else None, progress=_progress)
            val, test = zm.loader("val"), zm.loader("test")
            for bits in args.bits:
                for method in METHODS:
                    start = time.perf_counter()
                    r = quantize(
                        zm.model, zm.loader("train", shuffle=True, seed=seed), val, avg_bits=bits, method=method, test=test,
                        finetune_epochs=args.epochs, seed=seed,
                    )  # fmt: skip
                    rows.append(
                        {
                            "model": args.model, "method": method, "target_bits": bits, "seed": seed, "fold": fold,
                            "test_n": len(zm.splits["test"]), "avg_bits": round(r.allocation.avg_bits, 5),
                            "val_float": r.val_before, "val_rtn": r.val_ptq, "val_after": r.val_after,
                            "test_float": r.test_before, "test_rtn": r.test_rtn, "test_after": r.test_after,
                            "best_epoch": r.best_epoch, "wall_s": round(time.perf_counter() - start, 3),
                        }
                    )  # fmt: skip
                    print(
                        f"seed {seed} fold {fold} {method:12s} {bits:g}: {r.allocation.avg_bits:.3f} bits, "
                        f"test RTN {r.test_rtn:.1f} %, after {r.test_after:.1f} %",
                        flush=True,
                    )
    write_csv(path, rows, FIELDS, command=command)


def _progress(what: str, fraction: float) -> None:
    print(f"\r{what} ({100 * fraction:.0f} %)", end="\n" if fraction >= 1 else "", file=sys.stderr, flush=True)


def _split_text(n_folds: int) -> str:
    """How the page's model was split: cross-validation folds, or one fixed train/val/test split."""
    return f"{n_folds} folds" if n_folds > 1 else "one fixed train/val/test split"


def _pooled_text(n_folds: int, n_test: int) -> str:
    """What one seed's test accuracy counts, for a cross-validated model or a single split."""
    if n_folds > 1:
        return f"Test accuracy is pooled over the folds: {n_test} test images per seed and method, every image once."
    return f"Test accuracy is over the {n_test} test images of the split, per seed and method."


def pooled(rows: list[dict[str, Any]], key: str) -> dict[tuple[str, str, int], float]:
    """``(method, target_bits, seed) -> accuracy %`` of ``key`` pooled over the folds (weighted by each fold's test size)."""
    means = weighted_means(rows, lambda r: (r["method"], r["target_bits"], int(r["seed"])), [key], "test_n")
    return {k: v[key] for k, v in means.items()}


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} [{min(values):.1f}-{max(values):.1f}]"


def _paired(ours: dict[int, float], theirs: dict[int, float], noise: float) -> tuple[str, float, bool]:
    """Class-based minus a method over the shared seeds: the interval text, the mean, and whether it is clear of noise."""
    diffs = [ours[s] - theirs[s] for s in sorted(ours) if s in theirs]
    mean = statistics.fmean(diffs) if diffs else 0.0
    clear = excludes_zero(diffs) and abs(mean) >= noise
    text = format_interval(diffs, 2)
    return (f"**{text}**" if clear else text), mean, clear


def search_model(model: str) -> str:
    """The model ``--search`` runs the ``quant`` problem on for a page of ``model``: ``model`` itself when the problem
    offers it (search/quant/problem.py's ``ARCH_LAYERS``), else :data:`SEARCH_MODEL` (cnn-digits-cv's folds are no
    single model to search)."""
    from coevo.search.quant.problem import ARCH_LAYERS

    return model if model in ARCH_LAYERS else SEARCH_MODEL


def _model_option(model: str) -> str:
    """The ``--model`` option that reproduces a page of ``model`` (none for the default task)."""
    return "" if model == MODEL else f" --model {model}"


def report(args: argparse.Namespace, path: Path) -> str:
    """quant.md's text from the rows of ``path``."""
    rows: list[dict[str, Any]] = list(read_csv(path))
    for r in rows:
        for k in NUMERIC:
            r[k] = float(r[k])
    model = rows[0]["model"]
    seeds = sorted({int(r["seed"]) for r in rows})
    n_folds = len({int(r["fold"]) for r in rows})
    n_test = sum(int(r["test_n"]) for r in rows if r["method"] == rows[0]["method"] and r["target_bits"] == rows[0]["target_bits"]) // len(
        seeds
    )
    after, rtn, flt = pooled(rows, "test_after"), pooled(rows, "test_rtn"), pooled(rows, "test_float")
    float_acc = statistics.fmean(v for (m, _, _), v in flt.items() if m == METHODS[0])
    se = (float_acc * (100 - float_acc) / n_test) ** 0.5
    noise = 2 * se
    lines = [
        f"# Class-based mixed-precision quantization vs uniform, HAWQ and magnitude, {model}",
        "",
        f"Written by `python -m coevo.figures quant --out {args.out}{_model_option(model)}` from `quant.csv`: seeds "
        f"{', '.join(map(str, seeds))}; "
        f"{_split_text(n_folds)}; fine-tuning up to {args.epochs} epochs with the straight-through estimator (the best val "
        f"epoch kept). A seed sets the trained float model{' (one per fold)' if n_folds > 1 else ''}, the fine-tuning and "
        f"HAWQ's probes. {_pooled_text(n_folds, n_test)} Float32 model: "
        f"{_spread([v for (m, _, _), v in flt.items() if m == METHODS[0]])} % test (median [min-max] over seeds).",
        "",
        "Weights quantized per output filter/neuron (symmetric, widths from {2, 3, 4, 6, 8}); biases and activations float32. "
        "`class-based`: (1 + number of classes the unit is important to) x the unit's error scale max|w|^2; `class-count`: the "
        "ablation without the error scale (the class count alone, the priority before issue 31); `taylor`: the "
        "ablation without the class counting (Taylor scores pooled over classes) x the same error scale; `magnitude`: the "
        "error scale alone; `hawq`: one width per layer from the Hessian trace; `uniform`: one width everywhere. Same "
        "average-bits budget (weighted by weight count; per-unit methods land just below it), same fine-tuning, same seeds. "
        "Accuracy columns: median [min-max] over seeds of the pooled test accuracy. Paired columns: class-based minus the "
        "method, same seed, mean ± 95 % t half-width over seeds; **bold** where the interval excludes 0 and the mean is at "
        f"least two binomial standard errors of one pooled accuracy ({noise:.1f} pp at {float_acc:.1f} % on {n_test} images).",
        "",
        "| avg bits | method | avg bits used | RTN test % | class-based minus it, RTN pp | test % after fine-tuning "
        "| class-based minus it, after pp | s per run |",
        "|---|---|---|---|---|---|---|---|",
    ]
    verdicts: dict[str, list[str]] = {"RTN": [], "fine-tuned": []}
    for bits in sorted({r["target_bits"] for r in rows}, key=float):
        ours_after = {s: v for (m, b, s), v in after.items() if m == "class-based" and b == bits}
        ours_rtn = {s: v for (m, b, s), v in rtn.items() if m == "class-based" and b == bits}
        for method in METHODS:
            mine = [r for r in rows if r["target_bits"] == bits and r["method"] == method]
            if not mine:
                continue
            a = {s: v for (m, b, s), v in after.items() if m == method and b == bits}
            q = {s: v for (m, b, s), v in rtn.items() if m == method and b == bits}
            cells = ["-", "-"]
            if method != "class-based":
                for i, (label, ours, theirs) in enumerate((("RTN", ours_rtn, q), ("fine-tuned", ours_after, a))):
                    text, mean, clear = _paired(ours, theirs, noise)
                    cells[i] = text
                    word = ("beats" if mean > 0 else "loses to") if clear else "ties with"
                    verdicts[label].append(f"at {float(bits):g} bits class-based {word} {method} ({mean:+.2f} pp)")
            lines.append(
                f"| {float(bits):g} | {method} | {statistics.median(r['avg_bits'] for r in mine):.3f} | {_spread(list(q.values()))} "
                f"| {cells[0]} | {_spread(list(a.values()))} | {cells[1]} | {statistics.median(r['wall_s'] for r in mine):.1f} |"
            )
    lines += [
        "",
        f"Verdicts without fine-tuning (paired over seeds; 'ties' = the 95 % interval includes 0 or the mean is below "
        f"{noise:.1f} pp): " + "; ".join(verdicts["RTN"]) + ".",
        "",
        "Verdicts after fine-tuning (same rule): " + "; ".join(verdicts["fine-tuned"]) + ".",
        "",
        f"The intervals hold the spread over seeds (trained model and fine-tuning); the test set's sampling noise is "
        f"bounded apart by the {noise:.1f} pp threshold (two binomial standard errors, {se:.2f} pp each, of a pooled "
        f"accuracy on {n_test} images).",
        "",
    ]
    search = Path(args.out) / "quant_search" / "results.md"
    if search.exists():
        lines += [
            f"## Search: `coevo bench --problem quant` on {search_model(model)} (pelnas vs tpe vs random)",
            "",
            f"`coevo bench --problem quant --model {search_model(model)} --finetune-epochs 1 --proposers pelnas,tpe,random "
            f"--budget {args.budget} --seeds 3 --out {Path(args.out) / 'quant_search'}` (run with `--search`; its groups "
            "come from the class counts, which issue 31 did not change). Objectives: val accuracy (%) after one "
            "fine-tuning epoch vs average weight bits. HV reference: accuracy 80 %, 8 bits; pooled HV ratio = a run's front "
            "HV over the HV of all runs' fronts pooled (the true front is unknown). The bench's own table, unchanged:",
            "",
            search.read_text(),
        ]
    return "\n".join(lines) + "\n"


def parser() -> argparse.ArgumentParser:
    """The figure's options."""
    p = figure_parser(NAME, __doc__)
    p.add_argument("--model", default=MODEL, help=f"zoo classifier (default: {MODEL}; a cross-validated one runs every fold)")
    p.add_argument("--bits", type=lambda s: [float(x) for x in s.split(",")], default=[2.5, 3.0], help="average bits, comma-separated")
    p.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (each: the trained models and the fine-tuning)")
    # 5, not QuantConfig.finetune_epochs (3): the committed figure's experiment setting
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument(
        "--search",
        action="store_true",
        help="also run coevo bench --problem quant (3 seeds) on --model when the problem offers it, else on " + SEARCH_MODEL,
    )
    p.add_argument("--budget", type=int, default=60, help="evaluations per search run (default: 60)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Measure (unless ``--report-only``; ``--search`` adds the bench), then write quant.md from quant.csv; 2 on bad input."""
    from coevo.sim.quant import CANDIDATES
    from coevo.sim.quant.mixed import check_target

    args = parser().parse_args(argv)
    try:  # before anything is trained or written
        for bits in args.bits:
            check_target(bits, CANDIDATES)
        if args.seeds < 1:
            raise UserInputError(f"--seeds must be >= 1, got {args.seeds}")
    except UserInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out, command = Path(args.out), command_line(NAME, argv)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "quant.csv"
    if not args.report_only:
        measure(args, path, command)
        if args.search:
            from coevo.agent.cli import main as coevo

            torch.set_num_threads(1)
            coevo(
                ["bench", "--problem", "quant", "--model", search_model(args.model),
                 "--finetune-epochs", str(QuantConfig.search_finetune_epochs), "--proposers", "pelnas,tpe,random",
                 "--budget", str(args.budget), "--seeds", "3", "--out", str(out / "quant_search")]
            )  # fmt: skip
    print(write_markdown(out / "quant.md", report(args, path), command))
    return 0
