"""``coevo worker``: join a search on shared storage and evaluate until its budget is done."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import threading
import uuid
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
from coevo.search.workers import ENV_WORKER_TAG, Progress, WorkerSettings, worker_name

log = logging.getLogger(__name__)


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
    their command line. While they run, a thread watches them (:meth:`check`): one that dies
    (``kill -9``, an error) is reported at once, and, being this process's child and reaped,
    certainly gone, so what it held is handed over at once (:func:`search.workers.settle_dead_worker`)
    rather than after its round lease expires.
    """

    WATCH_S = 0.5
    """Seconds between two looks at the processes."""

    def __init__(self, config: SearchConfig, settings: WorkerSettings, count: int) -> None:
        self.config = config
        self.settings = settings
        self.count = count
        self.procs: list[subprocess.Popen[bytes]] = []
        self.study: str | None = None
        self.ended: dict[int, str] = {}
        """How each process that ended with an error ended (``was killed (SIGKILL)``), by its index in :attr:`procs`."""
        self._seen: set[int] = set()
        self._stopping = False
        self.tags: list[str] = []
        """The tail of each process's worker name (:data:`search.workers.ENV_WORKER_TAG`), by its index in :attr:`procs`."""
        self._done = threading.Event()
        self._watcher: threading.Thread | None = None

    def start(self, study: str) -> None:
        """Start the processes on ``study``, and the thread that watches them."""
        s, reasoner = self.settings, self.config.reasoner
        command = [sys.executable, "-m", "coevo.agent.cli", "worker", "--study", study, "--quiet"]
        command += ["--heartbeat", str(s.heartbeat_s), "--grace", str(s.grace_s), "--db-patience", str(s.patience_s)]
        command += ["--db-timeout", str(s.timeouts.request_s)]
        if self.config.storage:  # the flags a worker shares with coevo search: their names from the one table
            command += [FLAGS["storage"], self.config.storage]
        if self.config.eval_timeout_s is not None:
            command += [FLAGS["eval_timeout_s"], repr(self.config.eval_timeout_s)]
        if reasoner is not None and reasoner.base_url:
            command += [FLAGS["reasoner.base_url"], reasoner.base_url]
        env = dict(os.environ)
        if reasoner is not None and reasoner.api_key:
            env[ENV_API_KEY] = reasoner.api_key
        self.study = study
        # each process is told the tail of its worker name, so a death is settled for exactly that worker
        self.tags = [uuid.uuid4().hex[:12] for _ in range(self.count)]
        self.procs = [subprocess.Popen(command, stdout=subprocess.DEVNULL, env={**env, ENV_WORKER_TAG: tag}) for tag in self.tags]
        if self.procs:
            self._watcher = threading.Thread(target=self._watch, name="coevo-worker-watch", daemon=True)
            self._watcher.start()

    def stop(self) -> None:
        """Pass a stop on to the processes still running (SIGTERM: each finishes or re-queues its evaluation).

        A Ctrl-C in a terminal reaches the whole process group; a ``kill``, systemd or Slurm
        signals this process only, and the workers would go on with the search.
        """
        self._stopping = True  # their exits are the stop's, not deaths to report
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)

    def wait(self) -> int:
        """Wait for every process; returns how many exited with an error (a stop by a signal, 130, is none)."""
        self._done.set()
        if self._watcher is not None:
            self._watcher.join()
        for proc in self.procs:
            proc.wait()
        for line in self.check(settle=False):  # died after the watcher's last look: reported, nothing left to hand over
            err.print(line, style="yellow", markup=False, soft_wrap=True)
        return sum(1 for p in self.procs if p.returncode not in (0, 130))

    def check(self, *, settle: bool = True) -> list[str]:
        """Look at the processes once: a line for each that has ended with an error since the last look (none during a stop).

        With ``settle``, what a dead one held (its round lease, its running trial) is handed over at once.
        """
        lines = []
        for i, proc in enumerate(self.procs):
            code = proc.poll()
            if code is None or i in self._seen:
                continue
            self._seen.add(i)
            if code in (0, 130) or self._stopping:
                continue
            how = f"was killed ({_signal_name(-code)})" if code < 0 else f"exited with status {code}"
            self.ended[i] = how
            lines.append(self._ended_line(i + 2, worker_name(proc.pid, self.tags[i]), proc.pid, how, settle=settle))
        return lines

    def _ended_line(self, number: int, name: str, pid: int, how: str, *, settle: bool) -> str:
        """What to say of worker process ``number`` (worker ``name``) that ended (``how``), after handing over what it held
        when ``settle``."""
        from coevo.search.workers import settle_dead_worker

        what = f"worker process {number} of {self.count + 1} (pid {pid}) {how}"
        if not settle or self.study is None:
            return what
        lease_s = 3 * self.settings.grace_s
        try:
            settled = settle_dead_worker(self.config.storage, self.study, name, f"{how}, seen by its search", self.settings)
        except Exception as exc:  # the watcher must not die of a database fault: the lease's expiry still covers this
            log.warning("could not hand over what worker process %d held: %s", number, exc)
            return f"{what}; its round and trial are taken over once its lease expires (within {lease_s:g} s)"
        if settled is None:
            return f"{what} before it registered; the search goes on without it"
        held = [
            f"{n} {thing}{'s' if n != 1 else ''}" for n, thing in ((settled.leases, "round lease"), (settled.trials, "running trial")) if n
        ]
        handed = f"its {' and '.join(held)} handed over at once" if held else "it held no round lease and no running trial"
        return f"{what}; {handed}, the search goes on without it"

    def _watch(self) -> None:
        """Report each process that dies while the search runs (:meth:`check`), until :meth:`wait`."""
        while not self._done.wait(self.WATCH_S):
            for line in self.check():
                err.print(line, style="yellow", markup=False, soft_wrap=True)


def _signal_name(number: int) -> str:
    """``SIGKILL`` for 9 (the number when it names no signal)."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
