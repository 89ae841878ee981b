"""``coevo worker``: join a search on shared storage and evaluate until its budget is done."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

from coevo.agent.cli._common import add_reasoner_arguments, add_timing_arguments, announce, out, proposer_options, worker_settings
from coevo.agent.reasoners import ENV_API_KEY, ENV_BASE_URL
from coevo.search.errors import UserInputError
from coevo.search.problem import Problem

HELP = "join a search on shared storage and evaluate until its budget is done"


def add_arguments(p: argparse.ArgumentParser, problem: type[Problem] | None) -> None:
    """Options of ``coevo worker`` (the problem and proposer come from the study)."""
    p.add_argument("--storage", default=None, help="the shared storage URL (e.g. postgresql://user@db/coevo)")
    p.add_argument("--study", required=True, help="the study to join (created by `coevo search ... --study NAME`)")
    p.add_argument("--json", action="store_true", help="print this worker's summary as JSON")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
    add_timing_arguments(p)
    add_reasoner_arguments(p)


def stored_proposer(args: argparse.Namespace, stored: Any) -> Any:
    """The study's proposer as its creator built it, from the options stored with the study.

    For a proposer driven by a reasoner, the stored reasoner settings are used; this
    machine's endpoint URL (``--llm-base-url``, then ``COEVO_LLM_BASE_URL``) and API key
    (``--llm-api-key``, then ``OPENAI_API_KEY``) complete them. Studies made before options
    were stored take the flags.
    """
    from coevo.search.proposers import get_proposer, takes_reasoner

    if not stored.proposer_options:
        return get_proposer(stored.proposer, proposer_options(args, stored.proposer))
    options = dict(stored.proposer_options)
    if not takes_reasoner(stored.proposer):
        return get_proposer(stored.proposer, options)
    config = dict(options.get("reasoner") or {"kind": "offline"})
    kind = config.get("kind", "offline")
    if (args.reasoner != "auto" and args.reasoner != kind) or (kind == "offline" and (args.llm_model or args.llm_base_url)):
        raise UserInputError(
            f"study {args.study!r} runs the {kind} reasoner and a worker joins with the study's reasoner: leave --reasoner and "
            "--llm-model/--llm-base-url out"
        )
    if kind == "llm":
        if args.llm_model and args.llm_model != config.get("model"):
            raise UserInputError(
                f"this study's reasoner is llm:{config.get('model')}; a worker cannot join it with --llm-model {args.llm_model}"
            )
        config["base_url"] = args.llm_base_url or os.environ.get(ENV_BASE_URL) or config.get("base_url")
        config["api_key"] = args.llm_api_key or os.environ.get(ENV_API_KEY)
        if args.llm_price:
            config["price_per_mtok"] = list(args.llm_price)
    options["reasoner"] = config
    proposer = get_proposer(stored.proposer, options)
    if not args.quiet:
        announce(proposer.reasoner)  # type: ignore[attr-defined]
    return proposer


def run(args: argparse.Namespace) -> int:
    """Join study ``args.study`` and work until its budget is evaluated."""
    from coevo.search.study import load_search
    from coevo.search.workers import Worker, with_database_retry

    settings = worker_settings(args)
    stored = with_database_retry(
        "loading the study", lambda: load_search(args.storage, args.study, create=False), patience_s=settings.patience_s
    )
    proposer = stored_proposer(args, stored)
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

    They read every option that shapes the search from the study itself (problem, proposer
    options, reasoner, budget); the API key reaches them through the environment, never
    their command line.
    """

    def __init__(self, args: argparse.Namespace, count: int) -> None:
        self.args = args
        self.count = count
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, study: str) -> None:
        """Start the processes on ``study``."""
        a = self.args
        command = [sys.executable, "-m", "coevo.agent.cli", "worker", "--study", study, "--quiet"]
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
