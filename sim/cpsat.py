"""One place that runs OR-Tools CP-SAT for the simulators' schedule bounds.

The pipeline schedule synthesis (:mod:`sim.pipeline.ilp`) and the FPGA task scheduler
(:mod:`sim.fpga.cpsat`) build different models but solve them the same way: under a wall
time limit, with a number of workers and a random seed, and with one reading of CP-SAT's
status: ``optimal`` (proved), ``feasible`` (the time limit cut the proof), and otherwise an
error the caller can act on. :func:`solve` is that shared block.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ortools.sat.python import cp_model

from coevo.sim.errors import UserInputError


@dataclass(frozen=True)
class Solved:
    """A model CP-SAT solved (a schedule was found).

    Attributes:
        solver: the solver, to read variable values (``solver.value(var)``) from.
        status: ``optimal`` (proved) or ``feasible`` (the time limit cut the proof).
        bound: CP-SAT's proved bound on the objective (``best_objective_bound``), in the model's units.
        solve_s: wall time of the solve, seconds.
    """

    solver: cp_model.CpSolver
    status: str
    bound: float
    solve_s: float


def solve(
    model: cp_model.CpModel,
    *,
    time_limit_s: float,
    workers: int,
    seed: int,
    remedy: str,
    infeasible: str | None = None,
) -> Solved:
    """Solve ``model`` under a time limit and map CP-SAT's status.

    Args:
        model: the model, objective set.
        time_limit_s: CP-SAT's ``max_time_in_seconds``.
        workers: CP-SAT's ``num_workers``.
        seed: CP-SAT's ``random_seed`` (with several workers the result may still vary run to run).
        remedy: what the caller should change when no schedule is found in time, appended to
            ``"CP-SAT found no schedule within {time_limit_s} s; "``.
        infeasible: the message when CP-SAT proves that no schedule exists; ``None`` reports
            a proof the same way as a timeout.

    Raises:
        UserInputError: no schedule found within ``time_limit_s`` (``remedy``), or proved
            infeasible (``infeasible``, when given).
    """
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit_s
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = seed
    began = time.perf_counter()
    status = solver.solve(model)
    solve_s = time.perf_counter() - began
    if status == cp_model.INFEASIBLE and infeasible is not None:
        raise UserInputError(infeasible)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        raise UserInputError(f"CP-SAT found no schedule within {time_limit_s:g} s; {remedy}")
    return Solved(solver, "optimal" if status == cp_model.OPTIMAL else "feasible", solver.best_objective_bound, solve_s)
