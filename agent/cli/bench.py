"""``coevo bench``: proposers x run groups x seeds on one problem, with tables and plots."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from coevo.agent.cli._common import (
    add_problem_argument,
    add_problem_arguments,
    add_reasoner_arguments,
    engine_flags,
    err,
    ignored_reasoner_flags,
    out,
    out_folder,
    problem_values,
    progress_bar,
    reasoner_flags,
)
from coevo.search.config import FLAGS, SearchConfig, default
from coevo.search.problem import Problem
from coevo.search.proposers import proposer_names


def _csv(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def add_arguments(p: argparse.ArgumentParser, problem: type[Problem] | None) -> None:
    """Options of ``coevo bench``."""
    add_problem_argument(p)
    p.add_argument("--storage", default=None, help="Optuna storage URL (default: OUT/bench.sqlite3)")
    group = problem.run_group if problem is not None else None
    p.add_argument(
        "--groups",
        "--devices",
        dest="groups",
        type=_csv,
        default=None,
        help=f"comma-separated values of the problem's run-group option ({group or 'none for this problem'}), one run group each "
        "(default: the option's value); --devices is the same flag",
    )
    p.add_argument(
        "--proposers",
        type=_csv,
        default=("random", "nsga2", "tpe"),
        help=f"comma-separated, of {', '.join(proposer_names())} (default: random,nsga2,tpe)",
    )
    p.add_argument("--budget", type=int, default=None, help=f"expensive evaluations per run (default: {default('budget')})")
    p.add_argument(
        "--budgets",
        default=None,
        metavar="LIST",
        help="instead of --budget: increasing budgets, e.g. 10,20,40,60; one run per group, proposer and seed at the largest, "
        "scored at each on its first B paid evaluations (budgets.csv, budgets.md, budgets_<group>.png in --out)",
    )
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 per run group and proposer (default: 3)")
    p.add_argument("--jobs", type=int, default=1, help="runs in parallel, as processes (default: 1)")
    p.add_argument("--out", type=out_folder, default=Path("bench-out"), help="output folder (default: ./bench-out)")
    p.add_argument("--json", action="store_true", help="print the per-run results as JSON lines")
    add_reasoner_arguments(p)
    add_problem_arguments(p, problem)


def run(args: argparse.Namespace) -> int:
    """Run ``coevo bench``."""
    from coevo.agent.reasoners import llm_settings, offline_note, resolve_kind
    from coevo.search.bench import BenchSpec, claim_out_folder, group_of, parse_budgets, run_bench
    from coevo.search.bench_budgets import run_budget_bench
    from coevo.search.errors import UserInputError
    from coevo.search.proposers import takes_reasoner
    from coevo.search.storage import open_storage
    from coevo.sim.paths import new_out_folder

    if args.budgets is not None and args.budget is not None:
        raise UserInputError("give --budget N or --budgets LIST, not both (--budgets runs to its largest budget)")
    budgets = parse_budgets(args.budgets) if args.budgets is not None else ()

    reasoner, banner = None, None
    engine = engine_flags(args)
    if any(takes_reasoner(p) for p in args.proposers):
        given = reasoner_flags(args)
        base_url, model, api_key = llm_settings(given.base_url, given.model, given.api_key)
        kind = resolve_kind(given)
        banner = offline_note(given) if kind == "offline" else f"reasoner: llm:{model}"
        # resolved here, once: every run process gets the same settings (the key in memory, never on a command line or in storage)
        reasoner = given.model_copy(update={"kind": kind, "base_url": base_url, "model": model, "api_key": api_key}).settings()
    elif ignored := ignored_reasoner_flags(args):
        err.print(f"note: {', '.join(ignored)} ignored: none of the proposers takes a reasoner", soft_wrap=True, markup=False)
    spec = BenchSpec(
        args.problem,
        problem_values(args),
        args.groups or (),
        args.proposers,
        tuple(range(args.seeds)) if args.seeds > 0 else (),
        # the budget's default (and its check) is SearchConfig's, as for coevo search: --budget unset is the declared default
        budgets[-1] if budgets else SearchConfig.create(names=FLAGS, budget=args.budget).budget,
        args.storage,
        args.jobs,
        reasoner,
        engine.given(),
        budgets,
    )
    spec.validate()
    claim_out_folder(spec, args.out)  # another benchmark's files there: refused before anything runs or is written
    with new_out_folder(args.out, "benchmark outputs"):  # --budgets writes there too
        if spec.storage is not None:  # a given storage is checked before the folder is kept (the default one lives inside it)
            open_storage(spec.storage)
    if banner is not None:  # after the checks: a bad value is the first line the user reads
        err.print(banner)
    total = len(spec.run_groups()) * len(spec.proposers) * len(spec.seeds)
    with progress_bar() as bar, bar.listening():  # runs in this process (--jobs 1) report their long work too
        task = bar.add_task("bench runs", total=total, detail=f"0/{total}")
        done = [0, total]

        def planned(runs: int) -> None:  # --budgets: one study per budget where prefixes cannot be scored
            done[1] = runs
            bar.update(task, total=runs, detail=f"0/{runs}")

        def finished(r: Any) -> None:
            done[0] += 1
            hv = "no exact front" if r.hv_ratio is None else f"HV ratio {r.hv_ratio:.4f}"
            bar.update(task, advance=1, detail=f"{done[0]}/{done[1]} · last: {hv} ({r.proposer} {group_of(spec, r.problem)} s{r.seed})")

        if budgets:
            report = run_budget_bench(spec, args.out, on_result=finished, on_plan=planned)
        else:
            report = run_bench(spec, args.out, on_result=finished)
    if budgets:
        err.print(f"scored at budgets {list(budgets)}: see {args.out / 'budgets.md'}")
    if args.json:
        for r in report.results:
            print(r.to_json())
    else:
        from coevo.agent.tables import print_markdown  # tables whole (rich's markdown tables cut cells with …)

        print_markdown(out, report.markdown)
        out.print("wrote: " + ", ".join(str(p) for p in report.files))
    return 0
