"""What the co-evolution engine costs on NB201: wall time of a 300-query search and its predictor's time per round (issue 29).

    python -m coevo.figures engine-cost --repeats 5
    python -m coevo.figures engine-cost --report-only

Each repeat runs ``coevo search --problem nb201 --dataset cifar10 --device fpga --proposer pelnas
--budget 300`` (what ``make demo`` runs) in a fresh process and a fresh SQLite file, one after the
other, and times the whole command (start-up included). The rounds' logs give, per round, the
labels the predictor was fitted on, its time (fitting and predicting: ``predictor_s``) and the
engine's own time (``propose_s``: everything but the evaluations). Whether the predictor's cost
grows at most linearly with the labels is read from the slope of log(time) on log(labels)
(least squares over rounds of every repeat; 1 is linear). Writes ``issue29-engine-cost.csv``,
``issue29-engine-rounds.csv`` and ``issue29-engine-cost.md``.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from coevo.figures._common import command_line, figure_parser, offline_search, read_numbers, write_csv, write_markdown

RUNS_CSV, ROUNDS_CSV, MD = "issue29-engine-cost.csv", "issue29-engine-rounds.csv", "issue29-engine-cost.md"
SEARCH = ["search", "--problem", "nb201", "--dataset", "cifar10", "--device", "fpga", "--proposer", "pelnas", "--budget", "300"]
GOAL_S = 30.0
"""The issue's bound on a 300-query NB201 search on the 2-core machine."""


def measure(repeats: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run the search ``repeats`` times; one row per run and one per guided round."""
    from coevo.search.round_log import RoundLogs

    runs: list[dict[str, Any]] = []
    rounds: list[dict[str, Any]] = []
    for repeat in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            storage = f"sqlite:///{Path(tmp) / 's.sqlite3'}"
            started = time.perf_counter()
            result = offline_search(SEARCH, storage)
            wall = time.perf_counter() - started
            runs.append({"repeat": repeat, "wall_s": wall, "search_wall_s": result["wall_s"], "hv": result["hv_ratio"]})
            for number, log in sorted(RoundLogs(storage).read(result["study"]).items()):
                if "predictor_s" not in log:
                    continue
                labels = int(log.get("information", {}).get("paid", 0))
                rounds.append(
                    {"repeat": repeat, "round": number, "labels": labels, "predictor_s": log["predictor_s"], "propose_s": log["propose_s"]}
                )
    return runs, rounds


def slope(rounds: list[dict[str, Any]]) -> tuple[float, float]:
    """Least-squares slope of log(predictor_s) on log(labels), and its standard error."""
    x = np.log([float(r["labels"]) for r in rounds])
    y = np.log([float(r["predictor_s"]) for r in rounds])
    a = np.vstack([x, np.ones_like(x)]).T
    coef, residual, *_ = np.linalg.lstsq(a, y, rcond=None)
    dof = max(len(x) - 2, 1)
    sigma2 = float(residual[0]) / dof if len(residual) else 0.0
    se = float(np.sqrt(sigma2 / np.sum((x - x.mean()) ** 2)))
    return float(coef[0]), se


def render(runs: list[dict[str, Any]], rounds: list[dict[str, Any]]) -> str:
    """The markdown, from the saved rows."""
    walls = [float(r["wall_s"]) for r in runs]
    hvs = ", ".join(f"{float(r['hv']):.4f}" for r in runs)
    inner = [float(r["search_wall_s"]) for r in runs]
    out = [
        "# What the engine costs: a 300-query NB201 search, and its predictor per round (issue 29)",
        "",
        f"`coevo {' '.join(SEARCH)}` (offline reasoner, a fresh SQLite file), {len(runs)} runs one after the other. "
        f"Whole command: median {statistics.median(walls):.1f} s (min {min(walls):.1f}, max {max(walls):.1f}); "
        f"the search itself (`wall_s`): median {statistics.median(inner):.1f} s. Goal: under {GOAL_S:.0f} s on the 2-core "
        f"machine ({'met' if statistics.median(walls) < GOAL_S else 'missed'}). HV ratio: "
        f"{hvs}.",
        "",
        "Per guided round (median over runs): the labels the predictor was fitted on, its time fitting and predicting, "
        "and the engine's own time (evaluations excluded).",
        "",
        "| round | labels | predictor s | engine s |",
        "|---:|---:|---:|---:|",
    ]
    for number in sorted({int(r["round"]) for r in rounds}):
        mine = [r for r in rounds if int(r["round"]) == number]
        labels = statistics.median(int(r["labels"]) for r in mine)
        pred = statistics.median(float(r["predictor_s"]) for r in mine)
        eng = statistics.median(float(r["propose_s"]) for r in mine)
        out.append(f"| {number} | {labels:.0f} | {pred:.3f} | {eng:.3f} |")
    b, se = slope(rounds)
    verdict = "at most linear" if b + 1.96 * se <= 1.0 else ("not shown to be at most linear" if b <= 1.0 else "faster than linear")
    out += [
        "",
        f"Growth of the predictor's time with the labels: log-log slope {b:.2f} ± {1.96 * se:.2f} (95 %; 1 is linear): {verdict}.",
        "",
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = figure_parser("engine-cost", __doc__)
    p.add_argument("--repeats", type=int, default=5, help="searches, one after the other (default: 5)")
    args = p.parse_args(argv)
    out: Path = args.out
    command = command_line("engine-cost", argv)
    if not args.report_only:
        runs, rounds = measure(args.repeats)
        write_csv(out / RUNS_CSV, runs, command=command)
        write_csv(out / ROUNDS_CSV, rounds, command=command)
    print(write_markdown(out / MD, render(read_numbers(out / RUNS_CSV), read_numbers(out / ROUNDS_CSV)), command))
    return 0
