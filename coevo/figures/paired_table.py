"""A paired comparison of two bench runs on the same seeds: per run group, mean HV ratio before and after, and the paired difference.

    python -m coevo.figures paired-table docs/bench/nb201/issue4-pelnas-cifar10.csv docs/bench/nb201/issue14-pelnas-cifar10.csv \
        --title "pelnas, cifar10, budget 300: before and after issue 14" --md issue14-pelnas-cifar10.md

Both files are ``runs.csv`` of ``coevo bench`` (one row per run). Runs are paired by run group
(the ``device`` column for NB201, or ``--group COLUMN``) and seed; the interval is a Student t
95 % interval of the paired differences (seeds as the unit), and the pooled row pairs every run.
The table is printed, and written to ``--md NAME`` in ``--out`` (docs/bench/nb201) when given. Nothing is
measured: ``--report-only`` is the same as a run.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from coevo.figures._common import command_line, figure_parser, read_csv, write_markdown
from coevo.search.stats import format_interval

NAME = "paired-table"


def _runs(path: Path, group: str, metric: str) -> dict[tuple[str, str], float]:
    return {(row[group], row["seed"]): float(row[metric]) for row in read_csv(path) if row[metric] not in ("", "None")}


def main(argv: list[str] | None = None) -> None:
    p = figure_parser(NAME, __doc__)
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    p.add_argument("--group", default="device", help="the run-group column (default: device)")
    p.add_argument("--metric", default="hv_ratio")
    p.add_argument("--title", default="paired comparison")
    p.add_argument("--md", default=None, help="write the Markdown to this file name in --out (default: print it only)")
    args = p.parse_args(argv)
    before, after = _runs(args.before, args.group, args.metric), _runs(args.after, args.group, args.metric)
    pairs = sorted(set(before) & set(after))
    groups = list(dict.fromkeys(g for g, _ in pairs))
    lines = [
        f"<!-- python -m coevo.figures paired-table {args.before} {args.after} --group {args.group} --metric {args.metric} -->",
        f"# {args.title}",
        "",
        f"{args.metric} per {args.group}, mean over seeds before and after, and the paired difference (after - before) with "
        "a Student t 95 % interval over seeds. An interval that contains 0 is no measurable change.",
        "",
        f"| {args.group} | seeds | before | after | paired difference |",
        "|---|---|---|---|---|",
    ]
    for g in groups:
        keys = [k for k in pairs if k[0] == g]
        diffs = [after[k] - before[k] for k in keys]
        lines.append(
            f"| {g} | {len(keys)} | {statistics.fmean(before[k] for k in keys):.4f} | {statistics.fmean(after[k] for k in keys):.4f} "
            f"| {format_interval(diffs)} |"
        )
    lines.append(f"| all | {len(pairs)} runs | | | {format_interval([after[k] - before[k] for k in pairs])} |")
    text = "\n".join(lines) + "\n"
    if args.md:
        text = write_markdown(args.out / args.md, text, command_line(NAME, argv))
    print(text, end="")
