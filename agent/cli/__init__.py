"""The ``coevo`` command line: a table of commands, one module per command.

User errors (:class:`search.errors.CoevoError`) print one line on stderr and exit 2, with
no traceback; so does a database fault that reaches the top (:func:`search.db_errors.classify`
names it: corrupt, read-only, refused, no reply, ...). Ctrl-C exits 130 and says how to resume.

Commands that take a problem (``search``, ``bench``, ``kb``) get one flag per option of
the problem named by ``--problem`` (the default when none), generated from the problem's
declaration; the command line is peeked for ``--problem`` before the parser is built.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from contextlib import suppress

import optuna

from coevo.agent.cli import bench, chat, kb, models, problems, proxies, runs, search, tools, worker
from coevo.agent.cli._common import Command, err, peek_problem
from coevo.search.db_errors import classify
from coevo.search.errors import CoevoError
from coevo.search.problem import Problem

COMMANDS: dict[str, Command] = {
    "chat": Command(chat.HELP, chat.add_arguments, lambda args: chat.run(args, main=main)),  # /search, /kb run coevo commands
    "search": Command(search.HELP, search.add_arguments, search.run),
    "worker": Command(worker.HELP, worker.add_arguments, worker.run),
    "runs": Command(runs.HELP, runs.add_arguments, runs.run),
    "bench": Command(bench.HELP, bench.add_arguments, bench.run),
    "problems": Command(problems.HELP, problems.add_arguments, problems.run),
    "tools": Command(tools.HELP, tools.add_arguments, tools.run),
    "kb": Command(kb.HELP, kb.add_arguments, kb.run),
    "proxies": Command(proxies.HELP, proxies.add_arguments, proxies.run),
    "models": Command(models.HELP, models.add_arguments, models.run),
}
"""The table of commands: adding a command is adding a module and an entry."""

TAKES_PROBLEM = ("search", "bench", "kb")


def build_parser(problem: type[Problem] | None = None) -> argparse.ArgumentParser:
    """The argument parser for every command in :data:`COMMANDS` (with ``problem``'s option flags where they apply)."""
    parser = argparse.ArgumentParser(prog="coevo", description="LLM-agent driven, hardware-aware design search.")
    parser.add_argument("--version", action="version", version=f"coevo {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{" + ",".join(COMMANDS) + "}")
    for name, command in COMMANDS.items():
        command.add_arguments(sub.add_parser(name, help=command.help, description=command.help), problem if name in TAKES_PROBLEM else None)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("coevo")
    except PackageNotFoundError:  # run from a checkout that is not installed
        return "unknown (not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``coevo`` console script.

    Exit status: 0 done; 2 an error in what was asked (one line on stderr, no traceback);
    130 interrupted (rerun to resume); 141 the reader of stdout went away (``| head``), quietly.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    args: argparse.Namespace | None = None
    try:
        problem = _problem_of(argv)
        args = build_parser(problem).parse_args(argv)
        return COMMANDS[args.command].run(args)
    except CoevoError as exc:
        err.print(f"[red]error:[/] {exc}", soft_wrap=True)
        return 2
    except KeyboardInterrupt:
        err.print("interrupted; rerun the same command to resume from storage")
        return 130
    except BrokenPipeError:
        # stdout's reader closed early: say nothing, and keep Python from complaining while it
        # flushes stdout at exit (as a Unix tool killed by SIGPIPE, status 128 + 13)
        with suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:  # after BrokenPipeError, an OSError that is no database's
        # a database fault no command caught (a corrupt page read mid-command, a server gone): one line, not a traceback
        fault = classify(exc, getattr(args, "storage", None))
        if fault is None:
            raise
        err.print(f"[red]error:[/] {fault.reason}", soft_wrap=True)
        return 2


def _problem_of(argv: Sequence[str]) -> type[Problem] | None:
    """The problem class whose options the command line may carry (loaded now, so its flags can be built)."""
    command = next((a for a in argv if not a.startswith("-")), None)
    if command not in TAKES_PROBLEM:
        return None
    from coevo.search.problems import problem_class

    return problem_class(peek_problem(argv))


if __name__ == "__main__":
    sys.exit(main())
