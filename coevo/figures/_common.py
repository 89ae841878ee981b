"""What every figure module shares: its output folder, its command line, provenance, CSV and markdown, intervals.

A figure module measures something, saves the data (CSV/JSON) beside its tables, and renders the
tables (markdown, PNG) from that saved data, so ``--report-only`` can re-render without measuring
again. This module holds the pieces they all need:

* :func:`figure_parser` -- an ``argparse`` parser with the two options every figure takes
  (``--out DIR``, default ``docs/bench/<topic>``; ``--report-only``).
* :func:`provenance` -- who wrote an output: the command line, git revision, machine load
  (``os.getloadavg``), thread count, date, Python and torch versions. :func:`write_markdown`
  puts it on the first line of every table (an HTML comment, invisible when rendered) and
  :func:`write_csv` records it for every data file in ``provenance.json`` beside the data.
* :func:`write_csv` / :func:`read_csv` -- one ``csv.DictWriter`` / ``csv.DictReader`` each.
* :func:`mean_std` / :func:`mean_interval` -- the two interval formats of the tables (the Student t
  interval is :func:`coevo.search.stats.t_interval`).
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import functools
import json
import math
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from coevo.figures import get
from coevo.search.stats import t_interval

__all__ = [
    "BENCH",
    "CHECKOUT",
    "PROVENANCE_FILE",
    "Output",
    "command_line",
    "figure_parser",
    "mean_interval",
    "mean_std",
    "out_dir",
    "plain_parser",
    "provenance",
    "provenance_comment",
    "read_csv",
    "read_numbers",
    "record_provenance",
    "strip_provenance",
    "t_interval",
    "write_csv",
    "write_markdown",
]

BENCH = Path("docs/bench")
"""Where figures go when ``--out`` is not given (relative to the working directory: run from the checkout's root)."""

CHECKOUT = Path(__file__).resolve().parents[2]
"""The folder that holds the ``coevo`` package (the checkout's root in a clone): put on ``PYTHONPATH`` of child processes."""

PROVENANCE_FILE = "provenance.json"
"""Name of the file, in each output folder, that maps every data file written there to its :func:`provenance`."""

_COMMENT = "<!-- provenance: "


def offline_search(args: Sequence[str], storage: str) -> dict[str, Any]:
    """``coevo search ARGS --storage STORAGE --json`` in a fresh process with the offline reasoner (no LLM endpoint
    set, whatever the caller's environment says); its JSON result. A failed search raises ``CalledProcessError``."""
    done = subprocess.run(
        [sys.executable, "-m", "coevo.agent.cli", *args, "--storage", storage, "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "COEVO_LLM_BASE_URL": "", "COEVO_LLM_MODEL": ""},
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def out_dir(topic: str) -> Path:
    """The default output folder of a figure of ``topic``: ``docs/bench/<topic>``."""
    return BENCH / topic


def command_line(name: str, argv: Sequence[str] | None) -> str:
    """The command a user types to run figure ``name`` with ``argv``: ``python -m coevo.figures NAME ARGS``.

    ``argv`` None stands for this process's own arguments (``sys.argv[1:]``), as ``argparse`` reads them.
    """
    return shlex.join(["python", "-m", "coevo.figures", name, *(sys.argv[1:] if argv is None else argv)])


def plain_parser(name: str, description: str | None = None) -> argparse.ArgumentParser:
    """A parser for figure ``name`` that writes no tables of its own (no ``--out``, no ``--report-only``)."""
    return argparse.ArgumentParser(
        prog=f"python -m coevo.figures {name}", description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def figure_parser(name: str, description: str | None = None) -> argparse.ArgumentParser:
    """A parser for figure ``name`` with ``--out`` (default ``docs/bench/<topic>``) and ``--report-only``.

    Args:
        name: the figure's name in :data:`coevo.figures.FIGURES`, whose topic names the default output folder.
        description: the ``--help`` text (usually the module docstring).
    """
    topic = get(name).topic
    parser = argparse.ArgumentParser(
        prog=f"python -m coevo.figures {name}", description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=out_dir(topic), help=f"output folder (default: {out_dir(topic)})")
    parser.add_argument("--report-only", action="store_true", help="re-render the tables from the saved data in --out; measure nothing")
    return parser


@functools.cache
def git_revision() -> str:
    """The commit the code ran from, ``-dirty`` when tracked code outside ``docs/`` differed from it.

    Measured once per process, at its first call: a figure's own outputs (under ``docs/``) would
    otherwise mark every file it writes after the first as dirty, and data under ``docs/`` is
    not code the result depends on.
    """
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, check=False)
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ":/", ":(top,exclude)docs"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
    except OSError:
        return "unknown"
    revision = head.stdout.strip()
    if not revision:
        return "unknown"
    return revision + ("-dirty" if changed.stdout.strip() else "")


def _threads() -> int:
    torch = sys.modules.get("torch")  # only when the figure uses torch: importing it here costs seconds
    return int(torch.get_num_threads()) if torch is not None else 1


def load_text() -> str:
    """The machine's load average (1, 5, 15 min) as ``"1.43 2.07 2.20"``, for a run's record of its machine."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def provenance(command: str) -> dict[str, Any]:
    """Who wrote an output, and on what: the facts a reader needs to judge (and rerun) a figure.

    Args:
        command: the command line that is writing the output (:func:`command_line`).

    Returns:
        ``command``, ``git`` (:func:`git_revision`), ``load`` (1, 5 and 15 min load averages),
        ``cpus``, ``threads`` (torch's intra-op threads, 1 when torch is not loaded), ``date`` (UTC, ISO 8601),
        ``python``, ``torch`` (its version, or ``None`` when the figure does not load it).
    """
    torch = sys.modules.get("torch")
    load = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else []
    return {
        "command": command,
        "git": git_revision(),
        "load": load,
        "cpus": os.cpu_count(),
        "threads": _threads(),
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "python": platform.python_version(),
        "torch": getattr(torch, "__version__", None) if torch is not None else None,
    }


def provenance_comment(prov: Mapping[str, Any]) -> str:
    """One markdown line (an HTML comment) that carries ``prov``."""
    # ">" escaped as JSON allows, so no "-->" inside can end the comment early
    return _COMMENT + json.dumps(dict(prov), sort_keys=True).replace(">", "\\u003e") + " -->"


def strip_provenance(text: str) -> str:
    """``text`` without the provenance line :func:`write_markdown` puts first (for comparing renders)."""
    first, _, rest = text.partition("\n")
    return rest if first.startswith(_COMMENT) else text


def write_markdown(path: Path, text: str, command: str) -> str:
    """Write ``text`` to ``path`` with the :func:`provenance` of ``command`` on its first line; returns what was written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = strip_provenance(text)
    written = provenance_comment(provenance(command)) + "\n" + body
    path.write_text(written)
    return written


def zoo_models_used() -> dict[str, str]:
    """The zoo models this process has loaded, label -> weights fingerprint (empty when it loaded none).

    Zoo training is seeded but not bit-identical across machines, so a data file records which
    trained weights its numbers came from (:func:`coevo.sim.zoo.used_models`).
    """
    registry = sys.modules.get("coevo.sim.zoo.registry")  # only when the figure loaded a model: no torch import here
    return dict(registry.used_models()) if registry is not None else {}


def record_provenance(path: Path, command: str) -> None:
    """Note in ``provenance.json`` beside ``path`` which command wrote ``path`` (data files carry no header of their own).

    The entry is :func:`provenance`'s, plus ``zoo_models`` (:func:`zoo_models_used`) when the process
    loaded zoo models before writing ``path``: every model it had loaded by then, not only the ones
    the file's rows used.
    """
    book = path.parent / PROVENANCE_FILE
    entries = json.loads(book.read_text()) if book.exists() else {}
    entry = provenance(command)
    models = zoo_models_used()
    if models:
        entry["zoo_models"] = models
    entries[path.name] = entry
    book.write_text(json.dumps(dict(sorted(entries.items())), indent=1) + "\n")


def write_csv(path: Path, rows: Sequence[Mapping[str, Any]], fields: Sequence[str] | None = None, *, command: str | None = None) -> None:
    """Write ``rows`` to ``path`` as CSV (a header, then one line per row).

    Args:
        path: the file; its folder is created.
        rows: the rows; with ``fields`` None the columns are the first row's keys, in order.
        fields: the columns, in order (rows missing one leave it empty).
        command: when given, the command line recorded for ``path`` in ``provenance.json`` (:func:`record_provenance`).
    """
    columns = list(fields) if fields is not None else list(rows[0])
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    if command is not None:
        record_provenance(path, command)


def splice_block(path: Path, marker: str, block: str) -> bool:
    """Replace what lies between ``<!-- marker -->`` and ``<!-- /marker -->`` in ``path`` with ``block``.

    A page without the markers is left alone with a line on stderr (a figure rerun into another
    folder may have no such page); returns whether the block was replaced.
    """
    pattern = re.compile(rf"(<!-- {re.escape(marker)} -->\n).*?(<!-- /{re.escape(marker)} -->)", re.S)
    text = path.read_text()
    if pattern.search(text) is None:
        print(f"{path}: no <!-- {marker} --> block, left alone", file=sys.stderr)
        return False
    path.write_text(pattern.sub(lambda m: m.group(1) + block + "\n" + m.group(2), text))
    return True


def read_csv(path: Path) -> list[dict[str, str]]:
    """The rows of the CSV file ``path``, as ``{column: text}``."""
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _number(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def read_numbers(path: Path) -> list[dict[str, Any]]:
    """:func:`read_csv` with every cell that reads as an int (else a float) converted: the rows as they were written."""
    return [{k: _number(v) for k, v in row.items()} for row in read_csv(path)]


_Key = TypeVar("_Key", bound=Hashable)
Number = TypeVar("Number", int, float)


def weighted_means(
    rows: Iterable[Mapping[str, Any]], group: Callable[[Mapping[str, Any]], _Key], fields: Sequence[str], weight: str
) -> dict[_Key, dict[str, float]]:
    """Per group of ``rows`` (``group(row)``, first-seen order), each of ``fields`` averaged with the rows' ``weight`` column.

    How the figures pool a seed's cross-validation folds: each fold weighs its test examples, so the
    pooled value is over every image once. A row whose ``weight`` is missing or empty weighs 1. Each
    group's total weight comes back under ``weight`` beside the means.
    """
    sums: dict[_Key, dict[str, float]] = {}
    totals: dict[_Key, float] = {}
    for r in rows:
        k, w = group(r), float(r.get(weight) or 1)
        acc = sums.setdefault(k, dict.fromkeys(fields, 0.0))
        for f in fields:
            acc[f] += float(r[f]) * w
        totals[k] = totals.get(k, 0.0) + w
    return {k: {f: v / totals[k] for f, v in acc.items()} | {weight: totals[k]} for k, acc in sums.items()}


def mean_std(values: Iterable[float], digits: int = 2, single: str | None = None) -> str:
    """``mean ± std`` over ``values`` (sample std), the value alone when there is one.

    Args:
        values: the numbers (seeds, runs).
        digits: decimals of both numbers.
        single: what to write for an empty sequence (``ValueError`` when None).
    """
    vals = list(values)
    if not vals:
        if single is None:
            raise ValueError("mean_std needs at least one value")
        return single
    if len(vals) == 1:
        return f"{vals[0]:.{digits}f}"
    return f"{statistics.mean(vals):.{digits}f} ± {statistics.stdev(vals):.{digits}f}"


def comma_list(text: str, flag: str, kind: Callable[[str], Number]) -> list[Number]:
    """Option ``flag``'s comma-separated values as ``kind`` (``int`` or ``float``), empty items skipped.

    Raises:
        UserInputError: a value ``kind`` cannot read; the message names ``flag`` and the text.
    """
    from coevo.sim.errors import UserInputError

    try:
        return [kind(x) for x in text.split(",") if x.strip()]
    except ValueError:
        what = "integers" if kind is int else "numbers"
        raise UserInputError(f"{flag} {text!r}: {what} joined by commas expected") from None


def mean_interval(values: Sequence[float], digits: int = 1, level: float = 0.95) -> str:
    """``mean ± half-width`` of the Student t interval over ``values``; the mean alone for one value."""
    mean, half = t_interval(values, level)
    return f"{mean:.{digits}f}" if math.isnan(half) else f"{mean:.{digits}f} ± {half:.{digits}f}"


@dataclass(frozen=True)
class Output:
    """Where a figure writes and which command is writing: all that its writers need, passed as one value.

    Attributes:
        folder: the output folder (``--out``).
        command: the command line writing it (:func:`command_line`), recorded with every file.
    """

    folder: Path
    command: str

    def path(self, name: str) -> Path:
        """``folder / name``."""
        return self.folder / name

    def write_csv(self, name: str, rows: Sequence[Mapping[str, Any]], fields: Sequence[str] | None = None) -> Path:
        """:func:`write_csv` to ``folder / name``, provenance recorded; returns the path."""
        write_csv(self.folder / name, rows, fields, command=self.command)
        return self.folder / name

    def read_csv(self, name: str) -> list[dict[str, str]]:
        """:func:`read_csv` of ``folder / name``."""
        return read_csv(self.folder / name)

    def write_markdown(self, name: str, text: str) -> str:
        """:func:`write_markdown` to ``folder / name``; returns what was written."""
        return write_markdown(self.folder / name, text, self.command)
