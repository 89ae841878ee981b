"""The ``coevo`` command line: a table of commands, one module per command.

User errors (:class:`search.errors.CoevoError`) print one line on stderr and exit 2, with
no traceback; so does a database fault that reaches the top (:func:`search.db_errors.classify`
names it: corrupt, read-only, refused, no reply, ...); so does a malformed command line (one
line naming the flag, and a hint to run ``--help``, not argparse's usage block). With
``--json`` the error also goes to stdout as one JSON object (:mod:`agent.json_output`). Ctrl-C
exits 130, saying how to resume where the command resumes (:data:`RESUMES`).

Commands that take a problem (``search``, ``bench``, ``kb``) get one flag per option of
the problem named by ``--problem`` (the default when none), generated from the problem's
declaration; the command line is peeked for ``--problem`` before the parser is built.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, NoReturn

from coevo.search.errors import CoevoError

if TYPE_CHECKING:
    from rich.console import Console

    from coevo.search.problem import Problem


@dataclass(frozen=True)
class Command:
    """One CLI command: its help line and the module (``add_arguments(parser, problem)``, ``run(args)``) that implements it.

    The module is imported when its command is parsed or run, never at start-up: ``coevo
    problems list`` must not pay for the imports of ``coevo search`` (start-up time).
    """

    help: str
    module: str

    def load(self) -> ModuleType:
        """The command's module (imported on first use)."""
        return importlib.import_module(self.module)


COMMANDS: dict[str, Command] = {
    "chat": Command("interactive session: questions to an LLM agent over the tools, or slash commands", "coevo.agent.cli.chat"),
    "search": Command("run or resume one search", "coevo.agent.cli.search"),
    "worker": Command("join a search on shared storage and evaluate until its budget is done", "coevo.agent.cli.worker"),
    "runs": Command("searches in a storage: progress, workers alive, HV so far; delete one", "coevo.agent.cli.runs"),
    "bench": Command("proposers x run groups (NB201: devices) x seeds, with tables and plots", "coevo.agent.cli.bench"),
    "problems": Command("problems a search can run: name, objectives (unit, direction, cost), options, niches", "coevo.agent.cli.problems"),
    "tools": Command("list, describe and run registered tools", "coevo.agent.cli.tools"),
    "kb": Command("knowledge bases: list, show, accept, reject, export, import, report, ablate", "coevo.agent.cli.kb"),
    "proxies": Command("zero-cost proxy quality (Spearman rho) and CPU cost on random NB201 cells", "coevo.agent.cli.proxies"),
    "models": Command("the model zoo: list models and their cache state, build one (train and cache it)", "coevo.agent.cli.models"),
}
"""The table of commands: adding a command is adding a module and an entry."""

TAKES_PROBLEM = ("search", "bench", "kb")

RESUMES = ("search", "worker", "bench")
"""Commands that pick up from storage where an interrupted run stopped: only their Ctrl-C message says to rerun."""


class ArgumentsError(SystemExit):
    """A command line argparse refused: the parser's ``prog`` (``coevo search``) and argparse's message.

    A :class:`SystemExit` with status 2, as argparse's own error is, for callers of
    :func:`build_parser` outside :func:`main`; :func:`main` reports it in one line.
    """

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(2)
        self.prog = prog
        self.message = message


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose errors go to :func:`main` to be said in one line.

    argparse itself prints the whole usage first: 13 lines for ``search``, the error last.
    """

    def error(self, message: str) -> NoReturn:
        raise ArgumentsError(self.prog, message)


def build_parser(problem: type[Problem] | None = None, *, command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser for :data:`COMMANDS` (with ``problem``'s option flags where they apply).

    Args:
        problem: the problem whose options become flags of the commands that take one.
        command: build only this command's arguments (the others are listed, with their help
            line, and take none): what :func:`main` does, so one command's modules load. None:
            every command's.
    """
    parser = _Parser(prog="coevo", description="LLM-agent driven, hardware-aware design search.")
    parser.add_argument("--version", action="version", version=f"coevo {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{" + ",".join(COMMANDS) + "}")
    for name, entry in COMMANDS.items():
        p = sub.add_parser(name, help=entry.help, description=entry.help)
        if command is None or name == command:
            entry.load().add_arguments(p, problem if name in TAKES_PROBLEM else None)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("coevo")
    except PackageNotFoundError:  # run from a checkout that is not installed
        return "unknown (not installed)"


_started: list[float] = []
"""When each running :func:`main` began (its :func:`time.perf_counter` reading), innermost last."""


def command_started() -> float | None:
    """When the running command began (:func:`main`'s start: loading the problem and parsing count), None outside :func:`main`.

    What a result's wall time counts from; the interpreter's own start-up before it (about 0.1 s)
    is not counted.
    """
    return _started[-1] if _started else None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``coevo`` console script.

    Exit status: 0 done; 2 an error in what was asked (one line on stderr, no traceback; with
    ``--json`` also one JSON object on stdout); 130 interrupted; 141 the reader of stdout went
    away (``| head``), quietly.
    """
    from coevo.sim.zoo.cache_files import install_note_format  # torch-free

    install_note_format()  # a rebuilt cache file nobody collects is one 'note:' line on stderr
    _started.append(time.perf_counter())  # a stack: chat's commands run through main inside main
    try:
        code = _main(list(sys.argv[1:] if argv is None else argv))
    finally:
        _started.pop()
    if argv is None:  # the process's own command (not a call from chat or a test): it ends here
        _end_past_abandoned_evaluations(code)
    return code


def _end_past_abandoned_evaluations(code: int) -> None:
    """End the process at once when an evaluation the worker abandoned (a stop, a deadline) still runs in its thread.

    Python's shutdown would stop that daemon thread wherever it is; inside torch's C++ that aborts the process
    (``terminate called without an active exception``, status 134) after the run's last line was written. Its
    result is dropped anyway, and everything worth keeping is in storage: flush what was printed and leave.
    """
    workers = sys.modules.get("coevo.search.workers")  # never imported: no evaluation ran in this process
    if workers is None or not any(t.is_alive() and t.name == workers.EVALUATION_THREAD for t in threading.enumerate()):
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _main(argv: list[str]) -> int:
    args: argparse.Namespace | None = None
    command = _command_of(argv)
    try:
        if command is not None and command not in RUNS_NO_STUDY:
            _quiet_optuna()
        problem = _problem_of(command, argv)
        args = build_parser(problem, command=command).parse_args(argv)
        return _run(args)
    except ArgumentsError as exc:
        # words no parser knew are reported by the top one ("coevo"): name the command they were given to
        prog = f"coevo {command}" if exc.prog == "coevo" and command is not None else exc.prog
        _err().print(f"{prog}: error: {exc.message}", soft_wrap=True, markup=False)
        _err().print(f"run '{prog} --help' for its arguments", markup=False)
        return _json_error(f"{prog}: {exc.message}", 2, args, argv)
    except CoevoError as exc:
        _err().print(_error_line(str(exc)), soft_wrap=True)
        return _json_error(str(exc), 2, args, argv)
    except KeyboardInterrupt:
        resumes = args is not None and args.command in RESUMES
        said = "interrupted; rerun the same command to resume from storage" if resumes else "interrupted"
        _err().print(said)
        return _json_error(said, 130, args, argv)
    except BrokenPipeError:
        # stdout's reader closed early: say nothing, and keep Python from complaining while it
        # flushes stdout at exit (as a Unix tool killed by SIGPIPE, status 128 + 13)
        from coevo.agent.console import silence

        silence(sys.stdout)
        return 141
    except Exception as exc:  # after BrokenPipeError, an OSError that is no database's
        # a database fault no command caught (a corrupt page read mid-command, a server gone): one line, not a traceback
        from coevo.search.db_errors import classify

        fault = classify(exc, getattr(args, "storage", None))
        if fault is None:
            raise
        _err().print(_error_line(fault.reason), soft_wrap=True)
        return _json_error(fault.reason, 2, args, argv)


def _json_error(message: str, code: int, args: argparse.Namespace | None, argv: Sequence[str]) -> int:
    """With ``--json``, the error as the one JSON object on stdout a script reads (the line on stderr is for people); returns ``code``.

    Before the command line is parsed (argparse refused it), ``--json`` among its words counts.
    """
    as_json = bool(getattr(args, "json", False)) if args is not None else "--json" in argv
    if as_json:
        from coevo.agent.json_output import error_fields, print_object

        print_object(error_fields(message, code))
    return code


def _run(args: argparse.Namespace) -> int:
    module = COMMANDS[args.command].load()
    run: Callable[..., int] = module.run
    if args.command == "chat":  # the session's /search and /kb run coevo commands through this entry point
        return run(args, main=main)
    return run(args)


def _command_of(argv: Sequence[str]) -> str | None:
    """The command a command line names (its first word that is not an option), None if it names none of :data:`COMMANDS`."""
    command = next((a for a in argv if not a.startswith("-")), None)
    return command if command in COMMANDS else None


RUNS_NO_STUDY = frozenset({"problems", "models"})
"""Commands that never open a study, so never load optuna (~0.6 s of their start-up): listing and describing problems
reads their classes and design spaces; the model zoo trains with torch alone."""


def _quiet_optuna() -> None:
    """Optuna's INFO lines (one per trial) off, for every command that may run trials (:data:`RUNS_NO_STUDY` never do)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)


def _error_line(message: str) -> str:
    """``error: MESSAGE`` in the console's markup, the message escaped: its [brackets] (``[nan]``, a list of names) are text."""
    from rich.markup import escape

    return f"[red]error:[/] {escape(message)}"


def _err() -> Console:
    from coevo.agent.cli._console import err

    return err


def _problem_of(command: str | None, argv: Sequence[str]) -> type[Problem] | None:
    """The problem class whose options the command line may carry (loaded now, so its flags can be built)."""
    if command not in TAKES_PROBLEM:
        return None
    from coevo.agent.cli._common import peek_problem
    from coevo.search.problems import problem_class

    return problem_class(peek_problem(argv))


if __name__ == "__main__":
    sys.exit(main())
