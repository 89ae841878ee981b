"""The optimal schedule of a (small) task DAG with OR-Tools CP-SAT: the bound the list schedulers are measured against.

Model: one interval variable per task (fixed duration, its cycles); ``start(t) >= end(p)``
for every dependency; per engine ``add_no_overlap`` when it has one core, else
``add_cumulative`` with demand 1 and capacity = its cores; minimise the makespan. The list
schedule (upward rank) is given as a hint and its makespan as the horizon. The solver runs
under a time limit (:func:`sim.cpsat.solve`, shared with :mod:`sim.pipeline.ilp`); the answer
says whether the schedule is proved optimal, CP-SAT's lower bound on the makespan, and the
relative gap ``(makespan - bound) / makespan``. Cores are
assigned afterwards (an interval graph with at most ``cores`` overlaps is ``cores``-colourable,
greedily in start order), and the result passes :func:`sim.fpga.sched.check_schedule`.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from ortools.sat.python import cp_model

from coevo.sim.cpsat import solve
from coevo.sim.errors import UserInputError
from coevo.sim.fpga.dag import Task
from coevo.sim.fpga.model import ENGINES, Accelerator
from coevo.sim.fpga.sched import Schedule, list_schedule, upward_ranks


@dataclass(frozen=True)
class Optimum:
    """CP-SAT's answer.

    Attributes:
        schedule: the best schedule found.
        status: ``optimal`` (proved) or ``feasible`` (the time limit cut the proof).
        bound_cycles: CP-SAT's lower bound on the makespan.
        gap: ``(makespan - bound) / makespan``.
        solve_s: wall time of the solve.
    """

    schedule: Schedule
    status: str
    bound_cycles: int
    gap: float
    solve_s: float


def cpsat_schedule(tasks: Sequence[Task], accel: Accelerator, *, time_limit_s: float = 10.0, workers: int = 1, seed: int = 0) -> Optimum:
    """The makespan-optimal schedule of ``tasks`` (module doc), or the best found within ``time_limit_s``.

    Raises:
        UserInputError: more than 3,000 tasks (use a smaller instance: fewer sequences or
            layers), or no schedule found in the time limit.
    """
    if len(tasks) > 3000:
        raise UserInputError(f"{len(tasks)} tasks is too many for the CP-SAT bound; use fewer sequences, layers or heads (<= 3000 tasks)")
    hint = list_schedule(tasks, accel, upward_ranks(tasks), "hint")
    horizon = hint.makespan
    model = cp_model.CpModel()
    start = [model.new_int_var(0, horizon - t.cycles, f"s{t.id}") for t in tasks]
    intervals = [model.new_fixed_size_interval_var(start[t.id], t.cycles, f"i{t.id}") for t in tasks]
    for t in tasks:
        for p in t.preds:
            model.add(start[t.id] >= start[p] + tasks[p].cycles)
    for e in ENGINES:
        ivs = [intervals[t.id] for t in tasks if t.engine == e and t.cycles > 0]
        if not ivs:
            continue
        if accel.capacity(e) == 1:
            model.add_no_overlap(ivs)
        else:
            model.add_cumulative(ivs, [1] * len(ivs), accel.capacity(e))
    makespan = model.new_int_var(0, horizon, "makespan")
    for t in tasks:
        model.add(makespan >= start[t.id] + t.cycles)
    model.minimize(makespan)
    for t in tasks:
        model.add_hint(start[t.id], hint.start[t.id])
    model.add_hint(makespan, horizon)
    solved = solve(model, time_limit_s=time_limit_s, workers=workers, seed=seed, remedy="raise the time limit or use a smaller instance")
    starts = [int(solved.solver.value(s)) for s in start]
    cores = _assign_cores(tasks, starts, accel)
    schedule = Schedule(tuple(tasks), tuple(starts), tuple(cores), "cp-sat")
    best = schedule.makespan
    bound = min(best, round(solved.bound))
    return Optimum(schedule, solved.status, bound, (best - bound) / best if best else 0.0, solved.solve_s)


def _assign_cores(tasks: Sequence[Task], starts: Sequence[int], accel: Accelerator) -> list[int]:
    """A core per task: in start order, the lowest-numbered core free at the task's start."""
    cores = [0] * len(tasks)
    for e in ENGINES:
        free = list(range(accel.capacity(e)))
        busy: list[tuple[int, int]] = []  # (end, core)
        for t in sorted((t for t in tasks if t.engine == e), key=lambda t: (starts[t.id], t.id)):
            while busy and busy[0][0] <= starts[t.id]:
                free.append(heapq.heappop(busy)[1])
            free.sort()
            c = free.pop(0) if free else 0  # an overfull engine is left to check_schedule to report
            cores[t.id] = c
            if t.cycles > 0:
                heapq.heappush(busy, (starts[t.id] + t.cycles, c))
            else:
                free.append(c)
    return cores
