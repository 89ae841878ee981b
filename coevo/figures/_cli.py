"""The command line of :mod:`coevo.figures`: ``list``, ``index``, or a figure's name and its options."""

from __future__ import annotations

import contextlib
import difflib
import importlib
import io
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from coevo.figures import FIGURES, Figure, get
from coevo.figures._common import command_line, out_dir, write_markdown
from coevo.figures._index import INDEX_FILES, render_files
from coevo.sim.errors import UserInputError

USAGE = """\
usage: python -m coevo.figures list                       the figures: name, topic, what each measures
       python -m coevo.figures index [--check]            write docs/benchmarks.md and docs/bench/README.md from the registry
                                                          (--check: only say whether the committed ones are current)
       python -m coevo.figures NAME [--out DIR] [--report-only] [options]
                                                          run figure NAME (outputs in docs/bench/<topic>/ unless --out);
                                                          --report-only re-renders its tables from the saved data
       python -m coevo.figures NAME --help                the options of NAME
"""


def _list() -> int:
    width, topic = max(len(f.name) for f in FIGURES), max(len(f.topic) for f in FIGURES)
    for f in FIGURES:
        how = "module, --report-only" if f.renders else ("module" if f.module else "coevo command")
        print(f"{f.name:<{width}}  {f.topic:<{topic}}  {how:<21}  {f.measures}")
    return 0


def _index(argv: Sequence[str], root: Path = Path()) -> int:
    check = "--check" in argv
    stale = []
    for rel, text in render_files().items():
        path = root / rel
        if check:
            if not path.exists() or path.read_text() != text:
                stale.append(rel)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {rel}")
    if stale:
        print("not current (run `python -m coevo.figures index`): " + ", ".join(stale), file=sys.stderr)
        return 1
    if check:
        print("current: " + ", ".join(INDEX_FILES))
    return 0


class _Tee(io.TextIOBase):
    """A text stream that writes to several: the terminal and the buffer a printing figure's page is made from."""

    def __init__(self, *streams: TextIO) -> None:
        self._streams = streams

    def write(self, text: str) -> int:
        for stream in self._streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        for stream in self._streams:
            stream.flush()


def _take_out(argv: Sequence[str]) -> tuple[list[str], Path | None]:
    """``argv`` without ``--out DIR`` / ``--out=DIR``, and DIR (None when not given): a printing figure's module has no --out."""
    args, out = list(argv), None
    for i, arg in enumerate(args):
        if arg.startswith("--out="):
            if not arg.removeprefix("--out="):  # Path("") is the current folder: a page would land there unasked
                raise UserInputError("--out needs a folder: --out DIR")
            return args[:i] + args[i + 1 :], Path(arg.removeprefix("--out="))
        if arg == "--out":
            if i + 1 == len(args) or args[i + 1].startswith("-"):
                raise UserInputError("--out needs a folder: --out DIR")
            return args[:i] + args[i + 2 :], Path(args[i + 1])
    return args, out


def _run_printing(figure: Figure, module_main: Callable[[list[str]], int | None], argv: Sequence[str]) -> int:
    """Run a figure that prints its report, and save what it printed to its page (only when it succeeds)."""
    try:
        args, out = _take_out(argv)
    except UserInputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    command = command_line(figure.name, argv)
    printed = io.StringIO()
    with contextlib.redirect_stdout(_Tee(sys.stdout, printed)):
        rc = int(module_main(args) or 0)
    if rc == 0:
        page = (out or out_dir(figure.topic)) / figure.outputs[0]
        body = f"# {figure.measures}\n\nWhat `{command}` printed (the figure prints its report; the runner saves it here).\n\n"
        write_markdown(page, body + f"```text\n{printed.getvalue().rstrip()}\n```\n", command)
        print(f"wrote {page}")
    return rc


def _run(figure: Figure, argv: Sequence[str]) -> int:
    if figure.module is None:
        print(f"{figure.name} is written by a coevo command, not by a figure module: {figure.command}", file=sys.stderr)
        return 2
    if "--report-only" in argv and not figure.renders:
        why = figure.no_render or "it saves no data to re-render from"
        print(f"{figure.name} has no --report-only: {why}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"coevo.figures.{figure.module}")
    if figure.prints:
        return _run_printing(figure, module.main, argv)
    rc = module.main(list(argv))
    return int(rc or 0)


def main(argv: Sequence[str]) -> int:
    """Run the command line ``argv`` (without the program name); returns the exit status."""
    args = list(argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name == "list":
        return _list()
    if name == "index":
        return _index(rest)
    try:
        figure = get(name)
    except KeyError:
        close = difflib.get_close_matches(name, [f.name for f in FIGURES], n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        print(f"unknown figure {name!r}{hint}; `python -m coevo.figures list` names them all", file=sys.stderr)
        return 2
    return _run(figure, rest)
