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

The solver runs under a time limit (:func:`sim.cpsat.solve`, shared with :mod:`sim.fpga.cpsat`).
The best schedule found is returned with its status (``optimal`` or ``feasible``: the time limit cut the proof), CP-SAT's lower bound on the
makespan (``ObjectiveBound``) and the relative gap ``(makespan - bound) / makespan``; no
schedule found in time, or a proof that none exists, is an error saying which.
:func:`sim.pipeline.simulate.simulate` replays the schedule's op order per device
(durations there are not rounded to microseconds) for the reported numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ortools.sat.python import cp_model

from coevo.sim.cpsat import solve
from coevo.sim.errors import UserInputError
from coevo.sim.pipeline.cluster import Cluster
from coevo.sim.pipeline.config import PIPELINE
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


MEMORY_CAPS = ("1f1b", "1f1b-peak", "device")
"""What may cap each device's stashed activations (:func:`synthesize`'s ``memory``)."""


def synthesize(
    profile: ModelProfile,
    plan: Plan,
    cluster: Cluster,
    *,
    microbatches: int,
    time_limit_s: float = PIPELINE.synthesize_time_limit_s,
    workers: int = 2,
    memory: str = PIPELINE.ilp_memory,
    seed: int = 0,
    split_backward: bool = PIPELINE.ilp_split_backward,
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
    if memory not in MEMORY_CAPS:
        raise UserInputError(f"memory cap must be '1f1b', '1f1b-peak' or 'device', got {memory!r}")
    sm = _ScheduleModel(profile, plan, cluster, microbatches=microbatches, split_backward=split_backward)
    sm.add_ops()
    sm.add_transfers()
    sm.add_no_overlap()
    caps = sm.add_memory_caps(memory)
    makespan = sm.add_makespan()
    sm.add_hint(_hint_ops(profile, plan, cluster, microbatches=microbatches, split_backward=split_backward, caps=caps), makespan)
    solved = solve(
        sm.model,
        time_limit_s=time_limit_s,
        workers=workers,
        seed=seed,
        remedy="raise the time limit or use fewer microbatches",
        infeasible="no schedule fits the memory limits (proved by CP-SAT); use more devices or a smaller microbatch",
    )
    starts = {op: solved.solver.value(var) / US for op, var in sm.start.items()}
    best = solved.solver.value(makespan) / US
    bound = min(best, solved.bound / US)
    return Synthesized(starts, best, solved.status, solved.solve_s, bound, memory)


@dataclass(frozen=True)
class _Caps:
    """Per device: the cap on its stashed activations, and its activations and memory under 1F1B."""

    caps: dict[int, int]
    activations_1f1b: dict[int, int]
    one_f_one_b: tuple[int, ...]
    """1F1B's memory bound per device (:func:`sim.pipeline.simulate.memory_bound`)."""


class _ScheduleModel:
    """The CP-SAT model of one training step (module doc), built phase by phase in a fixed order.

    Durations are integer microseconds: ``fwd``, ``bwd`` (with the split, the input-gradient
    half), ``wgt`` (the weight-gradient half, 0 without the split) per virtual stage, and
    ``comm`` per virtual-stage boundary.
    """

    def __init__(self, profile: ModelProfile, plan: Plan, cluster: Cluster, *, microbatches: int, split_backward: bool) -> None:
        self.profile, self.plan, self.cluster = profile, plan, cluster
        self.microbatches, self.split_backward = microbatches, split_backward
        self.stages = stages = virtual_stages(profile, plan, **cluster.rates)
        self.n_v = n_v = len(stages)
        self.fwd = [max(1, round(s.forward_s * US)) for s in stages]
        bwd = [max(1, round(s.forward_s * (TRAIN_FLOPS_FACTOR - 1) * US)) for s in stages]
        self.wgt = [b // 2 for b in bwd] if split_backward else [0] * n_v
        self.bwd = [b - w for b, w in zip(bwd, self.wgt, strict=True)]  # with the split, B is the input-gradient half
        self.comm = [round(cluster.transfer_s(stages[v].device, stages[v + 1].device, stages[v].send_bytes) * US) for v in range(n_v - 1)]
        self.horizon = microbatches * (sum(self.fwd) + sum(self.bwd) + 2 * sum(self.comm)) + 1
        self.last = "W" if split_backward else "B"  # the op that frees a microbatch's activations
        self.model = cp_model.CpModel()
        self.start: dict[Op, cp_model.IntVar] = {}
        self.end: dict[Op, cp_model.IntVar] = {}
        self.by_device: dict[int, list[cp_model.IntervalVar]] = {}
        self.memory_use: dict[int, tuple[list[cp_model.IntervalVar], list[int]]] = {}
        self.spans: dict[tuple[int, int], cp_model.IntVar] = {}
        self.links: dict[tuple[str, int, int], list[cp_model.IntervalVar]] = {}
        self.transfers: dict[Op, tuple[cp_model.IntVar, cp_model.IntVar]] = {}  # ("F", v, m): v -> v+1; ("B", v, m): v+1 -> v

    def add_ops(self) -> None:
        """An interval per op, and per microbatch and stage the interval its activations are held."""
        model, horizon, last = self.model, self.horizon, self.last
        for v, stage in enumerate(self.stages):
            for m in range(self.microbatches):
                for kind, duration in (("F", self.fwd[v]), ("B", self.bwd[v]), ("W", self.wgt[v]))[: 3 if self.split_backward else 2]:
                    op = (kind, v, m)
                    self.start[op] = model.new_int_var(0, horizon, f"s_{kind}{v}_{m}")
                    self.end[op] = model.new_int_var(0, horizon, f"e_{kind}{v}_{m}")
                    interval = model.new_interval_var(self.start[op], duration, self.end[op], f"i_{kind}{v}_{m}")
                    self.by_device.setdefault(stage.device, []).append(interval)
                span = self.spans[v, m] = model.new_int_var(0, horizon, f"held_len_{v}_{m}")
                held = model.new_interval_var(self.start["F", v, m], span, self.end[last, v, m], f"held_{v}_{m}")
                if self.split_backward:
                    model.add(self.start["W", v, m] >= self.end["B", v, m])
                self.memory_use.setdefault(stage.device, ([], []))[0].append(held)
                self.memory_use[stage.device][1].append(stash_bytes(self.profile, self.stages, v, False))

    def add_transfers(self) -> None:
        """The pipeline dependencies; each boundary transfer an interval on every resource it crosses."""
        model, start, end, n_v = self.model, self.start, self.end, self.n_v
        for m in range(self.microbatches):
            for v in range(n_v - 1):
                a, b = self.stages[v].device, self.stages[v + 1].device
                if a == b or self.comm[v] == 0:
                    model.add(start["F", v + 1, m] >= end["F", v, m])
                    model.add(start["B", v, m] >= end["B", v + 1, m])
                    continue
                # each transfer occupies every resource on its path (activations a->b, gradients b->a), one at a time
                for kind, src, dst, after, before in (
                    ("F", a, b, end["F", v, m], start["F", v + 1, m]),
                    ("B", b, a, end["B", v + 1, m], start["B", v, m]),
                ):
                    t0 = model.new_int_var(0, self.horizon, f"t_{kind}{v}_{m}")
                    t1 = model.new_int_var(0, self.horizon, f"u_{kind}{v}_{m}")
                    transfer = model.new_interval_var(t0, self.comm[v], t1, f"x_{kind}{v}_{m}")
                    self.transfers[kind, v, m] = (t0, t1)
                    for resource in self.cluster.resources(src, dst):
                        self.links.setdefault(resource, []).append(transfer)
                    model.add(t0 >= after)
                    model.add(before >= t1)
            model.add(start["B", n_v - 1, m] >= end["F", n_v - 1, m])
            if m > 0:
                for v in range(n_v):
                    model.add(start["F", v, m] >= start["F", v, m - 1])

    def add_no_overlap(self) -> None:
        """One op at a time per device, one transfer at a time per resource."""
        for intervals in [*self.by_device.values(), *self.links.values()]:
            self.model.add_no_overlap(intervals)

    def _params(self, device: int) -> int:
        return sum(self.profile.blocks[i].param_bytes for s in self.stages if s.device == device for i in s.blocks)

    def add_memory_caps(self, memory: str) -> _Caps:
        """Each device's held activations within its cap (``memory``, :func:`synthesize`).

        Raises:
            UserInputError: a device cannot hold its parameters, optimizer state and one microbatch's activations.
        """
        one_f_one_b = memory_bound(self.profile, self.plan, schedule="1f1b", microbatches=self.microbatches)
        caps: dict[int, int] = {}
        activations_1f1b = {d: one_f_one_b[d] - self._params(d) * OPTIMIZER_BYTES_PER_PARAM_BYTE for d in self.memory_use}
        for device, (intervals, demands) in self.memory_use.items():
            params, gb = self._params(device), self.cluster.memory_gb
            free = int(gb * 1e9) - params * OPTIMIZER_BYTES_PER_PARAM_BYTE
            if free < max(demands):
                raise UserInputError(
                    f"device {device} cannot hold its parameters and optimizer state plus one microbatch's activations "
                    f"({params * OPTIMIZER_BYTES_PER_PARAM_BYTE / 1e9:.1f} GB + {max(demands) / 1e9:.2f} GB > {gb} GB): "
                    "use more devices, a smaller microbatch, or a cluster with more memory"
                )
            cap = caps[device] = {
                "device": free,
                "1f1b": min(free, activations_1f1b[device]),
                "1f1b-peak": min(free, max(activations_1f1b.values())),
            }[memory]
            scale = math.gcd(cap, *demands) or 1  # exact, in units as large as the sizes allow (smaller integers for CP-SAT)
            self.model.add_cumulative(intervals, [d // scale for d in demands], cap // scale)
        return _Caps(caps, activations_1f1b, one_f_one_b)

    def add_makespan(self) -> cp_model.IntVar:
        """The objective: the end of the last op that frees activations (the variable returned)."""
        makespan = self.model.new_int_var(0, self.horizon, "makespan")
        self.model.add_max_equality(makespan, [self.end[op] for op in self.end if op[0] == self.last])
        self.model.minimize(makespan)
        return makespan

    def add_hint(self, hint_ops: Sequence[Op], makespan: cp_model.IntVar) -> None:
        """Time ``hint_ops`` (in order) with this model's durations, one transfer at a time per resource, as a complete hint."""
        busy_until: dict[object, int] = {}
        at: dict[Op, tuple[int, int]] = {}
        durations = {"F": self.fwd, "B": self.bwd, "W": self.wgt}
        for op in hint_ops:
            kind, v, m = op
            arrive = at["F", v, m][1] if kind == "B" else at["B", v, m][1] if kind == "W" else 0
            dep = self._dependency(op)
            if dep is not None:
                producer, key, src, dst = dep
                arrive = max(arrive, at[producer][1])
                if key in self.transfers:
                    resources = self.cluster.resources(src, dst)
                    sent = max([arrive, *(busy_until.get(r, 0) for r in resources)])
                    arrive = sent + self.comm[key[1]]
                    busy_until |= dict.fromkeys(resources, arrive)
                    self.model.add_hint(self.transfers[key][0], sent)
                    self.model.add_hint(self.transfers[key][1], arrive)
            device = self.stages[v].device
            begin = max(arrive, busy_until.get(device, 0))
            at[op] = (begin, begin + durations[kind][v])
            busy_until[device] = at[op][1]
            self.model.add_hint(self.start[op], at[op][0])
            self.model.add_hint(self.end[op], at[op][1])
        for (v, m), span_var in self.spans.items():
            self.model.add_hint(span_var, at[self.last, v, m][1] - at["F", v, m][0])
        self.model.add_hint(makespan, max(at[op][1] for op in at if op[0] == self.last))

    def _dependency(self, op: Op) -> tuple[Op, Op, int, int] | None:
        """The op on another stage that ``op`` waits for: (producer op, transfer key, source device, destination device)."""
        kind, v, m = op
        if kind == "F" and v > 0:
            return (("F", v - 1, m), ("F", v - 1, m), self.stages[v - 1].device, self.stages[v].device)
        if kind == "B" and v < self.n_v - 1:
            return (("B", v + 1, m), ("B", v, m), self.stages[v + 1].device, self.stages[v].device)
        return None


def _hint_ops(profile: ModelProfile, plan: Plan, cluster: Cluster, *, microbatches: int, split_backward: bool, caps: _Caps) -> list[Op]:
    """The op order of the hint: the simulated 1F1B (wave), a complete, feasible solution of the model.

    With the split backward: ZB-H1's order when its activations fit the caps, else 1F1B's
    with each ``W`` right after its ``B``.
    """
    one = simulate(profile, plan, cluster, schedule="1f1b", microbatches=microbatches)
    hint_ops = [r.op for r in sorted(one.timeline, key=lambda r: (r.start, r.op))]
    if not split_backward:
        return hint_ops
    zb = simulate(profile, plan, cluster, schedule="zb-h1", microbatches=microbatches)
    params_of = {d: caps.one_f_one_b[d] - caps.activations_1f1b[d] for d in caps.caps}  # parameters and optimizer state
    if all(zb.peak_memory_bytes[d] - params_of[d] <= caps.caps[d] for d in caps.caps):
        return [r.op for r in sorted(zb.timeline, key=lambda r: (r.start, r.op))]
    return [x for op in hint_ops for x in ([op, ("W", op[1], op[2])] if op[0] == "B" else [op])]
