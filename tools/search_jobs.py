"""Searches in the background: ``search.start`` launches one, ``search.status`` reports its progress.

A started search is an ordinary ``coevo search`` process in its own session (Ctrl-C in
chat does not stop it), writing to the study like any other run, with its output in
``runs/jobs/<study>.log``. Status is read from the study itself, so it works for any
search, started here or not, and after a restart.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar, Literal

from coevo.knowledge.kb_from import search_study_name
from coevo.search.config import ReasonerConfig
from coevo.search.errors import UserInputError
from coevo.search.progress import progress
from coevo.search.study import open_stored_study
from coevo.tools._base import Tool, ToolResult
from coevo.tools.search_run import SearchArgs, SearchTool
from coevo.tools.studies import READS_STORAGE, StudyArgs, study_code

JOBS_DIR = Path("runs/jobs")


def log_path(study: str) -> Path:
    """The log file of a background search: one file in :data:`JOBS_DIR`, whatever the study name holds (``/``, ``..``)."""
    safe = re.sub(r"[^A-Za-z0-9._=-]", "_", study).lstrip(".") or "_"
    return JOBS_DIR / f"{safe}.log"


# The processes this process started, so that their exit is reaped and seen; a search started by another
# (an earlier chat session) is followed through the pid file next to its log.
_STARTED: dict[int, subprocess.Popen[bytes]] = {}


def process_state(study: str) -> str | None:
    """``running``, ``exited`` or ``exited (code N)`` for a search started with ``search.start``; None for others.

    The study can hold every evaluation while its process is still writing the summary: the
    search is finished only when both are true.
    """
    pid_file = log_path(study).with_suffix(".pid")
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    proc = _STARTED.get(pid)
    if proc is not None:
        code = proc.poll()
        return "running" if code is None else ("exited" if code == 0 else f"exited (code {code})")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "exited"
    except PermissionError:  # alive, someone else's: a pid reused by another user's process
        return "exited"
    return "running"


def _not_written(args: StudyArgs, exc: UserInputError) -> ToolResult:
    """Status of a search whose study cannot be read: one that search.start began and that has not written it yet.

    A background search takes a few seconds to open its storage and study; asked then, the
    status says so instead of "no study". A search that ended without writing it failed to start:
    the error says so with the end of its log. Any other search: the error as it is.

    Raises:
        UserInputError: the study is not there and no search started here is about to write it.
    """
    state = process_state(args.study)
    log = log_path(args.study)
    tail = log.read_text(errors="replace")[-600:] if log.exists() else ""
    if state is None:
        raise exc
    try:
        open_stored_study(args.storage, args.study, create=False)
    except UserInputError:
        if state == "running":
            value = {"study": args.study, "evaluations": 0, "budget_used": 0, "paid": 0, "finished": False}
            value |= {"process": state, "log_tail": tail}
            return ToolResult(
                value=value, messages=["the search is starting and has not written its study yet; ask again in a few seconds"]
            )
        raise UserInputError(f"the search {args.study!r} {state} before it wrote its study ({exc}); its log ends: {tail.strip()}") from None
    raise exc  # the study is there and still cannot be read: that error is the answer


class SearchStart(SearchTool):
    """Start (or resume) a search as a background process and return at once."""

    name = "search.start"
    description = (
        "Start or resume a headless design search in the background (same options as search.run) and return at once "
        "with the study name and log file; follow it with search.status. The user confirms before it starts."
    )
    Args = SearchArgs
    example: ClassVar[dict[str, Any]] = {
        "options": {"dataset": "cifar10", "device": "fpga"},
        "proposer": "random",
        "budget": 5,
        "study": "example-bg",
        "storage": "sqlite:///runs/background.sqlite3",
    }
    confirm = True

    def run(self, args: SearchArgs) -> ToolResult:
        config = args.config()  # bad names and values fail here, not in the background
        if config.reasoner is None and config.takes_reasoner():
            # the background search is a `coevo search` command, and its reasoner follows the environment as
            # the command's does (auto: the LLM the user configured, else offline)
            config = config.model_copy(update={"reasoner": ReasonerConfig(kind="auto")})
        problem = config.make_problem()  # and so does a problem that cannot be built
        # named as `coevo search` with the same flags names it: the proposer's variant (its LLM model, a --kb-from source) too
        study = search_study_name(config, problem)
        command = [sys.executable, "-m", "coevo.agent.cli", "search", *config.model_copy(update={"study": study}).to_argv(), "--json"]
        JOBS_DIR.mkdir(parents=True, exist_ok=True)
        log = log_path(study)
        with log.open("ab") as fh:
            proc = subprocess.Popen(command, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        _STARTED[proc.pid] = proc
        log.with_suffix(".pid").write_text(f"{proc.pid}\n")
        return ToolResult(
            value={"study": study, "pid": proc.pid, "log": str(log), "budget": config.budget, "command": " ".join(command[2:])},
            messages=["running in the background; ask search.status for progress"],
        )


class SearchStatus(Tool):
    """Progress of a search: evaluations against budget, HV ratio so far, whether it is finished."""

    name = "search.status"
    description = (
        "Progress of a search (running or finished): evaluations paid out of its budget (failed ones included), "
        "HV ratio and front recall so far, "
        "and, when it was started with search.start, whether its process still runs and the tail of its log."
    )
    Args = StudyArgs
    example: ClassVar[dict[str, Any]] = {"study": "example"}
    reads: ClassVar[dict[str, Literal["storage"]]] = READS_STORAGE

    def stored_code(self, args: StudyArgs) -> list[str]:
        return study_code(args)

    def run(self, args: StudyArgs) -> ToolResult:
        try:
            info = progress(args.storage, args.study)
        except UserInputError as exc:  # no storage or no study (yet)
            return _not_written(args, exc)
        value = {
            k: info[k]
            for k in (
                "study",
                "evaluations",
                "failed",
                "budget_used",
                "paid",
                "budget",
                "hv_ratio",
                "front_recall",
                "front_size",
                "workers_alive",
                "states",
            )
        }
        # failed evaluations count against the budget (and a zero-cost search pays for none: ``paid`` is 0 there);
        # a background search is finished once its process has also written its summary and exited
        state = process_state(args.study)
        value["finished"] = info["budget_used"] >= info["budget"] and state != "running"
        if state is not None:
            value["process"] = state
        log = log_path(args.study)
        if log.exists():
            value["log_tail"] = log.read_text(errors="replace")[-600:]
        return ToolResult(value=value)
