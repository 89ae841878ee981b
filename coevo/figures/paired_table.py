"""A paired comparison of two bench runs on the same seeds: per run group, mean HV ratio before and after, and the paired difference.

    python scripts/paired_table.py docs/bench/issue4-pelnas-cifar10.csv docs/bench/issue14-pelnas-cifar10.csv \
        --title "pelnas, cifar10, budget 300: before and after issue 14" --out docs/bench/issue14-pelnas-cifar10.md

Both files are ``runs.csv`` of ``coevo bench`` (one row per run). Runs are paired by run group
(the ``device`` column for NB201, or ``--group COLUMN``) and seed; the interval is a Student t
95 % interval of the paired differences (seeds as the unit), and the pooled row pairs every run.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coevo.search.stats import format_interval


def _runs(path: Path, group: str, metric: str) -> dict[tuple[str, str], float]:
    with path.open() as fh:
        return {(row[group], row["seed"]): float(row[metric]) for row in csv.DictReader(fh) if row[metric] not in ("", "None")}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    p.add_argument("--group", default="device", help="the run-group column (default: device)")
    p.add_argument("--metric", default="hv_ratio")
    p.add_argument("--title", default="paired comparison")
    p.add_argument("--out", type=Path, default=None, help="write the Markdown here (default: print it)")
    args = p.parse_args()
    before, after = _runs(args.before, args.group, args.metric), _runs(args.after, args.group, args.metric)
    pairs = sorted(set(before) & set(after))
    groups = list(dict.fromkeys(g for g, _ in pairs))
    lines = [
        f"<!-- python scripts/paired_table.py {args.before} {args.after} --group {args.group} --metric {args.metric} -->",
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
    if args.out:
        args.out.write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
