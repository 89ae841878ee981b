"""Layer freezing with a compressed feature cache vs full training and naive freezing (issue 21): table + CSV.

    nice -n 10 python -m coevo.figures freeze --seeds 0 1 2
    python -m coevo.figures freeze --report-only      # freeze.md again from freeze.csv (give the arguments of the run)

Writes docs/bench/freeze/freeze.csv (one row per run) and docs/bench/freeze/freeze.md (one
ablation per row: mean +- std over seeds of val/test accuracy, MACs and cache bytes, medians of wall
and CPU seconds). Every configuration of one seed runs back to back (interleaved), so load from other
jobs on the shared machine hits all of them alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from dataclasses import replace
from pathlib import Path

import torch

from coevo.figures._common import command_line, figure_parser, load_text, mean_std, read_csv, write_csv, write_markdown
from coevo.sim.freeze import FreezeConfig, train_zoo
from coevo.sim.freeze.config import FreezeFamilyConfig

NAME = "freeze"


def rows(epochs: int, freeze_at: tuple[int | None, ...]) -> list[tuple[str, FreezeConfig]]:
    base = FreezeConfig(method="cache", schedule="fixed", freeze_at=freeze_at, epochs=epochs, codec="float32", augment="none")
    return [
        ("full training", replace(base, method="full")),
        ("naive freezing (no cache)", replace(base, method="naive")),
        ("cache float32, no augmentation", base),
        ("cache float32, similarity-aware aug (25 %)", replace(base, augment="similarity-aware")),
        ("cache float32, full augmented copies", replace(base, augment="full")),
        ("cache zstd 8/6/4 bit, no augmentation", replace(base, codec="zstd")),
        ("cache zstd 8/6/4 bit, similarity-aware aug", replace(base, codec="zstd", augment="similarity-aware")),
        ("cache zstd 4/4/4 bit (not progressive), sim-aware", replace(base, codec="zstd", bits=(4, 4, 4), augment="similarity-aware")),
        ("cache jpeg q90/75/50, similarity-aware aug", replace(base, codec="jpeg", augment="similarity-aware")),
        ("cache webp q90/75/50, similarity-aware aug", replace(base, codec="webp", augment="similarity-aware")),
        ("auto (CKA) naive freezing", replace(base, method="naive", schedule="auto")),
        ("auto (CKA) cache zstd, similarity-aware aug", replace(base, schedule="auto", codec="zstd", augment="similarity-aware")),
        (
            "auto (grad-norm) cache zstd, sim-aware aug",
            replace(base, schedule="auto", criterion="gradnorm", codec="zstd", augment="similarity-aware"),
        ),
    ]


def parser() -> argparse.ArgumentParser:
    """The figure's options; the model is the family's search model (``FreezeFamilyConfig.search_model``)."""
    ap = figure_parser(NAME, __doc__)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--model", default=FreezeFamilyConfig.search_model)
    # 20, not FreezeFamilyConfig.search_epochs (8): the committed figure's experiment setting
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--freeze-at", type=int, nargs=2, default=[6, 10], help="fixed schedule: epochs before blocks 1 and 2 freeze")
    ap.add_argument("--tag", default="", help="suffix of the output names (freeze<tag>.md/.csv)")
    return ap


def main(argv: list[str] | None = None) -> None:
    """Train every configuration of every seed (unless ``--report-only``), then write freeze<tag>.md."""
    args = parser().parse_args(argv)
    torch.set_num_threads(1)
    out, command = args.out, command_line(NAME, argv)
    out.mkdir(parents=True, exist_ok=True)
    configs = rows(args.epochs, (args.freeze_at[0], args.freeze_at[1], None))
    csv_path = out / f"freeze{args.tag}.csv"
    if args.report_only:
        read = [
            {k: (float(v) if k not in ("model", "config", "freeze_epochs") else v) for k, v in row.items()} for row in read_csv(csv_path)
        ]
        write_md(args, configs, read, csv_path, command)
        return
    load_before = load_text()
    records: list[dict] = []
    for seed in args.seeds:
        for label, cfg in configs:
            r = train_zoo(args.model, replace(cfg, seed=seed))
            rec = {
                "model": args.model, "config": label, "seed": seed, "val_accuracy": r.val_accuracy, "test_accuracy": r.test_accuracy,
                "wall_s": r.wall_s, "cpu_s": r.cpu_s, "gmac": r.macs / 1e9, "cache_build_gmac": r.macs_cache_build / 1e9,
                "cache_mb": r.cache_bytes / 1e6, "cache_io_s": r.cache_io_s, "freeze_epochs": str(r.freeze_epochs),
            }  # fmt: skip
            records.append(rec)
            print(f"seed {seed} {label:52s} val {r.val_accuracy:6.2f} test {r.test_accuracy:6.2f} cpu {r.cpu_s:6.2f}s "
                  f"{r.macs / 1e9:7.3f} GMAC cache {r.cache_bytes / 1e6:7.3f} MB frozen at {r.freeze_epochs}", flush=True)  # fmt: skip
    write_csv(csv_path, records, command=command)
    run_path(csv_path).write_text(
        json.dumps({"cpus": os.cpu_count(), "load_before": load_before, "load_after": load_text()}, indent=1) + "\n"
    )
    write_md(args, configs, records, csv_path, command)


def run_path(csv_path: Path) -> Path:
    """The measuring run's record beside its CSV (``freeze<tag>-run.json``: cores and load average before and after)."""
    return csv_path.with_name(csv_path.stem + "-run.json")


def _machine(csv_path: Path) -> str:
    """The page's machine sentence, from the measuring run's record (a re-render must not describe its own machine)."""
    path = run_path(csv_path)
    run = json.loads(path.read_text()) if path.is_file() else {}
    if run.get("load_before") is None:
        return "Machine: torch 1 thread; the machine and its load during the measuring run were not recorded (a run before they were)."
    return (
        f"Machine: {run['cpus']}-core CPU, torch 1 thread; load average (1, 5, 15 min) before the run {run['load_before']}, "
        f"after it {run['load_after']} (from {path.name})."
    )


def write_md(args: argparse.Namespace, configs: list[tuple[str, FreezeConfig]], records: list[dict], csv_path: Path, command: str) -> None:
    """freeze<tag>.md beside ``csv_path`` from the run records (one per seed and configuration)."""
    full = [r for r in records if r["config"] == "full training"]
    full_cpu = statistics.median(r["cpu_s"] for r in full)
    full_gmac = statistics.mean(r["gmac"] for r in full)
    lines = [
        f"# Layer freezing with a compressed feature cache ({args.model})",
        "",
        f"Command: `nice -n 10 python -m coevo.figures freeze --model {args.model} --epochs {args.epochs} "
        f"--freeze-at {args.freeze_at[0]} {args.freeze_at[1]} --seeds {' '.join(map(str, args.seeds))}"
        + (f" --tag {args.tag}" if args.tag else "")
        + f"` (data: [{csv_path.name}]({csv_path.name})).",
        "",
        _machine(csv_path) + " Every model trains from scratch with the zoo recipe's data split, optimiser, batch and "
        "one-cycle learning rate; "
        f"{args.epochs} epochs; input augmentation (random shift, Gaussian noise 0.1) on every step that sees inputs. "
        f"Fixed schedule: block 1 (conv1) freezes after {args.freeze_at[0]} epochs, blocks 1-2 after {args.freeze_at[1]}; "
        "conv3 and the head always train. Seeds "
        f"{', '.join(map(str, args.seeds))} (initialisation, batch order, augmentation); all rows of a seed run back to back.",
        "",
        "Accuracy in % (val: what choices may use; test: measured once per run), mean ± std over seeds. GMAC: forward + "
        "backward multiply-accumulates executed (counted per layer call; cache building and CKA monitoring included), "
        "mean ± std. CPU s: this process's CPU seconds, median (wall time is in the CSV: on the shared box it ran "
        "several times CPU time and swung with other jobs). Cache MB: the largest cache on disk at once (one stage is kept at a time).",
        "",
        "| configuration | val acc % | test acc % | GMAC | GMAC vs full | CPU s (median) | CPU vs full | cache MB | frozen after |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for label, _ in configs:
        rs = [r for r in records if r["config"] == label]
        cpu = statistics.median(r["cpu_s"] for r in rs)
        gmac = [r["gmac"] for r in rs]
        lines.append(
            f"| {label} | {mean_std([r['val_accuracy'] for r in rs])} | {mean_std([r['test_accuracy'] for r in rs])} | "
            f"{mean_std(gmac, 3)} | "
            f"{statistics.mean(gmac) / full_gmac:.3f} | {cpu:.2f} | {cpu / full_cpu:.2f} | {mean_std([r['cache_mb'] for r in rs], 3)} | "
            f"{'; '.join(sorted({r['freeze_epochs'] for r in rs}))} |"
        )
    lines += ["", "Reading (computed from the CSV):", ""]

    def mean(label: str, key: str) -> float:
        return statistics.mean(r[key] for r in records if r["config"] == label)

    def med(label: str, key: str) -> float:
        return statistics.median(r[key] for r in records if r["config"] == label)

    sim, none = "cache zstd 8/6/4 bit, similarity-aware aug", "cache zstd 8/6/4 bit, no augmentation"
    naive, raw, fullaug = "naive freezing (no cache)", "cache float32, similarity-aware aug (25 %)", "cache float32, full augmented copies"
    lines += [
        f"- Counted MACs: naive freezing {mean(naive, 'gmac') / full_gmac:.3f} of full training, the zstd cache with "
        f"similarity-aware augmentation {mean(sim, 'gmac') / full_gmac:.3f} (cache building included).",
        f"- CPU time (median): naive {med(naive, 'cpu_s') / full_cpu:.2f} of full training, zstd cache with similarity-aware "
        f"augmentation {med(sim, 'cpu_s') / full_cpu:.2f}; its cache I/O (encode, write, read, verify, decode) took "
        f"{med(sim, 'cache_io_s'):.2f} s wall clock (inflated by the shared box's load; the run's whole wall time was "
        f"{med(sim, 'wall_s'):.2f} s).",
        f"- Similarity-aware augmentation vs none (zstd): val {mean(sim, 'val_accuracy') - mean(none, 'val_accuracy'):+.2f} "
        f"points, test {mean(sim, 'test_accuracy') - mean(none, 'test_accuracy'):+.2f} points (compare with the seed std in "
        "the table).",
        f"- Storage: similarity-aware float32 cache {mean(raw, 'cache_mb'):.2f} MB vs full augmented copies "
        f"{mean(fullaug, 'cache_mb'):.2f} MB; zstd 8/6/4 bit brings the similarity-aware cache to {mean(sim, 'cache_mb'):.2f} MB "
        f"({mean(raw, 'cache_mb') / mean(sim, 'cache_mb'):.1f}x smaller).",
        "",
    ]
    write_markdown(csv_path.with_suffix(".md"), "\n".join(lines) + "\n", command)
