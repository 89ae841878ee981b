"""``coevo worker``: join a search on shared storage and evaluate until its budget is done."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from coevo.agent.cli._common import (
    add_reasoner_arguments,
    add_timing_arguments,
    announce,
    engine_flags,
    err,
    out,
    reasoner_flags,
    search_progress,
    stopped_by_signal,
    worker_settings,
)
from coevo.agent.reasoners import ENV_API_KEY
from coevo.search.config import FLAGS, SearchConfig
from coevo.search.problem import Problem
from coevo.search.strict_json import strict_dumps
from coevo.search.workers import Progress, WorkerSettings


def add_arguments(p: argparse.ArgumentParser, problem: type[Problem] | None) -> None:
    """Options of ``coevo worker`` (the problem and proposer come from the study)."""
    p.add_argument("--storage", default=None, help="the shared storage URL (e.g. postgresql://user@db/coevo)")
    p.add_argument("--study", required=True, help="the study to join (created by `coevo search ... --study NAME`)")
    p.add_argument("--json", action="store_true", help="print this worker's summary as JSON")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
    add_timing_arguments(p)
    add_reasoner_arguments(p)


def run(args: argparse.Namespace) -> int:
    """Join study ``args.study`` and work until its budget is evaluated.

    The problem, proposer and reasoner are the study's, rebuilt from what it stores
    (:func:`agent.run_config.joined_search`); this machine's endpoint URL and key
    (``--llm-base-url``/``COEVO_LLM_BASE_URL``, ``--llm-api-key``/``OPENAI_API_KEY``) reach its
    LLM. Studies made before options were stored take the flags.
    """
    from coevo.agent.run_config import joined_search
    from coevo.search.study import load_search
    from coevo.search.workers import Worker, with_database_retry

    settings = worker_settings(args)
    local = reasoner_flags(args)
    SearchConfig.create(names=FLAGS, eval_timeout_s=args.eval_timeout)  # a bad --eval-timeout fails before the study is loaded
    stored = with_database_retry(
        "loading the study",
        lambda: load_search(args.storage, args.study, create=False, timeouts=settings.timeouts),
        patience_s=settings.patience_s,
        storage=args.storage,
    )
    config, proposer = joined_search(
        stored,
        local,
        storage=args.storage,
        study=args.study,
        engine=engine_flags(args),
        on_reasoner=None if args.quiet else announce,
        eval_timeout_s=args.eval_timeout,
    )
    problem = config.make_problem()
    joined: dict[str, Any] = {"storage": config.storage, "study_name": args.study, "seed": config.seed, "settings": settings}

    def work(on_progress: Callable[[Progress], None] | None) -> Any:
        return Worker(problem, proposer, **joined, eval_timeout_s=config.eval_timeout_s, on_progress=on_progress).run()

    # --quiet: the workers `coevo search --workers N` starts, whose search shows the progress
    result = work(None) if args.quiet else search_progress(f"worker on {args.study}", config.budget, work)
    if args.json:
        print(strict_dumps(vars(result)))
    elif not args.quiet:
        out.print(
            f"worker {result.worker}: {result.evaluated} evaluated, {result.failed} failed, {result.answered} answered from the study, "
            f"{result.pruned} skipped, {result.rounds_led} rounds led, {result.requeued_seen} re-queued trials taken over, "
            f"{result.wall_s:.1f} s"
        )
    if stopped_by_signal(result.stopped):
        # as `coevo search` does: 130, and how to go on (its evaluation was finished or re-queued: nothing is lost)
        if not args.quiet:
            err.print(f"{result.stopped}; rerun the same command to resume", style="yellow", markup=False, soft_wrap=True)
        return 130
    return 0


class WorkerProcesses:
    """The extra ``coevo worker`` processes of ``coevo search --workers N`` (started once the study exists).

    They read every option that shapes the search from the study itself (problem, proposer
    options, reasoner, budget); the API key reaches them through the environment, never
    their command line.
    """

    def __init__(self, config: SearchConfig, settings: WorkerSettings, count: int) -> None:
        self.config = config
        self.settings = settings
        self.count = count
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, study: str) -> None:
        """Start the processes on ``study``."""
        s, reasoner = self.settings, self.config.reasoner
        command = [sys.executable, "-m", "coevo.agent.cli", "worker", "--study", study, "--quiet"]
        command += ["--heartbeat", str(s.heartbeat_s), "--grace", str(s.grace_s), "--db-patience", str(s.patience_s)]
        command += ["--db-timeout", str(s.timeouts.request_s)]
        if self.config.storage:
            command += ["--storage", self.config.storage]
        if self.config.eval_timeout_s is not None:
            command += ["--eval-timeout", repr(self.config.eval_timeout_s)]
        if reasoner is not None and reasoner.base_url:
            command += ["--llm-base-url", reasoner.base_url]
        env = dict(os.environ)
        if reasoner is not None and reasoner.api_key:
            env[ENV_API_KEY] = reasoner.api_key
        self.procs = [subprocess.Popen(command, stdout=subprocess.DEVNULL, env=env) for _ in range(self.count)]

    def stop(self) -> None:
        """Pass a stop on to the processes still running (SIGTERM: each finishes or re-queues its evaluation).

        A Ctrl-C in a terminal reaches the whole process group; a ``kill``, systemd or Slurm
        signals this process only, and the workers would go on with the search.
        """
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)

    def wait(self) -> int:
        """Wait for every process; returns how many exited with an error (a stop by a signal, 130, is none)."""
        for proc in self.procs:
            proc.wait()
        return sum(1 for p in self.procs if p.returncode not in (0, 130))
