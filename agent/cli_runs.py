"""``coevo worker``, ``coevo search --workers N`` and ``coevo runs``: distributed searches on shared storage."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from agent.reasoners import ENV_API_KEY
from search.errors import StorageMissingError, UserInputError

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)


def add_timing_arguments(p: argparse.ArgumentParser) -> None:
    """Heartbeat and fault-tolerance options shared by ``worker`` and ``search --workers``."""
    g = p.add_argument_group("workers")
    g.add_argument("--heartbeat", type=int, default=5, help="seconds between heartbeats of a running trial (default: 5)")
    g.add_argument("--grace", type=int, default=20, help="a trial silent this long is failed and re-queued (default: 20)")
    g.add_argument("--db-patience", type=float, default=60.0, help="seconds the database may be away before a worker stops (default: 60)")


def worker_settings(args: argparse.Namespace) -> Any:
    """The :class:`search.workers.WorkerSettings` of ``--heartbeat``, ``--grace`` and ``--db-patience``."""
    from search.workers import WorkerSettings

    if args.heartbeat < 1 or args.grace <= args.heartbeat:
        raise UserInputError(f"need --heartbeat >= 1 and --grace > --heartbeat (got {args.heartbeat} and {args.grace})")
    if args.db_patience < 0:
        raise UserInputError(f"--db-patience must be >= 0 seconds, got {args.db_patience}")
    return WorkerSettings(heartbeat_s=args.heartbeat, grace_s=args.grace, patience_s=args.db_patience)


def add_worker_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``coevo worker``."""
    from agent.cli import _add_reasoner_args  # the same reasoner flags as search

    p.add_argument("--storage", default=None, help="the shared storage URL (e.g. postgresql://user@db/coevo)")
    p.add_argument("--study", required=True, help="the study to join (created by `coevo search ... --study NAME`)")
    p.add_argument("--json", action="store_true", help="print this worker's summary as JSON")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
    add_timing_arguments(p)
    _add_reasoner_args(p)


def _stored_proposer(args: argparse.Namespace, stored: Any) -> Any:
    """The study's proposer as its creator built it (options stored with the study); flags for legacy studies."""
    from agent.cli import _announce, _proposer_options
    from search.proposers import get_proposer

    if not stored.proposer.startswith("pelnas") or not stored.proposer_options:
        return get_proposer(stored.proposer, _proposer_options(args, stored.proposer))  # a baseline, or a study from before 0.2
    from agent.coevolution import pelnas_from_options

    kind = stored.proposer_options.get("reasoner", {}).get("kind", "offline")
    if (args.reasoner != "auto" and args.reasoner != kind) or (kind == "offline" and (args.llm_model or args.llm_base_url)):
        raise UserInputError(
            f"study {args.study!r} runs the {kind} reasoner and a worker joins with the study's reasoner: leave --reasoner and "
            "--llm-model/--llm-base-url out"
        )
    proposer = pelnas_from_options(
        stored.proposer,
        stored.proposer_options,
        storage=args.storage,
        base_url=args.llm_base_url,
        model=args.llm_model,
        api_key=args.llm_api_key,
        price_per_mtok=args.llm_price,
    )
    if not args.quiet:
        _announce(proposer.reasoner)
    return proposer


def run_worker(args: argparse.Namespace) -> int:
    """Join study ``args.study`` and work until its budget is evaluated."""
    from search.study import load_search
    from search.workers import Worker, with_database_retry

    settings = worker_settings(args)
    stored = with_database_retry(
        "loading the study", lambda: load_search(args.storage, args.study, create=False), patience_s=settings.patience_s
    )
    proposer = _stored_proposer(args, stored)
    worker = Worker(stored.problem, proposer, storage=args.storage, study_name=args.study, seed=stored.seed, settings=settings)
    result = worker.run()
    if args.json:
        print(json.dumps(vars(result)))
    elif not args.quiet:
        out.print(
            f"worker {result.worker}: {result.evaluated} evaluated, {result.answered} answered from the study, {result.pruned} skipped, "
            f"{result.rounds_led} rounds led, {result.requeued_seen} re-queued trials taken over, {result.wall_s:.1f} s"
        )
    return 0  # a worker stopped by a signal finished its evaluation and left nothing behind: a clean stop


class WorkerProcesses:
    """The extra ``coevo worker`` processes of ``coevo search --workers N`` (started once the study exists).

    They read every option that shapes the search from the study itself (proposer options,
    reasoner, budget); the API key reaches them through the environment, never their
    command line.
    """

    def __init__(self, args: argparse.Namespace, count: int) -> None:
        self.args = args
        self.count = count
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, study: str) -> None:
        """Start the processes on ``study``."""
        a = self.args
        command = [sys.executable, "-m", "agent.cli", "worker", "--study", study, "--quiet"]
        command += ["--heartbeat", str(a.heartbeat), "--grace", str(a.grace), "--db-patience", str(a.db_patience)]
        if a.storage:
            command += ["--storage", a.storage]
        if a.llm_base_url:
            command += ["--llm-base-url", a.llm_base_url]
        env = dict(os.environ)
        if a.llm_api_key:
            env[ENV_API_KEY] = a.llm_api_key
        self.procs = [subprocess.Popen(command, stdout=subprocess.DEVNULL, env=env) for _ in range(self.count)]

    def wait(self) -> int:
        """Wait for every process; returns how many exited with an error."""
        for proc in self.procs:
            proc.wait()
        return sum(1 for p in self.procs if p.returncode)


# ---------------------------------------------------------------- runs


def add_runs_arguments(p: argparse.ArgumentParser) -> None:
    """``coevo runs list``, ``coevo runs show NAME`` and ``coevo runs delete NAME``."""
    sub = p.add_subparsers(dest="runs_command", required=True, metavar="{list,show,delete}")
    ls = sub.add_parser("list", help="every search in the storage: progress, workers alive, HV so far")
    ls.add_argument("--storage", default=None, help="storage URL (default: sqlite:///runs/coevo.sqlite3)")
    ls.add_argument("--json", action="store_true")
    show = sub.add_parser("show", help="one search: progress, trial states, workers, HV so far")
    show.add_argument("study")
    show.add_argument("--storage", default=None, help="storage URL (default: sqlite:///runs/coevo.sqlite3)")
    show.add_argument("--json", action="store_true")
    rm = sub.add_parser("delete", help="delete a search: its study, knowledge base, round logs, LLM replies and claims")
    rm.add_argument("study")
    rm.add_argument("--storage", default=None, help="storage URL (default: sqlite:///runs/coevo.sqlite3)")
    rm.add_argument("--yes", action="store_true", help="delete without asking")


def run_runs(args: argparse.Namespace) -> int:
    """``coevo runs list|show|delete``."""
    import optuna

    from search.progress import progress
    from search.storage import check_exists, open_storage

    if args.runs_command == "delete":
        return _delete(args)
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
    try:
        check_exists(args.storage)
    except StorageMissingError as exc:
        err.print(f"no searches: {exc}")  # nothing stored yet is an answer, not a failure; nothing is created
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


def _delete(args: argparse.Namespace) -> int:
    """``coevo runs delete NAME``: the study and everything coevo keeps for it, after a confirmation."""
    import optuna

    from search.storage import open_storage
    from search.study import load_search, purge_side_tables
    from search.workers import Coordination, _alive

    stored = load_search(args.storage, args.study, create=False)
    live = [w for w in Coordination(args.storage, args.study).workers() if _alive(w, 30.0)]
    if live:
        raise UserInputError(
            f"{len(live)} worker(s) are still working on {args.study!r} ({', '.join(w['worker'] for w in live)}); stop them first"
        )
    trials = len(stored.study.get_trials(deepcopy=False))
    what = f"study {args.study!r} ({trials} trials) and its knowledge base, round logs, cached LLM replies and worker records"
    if not args.yes:
        if not sys.stdin.isatty():
            raise UserInputError(f"this deletes {what}; pass --yes to delete without being asked")
        answer = input(f"delete {what}? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            err.print("nothing deleted")
            return 1
    optuna.delete_study(study_name=args.study, storage=open_storage(args.storage))
    removed = purge_side_tables(args.storage, args.study, "delete")
    job_log = Path("runs/jobs") / f"{args.study}.log"
    if job_log.is_file():
        job_log.unlink()
        removed.append(f"background log {job_log}")
    out.print(f"deleted study {args.study!r} ({trials} trials)" + (f", {', '.join(removed)}" if removed else ""))
    return 0
