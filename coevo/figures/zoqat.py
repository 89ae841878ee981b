"""Issue 17 figure: W4A8 zeroth-order QAT (SPSA, projected) vs first-order STE QAT vs RTN on a zoo LM.

Every run is a fresh process (sim.zoqat.job.run_isolated, one torch thread) so its peak resident memory is its own.
Phase "val": the learning rate of each trained method is chosen on the validation split (seed 0). Phase "test":
each method with its chosen rate, seeds 0-2, the same batches and steps; the test split is read here only.
Writes docs/bench/quant/zoqat.csv (every run of every model) and zoqat.md (lm-pydoc; zoqat-MODEL.md for
another model): medians and spread, from the CSV.

    nice -n 10 python -m coevo.figures zoqat                      # lm-pydoc, 300 steps
    python -m coevo.figures zoqat --model lm-pydoc-tiny --steps 40 --out /tmp/zq   # a quick look
    python -m coevo.figures zoqat --report-only                   # rewrite the table from the CSV
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from coevo.figures._common import command_line, figure_parser, read_csv, record_provenance, write_markdown
from coevo.sim.zoqat.config import ZOQAT
from coevo.sim.zoqat.job import Spec, run_isolated

NAME = "zoqat"

LR_GRID = {"spsa": [3e-3, 1e-2], "projected": [3e-3, 1e-2], "ste": [3e-3, 1e-2]}
"""Learning rates tried on the validation split (seed 0)."""
MEMORY_LR = {"spsa": 1e-2, "projected": 1e-2, "ste": 1e-2}
"""Learning rates of the memory-only runs: the figure's own (the committed memory rows were measured with them;
``DEFAULT_LR`` has 3e-3 for projected), and memory and time per step do not depend on the rate."""
SEEDS = (0, 1, 2)
FIELDS = [
    "phase",
    "model",
    "method",
    "w_bits",
    "a_bits",
    "steps",
    "lr",
    "eps",
    "seed",
    "batch_size",
    "metric",
    "float_val",
    "rtn_val",
    "after_val",
    "float_test",
    "rtn_test",
    "after_test",
    "peak_rss_train_mb",
    "train_peak_added_mb",
    "rss_before_train_mb",
    "s_per_step",
    "train_s",
    "trainable_values",
    "first_loss",
    "last_loss",
    "peak_reset",
]


def read(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    return read_csv(path)


def key(row: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(row[k]) for k in ("phase", "model", "method", "w_bits", "a_bits", "steps", "lr", "eps", "seed", "batch_size"))


def append(path: Path, row: dict[str, Any]) -> None:
    new = not path.exists()
    with path.open("a", newline="") as f:
        w = csv.DictWriter(f, FIELDS, extrasaction="ignore")
        if new:
            w.writeheader()
        w.writerow(row)


def measure(path: Path, done: set[tuple[str, ...]], phase: str, spec: Spec) -> dict[str, Any]:
    row = {
        "phase": phase,
        **{k: getattr(spec, k) for k in ("model", "method", "w_bits", "a_bits", "steps", "lr", "eps", "seed", "batch_size")},
    }
    if key(row) in done:
        return next(r for r in read(path) if key(r) == key(row))
    started = time.perf_counter()
    out = run_isolated(spec)
    out["phase"] = phase
    append(path, out)
    done.add(key(row))
    after = out.get("after_val", out.get("after_test"))
    print(
        f"{phase} {spec.method} lr={spec.lr:g} seed={spec.seed}: {after} peak={out['peak_rss_train_mb']} MB "
        f"{out['s_per_step']} s/step ({time.perf_counter() - started:.0f} s)",
        flush=True,
    )
    return out


def chosen_lr(rows: list[dict[str, str]], method: str, model: str, steps: int) -> float | None:
    """The validation-phase learning rate with the lowest val perplexity (highest accuracy) for ``method``."""
    cands = [r for r in rows if r["phase"] == "val" and r["method"] == method and r["model"] == model and int(r["steps"]) == steps]
    if not cands:
        return None
    sign = 1 if cands[0]["metric"] == "perplexity" else -1
    return float(min(cands, key=lambda r: sign * float(r["after_val"]))["lr"])


def table(rows: list[dict[str, str]], model: str, steps: int, w_bits: int, a_bits: int) -> str:
    test = [r for r in rows if r["phase"] == "test" and r["model"] == model and int(r["steps"]) in (steps, 0)]
    test = [r for r in test if int(r["w_bits"]) == w_bits and r["a_bits"] == str(a_bits)]
    if not test:
        return "(no test runs yet)\n"
    metric = test[0]["metric"]

    def med(vals: Sequence[float], digits: int = 3) -> str:
        if not vals:
            return "-"
        m = statistics.median(vals)
        return f"{m:.{digits}f} [{min(vals):.{digits}f}, {max(vals):.{digits}f}]" if len(vals) > 1 else f"{m:.{digits}f}"

    lines = [
        f"| method | lr | seeds | test {metric} after (median [min, max]) | test {metric} RTN | change vs RTN | "
        "peak RSS in training, MB | added by training, MB | s/step | trained values |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for method in ("rtn", "spsa", "projected", "ste"):
        rs = [r for r in test if r["method"] == method]
        if not rs:
            continue
        after = [float(r["after_test"]) for r in rs]
        rtn = [float(r["rtn_test"]) for r in rs]
        change = [100 * (a - b) / b for a, b in zip(after, rtn, strict=True)]
        lines.append(
            f"| {method} | {rs[0]['lr'] if method != 'rtn' else '-'} | {len(rs)} | {med(after)} | {med(rtn)} | "
            f"{statistics.median(change):+.2f} % | {med([float(r['peak_rss_train_mb']) for r in rs], 0)} | "
            f"{med([float(r['train_peak_added_mb']) for r in rs], 1)} | {med([float(r['s_per_step']) for r in rs], 3)} | "
            f"{rs[0]['trainable_values']} |"
        )
    fl = statistics.median(float(r["float_test"]) for r in test)
    return "\n".join(lines) + f"\n\nFloat model: test {metric} {fl:.3f}.\n"


def findings(rows: list[dict[str, str]], model: str, steps: int, w_bits: int, a_bits: int) -> str:
    """Sentences computed from the test rows: the memory and quality of each ZO method against STE and RTN."""
    test = [r for r in rows if r["phase"] == "test" and r["model"] == model and int(r["steps"]) in (steps, 0)]
    test = [r for r in test if int(r["w_bits"]) == w_bits and r["a_bits"] == str(a_bits)]

    def med(method: str, field: str) -> float | None:
        vals = [float(r[field]) for r in test if r["method"] == method]
        return statistics.median(vals) if vals else None

    ste_q, ste_add, ste_peak = med("ste", "after_test"), med("ste", "train_peak_added_mb"), med("ste", "peak_rss_train_mb")
    rtn_q = med("rtn", "after_test")
    if ste_q is None or rtn_q is None or ste_add is None or ste_peak is None:
        return ""
    metric = test[0]["metric"]
    out = []
    for method in ("spsa", "projected"):
        q, add, peak = med(method, "after_test"), med(method, "train_peak_added_mb"), med(method, "peak_rss_train_mb")
        if q is None or add is None or peak is None:
            continue
        out.append(
            f"- **{method}** vs STE: training added {add:.1f} MB at peak vs {ste_add:.1f} MB "
            f"(whole-process peak {peak:.0f} vs {ste_peak:.0f} MB, {100 * (1 - peak / ste_peak):.0f} % less); "
            f"test {metric} {q:.3f} vs STE {ste_q:.3f} and RTN {rtn_q:.3f} "
            f"(it recovers {_recovered(q, ste_q, rtn_q)} of the improvement STE makes over RTN)."
        )
    return "\n".join(out) + "\n"


def _recovered(q: float, ste: float, rtn: float) -> str:
    if abs(rtn - ste) < 1e-9:
        return "n/a (STE made none)"
    return f"{100 * (rtn - q) / (rtn - ste):.0f} %"


def val_table(rows: list[dict[str, str]], model: str, steps: int) -> str:
    val = [r for r in rows if r["phase"] == "val" and r["model"] == model and int(r["steps"]) == steps]
    if not val:
        return "(no validation runs)\n"
    lines = ["| method | lr | val after | val RTN | s/step |", "| --- | --- | --- | --- | --- |"]
    for r in sorted(val, key=lambda r: (r["method"], float(r["lr"]))):
        lines.append(f"| {r['method']} | {r['lr']} | {float(r['after_val']):.3f} | {float(r['rtn_val']):.3f} | {r['s_per_step']} |")
    return "\n".join(lines) + "\n"


def memory_only(a: argparse.Namespace, out: Path, command: str) -> None:
    """Peak memory and s/step of every method on the untrained architecture (real data, no evaluation)."""
    path = out / "zoqat-memory.csv"
    done = {key(r) for r in read(path)}
    lrs = MEMORY_LR
    base = Spec(model=a.model, w_bits=a.w_bits, a_bits=a.a_bits, batch_size=a.batch_size, eps=a.eps, threads=1, splits=(), untrained=True)
    if not a.report_only:
        for seed in [int(s) for s in a.seeds.split(",")]:
            for method in ("spsa", "projected", "ste"):
                measure(path, done, "memory", replace(base, method=method, lr=lrs[method], steps=a.steps, seed=seed))
        record_provenance(path, command)
    rows = [r for r in read(path) if r["model"] == a.model and int(r["steps"]) == a.steps]
    lines = [
        f"# Peak memory and time per step of W{a.w_bits}A{a.a_bits} QAT on `{a.model}`'s architecture",
        "",
        f"Written by `python -m coevo.figures zoqat --memory-only --model {a.model} --steps {a.steps}` from `zoqat-memory.csv`. "
        "The architecture at its initial weights on the real training data (the trained model was not cached when "
        "this ran): memory and time per step do not depend on the weights' values, perplexity does and is not "
        f"reported here. Fresh process per run, one torch thread, batches of {a.batch_size} x 128 bytes; trained: the "
        "quantization scales. Peak: the kernel's resident high-water mark during training (VmHWM, reset when "
        "training starts); 'added' is that peak minus the RSS when training started.",
        "",
        "| method | seeds | peak RSS in training, MB (median [min, max]) | added by training, MB | s/step | trained values |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for method in ("spsa", "projected", "ste"):
        rs = [r for r in rows if r["method"] == method]
        if not rs:
            continue

        def span(field: str, digits: int, rs: list[dict[str, str]] = rs) -> str:
            v = [float(r[field]) for r in rs]
            return f"{statistics.median(v):.{digits}f} [{min(v):.{digits}f}, {max(v):.{digits}f}]"

        lines.append(
            f"| {method} | {len(rs)} | {span('peak_rss_train_mb', 0)} | {span('train_peak_added_mb', 1)} | "
            f"{span('s_per_step', 3)} | {rs[0]['trainable_values']} |"
        )
    write_markdown(out / "zoqat-memory.md", "\n".join(lines) + "\n", command)
    print(f"wrote {out / 'zoqat-memory.md'}")


def parser() -> argparse.ArgumentParser:
    """The figure's options; the model, bits, steps, batch, perturbation and evaluation are the family's (``ZOQAT``)."""
    ap = figure_parser(NAME, __doc__)
    ap.add_argument("--model", default=ZOQAT.model)
    ap.add_argument("--steps", type=int, default=ZOQAT.steps)
    ap.add_argument("--val-steps", type=int, default=None, help="steps of the lr choice runs (default: --steps)")
    ap.add_argument("--w-bits", type=int, default=ZOQAT.w_bits)
    ap.add_argument("--a-bits", type=int, default=ZOQAT.a_bits)
    ap.add_argument("--batch-size", type=int, default=ZOQAT.batch_size)
    ap.add_argument("--eps", type=float, default=ZOQAT.eps)
    ap.add_argument("--eval-batches", type=int, default=ZOQAT.eval_batches, help="batches of 64 per split to evaluate (default: all)")
    ap.add_argument("--methods", default="rtn,spsa,projected,ste")
    ap.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    ap.add_argument(
        "--memory-only",
        action="store_true",
        help="peak memory and s/step only, on the architecture at its initial weights (no zoo training, no evaluation)",
    )
    ap.add_argument(
        "--lrs",
        default=None,
        help="method=lr,... to use instead of choosing on val (e.g. the rates chosen on lm-pydoc-tiny); skips the val phase",
    )
    return ap


def main(argv: list[str] | None = None) -> None:
    """Measure (unless ``--report-only``), then write zoqat.md (or zoqat-memory.md with ``--memory-only``)."""
    a = parser().parse_args(argv)
    out, command = Path(a.out), command_line(NAME, argv)
    out.mkdir(parents=True, exist_ok=True)
    if a.memory_only:
        memory_only(a, out, command)
        return
    path = out / "zoqat.csv"
    done = {key(r) for r in read(path)}
    val_steps = a.val_steps or a.steps
    methods = a.methods.split(",")
    seeds = [int(s) for s in a.seeds.split(",")]
    base = Spec(
        model=a.model,
        w_bits=a.w_bits,
        a_bits=a.a_bits,
        batch_size=a.batch_size,
        eps=a.eps,
        eval_batches=a.eval_batches,
        threads=1,
    )
    given = {m: float(v) for m, v in (item.split("=") for item in a.lrs.split(","))} if a.lrs else None
    if not a.report_only:
        for method in methods:
            for lr in [] if given else LR_GRID.get(method, []):
                measure(path, done, "val", replace(base, method=method, lr=lr, steps=val_steps, seed=0, splits=("val",)))
        rows = read(path)
        for method in methods:
            best = 0.0 if method == "rtn" else given[method] if given else chosen_lr(rows, method, a.model, val_steps)
            assert best is not None
            for seed in seeds:
                steps = 0 if method == "rtn" else a.steps
                measure(path, done, "test", replace(base, method=method, lr=best, steps=steps, seed=seed, splits=("val", "test")))
        record_provenance(path, command)
    rows = read(path)
    md = [
        f"# W{a.w_bits}A{a.a_bits} zeroth-order QAT vs STE QAT vs RTN on `{a.model}`",
        "",
        f"Written by `python -m coevo.figures zoqat --model {a.model} --steps {a.steps}"
        + (f" --val-steps {val_steps}" if val_steps != a.steps else "")
        + (f" --lrs {a.lrs}" if a.lrs else "")
        + (f" --eval-batches {a.eval_batches}" if a.eval_batches else "")
        + f"` from `zoqat.csv` (every run, seeds {a.seeds}). Each run is a fresh process with one torch thread; "
        f"batches of {a.batch_size} sequences, the same batch order and calibration batches for every method of a seed. "
        "Trained: the quantization scales only (per-channel weight scales and per-tensor input scales of every "
        "nn.Linear, LSQ-style, in log space), for all three trained methods. Weights W per output channel, "
        "activations (Linear inputs) per tensor, symmetric, starting at round-to-nearest (RTN) scales.",
        "",
        "Peak memory: the kernel's resident high-water mark (VmHWM, reset through /proc/self/clear_refs when training "
        "starts), i.e. the whole process (python, torch, the model, the data) at its peak during training; "
        "'added by training' is that peak minus the RSS when training started.",
        "",
        "## Test split "
        + (
            "(learning rates given with --lrs: chosen on lm-pydoc-tiny's validation split, NOT on this model's)"
            if a.lrs
            else "(learning rate chosen on val, seed 0)"
        ),
        "",
        table(rows, a.model, a.steps, a.w_bits, a.a_bits),
        "## Findings (medians over seeds, computed from the CSV)",
        "",
        findings(rows, a.model, a.steps, a.w_bits, a.a_bits),
        f"## Learning-rate choice on the validation split ({val_steps} steps, seed 0)",
        "",
        val_table(rows, a.model, val_steps),
    ]
    name = "zoqat.md" if a.model == "lm-pydoc" else f"zoqat-{a.model}.md"
    write_markdown(out / name, "\n".join(md), command)
    print(f"wrote {out / name}")
