"""``coevo problems``: the problems a search can run (built-in, installed, or a user's file), and their options."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from rich.table import Table

from coevo.agent.cli._console import out

if TYPE_CHECKING:
    from coevo.search.problem import Problem


def add_arguments(p: argparse.ArgumentParser, problem: type[Problem] | None) -> None:
    """``coevo problems list`` and ``coevo problems describe NAME``."""
    sub = p.add_subparsers(dest="problems_command", required=True, metavar="{list,describe}")
    ls = sub.add_parser("list", help="every built-in and installed problem")
    ls.add_argument("--json", action="store_true", help="one JSON object per problem")
    d = sub.add_parser("describe", help="one problem: objectives, every option with type, default, bounds and help, niches")
    d.add_argument("name", help="a problem name, module:Class or path/to/file.py:Class")
    d.add_argument("--json", action="store_true")


def summary(name: str) -> dict[str, Any]:
    """What ``coevo problems list`` shows of one problem, as data: read from its class, nothing is built.

    Building a problem can train a model or load a simulator (torch, OR-Tools), so the niches,
    which need an instance, are left to :func:`describe`.
    """
    from coevo.search.problem import Problem
    from coevo.search.problems import describe_options, problem_class

    cls = problem_class(name)
    return {
        "name": cls.name,
        "class": f"{cls.__module__}:{cls.__qualname__}",
        "doc": (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else "",
        "objectives": [
            {"name": o.name, "direction": o.direction, "unit": o.unit, "cost": o.cost, "depends_on": o.depends_on} for o in cls.objectives
        ],
        "options": describe_options(cls),
        "run_group": cls.run_group,
        "exact_front": cls.reference is not Problem.reference,
        "noisy": cls.noisy,
    }


def describe(name: str) -> dict[str, Any]:
    """What ``coevo problems describe NAME`` shows, as data: :func:`summary` and the niches of an instance."""
    from coevo.search.problems import make_problem, problem_class

    cls = problem_class(name)
    record = summary(name)
    try:
        instance = make_problem(name, dict(cls.example_options))
        record["niches"] = [{"id": n.id, "description": n.description} for n in instance.niches()]
    except Exception as exc:  # describing must not need the problem to build (a missing cluster file, say)
        record["niches"] = f"(not shown: building the problem with its example options failed: {exc})"
    return record


def run(args: argparse.Namespace) -> int:
    """Run ``coevo problems list|describe``."""
    if args.problems_command == "describe":
        return _describe(args)
    return _list(args)


def _describe(args: argparse.Namespace) -> int:
    """``coevo problems describe NAME``: objectives, options, run group, exact front and niches."""
    record = describe(args.name)
    if args.json:
        print(json.dumps(record, default=str))
        return 0
    out.print(f"[bold]{record['name']}[/] ({record['class']}): {record['doc']}")
    _objectives_table(record)
    _options_table(record, args.name)
    out.print(f"run group (coevo bench --groups): {record['run_group'] or 'none'}; exact front: {'yes' if record['exact_front'] else 'no'}")
    if isinstance(record["niches"], list):
        out.print("niches: " + "; ".join(f"{n['id']} ({n['description']})" for n in record["niches"]), soft_wrap=True)
    else:
        out.print(f"niches: {record['niches']}")
    return 0


def _list(args: argparse.Namespace) -> int:
    """``coevo problems list``: every built-in and installed problem, one row (or JSON line) each."""
    from coevo.search.problems import problem_names

    records = [summary(name) for name in problem_names()]
    if args.json:
        for r in records:
            print(json.dumps(r, default=str))
        return 0
    table = Table(
        title=f"{len(records)} problems (coevo problems describe NAME for one, with its niches; --problem path/to/file.py:Class for yours)"
    )
    for col in ("problem", "objectives", "options", "exact front"):
        table.add_column(col, overflow="fold")
    for r in records:
        objectives = "; ".join(f"{o['name']} ({o['unit']}, {o['direction'][:3]}, {o['cost']})" for o in r["objectives"])
        table.add_row(r["name"], objectives, ", ".join(o["name"] for o in r["options"]), "yes" if r["exact_front"] else "no")
    out.print(table)
    return 0


def _options_table(record: dict[str, Any], name: str) -> None:
    options = Table(title=f"options (coevo search --problem {name} --help shows them as flags)")
    for col in ("option", "type", "default", "allowed", "help"):
        options.add_column(col, overflow="fold")
    for o in record["options"]:
        allowed = ", ".join(map(str, o["choices"])) if o["choices"] else ", ".join(f"{k} {v}" for k, v in (o["bounds"] or {}).items())
        options.add_row(o["name"], o["type"], str(o["default"]), allowed, o["help"])
    out.print(options)


def _objectives_table(record: dict[str, Any]) -> None:
    table = Table(title="objectives (the first is maximised, the second minimised: the Pareto metrics' pair)")
    for col in ("objective", "direction", "unit", "cost", "depends on"):
        table.add_column(col)
    for o in record["objectives"]:
        depends = "all options" if o["depends_on"] is None else (", ".join(o["depends_on"]) or "no option")
        table.add_row(o["name"], o["direction"], o["unit"], o["cost"], depends)
    out.print(table)
