"""Schedule synthesis with OR-Tools CP-SAT: the op order that minimises a step's makespan.

Variables: one interval per op ``F(v, m)`` / ``B(v, m)`` (virtual stage *v*, microbatch *m*;
durations in integer microseconds). Constraints: the pipeline dependencies of
:mod:`sim.pipeline.simulate`, each boundary's transfer an interval on its directed link
(one transfer at a time per link, as in the simulator); one op at a time per device
(``add_no_overlap``); memory: each microbatch's stashed activations are
held from the start of its forward to the end of its backward on that device, and their
sum plus the device's parameter/optimizer bytes must fit the device (``add_cumulative``);
microbatches enter each virtual stage in order (symmetry breaking, loses nothing: they are
identical). Objective: the makespan.

The solver runs under a time limit. The best schedule found is returned with its status
(``optimal`` or ``feasible``: the time limit cut the proof); no schedule found in time, or
a proof that none exists, is an error saying which. :func:`sim.pipeline.simulate.simulate`
replays the schedule's op order per device (durations there are not rounded to
microseconds) for the reported numbers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ortools.sat.python import cp_model

from sim.errors import UserInputError
from sim.pipeline.cluster import Cluster
from sim.pipeline.partition import TRAIN_FLOPS_FACTOR, Plan
from sim.pipeline.profile import ModelProfile
from sim.pipeline.simulate import OPTIMIZER_BYTES_PER_PARAM_BYTE, Op, virtual_stages

US = 1e6


@dataclass(frozen=True)
class Synthesized:
    """A CP-SAT schedule: op start times (seconds), status and solver time."""

    starts: dict[Op, float]
    makespan_s: float
    status: str
    solve_s: float


def synthesize(
    profile: ModelProfile, plan: Plan, cluster: Cluster, *, microbatches: int, time_limit_s: float = 30.0, workers: int = 2
) -> Synthesized:
    """Minimise one training step's makespan (see module doc).

    Raises:
        UserInputError: the memory cannot hold any schedule (proved), or no schedule was found in ``time_limit_s``.
    """
    if microbatches < 1:
        raise UserInputError(f"microbatches must be at least 1, got {microbatches}")
    stages = virtual_stages(profile, plan, **cluster.rates)
    n_v = len(stages)
    fwd = [max(1, round(s.forward_s * US)) for s in stages]
    bwd = [max(1, round(s.forward_s * (TRAIN_FLOPS_FACTOR - 1) * US)) for s in stages]
    comm = [round(cluster.transfer_s(stages[v].device, stages[v + 1].device, stages[v].send_bytes) * US) for v in range(n_v - 1)]
    horizon = microbatches * (sum(fwd) + sum(bwd) + 2 * sum(comm)) + 1
    model = cp_model.CpModel()
    start: dict[Op, cp_model.IntVar] = {}
    end: dict[Op, cp_model.IntVar] = {}
    by_device: dict[int, list[cp_model.IntervalVar]] = {}
    memory: dict[int, tuple[list[cp_model.IntervalVar], list[int]]] = {}
    for v, stage in enumerate(stages):
        for m in range(microbatches):
            for kind, duration in (("F", fwd[v]), ("B", bwd[v])):
                op = (kind, v, m)
                start[op] = model.new_int_var(0, horizon, f"s_{kind}{v}_{m}")
                end[op] = model.new_int_var(0, horizon, f"e_{kind}{v}_{m}")
                interval = model.new_interval_var(start[op], duration, end[op], f"i_{kind}{v}_{m}")
                by_device.setdefault(stage.device, []).append(interval)
            span = model.new_int_var(0, horizon, f"held_len_{v}_{m}")
            held = model.new_interval_var(start["F", v, m], span, end["B", v, m], f"held_{v}_{m}")
            memory.setdefault(stage.device, ([], []))[0].append(held)
            memory[stage.device][1].append(stage.stash_bytes)
    links: dict[tuple[int, int], list[cp_model.IntervalVar]] = {}
    for m in range(microbatches):
        for v in range(n_v - 1):
            a, b = stages[v].device, stages[v + 1].device
            if a == b or comm[v] == 0:
                model.add(start["F", v + 1, m] >= end["F", v, m])
                model.add(start["B", v, m] >= end["B", v + 1, m])
                continue
            # each transfer occupies its directed link (activations a->b, gradients b->a), one at a time
            for kind, src, dst, after, before in (
                ("F", a, b, end["F", v, m], start["F", v + 1, m]),
                ("B", b, a, end["B", v + 1, m], start["B", v, m]),
            ):
                t0 = model.new_int_var(0, horizon, f"t_{kind}{v}_{m}")
                t1 = model.new_int_var(0, horizon, f"u_{kind}{v}_{m}")
                links.setdefault((src, dst), []).append(model.new_interval_var(t0, comm[v], t1, f"x_{kind}{v}_{m}"))
                model.add(t0 >= after)
                model.add(before >= t1)
        model.add(start["B", n_v - 1, m] >= end["F", n_v - 1, m])
        if m > 0:
            for v in range(n_v):
                model.add(start["F", v, m] >= start["F", v, m - 1])
    for intervals in [*by_device.values(), *links.values()]:
        model.add_no_overlap(intervals)
    for device, (intervals, demands) in memory.items():
        params = sum(profile.blocks[i].param_bytes for s in stages if s.device == device for i in s.blocks)
        free = int(cluster.memory_gb * 1e9) - params * OPTIMIZER_BYTES_PER_PARAM_BYTE
        if free < max(demands):
            raise UserInputError(
                f"device {device} cannot hold its parameters and optimizer state plus one microbatch's activations "
                f"({params * OPTIMIZER_BYTES_PER_PARAM_BYTE / 1e9:.1f} GB + {max(demands) / 1e9:.2f} GB > {cluster.memory_gb} GB): "
                "use more devices, a smaller microbatch, or a cluster with more memory"
            )
        scale = max(1, max(demands) // 10_000)  # keep capacities in CP-SAT's comfortable integer range
        model.add_cumulative(intervals, [max(1, d // scale) for d in demands], free // scale)
    makespan = model.new_int_var(0, horizon, "makespan")
    model.add_max_equality(makespan, [end["B", 0, m] for m in range(microbatches)])
    model.minimize(makespan)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit_s
    solver.parameters.num_workers = workers
    began = time.perf_counter()
    status = solver.solve(model)
    solve_s = time.perf_counter() - began
    if status == cp_model.INFEASIBLE:
        raise UserInputError("no schedule fits the memory limits (proved by CP-SAT); use more devices or a smaller microbatch")
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        raise UserInputError(f"CP-SAT found no schedule within {time_limit_s:g} s; raise the time limit or use fewer microbatches")
    starts = {op: solver.value(var) / US for op, var in start.items()}
    return Synthesized(starts, solver.value(makespan) / US, "optimal" if status == cp_model.OPTIMAL else "feasible", solve_s)
