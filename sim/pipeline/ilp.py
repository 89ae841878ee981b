"""Schedule synthesis with OR-Tools CP-SAT: the op order that minimises a step's makespan.

Variables: one interval per op ``F(v, m)`` / ``B(v, m)`` (virtual stage *v*, microbatch *m*;
durations in integer microseconds) over the plan's virtual stages, so on a skip-aware plan
the V-shaped wave (a device hosts an encoder stage and its mirrored decoder stage) is what
gets scheduled. Constraints: the pipeline dependencies of :mod:`sim.pipeline.simulate`; each
boundary's transfer an interval on every shared resource it crosses
(:meth:`sim.pipeline.cluster.Cluster.resources`: the directed GPU link inside a node, the
NICs' transmit and receive sides between nodes), one transfer at a time per resource (the
simulator instead shares a resource fairly among concurrent transfers: same total time,
different order, so a replay can differ slightly where transfers meet); one op at a time
per device (``add_no_overlap``); memory: each microbatch's stashed activations are held
from the start of its forward to the end of its backward on that device, and their sum may
not exceed the cap (``add_cumulative``): by default 1F1B's own bound on that device
(:func:`sim.pipeline.simulate.memory_bound`, what 1F1B / wave may stash there), so the
synthesised schedule is compared with 1F1B at equal memory; ``memory="device"`` allows
whatever fits the device. Microbatches enter each virtual stage in order (symmetry
breaking, loses nothing: they are identical). The simulated 1F1B (wave) schedule is given
as a solution hint. Objective: the makespan.

With ``split_backward``, each backward is two ops, ``B`` (input gradient, what the
previous stage waits for) and ``W`` (weight gradient, after ``B`` on the same device), as
in zero-bubble schedules; activations are held until ``W``, and the ZB-H1 schedule of the
simulator is the hint. Memory ``1f1b-peak`` lets every device hold the activations of
the fullest device under 1F1B (ZB-H1's rule).

The solver runs under a time limit. The best schedule found is returned with its status
(``optimal`` or ``feasible``: the time limit cut the proof), CP-SAT's lower bound on the
makespan (``ObjectiveBound``) and the relative gap ``(makespan - bound) / makespan``; no
schedule found in time, or a proof that none exists, is an error saying which.
:func:`sim.pipeline.simulate.simulate` replays the schedule's op order per device
(durations there are not rounded to microseconds) for the reported numbers.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from ortools.sat.python import cp_model

from coevo.sim.errors import UserInputError
from coevo.sim.pipeline.cluster import Cluster
from coevo.sim.pipeline.partition import TRAIN_FLOPS_FACTOR, Plan
from coevo.sim.pipeline.profile import ModelProfile
from coevo.sim.pipeline.simulate import OPTIMIZER_BYTES_PER_PARAM_BYTE, Op, memory_bound, simulate, stash_bytes, virtual_stages

US = 1e6


@dataclass(frozen=True)
class Synthesized:
    """A CP-SAT schedule: op start times (seconds), status, solver time, and the solver's bound."""

    starts: dict[Op, float]
    makespan_s: float
    status: str
    solve_s: float
    bound_s: float = 0.0
    """CP-SAT's proved lower bound on the makespan (``ObjectiveBound``)."""
    memory_cap: str = "1f1b"
    """What capped each device's stashed activations: ``1f1b`` (1F1B's bound) or ``device`` (its free memory)."""

    @property
    def gap(self) -> float:
        """Relative optimality gap ``(makespan - bound) / makespan`` (0: proved optimal)."""
        return max(0.0, (self.makespan_s - self.bound_s) / self.makespan_s) if self.makespan_s > 0 else 0.0

    def as_dict(self) -> dict[str, float | str]:
        """JSON-friendly form (without the starts)."""
        return {
            "status": self.status,
            "solve_s": round(self.solve_s, 3),
            "makespan_ms": round(self.makespan_s * 1e3, 4),
            "bound_ms": round(self.bound_s * 1e3, 4),
            "gap": round(self.gap, 4),
            "memory_cap": self.memory_cap,
        }


def synthesize(
    profile: ModelProfile,
    plan: Plan,
    cluster: Cluster,
    *,
    microbatches: int,
    time_limit_s: float = 30.0,
    workers: int = 2,
    memory: str = "1f1b",
    seed: int = 0,
    split_backward: bool = False,
) -> Synthesized:
    """Minimise one training step's makespan (see module doc).

    Args:
        memory: ``1f1b`` (cap each device's stashed activations at 1F1B's bound there),
            ``1f1b-peak`` (every device up to the fullest device's 1F1B activations: ZB-H1's "same
            peak memory as 1F1B") or ``device``.
        seed: CP-SAT's random seed (with several workers the result may still vary run to run).
        split_backward: schedule ``B`` (input gradient) and ``W`` (weight gradient, half the
            backward each) as separate ops, as ZB-H1 does: activations are held until ``W``;
            the schedule is replayed with ``simulate(schedule="zb-h1", order=...)``.

    Raises:
        UserInputError: the memory cannot hold any schedule (proved), or no schedule was found in ``time_limit_s``.
    """
    if microbatches < 1:
        raise UserInputError(f"microbatches must be at least 1, got {microbatches}")
    if memory not in ("1f1b", "1f1b-peak", "device"):
        raise UserInputError(f"memory cap must be '1f1b', '1f1b-peak' or 'device', got {memory!r}")
    stages = virtual_stages(profile, plan, **cluster.rates)
    n_v = len(stages)
    fwd = [max(1, round(s.forward_s * US)) for s in stages]
    bwd = [max(1, round(s.forward_s * (TRAIN_FLOPS_FACTOR - 1) * US)) for s in stages]
    wgt = [b // 2 for b in bwd] if split_backward else [0] * n_v
    bwd = [b - w for b, w in zip(bwd, wgt, strict=True)]  # with the split, B is the input-gradient half
    comm = [round(cluster.transfer_s(stages[v].device, stages[v + 1].device, stages[v].send_bytes) * US) for v in range(n_v - 1)]
    horizon = microbatches * (sum(fwd) + sum(bwd) + 2 * sum(comm)) + 1
    model = cp_model.CpModel()
    start: dict[Op, cp_model.IntVar] = {}
    end: dict[Op, cp_model.IntVar] = {}
    by_device: dict[int, list[cp_model.IntervalVar]] = {}
    memory_use: dict[int, tuple[list[cp_model.IntervalVar], list[int]]] = {}
    spans: dict[tuple[int, int], cp_model.IntVar] = {}
    last = "W" if split_backward else "B"  # the op that frees a microbatch's activations
    for v, stage in enumerate(stages):
        for m in range(microbatches):
            for kind, duration in (("F", fwd[v]), ("B", bwd[v]), ("W", wgt[v]))[: 3 if split_backward else 2]:
                op = (kind, v, m)
                start[op] = model.new_int_var(0, horizon, f"s_{kind}{v}_{m}")
                end[op] = model.new_int_var(0, horizon, f"e_{kind}{v}_{m}")
                interval = model.new_interval_var(start[op], duration, end[op], f"i_{kind}{v}_{m}")
                by_device.setdefault(stage.device, []).append(interval)
            span = spans[v, m] = model.new_int_var(0, horizon, f"held_len_{v}_{m}")
            held = model.new_interval_var(start["F", v, m], span, end[last, v, m], f"held_{v}_{m}")
            if split_backward:
                model.add(start["W", v, m] >= end["B", v, m])
            memory_use.setdefault(stage.device, ([], []))[0].append(held)
            memory_use[stage.device][1].append(stash_bytes(profile, stages, v, False))
    links: dict[tuple[str, int, int], list[cp_model.IntervalVar]] = {}
    transfers: dict[Op, tuple[cp_model.IntVar, cp_model.IntVar]] = {}  # ("F", v, m): v -> v+1; ("B", v, m): v+1 -> v
    for m in range(microbatches):
        for v in range(n_v - 1):
            a, b = stages[v].device, stages[v + 1].device
            if a == b or comm[v] == 0:
                model.add(start["F", v + 1, m] >= end["F", v, m])
                model.add(start["B", v, m] >= end["B", v + 1, m])
                continue
            # each transfer occupies every resource on its path (activations a->b, gradients b->a), one at a time
            for kind, src, dst, after, before in (
                ("F", a, b, end["F", v, m], start["F", v + 1, m]),
                ("B", b, a, end["B", v + 1, m], start["B", v, m]),
            ):
                t0 = model.new_int_var(0, horizon, f"t_{kind}{v}_{m}")
                t1 = model.new_int_var(0, horizon, f"u_{kind}{v}_{m}")
                transfer = model.new_interval_var(t0, comm[v], t1, f"x_{kind}{v}_{m}")
                transfers[kind, v, m] = (t0, t1)
                for resource in cluster.resources(src, dst):
                    links.setdefault(resource, []).append(transfer)
                model.add(t0 >= after)
                model.add(before >= t1)
        model.add(start["B", n_v - 1, m] >= end["F", n_v - 1, m])
        if m > 0:
            for v in range(n_v):
                model.add(start["F", v, m] >= start["F", v, m - 1])
    for intervals in [*by_device.values(), *links.values()]:
        model.add_no_overlap(intervals)
    one_f_one_b = memory_bound(profile, plan, schedule="1f1b", microbatches=microbatches)
    caps: dict[int, int] = {}
    activations_1f1b = {
        d: one_f_one_b[d]
        - sum(profile.blocks[i].param_bytes for s in stages if s.device == d for i in s.blocks) * OPTIMIZER_BYTES_PER_PARAM_BYTE
        for d in memory_use
    }
    for device, (intervals, demands) in memory_use.items():
        params = sum(profile.blocks[i].param_bytes for s in stages if s.device == device for i in s.blocks)
        free = int(cluster.memory_gb * 1e9) - params * OPTIMIZER_BYTES_PER_PARAM_BYTE
        if free < max(demands):
            raise UserInputError(
                f"device {device} cannot hold its parameters and optimizer state plus one microbatch's activations "
                f"({params * OPTIMIZER_BYTES_PER_PARAM_BYTE / 1e9:.1f} GB + {max(demands) / 1e9:.2f} GB > {cluster.memory_gb} GB): "
                "use more devices, a smaller microbatch, or a cluster with more memory"
            )
        cap = caps[device] = {
            "device": free,
            "1f1b": min(free, activations_1f1b[device]),
            "1f1b-peak": min(free, max(activations_1f1b.values())),
        }[memory]
        scale = math.gcd(cap, *demands) or 1  # exact, in units as large as the sizes allow (smaller integers for CP-SAT)
        model.add_cumulative(intervals, [d // scale for d in demands], cap // scale)
    makespan = model.new_int_var(0, horizon, "makespan")
    model.add_max_equality(makespan, [end[op] for op in end if op[0] == ("W" if split_backward else "B")])
    model.minimize(makespan)
    # hint: 1F1B (wave) as a complete, feasible solution of this model: the simulator's op order per device,
    # timed with this model's integer durations and one transfer at a time per resource. With the split
    # backward: ZB-H1's order when its activations fit the caps, else 1F1B's with each W right after its B
    one = simulate(profile, plan, cluster, schedule="1f1b", microbatches=microbatches)
    hint_ops = [r.op for r in sorted(one.timeline, key=lambda r: (r.start, r.op))]
    if split_backward:
        zb = simulate(profile, plan, cluster, schedule="zb-h1", microbatches=microbatches)
        params_of = {d: one_f_one_b[d] - activations_1f1b[d] for d in caps}  # parameters and optimizer state
        if all(zb.peak_memory_bytes[d] - params_of[d] <= caps[d] for d in caps):
            hint_ops = [r.op for r in sorted(zb.timeline, key=lambda r: (r.start, r.op))]
        else:
            hint_ops = [x for op in hint_ops for x in ([op, ("W", op[1], op[2])] if op[0] == "B" else [op])]
    busy_until: dict[object, int] = {}
    at: dict[Op, tuple[int, int]] = {}
    for op in hint_ops:
        kind, v, m = op
        arrive = at["F", v, m][1] if kind == "B" else at["B", v, m][1] if kind == "W" else 0
        dep: tuple[Op, Op, int, int] | None = None
        if kind == "F" and v > 0:
            dep = (("F", v - 1, m), ("F", v - 1, m), stages[v - 1].device, stages[v].device)
        elif kind == "B" and v < n_v - 1:
            dep = (("B", v + 1, m), ("B", v, m), stages[v + 1].device, stages[v].device)
        if dep is not None:
            producer, key, src, dst = dep
            arrive = max(arrive, at[producer][1])
            if key in transfers:
                sent = max([arrive, *(busy_until.get(r, 0) for r in cluster.resources(src, dst))])
                arrive = sent + comm[key[1]]
                busy_until |= dict.fromkeys(cluster.resources(src, dst), arrive)
                model.add_hint(transfers[key][0], sent)
                model.add_hint(transfers[key][1], arrive)
        begin = max(arrive, busy_until.get(stages[v].device, 0))
        at[op] = (begin, begin + {"F": fwd, "B": bwd, "W": wgt}[kind][v])
        busy_until[stages[v].device] = at[op][1]
        model.add_hint(start[op], at[op][0])
        model.add_hint(end[op], at[op][1])
    for (v, m), span_var in spans.items():
        model.add_hint(span_var, at[last, v, m][1] - at["F", v, m][0])
    model.add_hint(makespan, max(at[op][1] for op in at if op[0] == last))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit_s
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = seed
    began = time.perf_counter()
    status = solver.solve(model)
    solve_s = time.perf_counter() - began
    if status == cp_model.INFEASIBLE:
        raise UserInputError("no schedule fits the memory limits (proved by CP-SAT); use more devices or a smaller microbatch")
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        raise UserInputError(f"CP-SAT found no schedule within {time_limit_s:g} s; raise the time limit or use fewer microbatches")
    starts = {op: solver.value(var) / US for op, var in start.items()}
    best = solver.value(makespan) / US
    bound = min(best, solver.best_objective_bound / US)
    return Synthesized(starts, best, "optimal" if status == cp_model.OPTIMAL else "feasible", solve_s, bound, memory)
