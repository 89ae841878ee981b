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
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from coevo.figures._common import command_line, figure_parser, read_csv, record_provenance, write_markdown
from coevo.search.stats import format_interval, t_interval
from coevo.sim.zoqat.config import ZOQAT
from coevo.sim.zoqat.job import Spec, run_isolated

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
    with path.open("a", newline="") as f:
        w = csv.DictWriter(f, FIELDS, extrasaction="ignore")
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
        "--vary-model",
        action="store_true",
        help="test seed s also trains the zoo model with seed s (seeds vary the trained model, not only the method's randomness)",
    )
    return ap


def main(argv: list[str] | None = None) -> None:
    """Measure (unless ``--report-only``), then write zoqat.md (zoqat-MODEL.md for another model than lm-pydoc-tiny)."""
    a = parser().parse_args(argv)
    out, command = Path(a.out), command_line(NAME, argv)
    out.mkdir(parents=True, exist_ok=True)
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
