"""What ``--kb-from`` a single-family NB201 study does to a 40-evaluation joint nb201-accel search (issue 32, item 5).

    python -m coevo.figures kb-joint --seeds 3
    python -m coevo.figures kb-joint --report-only

1. the source: ``coevo search --problem nb201 --dataset cifar10 --device fpga --proposer pelnas
   --budget 100 --seed 0`` (a study of the joint problem's ``cell`` part alone);
2. per seed, ``coevo search --problem nb201-accel --dataset cifar10 --proposer pelnas --budget 40``
   twice: alone, and with ``--kb-from`` the source study (its paid cifar10 accuracies label the
   cell part's accuracy in the joint predictor; ``--kb-from-use`` left at its default, evaluations);
3. the HV ratio of each against nb201-accel's exact front, and the same-seed difference with a
   95 % t interval.

Each command runs in a fresh process on one temporary SQLite file, the offline reasoner (no LLM).
Writes ``kb-joint.csv`` (one row per search) and ``kb-joint.md`` rendered from it.
"""

from __future__ import annotations

import shlex
import tempfile
from pathlib import Path
from typing import Any

from coevo.figures._common import command_line, figure_parser, offline_search, read_numbers, write_csv, write_markdown
from coevo.search.stats import excludes_zero, format_interval

NAME = "kb-joint"
CSV, MD = "kb-joint.csv", "kb-joint.md"
SOURCE_STUDY = "nb201-cifar10-fpga-pelnas-s0"
SOURCE = ["search", "--problem", "nb201", "--dataset", "cifar10", "--device", "fpga", "--proposer", "pelnas", "--budget", "100"]
JOINT = ["search", "--problem", "nb201-accel", "--dataset", "cifar10", "--proposer", "pelnas", "--budget", "40"]


def _row(arm: str, seed: int, args: list[str], result: dict[str, Any]) -> dict[str, Any]:
    return {
        "arm": arm,
        "seed": seed,
        "hv_ratio": result["hv_ratio"],
        "front_recall": result["front_recall"],
        "evaluations": result["evaluations"],
        "wall_s": result["wall_s"],
        "transferred": "; ".join(result["information"]["transferred"]),
        "command": shlex.join(["coevo", *args]),
    }


def measure(seeds: int) -> list[dict[str, Any]]:
    """The source study, then the joint search alone and seeded on each seed; one row per search."""
    with tempfile.TemporaryDirectory() as tmp:
        storage = f"sqlite:///{Path(tmp) / 's.sqlite3'}"
        source = [*SOURCE, "--seed", "0", "--study", SOURCE_STUDY]
        rows = [_row("source", 0, source, offline_search(source, storage))]
        for seed in range(seeds):
            alone = [*JOINT, "--seed", str(seed)]
            seeded = [*alone, "--kb-from", SOURCE_STUDY]
            rows.append(_row("alone", seed, alone, offline_search(alone, storage)))
            rows.append(_row("kb-from", seed, seeded, offline_search(seeded, storage)))
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    """The markdown, from the saved rows."""
    source = next(r for r in rows if r["arm"] == "source")
    alone = {int(r["seed"]): float(r["hv_ratio"]) for r in rows if r["arm"] == "alone"}
    seeded = {int(r["seed"]): r for r in rows if r["arm"] == "kb-from"}
    seeds = sorted(set(alone) & set(seeded))
    diffs = [float(seeded[s]["hv_ratio"]) - alone[s] for s in seeds]
    verdict = "the interval excludes 0" if excludes_zero(diffs) else "the interval includes 0"
    out = [
        "# `--kb-from` a single-family NB201 study into a 40-evaluation nb201-accel search (issue 32, item 5)",
        "",
        f"Source: `{source['command']}` (HV ratio {float(source['hv_ratio']):.4f} on nb201). Each joint search "
        f"`{rows[1]['command']}` ran alone and with `--kb-from {SOURCE_STUDY}`; HV ratio against nb201-accel's exact "
        "(accuracy, latency_ms) front.",
        "",
        "| seed | alone | with --kb-from | difference |",
        "|---:|---:|---:|---:|",
    ]
    for s, d in zip(seeds, diffs, strict=True):
        out.append(f"| {s} | {alone[s]:.4f} | {float(seeded[s]['hv_ratio']):.4f} | {d:+.4f} |")
    out += [
        "",
        f"Same-seed difference (with minus alone), mean ± 95 % t half-width over {len(seeds)} seeds: "
        f"**{format_interval(diffs)}** ({verdict}).",
        "",
        f"What the seeded searches used from the source: {seeded[seeds[0]]['transferred']}.",
        "",
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = figure_parser(NAME, __doc__)
    p.add_argument("--seeds", type=int, default=3, help="seeds of the joint search, each run alone and seeded (default: 3)")
    args = p.parse_args(argv)
    out: Path = args.out
    command = command_line(NAME, argv)
    if not args.report_only:
        write_csv(out / CSV, measure(args.seeds), command=command)
    print(write_markdown(out / MD, render(read_numbers(out / CSV)), command))
    return 0
