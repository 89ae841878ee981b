"""The command line of :mod:`coevo.figures`: ``list``, ``index``, or a figure's name and its options."""

from __future__ import annotations

import difflib
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

from coevo.figures import FIGURES, Figure, get
from coevo.figures._index import INDEX_FILES, render_files

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


def _run(figure: Figure, argv: Sequence[str]) -> int:
    if figure.module is None:
        print(f"{figure.name} is written by a coevo command, not by a figure module: {figure.command}", file=sys.stderr)
        return 2
    if "--report-only" in argv and not figure.renders:
        why = figure.no_render or "it saves no data to re-render from"
        print(f"{figure.name} has no --report-only: {why}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"coevo.figures.{figure.module}")
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
