"""``coevo models``: the shared model zoo (list it, build a model), through the registry's ``models.*`` tools."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from rich.markup import escape

from coevo.agent.cli._console import out
from coevo.agent.tables import Column, print_table
from coevo.search.strict_json import strict_dumps

if TYPE_CHECKING:
    from coevo.search.problem import Problem


def add_arguments(p: argparse.ArgumentParser, problem: type[Problem] | None) -> None:
    """``coevo models list|build``."""
    sub = p.add_subparsers(dest="models_command", required=True, metavar="{list,build}")
    ls = sub.add_parser("list", help="name, task, parameters, metric and cache state of every zoo model")
    ls.add_argument("--json", action="store_true", help="print the list as JSON")
    b = sub.add_parser("build", help="train a zoo model and cache it (a second call loads it)")
    b.add_argument("name", help="zoo model name (see `coevo models list`)")
    b.add_argument("--rebuild", action="store_true", help="train again even if a cached copy exists")
    b.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace) -> int:
    """Run ``coevo models list|build``."""
    from coevo.agent.cli.tools import run_with_progress
    from coevo.tools import REGISTRY

    if args.models_command == "list":
        value = run_with_progress(REGISTRY.get("models.list"), "{}")["value"]
        if args.json:
            print(strict_dumps(value))
            return 0
        rows = []
        for m in value["models"]:
            base = m["baseline"]
            metric = "accuracy" if m["task"] == "classify" else "perplexity"
            unit = " %" if metric == "accuracy" else ""
            shown = f"{metric} {base[f'val_{metric}']:.4g}{unit} / {base[f'test_{metric}']:.4g}{unit}" if base else "-"
            cache = "not built" if not m["cached"] else "trained" if m["train_s"] is None else f"trained ({m['train_s']:.0f} s)"
            if m.get("weights"):
                cache += f", weights {m['weights']}"
            rows.append([m["name"], m["task"], f"{m['params']:,}", shown, cache, m["about"]])
        # the shared printer: names, sizes and the weights' fingerprint whole; the sentences wrap between words
        columns = [
            Column("name"),
            Column("task"),
            Column("params", justify="right"),
            Column("baseline (val / test)", text=True),
            Column("cache", text=True),
            Column("data", text=True),
        ]
        print_table(out, f"model zoo (cache: {value['cache_dir']})", columns, rows)
        return 0
    result = run_with_progress(REGISTRY.get("models.build"), json.dumps({"model": args.name, "rebuild": args.rebuild}))
    value = result["value"]
    if args.json:
        print(strict_dumps(result))
        return 0
    for note in result["messages"]:
        out.print(f"[yellow]note:[/] {escape(note)}", soft_wrap=True)
    base = ", ".join(f"{k} {v:.4g}" for k, v in value["baseline"].items())
    size = f"{value['params']:,} parameters"
    weights = f"; weights {value['weights']}" if value.get("weights") else ""
    how = value["how"].split(":")[0] if value["how"] in result["messages"] else value["how"]  # the note said why
    out.print(f"{value['name']}: {how} in {value['wall_s']:.1f} s; {size}; {base}{weights}; cached at {value['path']}")
    return 0
