"""``design.explain``: one design of a study, part by part, with its objective values and their units.

A composed problem (:class:`~search.compose.ComposedProblem`, e.g. ``nb201-accel``) is explained
through its part structure, never by name: each part's own design and parameters (the cell's six
edges, the accelerator's rows, columns, dataflow, buffers and clock), and what the part's stage
handed on along the chain (the network's operand bits; the accelerator's latency, energy split and
area). Any other problem is one part, its own. The objective values are the study's when the
design was evaluated there; otherwise the cheap ones are computed (free) and the expensive ones
are left unknown: explaining a design never pays for an evaluation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from pydantic import Field

from coevo.search.compose import ComposedProblem
from coevo.search.errors import UserInputError
from coevo.search.problem import Evolvable, Problem
from coevo.search.proposers import Evaluation
from coevo.search.storage import DEFAULT_STORAGE
from coevo.search.study import evaluations_from_study, open_stored_study, reopen
from coevo.tools._base import Tool, ToolArgs, ToolResult
from coevo.tools.studies import READS_STORAGE, StudyArgs, study_code

EXAMPLE_ARCH = "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|"


class ExplainArgs(ToolArgs):
    study: str = Field(..., description="study name (see studies.list; search.start returns it)")
    storage: str | None = Field(None, description=f"Optuna storage URL; default {DEFAULT_STORAGE}")
    design: str | None = Field(None, description="the design as study.front writes it (give this or trial)")
    trial: int | None = Field(None, ge=0, description="the trial number of an evaluated design (give this or design)")


def handed_on(value: Any, prefix: str = "") -> dict[str, Any]:
    """What a part's stage handed on, as flat fields: a dataclass's scalar fields, nested ones with dotted names.

    A sequence field is given by its length (``layers_count``): a network's every layer shape
    would bury the explanation. A value that is no dataclass is given as it is when scalar, else by its type.

    >>> @dataclasses.dataclass
    ... class Cost:
    ...     latency_ms: float
    ...     cycles: int
    >>> @dataclasses.dataclass
    ... class Result:
    ...     cost: Cost
    ...     area_mm2: float
    ...     layers: tuple[int, ...]
    >>> handed_on(Result(Cost(1.5, 300), 2.0, (1, 2, 3)))
    {'cost.latency_ms': 1.5, 'cost.cycles': 300, 'area_mm2': 2.0, 'layers_count': 3}
    """
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        if value is None or isinstance(value, bool | int | float | str):
            return {prefix.rstrip(".") or "value": value}
        return {prefix.rstrip(".") or "type": type(value).__name__}
    out: dict[str, Any] = {}
    for f in dataclasses.fields(value):
        inner = getattr(value, f.name)
        name = prefix + f.name
        if dataclasses.is_dataclass(inner) and not isinstance(inner, type):
            out.update(handed_on(inner, name + "."))
        elif isinstance(inner, bool | int | float | str):
            out[name] = inner
        elif isinstance(inner, Sequence):
            out[f"{name}_count"] = len(inner)
    return out


def _part_row(key: str, problem: Problem, point: Any, output: Any, chained: bool) -> dict[str, Any]:
    row: dict[str, Any] = {
        "part": key,
        "problem": problem.name,
        "label": problem.design_label,
        "design": problem.describe(point),
        "parameters": problem.to_params(point),
    }
    if chained:
        row["handed_on"] = handed_on(output)
    return row


def explain_parts(problem: Problem, point: Any) -> list[dict[str, Any]]:
    """One row per part of ``point``: its problem, design, parameters and (composed problems) what its stage handed on."""
    if not isinstance(problem, ComposedProblem):
        return [_part_row(problem.name, problem, point, None, chained=False)]
    outputs = problem.chain(point)
    return [
        _part_row(part.key, part.problem, problem.subpoint(point, part.key), outputs.get(part.key), chained=part.stage is not None)
        for part in problem.part_list
    ]


def objective_rows(problem: Problem, point: Any, evaluated: Evaluation | None) -> list[dict[str, Any]]:
    """Every objective of ``point`` with its unit, direction, cost, value and where the value comes from.

    An evaluated design's values are the study's; another's cheap values are computed now (free)
    and its expensive ones are None: explaining a design pays for nothing.
    """
    if evaluated is not None:
        source = f"trial {evaluated.trial_number}" + (" (paid)" if evaluated.query else " (not paid: predicted or transferred)")
        values: Mapping[str, float | None] = evaluated.values
        sources = dict.fromkeys(values, source)
    else:
        cheap = problem.cheap_values([point]) if isinstance(problem, Evolvable) else {}
        values = {name: float(v[0]) for name, v in cheap.items()}
        sources = dict.fromkeys(values, "computed now (cheap: free)")
    return [
        {
            "objective": o.name,
            "value": values.get(o.name),
            "unit": o.unit,
            "direction": o.direction,
            "cost": o.cost,
            "source": sources.get(o.name, "not known: it costs an evaluation, and this design has none in the study"),
        }
        for o in problem.objectives
    ]


def _find(problem: Problem, evaluations: list[Evaluation], args: ExplainArgs) -> tuple[Any, Evaluation | None]:
    """The design ``args`` names and its evaluation in the study (None: it has none)."""
    if (args.design is None) == (args.trial is None):
        raise UserInputError("give either design (as study.front writes it) or trial (a trial number), not both or neither")
    if args.trial is not None:
        found = [e for e in evaluations if e.trial_number == args.trial]
        if not found:
            numbers = ", ".join(str(e.trial_number) for e in evaluations[:20]) or "none"
            raise UserInputError(f"trial {args.trial} is no completed evaluation of the study (evaluated trials: {numbers})")
        return found[0].point, found[0]
    point = problem.parse_design(str(args.design))
    point_id = problem.point_id(point)
    same = [e for e in evaluations if e.point_id == point_id]
    return point, (same[-1] if same else None)


class DesignExplain(Tool):
    """One design of a study explained part by part (composed problems), with its objective values and units."""

    name = "design.explain"
    description = (
        "Explain one design of a search part by part: for a composed problem (nb201-accel: the NB201 cell and the "
        "systolic-array accelerator) each part's design and parameters (the cell's edge operations; rows, columns, "
        "dataflow, buffers in KiB, clock in MHz) and what it hands on along the chain (operand bits; latency, energy "
        "split, area), then every objective's value with its unit and where the value comes from. Give the design as "
        "study.front writes it, or a trial number. Never pays for an evaluation."
    )
    Args = ExplainArgs
    example: ClassVar[dict[str, Any]] = {"study": "example", "design": EXAMPLE_ARCH}
    reads: ClassVar[dict[str, Literal["storage"]]] = READS_STORAGE

    def stored_code(self, args: ExplainArgs) -> list[str]:
        return study_code(StudyArgs(study=args.study, storage=args.storage))

    def run(self, args: ExplainArgs) -> ToolResult:
        stored = reopen(open_stored_study(args.storage, args.study, create=False), args.storage)
        problem = stored.problem
        point, evaluated = _find(problem, evaluations_from_study(problem, stored.study), args)
        value = {
            "study": args.study,
            "problem": problem.spec(),
            "design": problem.describe(point),
            "point_id": problem.point_id(point),
            "trial": evaluated.trial_number if evaluated else None,
            "parts": explain_parts(problem, point),
            "objectives": objective_rows(problem, point, evaluated),
        }
        messages = [] if evaluated else ["this design was not evaluated in the study: only its cheap objectives are given"]
        return ToolResult(value=value, messages=messages)
