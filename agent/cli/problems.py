"""``coevo problems``: the problems a search can run (built-in, installed, or a user's file), and their options."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from coevo.agent.cli._console import out
from coevo.agent.tables import Column, print_table
from coevo.search.strict_json import strict_dumps

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
    """What ``coevo problems describe NAME`` shows, as data: :func:`summary`, and the design variables and niches of an instance.

    Both need an instance (built with the problem's example options); where it cannot be built
    each says so in a ``(not shown: ...)`` string instead of its list.
    """
    from coevo.search.problems import make_problem, problem_class

    cls = problem_class(name)
    record = summary(name)
    try:
        instance = make_problem(name, dict(cls.example_options))
        record["design_variables"] = design_variables(instance)
        record["niches"] = [{"id": n.id, "description": n.description} for n in instance.niches()]
    except Exception as exc:  # describing must not need the problem to build (a missing cluster file, say)
        why = f"(not shown: building the problem with its example options failed: {exc})"
        record["design_variables"] = record["niches"] = why
    return record


def design_variables(problem: Problem) -> list[dict[str, Any]]:
    """The parameters a search chooses for ``problem`` (its :meth:`~coevo.search.problem.Problem.distributions`), as data.

    Each is ``{"name", "kind": "categorical", "levels": [...]}`` or ``{"name", "kind": "int"|"float",
    "low", "high", "step", "log"}`` (``step`` None: any value in the range); another kind of
    distribution is given by its Python form under ``"text"``.
    """
    return [_variable(name, dist) for name, dist in problem.distributions().items()]


def _variable(name: str, dist: Any) -> dict[str, Any]:
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    if isinstance(dist, CategoricalDistribution):
        return {"name": name, "kind": "categorical", "levels": list(dist.choices)}
    if isinstance(dist, IntDistribution | FloatDistribution):
        kind = "int" if isinstance(dist, IntDistribution) else "float"
        return {"name": name, "kind": kind, "low": dist.low, "high": dist.high, "step": dist.step, "log": dist.log}
    return {"name": name, "kind": type(dist).__name__, "text": repr(dist)}


def _values_text(variable: dict[str, Any]) -> str:
    """A variable's levels (``1, 2, 4``) or range (``2 to 16, step 2, log scale``), in words for the table."""
    if "levels" in variable:
        return ", ".join(map(str, variable["levels"]))
    if "low" not in variable:
        return str(variable["text"])
    step = variable["step"]
    parts = [f"{variable['low']} to {variable['high']}"]
    if step not in (None, 1):  # an int's step 1 is every integer: nothing to say
        parts.append(f"step {step}")
    if variable["log"]:
        parts.append("log scale")
    return ", ".join(parts)


def run(args: argparse.Namespace) -> int:
    """Run ``coevo problems list|describe``."""
    if args.problems_command == "describe":
        return _describe(args)
    return _list(args)


def _describe(args: argparse.Namespace) -> int:
    """``coevo problems describe NAME``: objectives, options, design variables, run group, exact front and niches."""
    record = describe(args.name)
    if args.json:
        print(strict_dumps(record))
        return 0
    out.print(f"[bold]{escape(record['name'])}[/] ({escape(record['class'])}): {escape(record['doc'])}", soft_wrap=True)
    _objectives_table(record)
    _options_table(record, args.name)
    _variables_table(record)
    out.print(f"run group (coevo bench --groups): {record['run_group'] or 'none'}; exact front: {'yes' if record['exact_front'] else 'no'}")
    if isinstance(record["niches"], list):
        out.print("niches: " + "; ".join(f"{n['id']} ({n['description']})" for n in record["niches"]), soft_wrap=True)
    else:
        out.print(f"niches: {record['niches']}", soft_wrap=True)
    return 0


def _list(args: argparse.Namespace) -> int:
    """``coevo problems list``: every built-in and installed problem, one row (or JSON line) each."""
    from coevo.search.problems import problem_names

    records = [summary(name) for name in problem_names()]
    if args.json:
        for r in records:
            print(strict_dumps(r))
        return 0
    rows = []
    for r in records:
        objectives = "; ".join(f"{o['name']} ({o['unit']}, {o['direction'][:3]}, {o['cost']})" for o in r["objectives"])
        rows.append([r["name"], objectives, ", ".join(o["name"] for o in r["options"]), "yes" if r["exact_front"] else "no"])
    columns = [Column("problem"), Column("objectives", text=True), Column("options", text=True), Column("exact front")]
    title = f"{len(records)} problems (coevo problems describe NAME for one, with its niches; --problem path/to/file.py:Class for yours)"
    print_table(out, title, columns, rows)
    return 0


def _options_table(record: dict[str, Any], name: str) -> None:
    rows = []
    for o in record["options"]:
        allowed = ", ".join(map(str, o["choices"])) if o["choices"] else ", ".join(f"{k} {v}" for k, v in (o["bounds"] or {}).items())
        rows.append([o["name"], o["type"], str(o["default"]), allowed, o["help"]])
    columns = [Column("option"), Column("type"), Column("default"), Column("allowed", text=True), Column("help", text=True)]
    print_table(out, f"options (coevo search --problem {name} --help shows them as flags)", columns, rows)


def _variables_table(record: dict[str, Any]) -> None:
    """The design variables: what a search chooses, with each one's levels or range."""
    variables = record["design_variables"]
    if not isinstance(variables, list):
        out.print(f"design variables: {variables}", soft_wrap=True)
        return
    rows = [[v["name"], v["kind"], _values_text(v)] for v in variables]
    title = f"design variables ({len(rows)}: what a search chooses; a design is one value of each)"
    print_table(out, title, [Column("variable"), Column("kind"), Column("levels or range", text=True)], rows)


def _objectives_table(record: dict[str, Any]) -> None:
    rows = []
    for o in record["objectives"]:
        depends = "all options" if o["depends_on"] is None else (", ".join(o["depends_on"]) or "no option")
        rows.append([o["name"], o["direction"], o["unit"], o["cost"], depends])
    columns = [Column("objective"), Column("direction"), Column("unit"), Column("cost"), Column("depends on", text=True)]
    print_table(out, "objectives (the first is maximised, the second minimised: the Pareto metrics' pair)", columns, rows)
