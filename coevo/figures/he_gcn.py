"""Issue 19 figures, HE-friendly GCN: accuracy, depth and encrypted latency at 3 keep fractions vs the all-polynomial baseline.

Writes docs/bench/he/he.csv (one row per dataset, seed and setting) and docs/bench/he/he.md.

    nice -n 10 python -m coevo.figures he-gcn [--seeds 0 1 2] [--quick]
    python -m coevo.figures he-gcn --report-only     # he.md again from he.csv (no training, no HE)

Accuracy: 3 seeds on ``digits-grid`` (8x8, 64 nodes) and ``digits-grid4`` (4x4, 16 nodes).
Encrypted passes (CKKS, TenSEAL) are measured on seed 0 only: every test sample in one batch
(batch packing: the pass time is the latency of one query and does not grow with the batch),
on digits-grid4 for every setting; on digits-grid the pass time is predicted from the op
counts and per-op costs measured once (the 8x8 passes take minutes each on the shared box).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import torch

from coevo.figures._common import command_line, figure_parser, mean_std, read_csv, write_csv, write_markdown
from coevo.sim.he.config import HeConfig
from coevo.sim.he.data import DATASETS
from coevo.sim.he.model import Recipe, teacher_accuracy
from coevo.sim.he.run import he_gcn

NAME = "he-gcn"
HIDDEN = (HeConfig.hidden,) * 2
"""Two graph convolutions of the family's width."""
BUDGET: dict[str, Any] = {"teacher_epochs": HeConfig.teacher_epochs, "epochs": HeConfig.epochs}
"""The family's training epochs (``--quick`` replaces them)."""
ENCRYPTED = "digits-grid4"
"""The dataset whose every setting runs encrypted (an experiment setting: the 8x8 passes take minutes each)."""

SETTINGS = [("baseline (all poly, CryptoGCN-style)", 0.0), ("LinGCN-style keep 25%", 0.25), ("keep 50%", 0.5), ("keep 75%", 0.75)]


def parser() -> argparse.ArgumentParser:
    """The figure's options."""
    ap = figure_parser(NAME, __doc__)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--quick", action="store_true", help="fewer epochs (a smoke run, not for the doc)")
    ap.add_argument("--encrypt", nargs="*", default=[ENCRYPTED], help="datasets whose seed-0 settings run encrypted")
    ap.add_argument(
        "--timing-rounds", type=int, default=0, help="only re-time digits-grid4 baseline vs keep 25%% interleaved, this many rounds"
    )
    return ap


def main(argv: list[str] | None = None) -> None:
    """Train, count and time every setting (unless ``--report-only`` or ``--timing-rounds``), then write he.md."""
    args = parser().parse_args(argv)
    out, command = args.out, command_line(NAME, argv)
    if args.timing_rounds:
        timing(out, args.timing_rounds, command)
        return
    if args.report_only:
        write(out, [dict(r) for r in read_csv(out / "he.csv")], command, save=False)
        return
    torch.set_num_threads(1)
    rows = []
    for dataset in DATASETS:
        for seed in args.seeds:
            for name, keep in SETTINGS:
                budget: dict[str, Any] = {"teacher_epochs": 5, "epochs": 3} if args.quick else BUDGET
                recipe = Recipe(dataset=dataset, hidden=HIDDEN, keep=(keep, keep), seed=seed, **budget)
                enc = dataset in args.encrypt and seed == args.seeds[0]
                t0 = time.perf_counter()
                r = he_gcn(recipe, relu_degree=4, encrypted_samples=270 if enc else 0, scale_bits=HeConfig.scale_bits)
                teacher = teacher_accuracy(recipe)
                rows.append(
                    {
                        "dataset": dataset,
                        "seed": seed,
                        "setting": name,
                        "keep": keep,
                        "kept_nodes": "+".join(map(str, r.kept_nodes)),
                        "val_acc": round(r.val_accuracy, 2),
                        "test_acc": round(r.test_accuracy, 2),
                        "test_acc_relu_approx": round(r.test_accuracy_relu_approx, 2),
                        "teacher_test_acc": round(teacher["test"], 2),
                        "depth": r.depth,
                        "poly_modulus_degree": r.params.poly_modulus_degree,
                        "chain_bits": r.params.total_bits,
                        "mul_plain": r.op_counts["mul_plain"],
                        "ct_mul": r.op_counts["mul"],
                        "predicted_pass_s": round(r.predicted_pass_s or 0.0, 2),
                        "measured_pass_s": round(r.pass_seconds[0], 2) if r.pass_seconds else "",
                        "levels_used": r.levels_used if r.levels_used is not None else "",
                        "enc_acc": round(r.encrypted_accuracy, 2) if r.encrypted_accuracy is not None else "",
                        "enc_agreement": round(r.encrypted_agreement, 2) if r.encrypted_agreement is not None else "",
                        "max_abs_err": f"{r.max_abs_error:.2e}" if r.max_abs_error is not None else "",
                        "wall_s": round(time.perf_counter() - t0, 1),
                    }
                )
                print(rows[-1], flush=True)
                write(out, rows, command)


def timing(out: Path, rounds: int, command: str) -> None:
    """Interleaved encrypted passes, baseline then keep 25 % in each round (seed 0, digits-grid4, models cached): he_timing.csv."""
    rows = []
    for r in range(rounds):
        for name, keep in SETTINGS[:2]:
            recipe = Recipe(dataset=ENCRYPTED, hidden=HIDDEN, keep=(keep, keep), seed=0, **BUDGET)
            rep = he_gcn(recipe, encrypted_samples=270, predict=False, scale_bits=HeConfig.scale_bits)
            load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
            rows.append(
                {
                    "round": r,
                    "setting": name,
                    "keep": keep,
                    "depth": rep.depth,
                    "N": rep.params.poly_modulus_degree,
                    "pass_s": round(rep.pass_seconds[0], 2),
                    "uptime": load,
                }
            )
            print(rows[-1], flush=True)
            write_csv(out / "he_timing.csv", rows, command=command)


def write(out: Path, rows: list[dict[str, object]], command: str, save: bool = True) -> None:
    """he.md in ``out`` from ``rows`` (one per dataset, seed and setting), and he.csv from them when ``save``."""
    if save:
        write_csv(out / "he.csv", rows, command=command)
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    seeds = sorted({int(str(r["seed"])) for r in rows})
    lines = [
        "# Issue 19: HE-friendly GCN (LinGCN-style) under CKKS",
        "",
        "Written by `nice -n 10 python -m coevo.figures he-gcn` from `he.csv` (beside this file).",
        f"Seeds {seeds}; machine: 2-core CPU shared with other engineers' jobs (`uptime` at writing: `{load}`), one thread.",
        "Model: 2 graph convolutions of 4 channels, flatten head; teacher all-ReLU; students distilled (w=0.5, T=4) from it,",
        "30 epochs (gates searched over the first 20, hardened by top-k, 10 epochs fine-tuning); the baseline is the same",
        "student with keep = 0 (every node a trainable degree-2 polynomial): same initialisation, distillation, epochs, seeds.",
        "Under CKKS each kept ReLU is a degree-4 Chebyshev least-squares polynomial on the layer's range (2 levels instead of 1).",
        "Accuracy: test split (270 images), mean ± std over seeds; `approx` is the plaintext accuracy with the ReLU",
        "approximation (what the encrypted pass computes). Depth is analytic (op graph) and was equal to the modulus-chain",
        "levels the ciphertexts consumed in every encrypted pass (`levels_used`). Chain: scale 2^28, the smallest secure ring.",
        "",
        "| dataset | setting | kept nodes/layer | test acc % | approx acc % | teacher % | depth | N | ct x ct | pt x ct "
        "| pass s (measured, seed 0) | ms/sample amortised (270 in one pass) | pass s (predicted) | enc acc % (agree %) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for dataset in DATASETS:
        for name, _ in SETTINGS:
            sel = [r for r in rows if r["dataset"] == dataset and r["setting"] == name]
            if not sel:
                continue
            first = sel[0]
            acc = mean_std([float(str(r["test_acc"])) for r in sel], 1)
            approx = mean_std([float(str(r["test_acc_relu_approx"])) for r in sel], 1)
            teacher = mean_std([float(str(r["teacher_test_acc"])) for r in sel], 1)
            enc = f"{first['enc_acc']} ({first['enc_agreement']})" if first["enc_acc"] != "" else "-"
            amortised = f"{float(str(first['measured_pass_s'])) / 270 * 1000:.0f}" if first["measured_pass_s"] != "" else "-"
            lines.append(
                f"| {dataset} | {name} | {first['kept_nodes']} | {acc} | {approx} | {teacher} | {first['depth']} | "
                f"{first['poly_modulus_degree']} | {first['ct_mul']} | {first['mul_plain']} | "
                f"{first['measured_pass_s'] or '-'} | {amortised} | "
                f"{first['predicted_pass_s']} | {enc} |"
            )
    base = {r["dataset"]: r for r in rows if float(str(r["keep"])) == 0.0 and r["measured_pass_s"] != ""}
    ratios = [
        f"{r['dataset']} keep {r['keep']}: "
        f"{float(str(r['measured_pass_s'])) / float(str(base[r['dataset']]['measured_pass_s'])):.2f}x the baseline's pass time"
        for r in rows
        if r["measured_pass_s"] != "" and float(str(r["keep"])) != 0.0 and r["dataset"] in base
    ]
    lines += [
        "",
        "Measured pass time relative to the all-polynomial baseline (same run, seed 0): " + ("; ".join(ratios) or "none measured") + ".",
        "",
        "## What this shows, and what it does not",
        "",
        "- The published LinGCN result (14.2x lower latency than CryptoGCN at 75 % accuracy on NTU-XVIEW) does **not**",
        "  appear here, and cannot with this formulation: here the baseline already has the smallest depth (every node a",
        "  degree-2 polynomial, one level per layer) and the student *adds* non-linearity (kept ReLUs, approximated by a",
        "  higher-degree polynomial), so it buys accuracy with depth and latency. LinGCN's gain comes from removing",
        "  polynomial activations (nodes become linear, fused into the next layer) in a deep ST-GCN (many layers, 25 joints x",
        "  many frames, 256 channels), where CryptoGCN's depth needs a much larger ring; our 2-layer 4-channel GCN on 64 pixels",
        "  has little depth to remove. The trade-off that does appear: keeping ReLUs in a layer raises the depth from 5 to 6-7,",
        "  which moves the chain from N=8192 to N=16384, roughly doubling to quadrupling every operation's cost.",
        "- The pass time is one batch: batch packing puts up to N/2 samples in the slots of each ciphertext, so one query and",
        "  270 queries cost the same; amortised per sample it is the pass time / 270.",
        "- Timings are on a shared, heavily loaded 2-core machine; the ratio between settings measured in the same run is the",
        "  meaningful number, not the seconds.",
    ]
    timing_csv = out / "he_timing.csv"
    if timing_csv.exists():
        t = read_csv(timing_csv)
        med = {k: statistics.median(float(r["pass_s"]) for r in t if float(r["keep"]) == k) for k in (0.0, 0.25)}
        pairs = [float(b["pass_s"]) / float(a["pass_s"]) for a, b in zip(t[0::2], t[1::2], strict=False)]
        lines[lines.index("## What this shows, and what it does not") : lines.index("## What this shows, and what it does not")] = [
            f"Interleaved re-timing (`--timing-rounds`, he_timing.csv; digits-grid4, seed 0, baseline then keep 25 % in each of "
            f"{len(pairs)} rounds): median pass {med[0.0]:.1f} s (N=8192) vs {med[0.25]:.1f} s (N=16384); per-round ratios "
            + ", ".join(f"{p:.2f}x" for p in pairs)
            + ".",
            "",
        ]
    write_markdown(out / "he.md", "\n".join(lines) + "\n", command)
