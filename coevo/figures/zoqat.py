"""Issue 31 figure: W4A8 zeroth-order QAT, light (scales) and full (weights too, ZeroQAT), by SPSA and P-GAP, vs
first-order STE QAT and the post-training baselines RTN and GPTQ, at the same bits, on a zoo LM.

Every run is a fresh process (sim.zoqat.job.run_isolated, one torch thread) so its peak process memory is its own.
Phase "val": the learning rate of each trained configuration is chosen on the validation split (seed 0). Phase
"test": each configuration with its chosen rate, seeds 0-2 (the seed sets the batch order, the calibration batches
and the perturbations), the same batches and steps; the test split is read here only. Writes
docs/bench/quant/zoqat.csv (every run) and zoqat.md: means with 95 % t intervals and paired (same-seed) differences.

    nice -n 10 python -m coevo.figures zoqat --model lm-pydoc-tiny           # the committed figure
    python -m coevo.figures zoqat --model lm-pydoc-tiny --steps 40 --out /tmp/zq   # a quick look
    python -m coevo.figures zoqat --report-only --model lm-pydoc-tiny       # rewrite the table from the CSV

``--ablation`` (issue 31 item 3) runs :data:`ABLATION` instead: full ZeroQAT by SPSA against P-GAP at rank 2, 4 and 8
(probes scaled with the rank, charged to the same step budget) and with and without ZeroQAT's smoothing factors at
W4A8 and W4A4, seeds that vary the trained model, into zoqat-ablation.csv and .md:

    nice -n 10 python -m coevo.figures zoqat --ablation --lr-from docs/bench/quant/zoqat.csv
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from coevo.figures._common import command_line, figure_parser, read_csv, record_provenance, write_markdown
from coevo.search.stats import format_interval, t_interval
from coevo.sim.errors import UserInputError
from coevo.sim.zoqat.config import ZOQAT
from coevo.sim.zoqat.fakequant import check_alpha
from coevo.sim.zoqat.job import Spec, run_isolated
from coevo.sim.zoqat.train import check_pgap

NAME = "zoqat"

CONFIGS: dict[str, tuple[str, bool]] = {
    "rtn": ("rtn", False),
    "gptq": ("gptq", False),
    "spsa-light": ("spsa", False),
    "ste-light": ("ste", False),
    "spsa-full": ("spsa", True),
    "pgap-full": ("pgap", True),
    "ste-full": ("ste", True),
}
"""label -> (method, train_weights). light: the quantization scales trained, weights frozen; full: the Linear weights
too (full ZeroQAT). P-GAP runs full only: its subspaces are per weight matrix, and with the scales alone (vectors)
it is SPSA with fewer updates."""
LR_GRID: dict[str, list[float]] = {
    "spsa-light": [3e-3, 1e-2],
    "ste-light": [3e-3, 1e-2],
    "spsa-full": [1e-4, 1e-3],
    "pgap-full": [1e-4, 1e-3],
    "ste-full": [1e-4, 1e-3],
}
"""Learning rates tried on the validation split (seed 0); the full variants move weights, hence smaller rates."""
ABLATION: dict[str, dict[str, Any]] = {
    "spsa-full": {"method": "spsa", "train_weights": True},
    "pgap-full": {"method": "pgap", "train_weights": True, "rank": 2, "probes": 5},
    "pgap-full-r2p20": {"method": "pgap", "train_weights": True, "rank": 2, "probes": 20},
    "pgap-full-r4p10": {"method": "pgap", "train_weights": True, "rank": 4, "probes": 10},
    "pgap-full-r8p20": {"method": "pgap", "train_weights": True, "rank": 8, "probes": 20},
    "spsa-full-smooth": {"method": "spsa", "train_weights": True, "smooth_alpha": 0.5},
    "spsa-full-a4": {"method": "spsa", "train_weights": True, "a_bits": 4},
    "spsa-full-smooth-a4": {"method": "spsa", "train_weights": True, "a_bits": 4, "smooth_alpha": 0.5},
}
"""label -> the Spec fields that differ from the base (W4A8 unless ``a_bits`` is given). P-GAP: ``probes`` per window
of ``refresh`` (50) steps, 2.5 probes per rank direction as the rank grows (r2p20: more probes at rank 2, to
tell the probes' effect from the rank's); spsa-full and pgap-full are the main
figure's configurations (so ``--lr-from`` reuses their learning-rate choice). smooth: ZeroQAT's smoothing factors,
SmoothQuant's init at alpha 0.5, trained with the scales and weights."""
ABLATION_BASELINE: dict[str, str] = {
    "pgap-full": "spsa-full",
    "pgap-full-r2p20": "spsa-full",
    "pgap-full-r4p10": "spsa-full",
    "pgap-full-r8p20": "spsa-full",
    "spsa-full-smooth": "spsa-full",
    "spsa-full-smooth-a4": "spsa-full-a4",
}
"""Each ablation configuration's paired comparison: the same bits without the change."""
ABLATION_LR_GRID = [3e-5, 1e-4, 1e-3]
"""The full variants' grid of the main figure (LR_GRID) and one rate below it (both full configurations chose its
lowest rate there), for every ablation configuration."""
SEEDS = (0, 1, 2)
FIELDS = [
    "phase",
    "label",
    "model",
    "method",
    "train_weights",
    "w_bits",
    "a_bits",
    "steps",
    "lr",
    "eps",
    "seed",
    "train_seed",
    "batch_size",
    "rank",
    "refresh",
    "probes",
    "smooth_alpha",
    "metric",
    "float_val",
    "rtn_val",
    "after_val",
    "float_test",
    "rtn_test",
    "after_test",
    "peak_rss_train_mb",
    "s_per_step",
    "train_s",
    "ptq_s",
    "trainable_values",
    "first_loss",
    "last_loss",
    "peak_reset",
    "weights",  # the trained model's weights fingerprint (zoo training is not bit-identical across machines)
]


def read(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    return read_csv(path)


KEY = ("phase", "label", "model", "w_bits", "a_bits", "steps", "lr", "eps", "seed", "batch_size")


def key(row: dict[str, Any]) -> tuple[str, ...]:
    # train_seed: rows written before it existed used the recipe's model (None)
    train_seed = row.get("train_seed")
    return (*(str(row[k]) for k in KEY), str(None if train_seed in (None, "") else train_seed))


def append(path: Path, row: dict[str, Any]) -> None:
    new = not path.exists()
    # an existing file keeps its own header: a CSV written before a field was added (smooth_alpha) stays aligned
    fields = FIELDS if new else next(csv.reader(path.open()))
    with path.open("a", newline="") as f:
        w = csv.DictWriter(f, fields, extrasaction="ignore")
        if new:
            w.writeheader()
        w.writerow(row)


def measure(path: Path, done: set[tuple[str, ...]], phase: str, label: str, spec: Spec) -> dict[str, Any]:
    row = {"phase": phase, "label": label, **{k: getattr(spec, k) for k in (*KEY[2:], "train_seed")}}
    if key(row) in done:
        return next(r for r in read(path) if key(r) == key(row))
    started = time.perf_counter()
    out = run_isolated(spec)
    out.update(phase=phase, label=label)
    append(path, out)
    done.add(key(row))
    after = out.get("after_test", out.get("after_val"))
    print(
        f"{phase} {label} lr={spec.lr:g} seed={spec.seed}: {after} peak={out['peak_rss_train_mb']} MB "
        f"{out['s_per_step']} s/step ({time.perf_counter() - started:.0f} s)",
        flush=True,
    )
    return out


def chosen_lr(rows: list[dict[str, str]], label: str, model: str, steps: int) -> float | None:
    """The validation-phase learning rate with the lowest val perplexity (highest accuracy) for ``label``."""
    cands = [r for r in rows if r["phase"] == "val" and r["label"] == label and r["model"] == model and int(r["steps"]) == steps]
    if not cands:
        return None
    sign = 1 if cands[0]["metric"] == "perplexity" else -1
    return float(min(cands, key=lambda r: sign * float(r["after_val"]))["lr"])


def rows_by_label(rows: list[dict[str, str]], model: str, steps: int, w_bits: int, a_bits: int) -> dict[str, dict[int, dict[str, str]]]:
    """label -> seed -> the test row (trained configurations at ``steps``, post-training ones at 0)."""
    out: dict[str, dict[int, dict[str, str]]] = {}
    for r in rows:
        if r["phase"] != "test" or r["model"] != model or int(r["w_bits"]) != w_bits or r["a_bits"] != str(a_bits):
            continue
        if int(r["steps"]) == (0 if CONFIGS[r["label"]][0] in ("rtn", "gptq") else steps):
            out.setdefault(r["label"], {})[int(r["seed"])] = r
    return out


def paired(a: dict[int, dict[str, str]], b: dict[int, dict[str, str]], field: str = "after_test") -> list[float]:
    """Same-seed differences ``a - b`` of ``field`` over the seeds both have."""
    return [float(a[s][field]) - float(b[s][field]) for s in sorted(set(a) & set(b))]


def _mean_ci(vals: list[float], digits: int) -> str:
    mean, half = t_interval(vals)
    return f"{mean:.{digits}f}" if half != half else f"{mean:.{digits}f} ± {half:.{digits}f}"


def table(rows: list[dict[str, str]], model: str, steps: int, w_bits: int, a_bits: int) -> str:
    by = rows_by_label(rows, model, steps, w_bits, a_bits)
    if not by:
        return "(no test runs yet)\n"
    metric = next(iter(next(iter(by.values())).values()))["metric"]
    lines = [
        f"| configuration | trained | lr | seeds | test {metric} (mean ± 95 % t) | paired vs RTN | paired vs GPTQ | "
        "paired vs spsa-light | peak process memory, MB (mean [min, max]) | s/step | trained values |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, (method, weights) in CONFIGS.items():
        rs = by.get(label)
        if not rs:
            continue
        after = [float(r["after_test"]) for r in rs.values()]
        peak = [float(r["peak_rss_train_mb"]) for r in rs.values()]
        trained = "-" if method in ("rtn", "gptq") else "scales + weights" if weights else "scales"
        first = next(iter(rs.values()))
        lines.append(
            f"| {label} | {trained} | {first['lr'] if trained != '-' else '-'} | {len(rs)} | {_mean_ci(after, 3)} | "
            f"{format_interval(paired(rs, by['rtn']), 3) if 'rtn' in by and label != 'rtn' else '-'} | "
            f"{format_interval(paired(rs, by['gptq']), 3) if 'gptq' in by and label != 'gptq' else '-'} | "
            f"{format_interval(paired(rs, by['spsa-light']), 3) if 'spsa-light' in by and label != 'spsa-light' else '-'} | "
            f"{statistics.mean(peak):.0f} [{min(peak):.0f}, {max(peak):.0f}] | "
            f"{statistics.mean(float(r['s_per_step']) for r in rs.values()):.3f} | {first['trainable_values'] if trained != '-' else '-'} |"
        )
    floats = [float(r["float_test"]) for rs in by.values() for r in rs.values()]
    fl = f"{statistics.mean(floats):.3f}"
    if max(floats) - min(floats) > 1e-9:  # seeds that train their own models: each has its own float figure
        fl = f"{fl} (mean over the seeds' models, {min(floats):.3f} to {max(floats):.3f})"
    return "\n".join(lines) + f"\n\nFloat model: test {metric} {fl}.\n"


def findings(rows: list[dict[str, str]], model: str, steps: int, w_bits: int, a_bits: int) -> str:
    """Sentences computed from the test rows: what each comparison of issue 31 came to (paired over seeds)."""
    by = rows_by_label(rows, model, steps, w_bits, a_bits)
    if not by:
        return ""
    metric = next(iter(next(iter(by.values())).values()))["metric"]
    lower = metric == "perplexity"

    def verdict(a: str, b: str) -> str | None:
        if a not in by or b not in by:
            return None
        diff = paired(by[a], by[b])
        mean, half = t_interval(diff)
        better = mean < 0 if lower else mean > 0
        resolved = half == half and abs(mean) > half  # nan half-width (one seed): nothing resolved
        word = ("better" if better else "worse") if resolved else "no difference the seeds can resolve"
        return f"- **{a}** vs **{b}**: test {metric} difference {format_interval(diff, 3)} (paired, {len(diff)} seeds): {word}."

    pairs = [
        ("gptq", "rtn"),
        ("spsa-light", "rtn"),
        ("spsa-full", "spsa-light"),
        ("pgap-full", "spsa-full"),
        ("spsa-full", "ste-full"),
        ("ste-light", "rtn"),
        ("ste-full", "ste-light"),
        ("spsa-light", "gptq"),
        ("spsa-full", "gptq"),
    ]
    out = [v for a, b in pairs if (v := verdict(a, b))]

    def peak(label: str) -> float | None:
        return statistics.mean(float(r["peak_rss_train_mb"]) for r in by[label].values()) if label in by else None

    for zo, fo in (("spsa-light", "ste-light"), ("spsa-full", "ste-full"), ("pgap-full", "ste-full")):
        pz, pf = peak(zo), peak(fo)
        if pz is not None and pf is not None:
            out.append(f"- peak process memory, **{zo}** {pz:.0f} MB vs **{fo}** {pf:.0f} MB ({100 * (1 - pz / pf):.0f} % less).")
    return "\n".join(out) + "\n"


def val_table(rows: list[dict[str, str]], model: str, steps: int) -> str:
    val = [r for r in rows if r["phase"] == "val" and r["model"] == model and int(r["steps"]) == steps]
    if not val:
        return "(no validation runs)\n"
    lines = ["| configuration | lr | val after | val RTN | s/step |", "| --- | --- | --- | --- | --- |"]
    for r in sorted(val, key=lambda r: (list(CONFIGS).index(r["label"]), float(r["lr"]))):
        lines.append(f"| {r['label']} | {r['lr']} | {float(r['after_val']):.3f} | {float(r['rtn_val']):.3f} | {r['s_per_step']} |")
    return "\n".join(lines) + "\n"


def parser() -> argparse.ArgumentParser:
    """The figure's options; the bits, steps, batch, perturbation and evaluation are the family's (``ZOQAT``)."""
    ap = figure_parser(NAME, __doc__)
    ap.add_argument("--model", default="lm-pydoc-tiny", help="zoo model (default lm-pydoc-tiny: the 21 runs fit the shared box)")
    ap.add_argument("--steps", type=int, default=ZOQAT.steps)
    ap.add_argument("--val-steps", type=int, default=None, help="steps of the lr choice runs (default: --steps)")
    ap.add_argument("--w-bits", type=int, default=ZOQAT.w_bits)
    ap.add_argument("--a-bits", type=int, default=ZOQAT.a_bits)
    ap.add_argument("--batch-size", type=int, default=ZOQAT.batch_size)
    ap.add_argument("--eps", type=float, default=ZOQAT.eps)
    ap.add_argument("--eval-batches", type=int, default=ZOQAT.eval_batches, help="batches of 64 per split to evaluate (default: all)")
    ap.add_argument("--configs", default=",".join(CONFIGS), help="labels of CONFIGS to run")
    ap.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    ap.add_argument(
        "--lr-from",
        default=None,
        help="an earlier run's CSV: reuse its validation-phase rows (the learning-rate choice, seed 0) instead of measuring them "
        "again; with --vary-model, seed 0 is the recipe's own model, so the choice is the same",
    )
    ap.add_argument(
        "--ablation",
        action="store_true",
        help="run ABLATION (P-GAP rank and probes, ZeroQAT's smoothing; seeds vary the model) into zoqat-ablation.csv/.md",
    )
    ap.add_argument(
        "--vary-model",
        action="store_true",
        help="test seed s also trains the zoo model with seed s (seeds vary the trained model, not only the method's randomness)",
    )
    return ap


def main(argv: list[str] | None = None) -> int | None:
    """Measure (unless ``--report-only``), then write zoqat.md (zoqat-MODEL.md for another model than lm-pydoc-tiny)."""
    a = parser().parse_args(argv)
    out, command = Path(a.out), command_line(NAME, argv)
    out.mkdir(parents=True, exist_ok=True)
    if a.ablation:
        return ablation_main(a, out, command)
    suffix = ("" if a.model == "lm-pydoc-tiny" else f"-{a.model}") + ("-vary-model" if a.vary_model else "")
    path = out / f"zoqat{suffix}.csv"
    done = {key(r) for r in read(path)}
    val_steps = a.val_steps or a.steps
    labels = a.configs.split(",")
    seeds = [int(s) for s in a.seeds.split(",")]
    base = Spec(model=a.model, w_bits=a.w_bits, a_bits=a.a_bits, batch_size=a.batch_size, eps=a.eps, eval_batches=a.eval_batches, threads=1)
    if not a.report_only:
        if a.lr_from:  # the learning-rate choice of an earlier run: its validation rows count as measured here
            for r in read(Path(a.lr_from)):
                if r["phase"] == "val" and r["model"] == a.model and key(r) not in done:
                    append(path, r)
                    done.add(key(r))
        for label in labels:
            method, weights = CONFIGS[label]
            for lr in LR_GRID.get(label, []):
                spec = replace(base, method=method, train_weights=weights, lr=lr, steps=val_steps, seed=0, splits=("val",))
                measure(path, done, "val", label, spec)
        for label in labels:
            method, weights = CONFIGS[label]
            untrained = method in ("rtn", "gptq")
            best = 0.0 if untrained else chosen_lr(read(path), label, a.model, val_steps)
            assert best is not None
            for seed in seeds:
                spec = replace(
                    base,
                    method=method,
                    train_weights=weights,
                    lr=best,
                    steps=0 if untrained else a.steps,
                    seed=seed,
                    train_seed=seed if a.vary_model else None,
                )
                measure(path, done, "test", label, spec)
        record_provenance(path, command)
    rows = read(path)
    md = [
        f"# W{a.w_bits}A{a.a_bits} zeroth-order QAT (light and full ZeroQAT; SPSA, P-GAP) vs STE QAT vs RTN and GPTQ on `{a.model}`",
        "",
        f"Written by `python -m coevo.figures zoqat --model {a.model} --steps {a.steps}"
        + (f" --val-steps {val_steps}" if val_steps != a.steps else "")
        + (f" --eval-batches {a.eval_batches}" if a.eval_batches else "")
        + (" --vary-model" if a.vary_model else "")
        + (f" --lr-from {a.lr_from}" if a.lr_from else "")
        + f"` from `{path.name}` (every run; test seeds {a.seeds}). Each run is a fresh process with one torch thread; "
        f"batches of {a.batch_size} sequences; a seed fixes the batch order, the calibration batches (4) and the "
        "perturbations, the same for every configuration"
        + (" and, at test, the zoo model's own training (seed s trains model s). " if a.vary_model else ". ")
        + "All at the same bits: weights W per output channel, "
        "activations (every Linear's input) per tensor, symmetric, from round-to-nearest (RTN) scales. "
        "light: the quantization scales trained (LSQ-style, log space), weights frozen; full (ZeroQAT): the Linear "
        "weights too. ZO configurations make two forward passes per step (P-GAP's probes included), none backward. "
        "GPTQ: post-training, on RTN's grid, from the same calibration batches. s/step is wall time on a shared "
        "machine (its load is in the provenance line): compare it within this table only.",
        "",
        "**Memory, one figure: peak process memory**, the kernel's resident high-water mark (VmHWM) of the run's "
        "fresh process, reset through /proc/self/clear_refs when training (or GPTQ) starts and read when it ends: "
        "python, torch, the model, the data and everything training allocates, at its peak.",
        "",
        "## Test split (learning rate chosen on val, seed 0; paired: same-seed differences, mean ± 95 % t half-width)",
        "",
        table(rows, a.model, a.steps, a.w_bits, a.a_bits),
        "## Findings (computed from the CSV)",
        "",
        findings(rows, a.model, a.steps, a.w_bits, a.a_bits),
        f"## Learning-rate choice on the validation split ({val_steps} steps, seed 0)",
        "",
        val_table(rows, a.model, val_steps),
    ]
    write_markdown(out / f"zoqat{suffix}.md", "\n".join(md), command)
    print(f"wrote {out / f'zoqat{suffix}.md'}")
    return 0


def updates(steps: int, refresh: int, probes: int) -> int:
    """Steps of a P-GAP run that update the model: the others are probes (``i % refresh < probes``), no update."""
    return sum(1 for i in range(steps) if i % refresh >= probes)


def check_ablation(a: argparse.Namespace) -> str | None:
    """One line naming a bad value and its bound, or None: the ablation's P-GAP and smoothing settings."""
    try:
        for label, change in ABLATION.items():
            if change["method"] == "pgap":
                check_pgap(int(change["rank"]), int(change["probes"]), Spec.refresh)
            check_alpha(change.get("smooth_alpha"))
            if label.endswith("-a4") and a.a_bits <= 4:
                return f"--a-bits must be above 4 for --ablation (its A4 rows are the lower width), got {a.a_bits}"
    except UserInputError as exc:
        return str(exc)
    return None


def ablation_main(a: argparse.Namespace, out: Path, command: str) -> int:
    """``--ablation``: measure :data:`ABLATION` (unless ``--report-only``), write zoqat-ablation.csv and .md."""
    bad = check_ablation(a)
    if bad:
        print(bad, file=sys.stderr)
        return 2
    path = out / "zoqat-ablation.csv"
    done = {key(r) for r in read(path)}
    val_steps = a.val_steps or a.steps
    seeds = [int(s) for s in a.seeds.split(",")]
    base = Spec(model=a.model, w_bits=a.w_bits, a_bits=a.a_bits, batch_size=a.batch_size, eps=a.eps, eval_batches=a.eval_batches, threads=1)
    if not a.report_only:
        if a.lr_from:  # the main figure's choice for spsa-full and pgap-full (same labels, same seed-0 model)
            for r in read(Path(a.lr_from)):
                if r["phase"] == "val" and r["model"] == a.model and r["label"] in ABLATION and key(r) not in done:
                    append(path, r)
                    done.add(key(r))
        for label, change in ABLATION.items():
            for lr in ABLATION_LR_GRID:  # the rows --lr-from brought count as measured
                measure(path, done, "val", label, replace(base, **change, lr=lr, steps=val_steps, seed=0, splits=("val",)))
        for label, change in ABLATION.items():
            best = chosen_lr(read(path), label, a.model, val_steps)
            assert best is not None
            for seed in seeds:
                measure(path, done, "test", label, replace(base, **change, lr=best, steps=a.steps, seed=seed, train_seed=seed))
        record_provenance(path, command)
    write_markdown(out / "zoqat-ablation.md", ablation_page(read(path), a, val_steps), command)
    print(f"wrote {out / 'zoqat-ablation.md'}")
    return 0


def ablation_rows(rows: list[dict[str, str]], model: str, steps: int) -> dict[str, dict[int, dict[str, str]]]:
    """label -> seed -> the ablation's test row at ``steps``."""
    out: dict[str, dict[int, dict[str, str]]] = {}
    for r in rows:
        if r["phase"] == "test" and r["model"] == model and int(r["steps"]) == steps and r["label"] in ABLATION:
            out.setdefault(r["label"], {})[int(r["seed"])] = r
    return out


def _verdict_word(diff: list[float]) -> str:
    mean, half = t_interval(diff)
    if half != half or abs(mean) <= half:
        return "no difference the seeds can resolve"
    return "better" if mean < 0 else "worse"


def ablation_table(by: dict[str, dict[int, dict[str, str]]], steps: int) -> str:
    """The test table: perplexity, updates, paired against the configuration without the change and against RTN."""
    lines = [
        "| configuration | A bits | rank / probes per window | model updates (of the steps) | lr | seeds | test ppl (mean ± 95 % t) | "
        "paired ln-ppl vs its baseline | paired ln-ppl vs RTN (unsmoothed) | paired ln-ppl vs its own start |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, change in ABLATION.items():
        rs = by.get(label)
        if not rs:
            continue
        first = next(iter(rs.values()))
        pgap = change["method"] == "pgap"
        rp = f"{change['rank']} / {change['probes']}" if pgap else "-"
        ups = updates(steps, int(first["refresh"]), int(change["probes"])) if pgap else steps
        base = ABLATION_BASELINE.get(label)
        vs = format_interval(log_paired(rs, by[base]), 4) + f" (vs {base})" if base and base in by else "-"
        plain = by.get("spsa-full-a4" if change.get("a_bits") == 4 else "spsa-full", {})
        vs_rtn = [math.log(float(rs[s]["after_test"])) - math.log(float(plain[s]["rtn_test"])) for s in sorted(set(rs) & set(plain))]
        lines.append(
            f"| {label} | {first['a_bits']} | {rp} | {ups} / {steps} | {first['lr']} | {len(rs)} | "
            f"{_mean_ci([float(r['after_test']) for r in rs.values()], 3)} | {vs} | {format_interval(vs_rtn, 4)} | "
            f"{format_interval(log_paired(rs, rs, 'after_test', 'rtn_test'), 4)} |"
        )
    return "\n".join(lines) + "\n"


def log_paired(
    a: dict[int, dict[str, str]], b: dict[int, dict[str, str]], field: str = "after_test", b_field: str | None = None
) -> list[float]:
    """Same-seed differences ``ln(a[field]) - ln(b[b_field or field])`` (ln-perplexity), over the seeds both have."""
    other = b_field or field
    return [math.log(float(a[s][field])) - math.log(float(b[s][other])) for s in sorted(set(a) & set(b))]


def ablation_findings(by: dict[str, dict[int, dict[str, str]]]) -> str:
    """Sentences computed from the test rows: each change against its baseline, and smoothing's PTQ effect alone."""
    out = []
    for label, base in ABLATION_BASELINE.items():
        if label in by and base in by:
            diff = log_paired(by[label], by[base])
            word = _verdict_word(diff)
            out.append(f"- **{label}** vs **{base}**: test ln-ppl {format_interval(diff, 4)} (paired, {len(diff)} seeds): {word}.")
    for smooth, plain in (("spsa-full-smooth", "spsa-full"), ("spsa-full-smooth-a4", "spsa-full-a4")):
        if smooth in by and plain in by:  # before training: the smoothed model at RTN scales vs plain RTN (SmoothQuant as PTQ)
            diff = log_paired(by[smooth], by[plain], "rtn_test")
            bits = by[smooth][next(iter(by[smooth]))]["a_bits"]
            out.append(
                f"- before training, W4A{bits}: RTN after SmoothQuant's init vs plain RTN, test ln-ppl "
                f"{format_interval(diff, 4)} (paired, {len(diff)} seeds): {_verdict_word(diff)}."
            )
    return "\n".join(out) + "\n"


def ablation_page(rows: list[dict[str, str]], a: argparse.Namespace, val_steps: int) -> str:
    """zoqat-ablation.md: the test table, the findings and the learning-rate choice, all from ``rows``."""
    by = ablation_rows(rows, a.model, a.steps)
    val = [r for r in rows if r["phase"] == "val" and r["model"] == a.model and int(r["steps"]) == val_steps and r["label"] in ABLATION]
    vt = ["| configuration | lr | val after | val RTN |", "| --- | --- | --- | --- |"]
    for r in sorted(val, key=lambda r: (list(ABLATION).index(r["label"]), float(r["lr"]))):
        vt.append(f"| {r['label']} | {r['lr']} | {float(r['after_val']):.3f} | {float(r['rtn_val']):.3f} |")
    floats = [float(r["float_test"]) for rs in by.values() for r in rs.values()]
    fl = f"{statistics.mean(floats):.3f} ({min(floats):.3f} to {max(floats):.3f} over the seeds' models)" if floats else "-"
    return "\n".join(
        [
            f"# Full ZeroQAT ablation on `{a.model}`: P-GAP's rank and probes, ZeroQAT's smoothing factors",
            "",
            "Written by `python -m coevo.figures zoqat --ablation"
            + (f" --lr-from {a.lr_from}" if a.lr_from else "")
            + f"` from `zoqat-ablation.csv` (every run; test seeds {a.seeds}, seed s also trains the zoo model with seed s). "
            f"W{a.w_bits} per output channel, activations per tensor at the A bits shown, symmetric; full ZeroQAT (the "
            f"Linear weights and the quantizers trained forward-only), {a.steps} steps of batches of {a.batch_size}, two "
            "forward passes per step for every configuration. **P-GAP's probes are charged**: each probe is one of the "
            "steps (two forward passes, no update), so every row makes the same number of forward passes and P-GAP "
            "updates the model fewer times (column 'model updates'). smooth: ZeroQAT's per-input-channel smoothing "
            "factors (X diag(s)^-1, diag(s) W), SmoothQuant's init s_j = max|X_j|^0.5 / max|W_j|^0.5 from the 4 "
            "calibration batches, trained with the scales and weights; the weight and activation scales start at RTN "
            "of the smoothed operands. Paired columns: same-seed differences of ln(perplexity), mean ± 95 % t "
            "half-width; negative is better. 'its own start': the trained model against the same run's model before "
            "training (RTN scales; for smooth, of the smoothed operands), i.e. what training added. The learning rate "
            "of each configuration is the better of its grid on the validation split (seed 0, the recipe's model).",
            "",
            "## Test split",
            "",
            ablation_table(by, a.steps) if by else "(no test runs yet)\n",
            f"Float model: test perplexity {fl}.",
            "",
            "## Findings (computed from the CSV)",
            "",
            ablation_findings(by),
            f"## Learning-rate choice on the validation split ({val_steps} steps, seed 0)",
            "",
            "\n".join(vt) + "\n",
        ]
    )
