"""``coevo proxies``: zero-cost proxy quality (Spearman rho) and CPU cost on random NB201 cells."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.markup import escape

from coevo.agent.cli._common import err, out, out_folder
from coevo.search.problem import Problem
from coevo.search.storage import DEFAULT_STORAGE


def add_arguments(p: argparse.ArgumentParser, problem: type[Problem] | None) -> None:
    """Options of ``coevo proxies``."""
    p.add_argument("--cells", type=int, default=1000, help="random cells to score (default: 1000)")
    p.add_argument("--dataset", default="cifar10", help="accuracy to compare against (default: cifar10)")
    p.add_argument("--storage", default=None, help=f"where scores are cached (default: {DEFAULT_STORAGE})")
    p.add_argument("--jobs", type=int, default=1, help="processes (default: 1)")
    p.add_argument("--seed", type=int, default=0, help="sample seed (default: 0)")
    p.add_argument(
        "--out",
        type=out_folder,
        default=Path("bench-out/proxies"),
        help="output folder of proxies.md and .csv (default: bench-out/proxies)",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``coevo proxies``."""
    from coevo.agent.cli._progress import Reporter
    from coevo.agent.tables import print_markdown  # tables whole (rich's markdown tables cut cells with …)
    from coevo.search.zero_cost_bench import run_proxies

    with Reporter() as reporter, reporter.listening(), reporter.phase(f"proxies on {args.cells} cells"):
        report = run_proxies(cells=args.cells, dataset=args.dataset, storage=args.storage, out=args.out, jobs=args.jobs, seed=args.seed)
    print_markdown(out, report.markdown)
    err.print(escape(f"wrote {args.out / 'proxies.md'} and {args.out / 'proxies.csv'}"))
    return 0
