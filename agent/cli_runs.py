"""``coevo worker``, ``coevo search --workers N`` and ``coevo runs``: distributed searches on shared storage."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from typing import Any

from rich.console import Console
from rich.table import Table

from search.errors import UserInputError

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)


def add_timing_arguments(p: argparse.ArgumentParser) -> None:
    """Heartbeat and fault-tolerance options shared by ``worker`` and ``search --workers``."""
    g = p.add_argument_group("workers")
    g.add_argument("--heartbeat", type=int, default=5, help="seconds between heartbeats of a running trial (default: 5)")
    g.add_argument("--grace", type=int, default=20, help="a trial silent this long is failed and re-queued (default: 20)")
    g.add_argument("--db-patience", type=float, default=60.0, help="seconds the database may be away before a worker stops (default: 60)")


def _settings(args: argparse.Namespace) -> Any:
    from search.workers import WorkerSettings

    if args.heartbeat < 1 or args.grace <= args.heartbeat:
        raise UserInputError(f"need --heartbeat >= 1 and --grace > --heartbeat (got {args.heartbeat} and {args.grace})")
    return WorkerSettings(heartbeat_s=args.heartbeat, grace_s=args.grace, patience_s=args.db_patience)


def add_worker_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``coevo worker``."""
    from agent.cli import _add_reasoner_args  # the same reasoner flags as search

    p.add_argument("--storage", default=None, help="the shared storage URL (e.g. postgresql://user@db/coevo)")
    p.add_argument("--study", required=True, help="the study to join (created by `coevo search ... --study NAME`)")
    p.add_argument("--json", action="store_true", help="print this worker's summary as JSON")
    add_timing_arguments(p)
    _add_reasoner_args(p)


def run_worker(args: argparse.Namespace, *, quiet: bool = False) -> int:
    """Join study ``args.study`` and work until its budget is evaluated."""
    from agent.cli import _proposer_options
    from search.proposers import get_proposer
    from search.runner import load_search
    from search.workers import Worker, with_database_retry

    settings = _settings(args)
    stored = with_database_retry("loading the study", lambda: load_search(args.storage, args.study), patience_s=settings.patience_s)
    proposer = get_proposer(stored.proposer, _proposer_options(args, stored.proposer))
    worker = Worker(stored.problem, proposer, storage=args.storage, study_name=args.study, seed=stored.seed, settings=settings)
    result = worker.run()
    if args.json:
        print(json.dumps(vars(result)))
    elif not quiet:
        out.print(
            f"worker {result.worker}: {result.evaluated} evaluated, {result.answered} answered from the study, {result.pruned} skipped, "
            f"{result.rounds_led} rounds led, {result.requeued_seen} re-queued trials taken over, {result.wall_s:.1f} s"
        )
    return 0


def search_with_workers(args: argparse.Namespace, problem: Any, proposer: Any) -> Any:
    """``coevo search --workers N``: create the study, start N - 1 worker processes, work in this one, summarize."""
    from search.runner import default_study_name, open_study, summarize
    from search.workers import Worker

    name = args.study or default_study_name(problem, proposer.name, args.seed, proposer.variant)
    study = open_study(problem, proposer, storage=args.storage, study_name=name, seed=args.seed, budget=args.budget)
    command = [sys.executable, "-m", "agent.cli", "worker", "--study", name, "--heartbeat", str(args.heartbeat), "--grace", str(args.grace)]
    command += ["--db-patience", str(args.db_patience), "--reasoner", args.reasoner]
    for flag, value in (("--storage", args.storage), ("--llm-base-url", args.llm_base_url), ("--llm-model", args.llm_model)):
        if value:
            command += [flag, value]
    started = time.perf_counter()
    others = [subprocess.Popen(command, stdout=subprocess.DEVNULL) for _ in range(args.workers - 1)]
    try:
        Worker(problem, proposer, storage=args.storage, study_name=name, seed=args.seed, settings=_settings(args)).run()
    finally:
        for proc in others:
            proc.wait()
    failed = [p.returncode for p in others if p.returncode]
    if failed:
        err.print(f"[yellow]{len(failed)} worker process(es) exited with an error; rerun the same command to finish[/]")
    return summarize(
        problem,
        study,
        proposer=proposer.name,
        seed=args.seed,
        budget=args.budget,
        storage=args.storage,
        wall_s=time.perf_counter() - started,
    )


# ---------------------------------------------------------------- runs


def add_runs_arguments(p: argparse.ArgumentParser) -> None:
    """``coevo runs list`` and ``coevo runs show NAME``."""
    sub = p.add_subparsers(dest="runs_command", required=True, metavar="{list,show}")
    ls = sub.add_parser("list", help="every search in the storage: progress, workers alive, HV so far")
    ls.add_argument("--storage", default=None, help="storage URL (default: sqlite:///runs/coevo.sqlite3)")
    ls.add_argument("--json", action="store_true")
    show = sub.add_parser("show", help="one search: progress, trial states, workers, HV so far")
    show.add_argument("study")
    show.add_argument("--storage", default=None, help="storage URL (default: sqlite:///runs/coevo.sqlite3)")
    show.add_argument("--json", action="store_true")


def run_runs(args: argparse.Namespace) -> int:
    """``coevo runs list|show``."""
    import optuna

    from search.progress import progress
    from search.storage import open_storage

    if args.runs_command == "show":
        info = progress(args.storage, args.study)
        if args.json:
            print(json.dumps(info, default=str))
            return 0
        summary = Table(title=f"study {args.study}", show_header=False)
        for key in (
            "problem",
            "proposer",
            "evaluations",
            "budget",
            "round",
            "states",
            "hv_ratio",
            "front_recall",
            "front_size",
            "workers_alive",
        ):
            v = info[key]
            summary.add_row(key, f"{v:.4f}" if isinstance(v, float) else json.dumps(v) if isinstance(v, dict) else str(v))
        out.print(summary)
        if info["workers"]:
            table = Table(title="workers")
            for col in ("worker", "host", "pid", "state", "alive", "evaluations", "last seen (s ago)", "note"):
                table.add_column(col, overflow="fold")
            for w in info["workers"]:
                ago = f"{time.time() - w['last_seen']:.0f}"
                table.add_row(
                    w["worker"], w["host"], str(w["pid"]), w["state"], str(w["alive"]), str(w["evaluations"]), ago, w["note"] or ""
                )
            out.print(table)
        return 0
    names = [s.study_name for s in optuna.get_all_study_summaries(open_storage(args.storage), include_best_trial=False)]
    rows = []
    for name in names:
        try:
            rows.append(progress(args.storage, name))
        except UserInputError:
            continue  # not a coevo study
    if args.json:
        for r in rows:
            print(json.dumps({k: v for k, v in r.items() if k != "workers"}, default=str))
        return 0
    table = Table(title=f"{len(rows)} searches")
    for col in ("study", "proposer", "evaluations", "HV ratio", "workers alive"):
        table.add_column(col, overflow="fold")
    for r in rows:
        hv = f"{r['hv_ratio']:.4f}" if r["hv_ratio"] is not None else "-"
        table.add_row(r["study"], r["proposer"], f"{r['evaluations']}/{r['budget']}", hv, str(r["workers_alive"]))
    out.print(table)
    return 0
