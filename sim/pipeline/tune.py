"""Hybrid tuner: pipeline degree x data-parallel degree x microbatch size x partitioner and schedule.

For a global batch on a cluster, every configuration with ``pp * dp == devices`` is
simulated: ``dp`` replicas of one pipeline each run ``global_batch / (dp * microbatch)``
microbatches (GPipe or 1F1B on each block-wise baseline's plan; GPipe or wave on a
skip-aware plan; the byte-aware partitioners all get the same ``balance`` tolerance), and
the data-parallel replicas of each stage ring-all-reduce its gradients as soon as its last
backward ends, all in one discrete-event simulation
(``simulate(..., data_parallel=dp)``): the rings' chunks and the pipelines' activations
and gradients are flows that share each node's NICs (and the GPU links inside a node)
max-min fairly, so an all-reduce that crosses nodes slows the pipeline transfers still in
flight on its NIC and the other way round (:func:`hybrid_step_s`). What is modelled: the
all-reduce overlaps the pipeline's tail (earlier stages' backward passes and transfers);
not modelled: bucketed all-reduce inside one device's own backward (DDP), and the
optimizer step.
Configurations whose memory bound (:func:`sim.pipeline.simulate.memory_bound`, the rule the
``pipeline`` search problem applies too) does not fit, or whose batch does not divide, are
listed as rejected with the reason. Pipelines are laid out on consecutive devices, and replica
*r* of stage *s* sits on device ``r * pp + s``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from coevo.sim.errors import UserInputError
from coevo.sim.pipeline.cluster import Cluster
from coevo.sim.pipeline.config import PIPELINE
from coevo.sim.pipeline.partition import TOLERANT, Plan, partition, units
from coevo.sim.pipeline.simulate import StepResult, memory_bound, simulate

if TYPE_CHECKING:  # sim.pipeline.profile imports torch and networkx; only its types are needed here
    from coevo.sim.pipeline.profile import ModelProfile

CHOICES = (
    ("blockwise", "gpipe"),
    ("blockwise", "1f1b"),
    ("blockwise-direct", "gpipe"),
    ("blockwise-direct", "1f1b"),
    ("blockwise-bytes", "gpipe"),
    ("blockwise-bytes", "1f1b"),
    ("skip-aware", "gpipe"),
    ("skip-aware", "wave"),
)
"""Partitioner and schedule pairs: 1F1B on a skip-aware plan is the wave schedule."""


@dataclass(frozen=True)
class Candidate:
    """One configuration and its simulated step."""

    pp: int
    dp: int
    microbatch: int
    method: str
    schedule: str
    step_s: float
    samples_per_s: float
    allreduce_s: float
    """The longest stage all-reduce alone, all rings at once (:func:`allreduce_s`; in ``step_s`` it is simulated and partly hidden)."""
    memory_gb: float
    """The schedule rule's memory bound on the fullest device (what must fit)."""
    peak_memory_gb: float
    """The simulated peak on the fullest device (never above the bound)."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in vars(self).items()}


@dataclass(frozen=True)
class Rejected:
    """A configuration the tuner did not keep, and why.

    Attributes:
        pp: pipeline degree.
        dp: data-parallel degree.
        microbatch: microbatch size.
        reason: why it was rejected.
        candidate: the simulated configuration when it got that far (rejected for memory);
            None when rejected before simulation (the batch does not divide).
    """

    pp: int
    dp: int
    microbatch: int
    reason: str
    candidate: Candidate | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form: the candidate's fields when simulated, with the reason."""
        head = self.candidate.as_dict() if self.candidate else {"pp": self.pp, "dp": self.dp, "microbatch": self.microbatch}
        return {**head, "reason": self.reason}


def ring_flows(cluster: Cluster, pp: int, dp: int) -> dict[tuple[str, int, int], int]:
    """Flows per shared resource when every stage's ring all-reduce sends at once (one flow per device to its ring successor)."""
    count: dict[tuple[str, int, int], int] = {}
    for g in range(pp * dp):
        for resource in cluster.resources(g, (g + pp) % (pp * dp)):
            count[resource] = count.get(resource, 0) + 1
    return count


def allreduce_s(cluster: Cluster, pp: int, dp: int, stage: int, grad_bytes: int) -> float:
    """Ring all-reduce time of one stage's gradients over its ``dp`` replicas, all stages' rings running at once.

    ``2 (dp - 1)`` rounds of ``grad_bytes / dp`` per member, at the slowest hop's share: a hop
    gets each resource it crosses (:meth:`~sim.pipeline.cluster.Cluster.resources`) divided
    among the ring flows of all ``pp`` stages on it (:func:`ring_flows`): e.g. 8 stages on
    one node whose rings all leave through one NIC get 1/8 of it each. An analytic estimate
    (no pipeline traffic, all rings at once); :func:`hybrid_step_s` uses the simulated flows
    when it can.
    """
    if dp == 1:
        return 0.0
    flows = ring_flows(cluster, pp, dp)
    ring = [r * pp + stage for r in range(dp)]
    slowest = min(
        min(cluster.capacity(res) / flows[res] for res in cluster.resources(a, b)) for a, b in zip(ring, ring[1:] + ring[:1], strict=True)
    )
    return 2 * (dp - 1) / dp * grad_bytes / slowest + 2 * (dp - 1) * cluster.latency_us * 1e-6


def hybrid_step_s(cluster: Cluster, plan: Plan, step: StepResult, dp: int) -> float:
    """One data-parallel pipeline step: each device's gradient all-reduce starts when its last op ends.

    When ``step`` was simulated with ``data_parallel=dp``, this is its ``step_s``: replicas,
    ring all-reduce flows and pipeline transfers sharing NICs, simulated together (module
    doc). Otherwise (a single pipeline's step) an estimate: each device's
    :func:`allreduce_s` (NIC shares of all rings at once, no pipeline traffic) added to the
    time its last op ends; the step ends when the last all-reduce (or the pipeline) does.
    """
    if step.data_parallel == dp:
        return step.step_s
    if step.data_parallel != 1:
        raise ValueError(f"step simulated with {step.data_parallel} replicas, asked for {dp}")
    ends = [done + allreduce_s(cluster, plan.devices, dp, d, plan.param_bytes[d]) for d, done in enumerate(step.device_done_s)]
    return max([step.makespan_s, *ends])


def gradient_allreduce_s(cluster: Cluster, plan: Plan, dp: int) -> float:
    """Time of the slowest stage's gradient all-reduce over ``dp`` replicas (:func:`allreduce_s`: all rings at once)."""
    return max(allreduce_s(cluster, plan.devices, dp, s, g) for s, g in enumerate(plan.param_bytes))


def tune(
    model: str,
    cluster: Cluster,
    *,
    global_batch: int,
    resolution: int = PIPELINE.resolution,
    microbatches: tuple[int, ...] = PIPELINE.tune_microbatches,
    balance: float = PIPELINE.balance,
    methods: tuple[str, ...] | None = None,
) -> tuple[list[Candidate], list[Rejected]]:
    """Every feasible configuration, fastest first, and the rejected ones with reasons.

    Args:
        balance: balance tolerance of the byte-aware partitioners (``blockwise-bytes``, ``skip-aware``).
        methods: partitioners to try (default: all of :data:`CHOICES`).

    Raises:
        UserInputError: no configuration fits (the message says the closest miss).
    """
    from coevo.sim.pipeline.profile import profile  # torch: loaded when a plan is first tuned

    if global_batch < 1:
        raise UserInputError(f"global batch must be at least 1, got {global_batch}")
    known = sorted({m for m, _ in CHOICES})
    if methods is not None and not set(methods) <= set(known):
        raise UserInputError(f"unknown partitioner(s) {sorted(set(methods) - set(known))}; choose from {', '.join(known)}")
    max_pairs = len(units(profile(model, resolution=resolution)))
    feasible: list[Candidate] = []
    rejected: list[Rejected] = []
    for pp in [d for d in range(1, cluster.devices + 1) if cluster.devices % d == 0]:
        dp = cluster.devices // pp
        for mb in microbatches:
            if global_batch % (dp * mb):
                rejected.append(Rejected(pp, dp, mb, f"global batch {global_batch} is not a multiple of dp x microbatch"))
                continue
            p = profile(model, resolution=resolution, microbatch=mb)
            n_micro = global_batch // (dp * mb)
            for method, schedule in CHOICES:
                if methods is not None and method not in methods:
                    continue
                if (method == "skip-aware" and pp > max_pairs) or pp > len(p.blocks):
                    continue
                entry, bound = _candidate(p, cluster, pp, dp, mb, n_micro, method, schedule, balance=balance, global_batch=global_batch)
                if bound > cluster.memory_gb:
                    rejected.append(Rejected(pp, dp, mb, f"needs {bound:.1f} GB on a device with {cluster.memory_gb:g} GB", entry))
                else:
                    feasible.append(entry)
    if not feasible:
        raise _none_fits(model, cluster, global_batch, rejected)
    feasible.sort(key=lambda c: -c.samples_per_s)
    return feasible, rejected


def _candidate(
    p: ModelProfile,
    cluster: Cluster,
    pp: int,
    dp: int,
    mb: int,
    n_micro: int,
    method: str,
    schedule: str,
    *,
    balance: float,
    global_batch: int,
) -> tuple[Candidate, float]:
    """One configuration simulated: its candidate record, and its memory bound per device (GB) under the schedule rule."""
    plan = partition(p, method, pp, **cluster.rates, balance_tolerance=balance if method in TOLERANT else 0.0)
    step = simulate(p, plan, cluster, schedule=schedule, microbatches=n_micro, data_parallel=dp)
    reduce_s = gradient_allreduce_s(cluster, plan, dp)
    bound = max(memory_bound(p, plan, schedule=schedule, microbatches=n_micro)) / 1e9
    total = hybrid_step_s(cluster, plan, step, dp)
    peak = max(step.peak_memory_bytes) / 1e9
    return Candidate(pp, dp, mb, method, schedule, total, global_batch / total, reduce_s, bound, peak), bound


def _none_fits(model: str, cluster: Cluster, global_batch: int, rejected: list[Rejected]) -> UserInputError:
    """The error when every configuration was rejected, naming the closest miss (the least memory among those simulated)."""
    simulated = [r.candidate for r in rejected if r.candidate is not None]
    closest = min(simulated, key=lambda c: c.memory_gb, default=None)
    hint = f"; closest: {closest.as_dict()}" if closest else ""
    return UserInputError(f"no configuration of {model} fits {cluster.name} for a global batch of {global_batch}{hint}")
