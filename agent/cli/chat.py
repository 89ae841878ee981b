"""``coevo chat``: an interactive session with the agent over the tools, or slash commands without an LLM.

The session's ``/search`` and ``/kb`` run ``coevo`` commands in this process. The chat package
sits below the CLI and never imports it: the CLI's entry point is handed in
(:func:`in_process` wraps it as the chat's :data:`agent.chat.command_line.CommandLine`).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from coevo.agent.chat.command_line import CliRun, CommandLine
from coevo.agent.chat.options import add_arguments as add_chat_arguments

if TYPE_CHECKING:
    from coevo.search.problem import Problem

JSON_LINES: dict[str, tuple[str, ...]] = {"kb": ("list", "export")}
"""Subcommands that print one JSON object per line (their value is a list, even of one), by command."""


def add_arguments(p: argparse.ArgumentParser, problem: type[Problem] | None) -> None:
    """Options of ``coevo chat`` (kept in agent.chat.options)."""
    add_chat_arguments(p)


def run(args: argparse.Namespace, *, main: Callable[[Sequence[str]], int]) -> int:
    """Run ``coevo chat``, its ``/search`` and ``/kb`` running ``coevo`` commands through ``main``.

    Args:
        args: the parsed ``coevo chat`` options.
        main: the CLI's entry point (``argv -> exit status``).
    """
    from coevo.agent.chat.repl import run as run_chat  # start-up time: the chat machinery loads for `coevo chat` only

    return run_chat(args, cli=in_process(main))


def in_process(main: Callable[[Sequence[str]], int]) -> CommandLine:
    """``main`` as the chat's command line: what a command prints on stdout is its result, not the terminal's.

    Args:
        main: the CLI's entry point (``argv -> exit status``).
    """

    def run(argv: Sequence[str]) -> CliRun:
        printed = io.StringIO()
        said = _Tee(sys.stderr)  # errors still reach the terminal, and the outcome can say what went wrong
        try:
            with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(said):  # rich consoles and print() alike
                code = main(list(argv))
        except SystemExit as exc:  # argparse printed the usage (on stderr); the session stays
            code = int(exc.code or 0) if isinstance(exc.code, int) else 2
        text = printed.getvalue()
        lines = len(argv) > 1 and argv[1] in JSON_LINES.get(argv[0], ())
        error = _failure_of(said.text()) if code else ""
        return CliRun(code, text, parse_printed(text, lines=lines), error)

    return run


def parse_printed(text: str, *, lines: bool = False) -> Any:
    """What a ``coevo`` command printed, as data: its JSON (a list of JSON lines when ``lines``), else the text itself.

    >>> parse_printed('{"a": 1}\\n'), parse_printed('{"a": 1}\\n', lines=True), parse_printed("a table")
    ({'a': 1}, [{'a': 1}], 'a table')
    """
    try:
        if lines:
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        return json.loads(text) if text.strip() else None
    except json.JSONDecodeError:
        return text


def _failure_of(stderr: str) -> str:
    """The line of a failed command's stderr that says what went wrong: its last ``error:`` line, else its last line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return next((line for line in reversed(lines) if "error:" in line), lines[-1] if lines else "")


class _Tee(io.TextIOBase):
    """A text stream that writes through to ``stream`` and keeps a copy."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._copy = io.StringIO()

    def write(self, text: str) -> int:
        self._copy.write(text)
        return int(self._stream.write(text))

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return bool(self._stream.isatty())

    def text(self) -> str:
        """What was written."""
        return self._copy.getvalue()
