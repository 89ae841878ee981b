"""HV against paid evaluations on the expensive problems (issue 29): pelnas, TPE, random and qnehvi at 10-60 evaluations.

    nice -n 5 python -m coevo.figures budgets                      # every problem's bench, then summary.md
    nice -n 5 python -m coevo.figures budgets --problems reram     # some of them
    python -m coevo.figures budgets --report-only                  # summary.md from the committed budgets.csv files

Each problem's bench is ``coevo bench --problem P [its options] --proposers pelnas,tpe,random,qnehvi
--budgets 10,20,40,60 --seeds 3 --jobs 1 --storage sqlite:///runs/budgets/P.sqlite3 --out docs/bench/budgets/P``
(:mod:`search.bench_budgets`: one run per proposer and seed at 60 evaluations, scored on its first
B paid evaluations; HV over the pooled best front of all runs of the problem, since none of these
problems has a known true front). A rerun reuses the finished runs in the storage.

``summary.md`` gathers, from each ``budgets.csv``, the HV per budget and proposer (mean ± Student t
95 % half-width over seeds) and answers one question per problem: does pelnas at 20 evaluations
reach the best baseline's HV at 40 (paired over seeds)?
"""

from __future__ import annotations

import argparse
import math
import shlex
import statistics
from pathlib import Path

from coevo.figures._common import command_line, figure_parser, write_markdown
from coevo.search.bench_budgets import BudgetRow, baselines_of, best_baseline, paired, reaches, read_budget_csv, rerender_budget_page
from coevo.search.stats import excludes_zero, format_interval, t_interval

NAME = "budgets"

PROPOSERS = ("pelnas", "tpe", "random", "qnehvi")
"""The co-evolution engine, two baselines that learn the cheap objective only from what they pay for, and the GP
baseline that sees it free (as pelnas does)."""

BUDGETS = (10, 20, 40, 60)

PROBLEMS: dict[str, tuple[str, ...]] = {
    "quant": (),
    "prune": ("--model", "lm-pydoc-tiny"),
    "reram": (),
    "fpga-transformer": (),
}
"""Each problem and the options its bench runs with (its defaults otherwise): see :data:`WHY`."""

WHY = (
    "Problem options: the defaults, except prune on `lm-pydoc-tiny` (prune's default `lm-pydoc` was not in this "
    "machine's zoo cache: its first evaluation, which trains it, had not finished after 7 minutes on the shared 2-core "
    "machine, so it did not fit the hour this measurement was sized to)."
)

LINK = "bench/budgets"
"""Links as docs/benchmarks.md (which includes the summary) resolves them."""
"""Links from the repository's root: summary.md is also included in docs/benchmarks.md (``coevo.figures._index``)."""

QUESTION = (20, 40)
"""pelnas at the first budget against the best baseline at the second."""


def bench_args(problem: str, seeds: int, storage: Path, out: Path) -> list[str]:
    """The ``coevo bench`` arguments of ``problem``'s budget curves."""
    return [
        "bench", "--problem", problem, *PROBLEMS[problem],
        "--proposers", ",".join(PROPOSERS), "--budgets", ",".join(map(str, BUDGETS)), "--seeds", str(seeds), "--jobs", "1",
        "--storage", f"sqlite:///{storage / f'{problem}.sqlite3'}", "--out", str(out / problem),
    ]  # fmt: skip


def _level(values: list[float]) -> str:
    if not values:
        return "n/a"
    mean, half = t_interval(values)
    return f"{mean:.3f}" if math.isnan(half) else f"{mean:.3f} ± {half:.3f}"


def _difference(diffs: list[float]) -> str:
    """``mean ± half-width`` of paired HV differences at 3 decimals, with ``*`` where the interval excludes 0.

    A difference that excludes 0 but whose mean or half-width rounds to 0.000 gets the digits that show both (up to
    6): "+0.000 ± 0.000 *" would read as a significant nothing.
    """
    digits = 3
    if excludes_zero(diffs):
        mean, half = t_interval(diffs)
        while digits < 6 and (round(abs(mean), digits) == 0 or (half > 0 and round(half, digits) == 0)):
            digits += 1
    return format_interval(diffs, digits) + (" *" if excludes_zero(diffs) else "")


def problem_section(problem: str, all_rows: list[BudgetRow]) -> list[str]:
    """One problem's part of summary.md: its command, then per run group the HV table and the answer to :data:`QUESTION`."""
    seeds = len({r.seed for r in all_rows})
    command = shlex.join(["coevo", *bench_args(problem, seeds, Path("runs/budgets"), Path("docs/bench/budgets"))])
    lines = [
        f"### {problem}",
        "",
        f"`{command}` (seeds {sorted({r.seed for r in all_rows})}; all tables: [{problem}/budgets.md]({LINK}/{problem}/budgets.md)).",
    ]
    for group in dict.fromkeys(r.group for r in all_rows):
        lines += ["", *_group_section(problem, group, [r for r in all_rows if r.group == group])]
    return lines


def _group_section(problem: str, group: str, rows: list[BudgetRow]) -> list[str]:
    """One run group's part: its plot link, the HV table with the paired row, and the answer to :data:`QUESTION`."""
    proposers = list(dict.fromkeys(r.proposer for r in rows))
    budgets = sorted({r.budget for r in rows})
    plot = f"budgets_{Path(group).stem}.png"
    worst = any(r.hv_kind == "pooled-worst" for r in rows)
    lines = [
        f"Run group {group}: [plot]({LINK}/{problem}/{plot})."
        + (
            " This problem has no acquisition bounds: the HV reference point is the pooled worst (lowest first, highest "
            "second objective over every paid evaluation of these runs)."
            if worst
            else ""
        ),
        "",
        "| proposer | " + " | ".join(f"HV at {b}" for b in budgets) + " |",
        "|---|" + "---|" * len(budgets),
    ]
    for p in proposers:
        cells = [_level([r.hv for r in rows if r.proposer == p and r.budget == b and r.hv is not None]) for b in budgets]
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    baselines = baselines_of(proposers)
    if "pelnas" in proposers and baselines:
        lines += _paired_row(rows, budgets, baselines)
    if "pelnas" in proposers:
        lines += _question(rows, budgets, baselines)
    return lines


def _paired_row(rows: list[BudgetRow], budgets: list[int], baselines: list[str]) -> list[str]:
    """The table's last row: pelnas minus the best baseline at each budget, paired over seeds, and what it means."""
    cells = []
    for b in budgets:
        top = best_baseline(rows, b, baselines)
        diffs = paired(rows, ("pelnas", b), (top, b)) if top else []
        cells.append(f"{_difference(diffs)} ({top})" if top else "n/a")
    return [
        "| pelnas - best baseline (paired) | " + " | ".join(cells) + " |",
        "",
        "The last row: pelnas minus the baseline of the highest mean HV at that budget (named), paired over seeds; "
        "* marks an interval that excludes 0.",
    ]


def _question(rows: list[BudgetRow], budgets: list[int], baselines: list[str]) -> list[str]:
    """The answer to :data:`QUESTION` (nothing when the budgets or a baseline are missing)."""
    at, later = QUESTION
    best = best_baseline(rows, later, baselines)
    if best is None or at not in budgets:
        return []
    diffs = paired(rows, ("pelnas", at), (best, later))
    theirs = [r.hv for r in rows if r.proposer == best and r.budget == later and r.hv is not None]
    mean, base = statistics.fmean(diffs), statistics.fmean(theirs)
    if all(d == 0 for d in diffs):  # a zero-width interval at 0: 'holds' below, not a contradiction
        sure = "the same HV on every seed"
    else:
        sure = "the interval excludes 0" if excludes_zero(diffs) else "the interval includes 0"
    share = f" ({-mean / base:.1%} of {best}'s mean)" if base > 0 else ""
    verdict = reaches(diffs, theirs)  # judged on the interval, as on the problem's own page
    if verdict == "yes":
        holds = "holds"
    elif verdict.startswith("no"):
        holds = f"does not hold: pelnas misses it by {-mean:.4f} HV{share}"
    else:
        holds = f"is undecided: the seeds cannot tell (mean difference {mean:+.4f} HV)"
    return [
        "",
        f"pelnas at {at} evaluations minus the best baseline at {later} ({best}, the highest mean HV at {later}): "
        f"{format_interval(diffs)} (paired over {len(diffs)} seeds; {sure}). "
        f'"pelnas at {at} evaluations reaches at least the best baseline\'s HV at {later}" {holds}.',
    ]


def report(out: Path) -> str:
    """summary.md from every ``<problem>/budgets.csv`` under ``out``."""
    found = {p: out / p / "budgets.csv" for p in PROBLEMS if (out / p / "budgets.csv").exists()}
    missing = [p for p in PROBLEMS if p not in found]
    lines = [
        "## HV against paid evaluations on the expensive problems (issue 29)",
        "",
        f"pelnas, TPE, random and qnehvi (GP + qLogNEHVI, which sees the free objective as pelnas does) at {', '.join(map(str, BUDGETS))} "
        "paid evaluations: one run per proposer and seed at the largest budget, scored on its first B paid evaluations "
        "(search/bench_budgets.py says where a prefix differs from a shorter run: inside a proposer's round). HV: each "
        "found front's HV over the HV of every run of the problem pooled (no true front is known; reference point at the "
        "problem's acquisition bounds, where it has them), mean ± Student t 95 % half-width over seeds. Written by "
        "`python -m coevo.figures budgets` from the budgets.csv beside each table. TPE's first 10 trials are its random "
        "start-up, drawn as random's with the same seed: the two are the same runs up to 10 evaluations. `runs.csv` beside "
        "each table lists the runs; its `wall_s` is the time of the invocation that wrote it (near 0 for a run reused from "
        "storage). " + WHY,
    ]
    if missing:
        lines += ["", f"Not measured: {', '.join(missing)} (see the report of the run)."]
    for problem, path in found.items():
        rows = read_budget_csv(path)
        lines += ["", *problem_section(problem, rows)]
    return "\n".join(lines) + "\n"


def parser() -> argparse.ArgumentParser:
    """The figure's options."""
    p = figure_parser(NAME, __doc__)
    p.add_argument("--problems", type=lambda s: [x.strip() for x in s.split(",")], default=list(PROBLEMS), help="comma list")
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 per proposer (default: 3)")
    p.add_argument("--storage", type=Path, default=Path("runs/budgets"), help="folder of the benches' SQLite files")
    return p


def main(argv: list[str] | None = None) -> None:
    """Run the benches (unless ``--report-only``), then write summary.md from their budgets.csv."""
    args = parser().parse_args(argv)
    out = Path(args.out)
    unknown = [p for p in args.problems if p not in PROBLEMS]
    if unknown:
        raise SystemExit(f"unknown problem {', '.join(unknown)}: one of {', '.join(PROBLEMS)}")
    if not args.report_only:
        from coevo.agent.cli import main as coevo

        args.storage.mkdir(parents=True, exist_ok=True)
        for problem in args.problems:
            code = coevo(bench_args(problem, args.seeds, args.storage, out))
            if code != 0:
                raise SystemExit(code)
    if args.report_only:  # each problem's page too, from its budgets.csv (a run writes them itself)
        for problem in args.problems:
            if (out / problem / "budgets.csv").is_file():
                rerender_budget_page(out / problem)
    print(write_markdown(out / "summary.md", report(out), command_line(NAME, argv)), end="")
