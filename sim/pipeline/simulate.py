"""Discrete-event simulation of one pipeline-parallel training step (GPipe, 1F1B, wave).

A plan's blocks are grouped into **virtual stages**: maximal runs of consecutive blocks
(forward order) on one device. A block-wise plan has one virtual stage per device; a
skip-aware plan is V-shaped (devices 0..S-1 through the encoder, back up through the
decoder), so each device hosts two virtual stages (the deepest one, one merged).

Per microbatch, virtual stage *v* runs forward ``F(v, m)`` (its FLOPs at the device rate
plus the cluster's fixed ``kernel_us`` per compute op: :func:`sim.pipeline.partition.work`) and
backward ``B(v, m)`` (twice that); ``F(v, m)`` waits for ``F(v-1, m)`` plus the transfer of
the activations crossing that boundary (the producer's output and any skips relayed
through it); ``B(v, m)`` waits for ``F(v, m)`` and ``B(v+1, m)`` plus the gradient transfer
(same bytes, reverse direction). Each device runs one op at a time; each directed device
pair is one link, used by one transfer at a time. Ops are list-scheduled: whenever a
device can start something, it starts the admissible ready op that the schedule prefers:

* ``gpipe``: forwards first; a device starts backwards only after all its forwards.
* ``1f1b``: backwards first; virtual stage *v* keeps at most ``V - v`` microbatches in
  flight (forward done, backward not), V = number of virtual stages (Megatron's 1F1B).
* ``wave``: the 1F1B rule applied over a V-shaped plan's virtual stages (Hanayo-style wave);
  on a block-wise plan it is the same as ``1f1b``.
* a given op order (``order``, e.g. a CP-SAT schedule from :mod:`sim.pipeline.ilp`): each
  device runs its ops in that order, as soon as each is ready.

Skips: a relayed plan sends each skip crossing devices along with the boundary activation
at every virtual-stage boundary it spans; a direct plan (``blockwise-direct``) sends it
once, point to point, from the producer's device when the producer's forward ends, and the
consumer's forward also waits for it (its gradient goes back the same way and the
producer's backward waits for it). Each transfer holds its directed link.

Activation memory per in-flight microbatch (:func:`stash_bytes`) is what autograd saves
for the virtual stage's backward (:meth:`sim.pipeline.profile.ModelProfile.activation_bytes`,
measured on the meta device), plus skips the device keeps for a later virtual stage that
nothing there saves: on a skip-aware plan the encoder output waiting for its decoder on
the same device, on a direct plan the skip held at its producer until sent (torchgpipe's
portals); both are counted for the producer's whole in-flight window, an upper bound.
With ``recompute`` (activation checkpointing per block), a virtual stage stashes only the
inputs of its blocks (and held skips) per in-flight microbatch and runs each block's
forward again before its backward (backward time 3x forward instead of 2x); while a block
runs its backward its saved tensors are live on top of the stash, for one block at a time.

Reported: makespan of the step (no optimizer, no data-parallel all-reduce), bubble ratio,
samples/s, bytes per link, and peak memory per device (16 bytes per parameter for
mixed-precision Adam, plus the stashed activations of in-flight microbatches and, with
recompute, the live block's saved tensors). Not modelled: transient tensors of an op
(gradients of activations during backward, temporaries inside a forward).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sim.errors import UserInputError
from sim.pipeline.cluster import Cluster
from sim.pipeline.partition import TRAIN_FLOPS_FACTOR, Plan, work
from sim.pipeline.profile import ModelProfile

SCHEDULES = ("gpipe", "1f1b", "wave")
Op = tuple[str, int, int]
"""``("F" | "B", virtual stage, microbatch)``."""
OPTIMIZER_BYTES_PER_PARAM_BYTE = 8
"""fp16 weights + fp16 grads + fp32 master, m, v = 16 bytes per parameter = 8 x its fp16 bytes."""


@dataclass(frozen=True)
class VirtualStage:
    """Consecutive blocks on one device."""

    device: int
    blocks: tuple[int, ...]
    forward_s: float
    send_bytes: int
    """Bytes sent to the next virtual stage per microbatch (forward; the gradients back are the same)."""
    stash_bytes: int
    """Activation bytes kept per in-flight microbatch without recompute (module doc)."""
    recompute_stash_bytes: int = 0
    """Bytes kept per in-flight microbatch with recompute: its blocks' inputs and held skips."""
    transient_bytes: int = 0
    """With recompute: the most saved bytes one of its blocks adds while it runs its backward."""


@dataclass(frozen=True)
class StepResult:
    """One simulated training step."""

    schedule: str
    microbatches: int
    makespan_s: float
    bubble_ratio: float
    samples_per_s: float
    link_bytes: dict[tuple[int, int], int]
    peak_memory_bytes: tuple[int, ...]
    virtual_stages: int
    device_done_s: tuple[float, ...] = ()
    """When each device finishes its last op (its gradients are final then)."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {
            "schedule": self.schedule,
            "microbatches": self.microbatches,
            "virtual_stages": self.virtual_stages,
            "makespan_ms": round(self.makespan_s * 1e3, 4),
            "bubble_ratio": round(self.bubble_ratio, 4),
            "samples_per_s": round(self.samples_per_s, 3),
            "bytes_per_step": sum(self.link_bytes.values()),
            "links": [{"from": a, "to": b, "bytes": n} for (a, b), n in sorted(self.link_bytes.items())],
            "peak_memory_gb": [round(m / 1e9, 3) for m in self.peak_memory_bytes],
        }


def stage_runs(device_of: Sequence[int]) -> list[list[int]]:
    """Virtual stages: maximal runs of consecutive blocks (forward order) on one device."""
    runs: list[list[int]] = []
    for i, d in enumerate(device_of):
        if runs and device_of[runs[-1][-1]] == d:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def boundary_tensors(
    device_of: Sequence[int], skips: Sequence[tuple[int, int]], *, direct: bool = False
) -> list[tuple[int, int, list[int]]]:
    """Per virtual-stage boundary: (from device, to device, block outputs sent across it).

    Sent: the boundary activation, and (relayed skips, ``direct`` False) each skip in flight
    across the boundary unless both its ends share a device (then it is cached locally,
    PULSE's point). With ``direct`` skips travel separately (:func:`direct_sends`).
    """
    runs = stage_runs(device_of)
    stage_of = {i: k for k, run in enumerate(runs) for i in run}
    out = []
    for k in range(len(runs) - 1):
        relayed = [] if direct else [s for s, c in skips if stage_of[s] <= k < stage_of[c] and device_of[s] != device_of[c]]
        out.append((device_of[runs[k][-1]], device_of[runs[k + 1][0]], [runs[k][-1], *relayed]))
    return out


def direct_sends(device_of: Sequence[int], skips: Sequence[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """Skips a direct plan sends point to point: (producer's virtual stage, consumer's virtual stage, producer block).

    Only skips whose ends sit on different devices travel; the others stay on the device."""
    stage_of = {i: k for k, run in enumerate(stage_runs(device_of)) for i in run}
    return [(stage_of[s], stage_of[c], s) for s, c in skips if device_of[s] != device_of[c]]


def _held_skips(profile: ModelProfile, plan: Plan, run: Sequence[int]) -> set[int]:
    """Skips produced in ``run`` that its device keeps for a later virtual stage (module doc)."""
    inside = set(run)
    held = set()
    for s, c in profile.skip_edges:
        if s in inside and c not in inside:
            same_device = plan.device_of[s] == plan.device_of[c]
            if same_device or plan.direct_skips:
                held.add(s)
    return held


def _activation_memory(profile: ModelProfile, plan: Plan, run: Sequence[int]) -> tuple[int, int, int]:
    """Stash without recompute, stash with recompute, and the recompute transient of one virtual stage (module doc)."""
    blocks = profile.blocks
    held = _held_skips(profile, plan, run)
    saved = {j for i in run for j in blocks[i].saved_outputs} | held
    stash = sum(blocks[i].saved_bytes for i in run) + sum(profile.output_bytes(j) for j in saved)
    inputs: set[int] = {i - 1 for i in run} | held
    inputs |= {skip for i in run if (skip := blocks[i].skip_from) is not None}
    recompute_stash = sum(profile.output_bytes(j) for j in inputs)
    transient = max(blocks[i].saved_bytes + sum(profile.output_bytes(j) for j in blocks[i].saved_outputs if j not in inputs) for i in run)
    return stash, recompute_stash, transient


def virtual_stages(profile: ModelProfile, plan: Plan, flops_per_s: float, kernel_s: float = 0.0) -> list[VirtualStage]:
    """Group ``plan``'s blocks into virtual stages with their compute and boundary bytes."""
    runs = stage_runs(plan.device_of)
    boundaries = boundary_tensors(plan.device_of, profile.skip_edges, direct=plan.direct_skips)
    sends = [sum(profile.blocks[t].out_bytes for t in tensors) for _, _, tensors in boundaries]
    out = []
    for k, run in enumerate(runs):
        flop_equivalents = sum(work(profile.blocks[i], flops_per_s, kernel_s) for i in run)
        stash, recompute_stash, transient = _activation_memory(profile, plan, run)
        send = sends[k] if k < len(sends) else 0
        out.append(
            VirtualStage(plan.device_of[run[0]], tuple(run), flop_equivalents / flops_per_s, send, stash, recompute_stash, transient)
        )
    return out


def stash_bytes(profile: ModelProfile, stages: Sequence[VirtualStage], v: int, recompute: bool) -> int:
    """Activation bytes virtual stage ``v`` keeps per in-flight microbatch (module doc; with recompute: its blocks' inputs)."""
    return stages[v].recompute_stash_bytes if recompute else stages[v].stash_bytes


def transient_bytes(stages: Sequence[VirtualStage], v: int, recompute: bool) -> int:
    """Bytes live on top of the stash while virtual stage ``v`` runs a backward (with recompute: one block's saved tensors)."""
    return stages[v].transient_bytes if recompute else 0


def memory_bound(profile: ModelProfile, plan: Plan, *, schedule: str, microbatches: int, recompute: bool = False) -> tuple[int, ...]:
    """Memory each device must hold under a schedule rule: optimizer state plus the most stashed activations it allows.

    GPipe stashes every microbatch on every virtual stage; 1F1B and wave keep at most
    ``V - v`` microbatches in flight on virtual stage ``v``; with recompute, the largest
    transient of the device's stages comes on top. The simulated peak never exceeds this.
    """
    stages = virtual_stages(profile, plan, 1.0)
    n_v = len(stages)
    memory = [0] * plan.devices
    transient = [0] * plan.devices
    for i, d in enumerate(plan.device_of):
        memory[d] += profile.blocks[i].param_bytes * OPTIMIZER_BYTES_PER_PARAM_BYTE
    for v, stage in enumerate(stages):
        limit = microbatches if schedule == "gpipe" else min(microbatches, n_v - v)
        memory[stage.device] += limit * stash_bytes(profile, stages, v, recompute)
        transient[stage.device] = max(transient[stage.device], transient_bytes(stages, v, recompute))
    return tuple(m + t for m, t in zip(memory, transient, strict=True))


def simulate(
    profile: ModelProfile,
    plan: Plan,
    cluster: Cluster,
    *,
    schedule: str,
    microbatches: int,
    order: Mapping[Op, float] | None = None,
    recompute: bool = False,
) -> StepResult:
    """Simulate one training step of ``microbatches`` microbatches (see module doc).

    Args:
        order: replay this op order per device (sort key per op) instead of a schedule rule;
            ``schedule`` then only names the result.
        recompute: activation checkpointing (module doc).

    Raises:
        UserInputError: unknown schedule, no microbatches, or more devices than the cluster has.
    """
    if schedule not in SCHEDULES and not (order is not None and schedule == "ilp"):
        raise UserInputError(f"unknown schedule {schedule!r}; choose from {', '.join(SCHEDULES)}")
    if microbatches < 1:
        raise UserInputError(f"microbatches must be at least 1, got {microbatches}")
    if plan.devices > cluster.devices:
        raise UserInputError(f"the plan uses {plan.devices} devices but cluster {cluster.name} has {cluster.devices}")
    stages = virtual_stages(profile, plan, **cluster.rates)
    n_v, n_dev = len(stages), plan.devices
    bwd_factor = TRAIN_FLOPS_FACTOR - 1.0 + (1.0 if recompute else 0.0)
    stashed = [stash_bytes(profile, stages, v, recompute) for v in range(len(stages))]
    live = [transient_bytes(stages, v, recompute) for v in range(len(stages))]
    skips_out: dict[int, list[tuple[int, int]]] = defaultdict(list)  # direct plans: producer stage -> (consumer stage, bytes)
    skips_in: dict[int, list[tuple[int, int]]] = defaultdict(list)  # consumer stage -> (producer stage, bytes)
    if plan.direct_skips:
        for src_v, dst_v, block in direct_sends(plan.device_of, profile.skip_edges):
            skips_out[src_v].append((dst_v, profile.blocks[block].out_bytes))
            skips_in[dst_v].append((src_v, profile.blocks[block].out_bytes))
    skip_arrival: dict[tuple[int, int], float] = defaultdict(float)  # (stage, microbatch) -> when its direct skips arrived
    grad_arrival: dict[tuple[int, int], float] = defaultdict(float)  # (stage, microbatch) -> when its skips' gradients arrived
    ready: dict[tuple[str, int, int], float] = {("F", 0, m): 0.0 for m in range(microbatches)}
    done: set[tuple[str, int, int]] = set()
    device_free = [0.0] * n_dev
    link_free: dict[tuple[int, int], float] = defaultdict(float)
    link_bytes: dict[tuple[int, int], int] = defaultdict(int)
    busy = [0.0] * n_dev
    inflight = [0] * n_v
    stash = [0] * n_dev
    peak = [0] * n_dev
    forwards_left = [sum(microbatches for s in stages if s.device == d) for d in range(n_dev)]
    finish: dict[tuple[str, int, int], float] = {}
    queues: dict[int, list[Op]] = {}
    if order is not None:
        for op in sorted(order, key=lambda o: (order[o], o)):
            queues.setdefault(stages[op[1]].device, []).append(op)
        queues = {d: q[::-1] for d, q in queues.items()}  # pop from the end

    def admissible(op: tuple[str, int, int]) -> bool:
        kind, v, _ = op
        dev = stages[v].device
        if order is not None:
            return bool(queues.get(dev)) and queues[dev][-1] == op
        if kind == "B":
            return schedule != "gpipe" or forwards_left[dev] == 0
        return schedule == "gpipe" or inflight[v] < n_v - v

    def priority(op: tuple[str, int, int]) -> tuple[int, int, int]:
        kind, v, m = op
        first = 0 if (kind == "B") != (schedule == "gpipe") else 1
        return (first, m, -v if kind == "B" else v)

    def send(src_v: int, dst_v: int, at: float, nbytes: int) -> float:
        a, b = stages[src_v].device, stages[dst_v].device
        if a == b or nbytes == 0:
            return at
        start = max(at, link_free[a, b])
        end = start + cluster.transfer_s(a, b, nbytes)
        link_free[a, b] = end
        link_bytes[a, b] += nbytes
        return end

    total = 2 * n_v * microbatches
    while len(done) < total:
        choice: tuple[float, tuple[int, int, int], tuple[str, int, int]] | None = None
        for op, t in ready.items():
            if op in done or not admissible(op):
                continue
            start = max(t, device_free[stages[op[1]].device])
            key = (start, priority(op), op)
            if choice is None or key[:2] < choice[:2]:
                choice = key
        if choice is None:
            raise RuntimeError("pipeline simulation deadlocked (a schedule rule admits no ready op)")  # a bug, not user input
        start, _, op = choice
        kind, v, m = op
        stage = stages[v]
        dev = stage.device
        duration = stage.forward_s * (1.0 if kind == "F" else bwd_factor)
        end = start + duration
        device_free[dev] = end
        busy[dev] += duration
        done.add(op)
        del ready[op]
        if order is not None:
            queues[dev].pop()
        finish[op] = end
        if kind == "F":
            forwards_left[dev] -= 1
            inflight[v] += 1
            stash[dev] += stashed[v]
            peak[dev] = max(peak[dev], stash[dev])
            if v + 1 < n_v:
                arrive = send(v, v + 1, end, stage.send_bytes)
                for dst_v, nbytes in skips_out[v]:  # after the boundary activation, which is needed first
                    skip_arrival[dst_v, m] = max(skip_arrival[dst_v, m], send(v, dst_v, end, nbytes))
                ready["F", v + 1, m] = max(arrive, skip_arrival.pop((v + 1, m), 0.0))
            else:
                ready["B", v, m] = end
        else:
            peak[dev] = max(peak[dev], stash[dev] + live[v])  # one block's saved tensors live during its backward (recompute)
            inflight[v] -= 1
            stash[dev] -= stashed[v]
            if v > 0:
                arrive = send(v, v - 1, end, stages[v - 1].send_bytes)
                for src_v, nbytes in skips_in[v]:
                    grad_arrival[src_v, m] = max(grad_arrival[src_v, m], send(v, src_v, end, nbytes))
                ready["B", v - 1, m] = max(arrive, finish["F", v - 1, m], grad_arrival.pop((v - 1, m), 0.0))
    makespan = max(finish.values())
    params = [sum(profile.blocks[i].param_bytes for i in s.blocks) for s in stages]
    param_dev = [0] * n_dev
    for s, pb in zip(stages, params, strict=True):
        param_dev[s.device] += pb
    memory = tuple(pb * OPTIMIZER_BYTES_PER_PARAM_BYTE + pk for pb, pk in zip(param_dev, peak, strict=True))
    return StepResult(
        schedule=schedule,
        microbatches=microbatches,
        makespan_s=makespan,
        bubble_ratio=1.0 - sum(busy) / (n_dev * makespan),
        samples_per_s=microbatches * profile.microbatch / makespan,
        link_bytes=dict(link_bytes),
        peak_memory_bytes=memory,
        virtual_stages=n_v,
        device_done_s=tuple(max((t for op, t in finish.items() if stages[op[1]].device == d), default=0.0) for d in range(n_dev)),
    )
