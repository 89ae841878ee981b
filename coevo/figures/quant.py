"""Class-based mixed-precision quantization vs uniform, HAWQ-trace and magnitude at 3, 4 and 6 average bits (and 2.5).

On the zoo's ``cnn-digits`` (scikit-learn digits, 1,000 train / 297 val / 500 test), every
method gets the same average-bits budget, the same straight-through fine-tuning (up to
``--epochs`` epochs, the best val epoch kept) and the same seeds (the fine-tuning seed: the
train loader's shuffle, the optimiser, HAWQ's Hutchinson probes). Test accuracy is measured
once per run, after the choices made on val. 2.5 bits is added because at 3 bits and above
short fine-tuning brings every method back to the float model on this small CNN. The greedy search (class-importance groups,
lowest bits within ``--max-drop`` pp of the float model on val) is reported beside them.
With ``--search`` it also runs ``coevo bench --problem quant`` (pelnas vs tpe vs random).

    nice -n 10 python -m coevo.figures quant            # ~5-10 min on 2 busy cores
    nice -n 10 python -m coevo.figures quant --search   # + the search comparison
    python -m coevo.figures quant --report-only         # re-render quant.md from the CSVs
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from coevo.figures._common import command_line, figure_parser, read_csv, write_csv, write_markdown
from coevo.search.stats import excludes_zero, format_interval
from coevo.sim.quant.config import QuantConfig

NAME = "quant"

METHODS = ("class-based", "taylor", "uniform", "hawq", "magnitude")
FIELDS = [
    "model",
    "method",
    "target_bits",
    "seed",
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


def measure(args: argparse.Namespace, path: Path, command: str) -> None:
    """Every method at every budget and seed; the rows go to ``path``."""
    from coevo.sim.quant import greedy_search, quantize
    from coevo.sim.zoo import load

    torch.set_num_threads(1)
    zm = load(args.model)
    val, test = zm.loader("val"), zm.loader("test")
    rows: list[dict[str, Any]] = []

    def keep(method: str, target: float | str, seed: int, r: Any, wall: float) -> None:
        rows.append(
            {
                "model": args.model, "method": method, "target_bits": target, "seed": seed,
                "avg_bits": round(r.allocation.avg_bits, 5), "val_float": r.val_before, "val_rtn": r.val_ptq,
                "val_after": r.val_after, "test_float": r.test_before, "test_rtn": r.test_rtn, "test_after": r.test_after,
                "best_epoch": r.best_epoch, "wall_s": round(wall, 3),
            }
        )  # fmt: skip
        print(f"{method:12s} {target!s:>5} seed {seed}: {r.allocation.avg_bits:.3f} bits, test {r.test_after:.1f} %", flush=True)

    for bits in args.bits:
        for seed in range(args.seeds):
            for method in METHODS:
                start = time.perf_counter()
                r = quantize(
                    zm.model, zm.loader("train", shuffle=True, seed=seed), val, avg_bits=bits, method=method, test=test,
                    finetune_epochs=args.epochs, seed=seed,
                )  # fmt: skip
                keep(method, bits, seed, r, time.perf_counter() - start)
    for seed in range(args.seeds):
        start = time.perf_counter()
        g = greedy_search(
            zm.model, zm.loader("train", shuffle=True, seed=seed), val, max_drop=args.max_drop, test=test,
            finetune_epochs=args.epochs, seed=seed,
        )  # fmt: skip
        keep(f"greedy (max drop {args.max_drop:g} pp)", "-", seed, g.result, time.perf_counter() - start)
    write_csv(path, rows, FIELDS, command=command)


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} [{min(values):.1f}-{max(values):.1f}]"


def report(args: argparse.Namespace, path: Path) -> str:
    """quant.md's text from the rows of ``path``."""
    rows: list[dict[str, Any]] = list(read_csv(path))
    for r in rows:
        for k in ("avg_bits", "val_float", "val_rtn", "val_after", "test_float", "test_rtn", "test_after", "wall_s"):
            r[k] = float(r[k])
    seeds = sorted({int(r["seed"]) for r in rows})
    test_float = statistics.median(r["test_float"] for r in rows)
    val_float = statistics.median(r["val_float"] for r in rows)
    lines = [
        "# Class-based mixed-precision quantization vs uniform and sensitivity-based, cnn-digits",
        "",
        f"Written by `python -m coevo.figures quant --out {args.out}` from `quant.csv` (seeds {', '.join(map(str, seeds))}; "
        f"fine-tuning up to {args.epochs} epochs with the straight-through estimator, the best val epoch kept). "
        f"Float32 model: val {val_float:.1f} %, test {test_float:.1f} % (500 test images: one image is 0.2 pp).",
        "",
        "Weights quantized per output filter/neuron (symmetric, widths from {2, 3, 4, 6, 8}); biases and activations float32. "
        "`taylor` is the ablation of class-based without the class counting (the same Taylor scores pooled over classes). "
        "Every method gets the same average-bits budget (weighted by weight count; per-unit methods land just below it, by "
        "less than one unit's upgrade; HAWQ chooses one width per layer exhaustively), the same fine-tuning and the same seeds. "
        "Test accuracy: median [min-max] over seeds. Paired difference: class-based minus the method, same seed, mean ± 95 % "
        "t half-width over seeds; **bold** where the interval excludes 0 and the mean is at least two binomial standard "
        "errors of one test accuracy (below that, the test set's own noise). RTN: round-to-nearest at the same widths, no fine-tuning.",
        "",
        "| avg bits | method | avg bits used | RTN val % | RTN test % | val % after | test % after | class-based minus it, test pp "
        "| s per run |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    verdicts: list[str] = []
    rtn_notes: list[str] = []
    noise = 2 * (test_float * (100 - test_float) / 500) ** 0.5  # two binomial standard errors of one test accuracy
    for bits in sorted({r["target_bits"] for r in rows if r["target_bits"] != "-"}, key=float):
        at = [r for r in rows if r["target_bits"] == bits]
        ours = {int(r["seed"]): r["test_after"] for r in at if r["method"] == "class-based"}
        ours_rtn = {int(r["seed"]): r["test_rtn"] for r in at if r["method"] == "class-based"}
        for method in METHODS:
            mine = [r for r in at if r["method"] == method]
            if not mine:
                continue
            diffs = [ours[int(r["seed"])] - r["test_after"] for r in mine if int(r["seed"]) in ours]
            paired = "-" if method == "class-based" else format_interval(diffs, 2)
            mean = statistics.fmean(diffs) if diffs else 0.0
            clear = excludes_zero(diffs) and abs(mean) >= noise
            if method != "class-based" and clear:
                paired = f"**{paired}**"
            rtn = [ours_rtn[int(r["seed"])] - r["test_rtn"] for r in mine if int(r["seed"]) in ours_rtn]
            if method != "class-based" and rtn:
                rtn_mean = statistics.fmean(rtn)
                if abs(rtn_mean) >= noise:
                    rtn_notes.append(f"at {float(bits):g} bits {'above' if rtn_mean > 0 else 'below'} {method} by {abs(rtn_mean):.1f} pp")
            if method != "class-based":
                word = "beats" if clear and mean > 0 else "loses to" if clear else "ties with"
                verdicts.append(f"at {float(bits):g} bits class-based {word} {method} ({mean:+.2f} pp)")
            lines.append(
                f"| {float(bits):g} | {method} | {statistics.median(r['avg_bits'] for r in mine):.3f} | "
                f"{_spread([r['val_rtn'] for r in mine])} | {_spread([r['test_rtn'] for r in mine])} | "
                f"{_spread([r['val_after'] for r in mine])} | "
                f"{_spread([r['test_after'] for r in mine])} | {paired} | {statistics.median(r['wall_s'] for r in mine):.1f} |"
            )
    greedy = [r for r in rows if r["target_bits"] == "-"]
    if greedy:
        lines.append(
            f"| {statistics.median(r['avg_bits'] for r in greedy):.2f} (found) | {greedy[0]['method']} | "
            f"{_spread([r['avg_bits'] for r in greedy])} | {_spread([r['val_rtn'] for r in greedy])} | "
            f"{_spread([r['test_rtn'] for r in greedy])} | "
            f"{_spread([r['val_after'] for r in greedy])} | {_spread([r['test_after'] for r in greedy])} | - | "
            f"{statistics.median(r['wall_s'] for r in greedy):.1f} |"
        )
    se = (test_float * (100 - test_float) / 500) ** 0.5
    lines += [
        "",
        f"Verdicts (paired over seeds; 'ties' = the 95 % interval includes 0 or the mean is below {noise:.1f} pp): "
        + "; ".join(verdicts)
        + ".",
        "",
        f"Without fine-tuning (round-to-nearest test accuracy, differences of at least {noise:.1f} pp), class-based is "
        + ("; ".join(rtn_notes) if rtn_notes else "within that of every method at every budget")
        + ".",
        "",
        f"The seeds vary the fine-tuning only (shuffle, optimiser, Hutchinson probes): where no epoch beats round-to-nearest on "
        f"val, every seed keeps the same model and the interval has zero width. The test set's own sampling noise (binomial "
        f"standard error of one accuracy: {se:.1f} pp at {test_float:.1f} % on 500 images) is not in these intervals, hence "
        "the threshold on the mean.",
        "",
    ]
    search = Path(args.out) / "quant_search" / "results.md"
    if search.exists():
        lines += [
            "## Search: `coevo bench --problem quant` (pelnas vs tpe vs random)",
            "",
            f"`coevo bench --problem quant --model {args.model} --finetune-epochs 1 --proposers pelnas,tpe,random "
            f"--budget {args.budget} --seeds 3 --out {Path(args.out) / 'quant_search'}`. Objectives: val accuracy (%) after "
            "one fine-tuning epoch vs average weight bits (model bits minus a constant). HV reference: accuracy 80 %, 8 bits; "
            "pooled HV ratio = a run's front HV over the HV of all runs' fronts pooled (the true front is unknown). "
            "The bench's own table, unchanged:",
            "",
            search.read_text(),
        ]
    return "\n".join(lines) + "\n"


def parser() -> argparse.ArgumentParser:
    """The figure's options; the model and the greedy tolerance are the family's (``QuantConfig``)."""
    p = figure_parser(NAME, __doc__)
    p.add_argument("--model", default=QuantConfig.model)
    p.add_argument("--bits", type=lambda s: [float(x) for x in s.split(",")], default=[2.5, 3.0, 4.0, 6.0])
    p.add_argument("--seeds", type=int, default=5)
    # 5, not QuantConfig.finetune_epochs (3): the committed figure's experiment setting
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--max-drop", type=float, default=QuantConfig.accuracy_drop_max)
    p.add_argument("--search", action="store_true", help="also run coevo bench --problem quant (pelnas, tpe, random; 3 seeds)")
    p.add_argument("--budget", type=int, default=60, help="evaluations per search run (default: 60)")
    return p


def main(argv: list[str] | None = None) -> None:
    """Measure (unless ``--report-only``; ``--search`` adds the bench), then write quant.md from quant.csv."""
    args = parser().parse_args(argv)
    out, command = Path(args.out), command_line(NAME, argv)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "quant.csv"
    if not args.report_only:
        measure(args, path, command)
        if args.search:
            from coevo.agent.cli import main as coevo

            torch.set_num_threads(1)
            coevo(
                ["bench", "--problem", "quant", "--model", args.model, "--finetune-epochs", str(QuantConfig.search_finetune_epochs),
                 "--proposers", "pelnas,tpe,random",
                 "--budget", str(args.budget), "--seeds", "3", "--out", str(out / "quant_search")]
            )  # fmt: skip
    print(write_markdown(out / "quant.md", report(args, path), command))
