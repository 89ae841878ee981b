"""``coevo search``: run or resume one search (one worker on its study; ``--workers N`` adds processes)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from rich.markup import escape

from coevo.agent.cli._common import (
    add_kb_from_arguments,
    add_problem_argument,
    add_problem_arguments,
    add_reasoner_arguments,
    add_timing_arguments,
    announce,
    err,
    out,
    progress_bar,
    search_config,
    search_progress,
    stopped_by_signal,
    worker_settings,
)
from coevo.agent.tables import Column, print_design_table, print_table, summary_cell
from coevo.search.config import DEFAULT_PROPOSER, default
from coevo.search.errors import UserInputError
from coevo.search.problem import Problem
from coevo.search.proposers import proposer_names
from coevo.search.storage import DEFAULT_STORAGE


def add_arguments(p: argparse.ArgumentParser, problem: type[Problem] | None) -> None:
    """Options of ``coevo search``."""
    add_problem_argument(p)
    p.add_argument("--storage", default=None, help=f"Optuna storage URL (default: {DEFAULT_STORAGE})")
    p.add_argument(
        "--proposer",
        default=DEFAULT_PROPOSER,
        help=f"{', '.join(proposer_names())}: pelnas is the co-evolution engine, the -no* its ablations, the rest Optuna "
        f"baselines (default: {DEFAULT_PROPOSER})",
    )
    p.add_argument(
        "--budget",
        type=int,
        default=default("budget"),
        help=f"evaluations to make, each paid for its expensive objective (NB201: an accuracy query; in zero-cost mode an "
        f"evaluation on the proxies' estimate, none paid; default: {default('budget')})",
    )
    p.add_argument("--seed", type=int, default=default("seed"), help=f"random seed (default: {default('seed')})")
    p.add_argument("--study", default=None, help="study name; an existing study with the same options is resumed")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes on this machine (default: 1); more can join from anywhere with `coevo worker --study NAME`",
    )
    add_timing_arguments(p)
    add_kb_from_arguments(p)
    add_reasoner_arguments(p)
    add_problem_arguments(p, problem)


def run(args: argparse.Namespace) -> int:
    """Run ``coevo search``."""
    from coevo.agent.cli import command_started
    from coevo.agent.cli.worker import WorkerProcesses
    from coevo.agent.run_config import make_proposer
    from coevo.search.runner import Progress as SearchProgress
    from coevo.search.storage import check_openable

    # the result's wall_s counts from the command's start: loading and building the problem is the user's wait too
    started = command_started()
    started = time.perf_counter() if started is None else started
    if args.workers < 1:
        raise UserInputError(f"--workers must be at least 1, got {args.workers}")
    if args.budget is not None and args.workers > max(args.budget, 1):
        # each process pays for one evaluation at a time: more of them than the budget only start and idle
        raise UserInputError(
            f"--workers {args.workers} is more than the budget of {args.budget} evaluations: at most {args.budget} processes "
            f"can have work; pass --workers {max(args.budget, 1)} or fewer"
        )
    settings = worker_settings(args)
    config = search_config(args)
    with progress_bar() as bar, bar.listening():  # a problem that trains or scores something when it is made says so
        problem = config.make_problem()
    # the storage before the reasoner's banner: a dead database or a typo in its path is the one line the user sees.
    # Not before the problem is built: that would create the study's database before the problem's own checks of its
    # options (a deploy-lm board too small for --pes) and leave a file behind them
    check_openable(config.storage)  # creating nothing: a bad --kb-from below leaves no new SQLite file behind
    proposer = make_proposer(config, on_reasoner=announce)  # outside the bar: an LLM endpoint check shows its own spinner
    others = WorkerProcesses(config, settings, args.workers - 1)
    name = f"search {config.proposer}" + (f", {args.workers} workers" if args.workers > 1 else "")

    def search(on_progress: Callable[[SearchProgress], None]) -> Any:
        return config.run(
            problem=problem, proposer=proposer, on_progress=on_progress, settings=settings, on_open=others.start, started=started
        )

    try:
        result = search_progress(name, config.budget, search)
        if stopped_by_signal(result.stopped):
            others.stop()  # the signal may have reached this process alone
    except BaseException:
        others.stop()
        raise
    finally:
        failed = others.wait()
    if failed:
        err.print(workers_ended_line(failed, result), style="yellow", markup=False, soft_wrap=True)
    code = print_search(problem, result, as_json=args.json)
    return 130 if stopped_by_signal(result.stopped) else code


def workers_ended_line(failed: int, result: Any) -> str:
    """The search's last word on its worker processes that ended with an error (each was reported as it ended).

    To rerun only when evaluations remain: a search that finished its budget without them has nothing left to finish.
    """
    left = result.budget - result.budget_used
    ended = "1 worker process ended with an error" if failed == 1 else f"{failed} worker processes ended with an error"
    it = "it" if failed == 1 else "them"
    if left > 0:
        return f"{ended}; {left} of the {result.budget} evaluations remain: rerun the same command to finish"
    return f"{ended} (said above as it happened); the search finished its {result.budget} evaluations without {it}"


def print_search(problem: Any, result: Any, *, as_json: bool = False) -> int:
    """The summary and the found front (or the JSON object with ``--json``)."""
    if result.failed:  # on stderr with --json too: the run went on, but the user should know
        err.print(failures_line(result), soft_wrap=True, markup=False, style="yellow")
    if as_json:
        print(result.to_json())
        return 0
    for note in result.notes:
        err.print(f"[yellow]note:[/] {escape(note)}", soft_wrap=True)
    if result.stopped:
        err.print(
            f"[yellow]{escape(result.stopped)}[/]" + ("; rerun the same command to resume" if stopped_by_signal(result.stopped) else "")
        )
    keys = ("problem", "proposer", "reasoner", "seed", "evaluations", "failed", "trials", "hv_ratio", "igd", "front_recall", "wall_s")
    summary = [[key, str(result.wall_s) if key == "wall_s" else summary_cell(getattr(result, key))] for key in (*keys, "storage")]
    summary[keys.index("trials")][1] = trials_text(result)
    print_table(out, f"study {result.study}", [Column("key"), Column("value", text=True)], summary, show_header=False)
    from coevo.search.runner import front_columns, unpaid_word

    if not result.front:  # stopped before its first evaluation, or every one failed: no table of no rows
        out.print("front: none (no evaluation succeeded)" if result.budget_used else "front: none yet (nothing evaluated)")
        return 0
    names = front_columns(problem)
    title = front_title(result)
    print_design_table(
        out,
        title,
        [*names, "point id", "paid"],
        [
            [
                *(f"{row[n]:.4g}" for n in names),
                str(row["point_id"]),
                "yes" if row.get("paid", True) else unpaid_word(result.found_set),
            ]
            for row in result.front
        ],
        [str(row[problem.design_label]) for row in result.front],
        design_header=problem.design_label,
    )
    return 0


def front_title(result: Any) -> str:
    """The front table's title: its rows are the non-dominated designs, on the true objectives, of the found set.

    The found set is every evaluation (query mode) or the designs reported (``reported``: the front
    under estimates or predictions, scored afterwards), of which only some stay non-dominated on
    the truth: ``front: 14 of the 39 reported designs, non-dominated on the true objectives (0 paid,
    14 predicted, scored afterwards)``, as the run's note says.
    """
    from coevo.search.runner import unpaid_word

    n = len(result.front)
    predicted = sum(1 for row in result.front if not row.get("paid", True))
    if result.found_set == "all" and result.evaluations and not predicted:
        return f"found front ({n} non-dominated of {result.evaluations} evaluated)"
    scored = f", {predicted} {unpaid_word(result.found_set)}, scored afterwards" if predicted else ""
    return f"front: {n} of the {result.reported} reported designs, non-dominated on the true objectives ({n - predicted} paid{scored})"


def trials_text(result: Any) -> str:
    """The study's trials, told apart from the evaluations the budget counted (they differ: ``109`` beside ``100`` says nothing).

    The budget's evaluations are paid ones, except in zero-cost mode, where they are evaluations on
    the proxies' estimate and nothing is paid (``100 evaluations on estimated objectives, none paid``).
    A trial the budget did not count is a design proposed again and answered from the study, or one
    skipped, interrupted and re-queued, or left waiting (a stopped search).
    """
    used = result.budget_used
    counted = f"{used} paid evaluations" if result.paid == used else f"{used} evaluations on estimated objectives, none paid"
    parts = [counted + (f", {result.failed} of them failed" if result.failed else "")]
    if result.answered:
        parts.append(f"{result.answered} repeats answered free from the study")
    rest = result.trials - used - result.answered
    if rest > 0:  # skipped (claimed by another worker), interrupted and re-queued, or left waiting by a stop
        parts.append(f"{rest} skipped, re-queued or waiting")
    return f"{result.trials} ({'; '.join(parts)})"


def failures_line(result: Any, shown: int = 3) -> str:
    """One line on a search's failed evaluations: how many of those the budget counted, and the first reasons."""
    first = "; ".join(f"trial {f['trial']} ({f['point_id']}): {f['failure']}" for f in result.failures[:shown])
    more = f"; and {result.failed - shown} more" if result.failed > shown else ""
    what = "paid evaluations" if result.paid == result.budget_used else "evaluations"
    return f"{result.failed} of {result.budget_used} {what} failed (each counted once against the budget, not retried): {first}{more}"
