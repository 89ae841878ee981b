"""``coevo runs``: the searches in a storage (progress, workers alive, HV so far), and deleting one."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from rich.console import Console

from coevo.agent.cli._common import err, out, progress_bar
from coevo.agent.tables import Column, print_table, summary_cell
from coevo.search.errors import StorageMissingError, UserInputError
from coevo.search.problem import Problem
from coevo.search.storage import DEFAULT_STORAGE
from coevo.search.strict_json import strict_dumps

LOAD_HELP = (
    "import a search's problem when it is your code (a problem file or module the study names) to show its HV ratio and front; "
    "without it such a search shows its progress only"
)


def add_arguments(p: argparse.ArgumentParser, problem: type[Problem] | None) -> None:
    """``coevo runs list``, ``coevo runs show NAME`` and ``coevo runs delete NAME``."""
    sub = p.add_subparsers(dest="runs_command", required=True, metavar="{list,show,delete}")
    ls = sub.add_parser("list", help="every search in the storage: progress, workers alive, HV so far")
    ls.add_argument("--storage", default=None, help=f"storage URL (default: {DEFAULT_STORAGE})")
    ls.add_argument("--json", action="store_true", help="one JSON object per search, one per line (JSON Lines)")
    ls.add_argument("--yes", action="store_true", help=LOAD_HELP)
    show = sub.add_parser("show", help="one search: progress, trial states, workers, HV so far")
    show.add_argument("study")
    show.add_argument("--storage", default=None, help=f"storage URL (default: {DEFAULT_STORAGE})")
    show.add_argument("--json", action="store_true", help="the search as one JSON object")
    show.add_argument("--yes", action="store_true", help=LOAD_HELP)
    rm = sub.add_parser("delete", help="delete a search: its study, knowledge base, round logs, LLM replies and claims")
    rm.add_argument("study")
    rm.add_argument("--storage", default=None, help=f"storage URL (default: {DEFAULT_STORAGE})")
    rm.add_argument("--yes", action="store_true", help="delete without asking")


def run(args: argparse.Namespace) -> int:
    """``coevo runs list|show|delete``."""
    if args.runs_command == "delete":
        return _delete(args)
    if args.runs_command == "show":
        return _show(args)
    return _list(args)


_SHOWN = (
    "problem",
    "proposer",
    "reasoner",
    "evaluations",
    "failed",
    "budget_used",
    "paid",
    "budget",
    "round",
    "states",
    "hv_ratio",
    "front_recall",
    "front_size",
    "workers_alive",
)
"""The fields of a search's progress in the summary table of ``coevo runs show``."""


def _show(args: argparse.Namespace) -> int:
    """``coevo runs show NAME``: the search's progress, then its workers."""
    from coevo.search.progress import progress

    with progress_bar() as bar, bar.listening():  # rebuilding a problem may score its space once (the pipeline's front)
        info = progress(args.storage, args.study, load_code=args.yes)
    _note_not_loaded([info])
    if args.json:
        print(strict_dumps(info))
        return 0
    print_show(out, args.study, info)
    return 0


def print_show(console: Console, study: str, info: dict[str, Any]) -> None:
    """``coevo runs show``'s tables: the search's progress, then its workers (every value whole)."""
    summary = [[key, reasoner_text(info) if key == "reasoner" else summary_cell(info[key])] for key in _SHOWN]
    print_table(console, f"study {study}", [Column("key"), Column("value", text=True)], summary, show_header=False)
    if info["workers"]:
        columns = [
            *(Column(c) for c in ("worker", "host", "pid", "state", "alive", "evaluations", "last seen (s ago)")),
            Column("note", text=True),
        ]
        rows = [
            [
                w["worker"],
                w["host"],
                str(w["pid"]),
                w["state"],
                str(w["alive"]),
                str(w["evaluations"]),
                f"{time.time() - w['last_seen']:.0f}",
                w["note"] or "",
            ]
            for w in info["workers"]
        ]
        print_table(console, "workers", columns, rows)


def _note_not_loaded(rows: list[dict[str, Any]]) -> None:
    """One line on stderr naming the searches whose problem (the user's code) was not imported, and how to load it."""
    left = [f"{r['study']} ({', '.join(r['not_loaded'])})" for r in rows if r.get("not_loaded")]
    if left:
        err.print(
            f"note: not imported, so no HV ratio or front: the problem code of {'; '.join(left)}; pass --yes to import it", soft_wrap=True
        )


def _list(args: argparse.Namespace) -> int:
    """``coevo runs list``: every coevo search in the storage.

    None stored yet in the default storage is an answer (exit 0); a ``--storage`` that does not exist, or holds no
    studies, is an error (exit 2), as for chat's ``/runs``.
    """
    import optuna

    from coevo.search.progress import progress
    from coevo.search.storage import check_exists, open_storage

    try:
        check_exists(args.storage)
    except StorageMissingError as exc:
        if args.storage is not None:
            # a storage named on the command line that is not there is most likely a typo: an error (exit 2), as chat's
            # /runs with --storage says; only the default storage, before the first search, is an empty answer
            raise StorageMissingError(f"{exc}; nothing to list") from None
        err.print(f"no searches yet: {exc}")  # nothing is created
        return 0
    names = [s.study_name for s in optuna.get_all_study_summaries(open_storage(args.storage, create=False), include_best_trial=False)]
    rows = []
    with progress_bar() as bar, bar.listening():  # as in _show
        for name in names:
            try:
                rows.append(progress(args.storage, name, load_code=args.yes))
            except UserInputError:
                continue  # not a coevo study
    _note_not_loaded(rows)
    if args.json:
        for r in rows:
            print(strict_dumps({k: v for k, v in r.items() if k != "workers"}))
        return 0
    print_list(out, rows)
    return 0


def print_list(console: Console, rows: list[dict[str, Any]]) -> None:
    """``coevo runs list``'s table: study names and numbers whole (they are copied into the next command)."""
    cells = []
    for r in rows:
        hv = f"{r['hv_ratio']:.4f}" if r["hv_ratio"] is not None else "-"
        cells.append([r["study"], r["proposer"], reasoner_text(r), used_text(r), hv, str(r["workers_alive"])])
    columns = [
        Column("study"),
        Column("proposer"),
        Column("reasoner", text=True),
        Column("used/budget", text=True),
        Column("HV ratio"),
        Column("workers alive"),
    ]
    print_table(console, f"{len(rows)} search{'' if len(rows) == 1 else 'es'}", columns, cells)


def reasoner_text(info: dict[str, Any]) -> str:
    """Which reasoner proposed a co-evolution search's rounds (``offline (no LLM)``, an LLM's label, or each with its
    rounds for a study resumed with another); ``-`` for a search no reasoner proposes for (random, TPE, NSGA-II...)."""
    return str(info.get("reasoner") or "-")


def used_text(info: dict[str, Any]) -> str:
    """A search's evaluations against its budget, with what was paid where that is not all of them.

    ``60/100``, ``100/100 (3 failed)``; a zero-cost search, which pays for nothing,
    ``100/100 (0 paid: estimated)`` (a search whose problem code was not imported does not know; it says nothing).
    """
    extra = [f"{info['failed']} failed"] if info["failed"] else []
    if info["paid"] is not None and info["paid"] != info["budget_used"]:
        extra.append(f"{info['paid']} paid: estimated")
    return f"{info['budget_used']}/{info['budget']}" + (f" ({', '.join(extra)})" if extra else "")


def _delete(args: argparse.Namespace) -> int:
    """``coevo runs delete NAME``: the study and everything coevo keeps for it, after a confirmation."""
    import optuna

    from coevo.search.progress import ALIVE_S
    from coevo.search.side_tables import SIDE_TABLES, purge_side_tables
    from coevo.search.storage import open_storage
    from coevo.search.study import open_stored_study
    from coevo.search.workers import Coordination, worker_alive
    from coevo.tools.search_jobs import log_path

    study = open_stored_study(args.storage, args.study, create=False)  # its problem is not rebuilt: no user code runs
    live = [w for w in Coordination(args.storage, args.study).workers() if worker_alive(w, ALIVE_S)]
    if live:
        raise UserInputError(
            f"{len(live)} worker(s) are still working on {args.study!r} ({', '.join(w['worker'] for w in live)}); stop them first"
        )
    trials = len(study.get_trials(deepcopy=False))
    what = f"study {args.study!r} ({trials} trials) and its {', '.join(t.what for t in SIDE_TABLES)}"
    if not args.yes:
        if not sys.stdin.isatty():
            raise UserInputError(f"this deletes {what}; pass --yes to delete without being asked")
        answer = input(f"delete {what}? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            err.print("nothing deleted")
            return 1
    optuna.delete_study(study_name=args.study, storage=open_storage(args.storage))
    removed = purge_side_tables(args.storage, args.study, "delete")
    # what search.start left for it: the log where that tool writes it (a sanitized name), and the pid file, which
    # would otherwise make a later search.status of a new study of this name report the old process
    job_log = log_path(args.study)
    for path, what in ((job_log, "background log"), (job_log.with_suffix(".pid"), "background pid file")):
        if path.is_file():
            path.unlink()
            removed.append(f"{what} {path}")
    out.print(f"deleted study {args.study!r} ({trials} trials)" + (f", {', '.join(removed)}" if removed else ""))
    return 0
