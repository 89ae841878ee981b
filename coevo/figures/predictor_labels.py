"""Rank correlation of each zero-cost proxy and of the search's predictor on held-out NB201 cells, against paid labels.

    python -m coevo.figures predictor-labels --draws 3
    python -m coevo.figures predictor-labels --report-only

For each dataset and each label count (0, 10, 30, 100, 300) and draw, that many cells drawn
uniformly from all 15,625 are "paid" (their true accuracy is the label); the predictor
(:class:`search.informed.InformedPredictor`: the encoding, the shipped table's proxies where it
has the cell, the labels) is fitted on them and scored on every other cell, split into the
cells of the shipped proxy table (proxies free) and the rest (encoding only). With 0 labels the
predictor is the label-free prior, which ranks only the table's cells. Each proxy alone is
label-free: its rho is on the table's cells. Spearman's rho; the median over draws and the
range. Writes ``issue29-predictor.csv`` and ``issue29-predictor.md``.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np

from coevo.figures._common import command_line, figure_parser, read_numbers, write_csv, write_markdown
from coevo.search.informed import InformedPredictor
from coevo.search.nb201 import DATASETS, NB201Problem
from coevo.search.nb201.proxy_table import DEFAULT_CONFIG, PRIOR_PROXIES, PROXIES, shipped_arrays
from coevo.search.predictor import spearman
from coevo.search.proposers import Evaluation

LABELS = (0, 10, 30, 100, 300)
CSV, MD = "issue29-predictor.csv", "issue29-predictor.md"


def measure(draws: int) -> list[dict[str, object]]:
    """One row per (dataset, scorer, labels, draw, cells): Spearman's rho on held-out cells."""
    rows: list[dict[str, object]] = []
    arrays = shipped_arrays(DEFAULT_CONFIG.key())
    assert arrays is not None, "the shipped proxy table is missing"
    index, scores = arrays
    for dataset in DATASETS:
        problem = NB201Problem(dataset=dataset, device="fpga")
        table = problem.table
        acc = table.acc(dataset)
        cells = [table.cell(i) for i in range(len(table.ops))]
        in_table = np.zeros(len(cells), bool)
        in_table[index] = True
        for k, name in enumerate(PROXIES):
            rows.append(
                {"dataset": dataset, "scorer": name, "labels": 0, "draw": 0, "cells": "table", "rho": spearman(scores[:, k], acc[index])}
            )
        for labels in LABELS:
            for draw in range(draws if labels else 1):
                rng = np.random.default_rng(1000 * draw + labels)
                paid_rows = rng.choice(len(cells), labels, replace=False) if labels else np.zeros(0, dtype=int)
                paid = [
                    Evaluation(j, cells[i], str(i), {"accuracy": float(acc[i]), "latency_ms": 0.0}, True, {})
                    for j, i in enumerate(paid_rows)
                ]
                model = InformedPredictor(problem, paid, seed=draw)
                held = np.setdiff1d(np.arange(len(cells)), paid_rows)
                score = model.score([cells[i] for i in held])
                for where, mask in (("table", in_table[held]), ("rest", ~in_table[held]), ("all", np.ones(len(held), bool))):
                    finite = mask & np.isfinite(score)
                    rho = spearman(score[finite], acc[held][finite]) if finite.sum() == mask.sum() else float("nan")
                    rows.append({"dataset": dataset, "scorer": "predictor", "labels": labels, "draw": draw, "cells": where, "rho": rho})
    return rows


def _cell(values: list[float]) -> str:
    finite = [v for v in values if v == v]
    if not finite:
        return "n/a"
    med = statistics.median(finite)
    return f"{med:.3f}" if len(finite) == 1 else f"{med:.3f} ({min(finite):.3f}-{max(finite):.3f})"


def render(rows: list[dict[str, object]]) -> str:
    """The markdown tables, from the saved rows."""
    whole = not any(r["cells"] == "rest" and r["rho"] == r["rho"] for r in rows)  # no finite rho on cells outside the table
    wheres = ("table",) if whole else ("table", "rest", "all")
    cells_note = (
        "`held out`: every cell not paid for (the shipped proxy table has all 15,625, so every cell's proxies are free)."
        if whole
        else "`table`: the cells of the shipped proxy table not paid for (their proxies are free); `rest`: the other cells "
        "(the predictor sees only their encoding); `all`: every held-out cell (n/a at 0 labels: without a label nothing "
        "ranks a cell whose proxies are not free)."
    )
    out = [
        "# Zero-cost proxies and the search's predictor: rank correlation on held-out NB201 cells vs paid labels (issue 29)",
        "",
        f"Spearman's rho with the benchmark's test accuracy. {cells_note} Predictor rows: median over draws (range); "
        "the labels are drawn uniformly from all 15,625 cells; the predictor is the search's own "
        "(search/informed.py: the encoding, the free proxies and their prior, the labels).",
        "",
    ]
    head = " | ".join("held out" if whole else w for w in wheres)
    for dataset in DATASETS:
        mine = [r for r in rows if r["dataset"] == dataset]
        out += [f"## {dataset}", "", f"| scorer | labels | {head} |", "|---|---:|" + "---:|" * len(wheres)]
        for name in PROXIES:
            vals = [float(r["rho"]) for r in mine if r["scorer"] == name]  # type: ignore[arg-type]
            tag = " (in the prior)" if name in PRIOR_PROXIES else ""
            out.append(f"| {name}{tag} | 0 | {_cell(vals)}" + " | n/a" * (len(wheres) - 1) + " |")
        for labels in LABELS:
            cols = [
                _cell([float(r["rho"]) for r in mine if r["scorer"] == "predictor" and r["labels"] == labels and r["cells"] == where])  # type: ignore[arg-type]
                for where in wheres
            ]
            out.append(f"| predictor | {labels} | {' | '.join(cols)} |")
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = figure_parser("predictor-labels", __doc__)
    p.add_argument("--draws", type=int, default=3, help="label draws per count (default: 3)")
    args = p.parse_args(argv)
    out: Path = args.out
    command = command_line("predictor-labels", argv)
    if not args.report_only:
        write_csv(out / CSV, measure(args.draws), command=command)
    rows = read_numbers(out / CSV)
    print(write_markdown(out / MD, render(rows), command))
    return 0
