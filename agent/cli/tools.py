"""``coevo tools``: list, describe and run the registered tools (the same registry chat and search use)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from coevo.agent.cli._console import out
from coevo.agent.tables import Column, print_table, render_value

if TYPE_CHECKING:
    from coevo.search.problem import Problem
    from coevo.tools import Tool


def add_arguments(p: argparse.ArgumentParser, problem: type[Problem] | None) -> None:
    """``coevo tools list|describe|run``."""
    sub = p.add_subparsers(dest="tools_command", required=True, metavar="{list,describe,run}")
    ls = sub.add_parser("list", help="list the registered tools")
    ls.add_argument("--json", action="store_true")
    d = sub.add_parser("describe", help="a tool's description and argument schema")
    d.add_argument("name")
    r = sub.add_parser("run", help="run a tool with JSON arguments")
    r.add_argument("name")
    r.add_argument("--args", default="{}", help="arguments as a JSON object")
    r.add_argument(
        "--json",
        action="store_true",
        help="print strict JSON (no NaN: null with a <key>_note reason; floats to 7 significant digits); "
        "the default on a terminal is a compact rendering, and piped output is this JSON",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``coevo tools list|describe|run``."""
    from coevo.tools import REGISTRY, llm_name

    if args.tools_command == "list":
        if args.json:
            print(
                json.dumps(
                    [
                        {"name": t.name, "llm_name": llm_name(t.name), "description": t.description, "long_running": t.long_running}
                        for t in REGISTRY
                    ]
                )
            )
            return 0
        print_table(
            out, f"{len(REGISTRY)} tools", [Column("name"), Column("description", text=True)], [[t.name, t.description] for t in REGISTRY]
        )
        return 0
    tool = REGISTRY.get(args.name)
    if args.tools_command == "describe":
        print(
            json.dumps(
                {
                    "name": tool.name,
                    "llm_name": llm_name(tool.name),
                    "description": tool.description,
                    "long_running": tool.long_running,
                    "example": tool.example,
                    "schema": tool.schema(),
                },
                indent=2,
            )
        )
        return 0
    from coevo.tools import ToolResult

    result = ToolResult.model_validate(run_with_progress(tool, args.args))
    if args.json or not sys.stdout.isatty():  # for machines (and for pipes): strict JSON
        print(result.to_strict_json())
        return 0
    render_value(out, result.value, notes=result.messages)  # for people: the rendering chat's /run shows
    for m in result.messages:
        out.print(f"note: {m}", style="dim", markup=False, soft_wrap=True)
    return 0


def run_with_progress(tool: Tool, raw_args: str) -> dict[str, Any]:
    """Run ``tool`` on JSON arguments from the command line; a long-running one shows its progress on stderr.

    A bar on a terminal, plain lines every few seconds otherwise (:class:`agent.cli._progress.Reporter`),
    with whatever the tool reports (a zoo model's first-use training announces itself with an estimate).
    """
    from coevo.agent.cli._progress import Reporter
    from coevo.tools.adapters import run_from_cli

    if not tool.long_running:
        return run_from_cli(tool, raw_args)
    with Reporter() as reporter, reporter.listening(), reporter.phase(f"tool {tool.name}"):
        return run_from_cli(tool, raw_args)
