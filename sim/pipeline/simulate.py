"""Discrete-event simulation of one pipeline-parallel training step (GPipe, 1F1B, wave, interleaved, ZB-H1).

A plan's blocks are grouped into **virtual stages**: maximal runs of consecutive blocks
(forward order) on one device. A block-wise plan has one virtual stage per device; a
skip-aware plan is V-shaped (devices 0..S-1 through the encoder, back up through the
decoder), so each device hosts two virtual stages (the deepest one, one merged).

Per microbatch, virtual stage *v* runs forward ``F(v, m)`` (its FLOPs at the device rate
plus the cluster's fixed ``kernel_us`` per compute op: :func:`sim.pipeline.partition.work`) and
backward ``B(v, m)`` (twice that); ``F(v, m)`` waits for ``F(v-1, m)`` plus the transfer of
the activations crossing that boundary (the producer's output and any skips relayed
through it); ``B(v, m)`` waits for ``F(v, m)`` and ``B(v+1, m)`` plus the gradient transfer
(same bytes, reverse direction). Each device runs one op at a time. Ops are list-scheduled:
whenever a device is idle, it starts the admissible ready op that the schedule prefers:

* ``gpipe``: forwards first; a device starts backwards only after all its forwards.
* ``1f1b``: backwards first; virtual stage *v* keeps at most ``V - v`` microbatches in
  flight (forward done, backward not), V = number of virtual stages (Megatron's 1F1B).
* ``wave``: the 1F1B rule applied over a V-shaped plan's virtual stages (Hanayo-style wave);
  on a block-wise plan it is the same as ``1f1b``.
* ``interleaved``: Megatron-LM's interleaved 1F1B over the plan's virtual stages (model
  chunks): each device runs a fixed op order (:func:`interleaved_order`): forwards of its
  chunks in groups of ``p`` microbatches (p = devices), a warm-up of ``2 (p - d - 1) +
  (k - 1) p`` forwards on device *d* with *k* chunks, then one forward, one backward, and
  the remaining backwards. On a block-wise plan (one chunk) it is plain 1F1B's order; on a
  V-shaped plan Megatron's warm-up counts (made for its loop placement) deadlock, and each
  stuck device gets the fewest extra warm-up forwards that let the order run. Megatron's
  group order fits the loop placement, not the V: there it runs far behind wave.
* ``zb-h1``: zero-bubble ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024):
  the backward is split into ``B`` (input gradient, sent upstream at once) and ``W`` (weight
  gradient, needed only by the optimizer), each half of the backward's time. ``B`` first,
  then ``F`` (1F1B's in-flight rule on ``F``..``B``), and ``W`` fills what is left; a
  microbatch's activations are held from ``F`` until its ``W``, and every device may hold at
  most as many microbatches as the fullest device holds under 1F1B (``V`` on a block-wise
  plan: 1F1B's peak, the paper's "same memory as 1F1B"), so later stages can defer up to
  ``v`` ``W`` s into the tail. With uniform stages F = B = W this gives the paper's bubble
  ``(p - 1)(F + B - W)`` per device instead of 1F1B's ``(p - 1)(F + B + W)`` (tested).
* a given op order (``order``, e.g. a CP-SAT schedule from :mod:`sim.pipeline.ilp`): each
  device runs its ops in that order, as soon as each is ready; an order that cannot run
  (an op waits for one queued after it) is refused.

**Network**: every transfer is a flow over the cluster's shared resources
(:meth:`sim.pipeline.cluster.Cluster.resources`): the directed GPU link inside a node, or
the sending node's NIC (transmit) and the receiving node's NIC (receive) between nodes.
After ``latency_us``, concurrent flows get max-min fair shares of every resource they
cross (progressive filling, recomputed whenever a flow starts or ends): two stages of one
node sending to another node at once through one NIC each get half its bandwidth.

**Data parallelism** (``data_parallel`` = *dp* > 1): *dp* replicas of the pipeline run
together, replica *r*'s device *d* on cluster device ``r * p + d``; as soon as a device's
last op is done (its gradients are final), it joins the ring all-reduce of its stage's
fp16 gradients with its replicas: ``2 (dp - 1)`` rounds, each member sending ``1/dp`` of
the gradients to its ring successor once it has received the previous round's chunk. The
rings' flows share NICs and links with the pipelines' own transfers still in flight
(overlapped with the pipeline's tail, not bucketed inside one device's backward).

Skips: a relayed plan sends each skip crossing devices along with the boundary activation
at every virtual-stage boundary it spans; a direct plan (``blockwise-direct``) sends it
once, point to point, from the producer's device when the producer's forward ends, and the
consumer's forward also waits for it (its gradient goes back the same way and the
producer's backward waits for it). Each transfer is a flow of the network below: a direct
skip is one flow from the producer's device to the consumer's, started when the
producer's forward ends (its gradient one flow back, started when the consumer's backward
ends), sharing links and NICs with every other flow in flight.

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

Reported: makespan of the pipeline (no optimizer), the step with its all-reduce,
bubble ratio, samples/s, bytes per link, peak memory per device (16 bytes per parameter for
mixed-precision Adam, plus the stashed activations of in-flight microbatches (under
``zb-h1`` held from ``F`` until ``W``) and, with recompute, the live block's saved tensors
during a backward), and the timeline, which :func:`check_timeline` validates after every
simulation. Not modelled: transient tensors of an op (gradients of activations during
backward, temporaries inside a forward).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from coevo.sim.errors import UserInputError
from coevo.sim.pipeline.cluster import Cluster
from coevo.sim.pipeline.config import PIPELINE
from coevo.sim.pipeline.partition import TRAIN_FLOPS_FACTOR, Plan, work

if TYPE_CHECKING:  # sim.pipeline.profile imports torch and networkx; only its types are needed here
    from coevo.sim.pipeline.profile import ModelProfile

SCHEDULES = ("gpipe", "1f1b", "wave", "interleaved", "zb-h1")
Op = tuple[str, int, int]
"""``("F" | "B" | "W", virtual stage, microbatch)``; ``W`` only where the backward is split (``zb-h1``)."""
OPTIMIZER_BYTES_PER_PARAM_BYTE = 8
"""fp16 weights + fp16 grads + fp32 master, m, v = 16 bytes per parameter = 8 x its fp16 bytes."""
EPS = 1e-9
"""Seconds of float slack when comparing event times."""


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
class Span:
    """One op as it ran: which replica's op, on which cluster device, from when to when."""

    op: Op
    replica: int
    device: int
    start: float
    end: float


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
    """When each device (of replica 0) finishes its last op (its gradients are final then)."""
    data_parallel: int = 1
    step_s: float = 0.0
    """The step with every gradient all-reduce done (``makespan_s`` when ``data_parallel`` is 1)."""
    allreduce_bytes: int = 0
    """Bytes the gradient all-reduce rings sent, all replicas together."""
    timeline: tuple[Span, ...] = field(default=(), repr=False, compare=False)

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        out = {
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
        if self.data_parallel > 1:
            out |= {"data_parallel": self.data_parallel, "step_ms": round(self.step_s * 1e3, 4), "allreduce_bytes": self.allreduce_bytes}
        return out


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
    ``V - v`` microbatches in flight on virtual stage ``v``. Interleaved runs a fixed op order
    per device (:func:`interleaved_order`): the most its order ever holds (forwards done,
    backwards not, each at its stage's stash). ZB-H1 lets a device hold at most
    :func:`zb_h1_cap` microbatches from ``F`` until ``W``, at most ``microbatches`` per
    virtual stage: the bound fills the device's largest stashes first. With recompute, the
    largest transient of the device's stages comes on top. The simulated peak never exceeds
    this (for a schedule rule, not for an arbitrary given ``order``).
    """
    stages = virtual_stages(profile, plan, 1.0)
    n_v = len(stages)
    memory = [0] * plan.devices
    transient = [0] * plan.devices
    stash = [stash_bytes(profile, stages, v, recompute) for v in range(n_v)]
    for i, d in enumerate(plan.device_of):
        memory[d] += profile.blocks[i].param_bytes * OPTIMIZER_BYTES_PER_PARAM_BYTE
    for v, stage in enumerate(stages):
        transient[stage.device] = max(transient[stage.device], transient_bytes(stages, v, recompute))
    if schedule == "interleaved":
        order = interleaved_order(stages, plan.devices, microbatches)
        held = [0] * plan.devices
        most = [0] * plan.devices
        for kind, v, _ in sorted(order, key=lambda o: (order[o], o)):
            d = stages[v].device
            held[d] += stash[v] if kind == "F" else -stash[v]
            most[d] = max(most[d], held[d])
        activations = most
    elif schedule == "zb-h1":
        cap = zb_h1_cap(stages, microbatches)
        activations = [0] * plan.devices
        for d in range(plan.devices):
            left = cap
            for size in sorted((stash[v] for v, s in enumerate(stages) if s.device == d), reverse=True):
                take = min(left, microbatches)
                activations[d] += take * size
                left -= take
    else:
        activations = [0] * plan.devices
        for v, stage in enumerate(stages):
            limit = microbatches if schedule == "gpipe" else min(microbatches, n_v - v)
            activations[stage.device] += limit * stash[v]
    return tuple(m + a + t for m, a, t in zip(memory, activations, transient, strict=True))


class _Network:
    """Transfers in flight over a cluster's shared resources, each at its max-min fair rate.

    A flow waits ``latency_us``, then moves its bytes at a rate set by progressive filling:
    repeatedly, the resource whose remaining capacity divided by its unfrozen flows is
    smallest fixes that share for those flows (the bottleneck), until every flow has a rate.
    """

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.latency_s = cluster.latency_us * 1e-6
        self.flows: dict[int, list[Any]] = {}  # id -> [resources, bytes left, active from, rate, tag]
        self.count = 0

    def add(self, now: float, src: int, dst: int, nbytes: float, tag: Any) -> None:
        """Start sending ``nbytes`` from cluster device ``src`` to ``dst`` at ``now``."""
        self.flows[self.count] = [self.cluster.resources(src, dst), float(nbytes), now + self.latency_s, 0.0, tag]
        self.count += 1

    def _rates(self, now: float) -> None:
        active = [f for f in self.flows.values() if f[2] <= now + EPS]
        for f in self.flows.values():
            f[3] = 0.0
        left: dict[Any, float] = {}
        users: dict[Any, list[list[Any]]] = defaultdict(list)
        for f in active:
            for r in f[0]:
                left.setdefault(r, self.cluster.capacity(r))
                users[r].append(f)
        unfrozen = {id(f): f for f in active}
        while unfrozen:
            share, bottleneck = min(
                (left[r] / sum(1 for f in fs if id(f) in unfrozen), r) for r, fs in users.items() if any(id(f) in unfrozen for f in fs)
            )
            for f in [f for f in users[bottleneck] if id(f) in unfrozen]:
                f[3] = share
                del unfrozen[id(f)]
                for r in f[0]:
                    left[r] -= share

    def next_event(self, now: float) -> float:
        """When the next flow becomes active or finishes (inf when none is in flight)."""
        self._rates(now)
        best = float("inf")
        for _, nbytes, active_from, rate, _ in self.flows.values():
            best = min(best, active_from if active_from > now + EPS else now + nbytes / rate)
        return best

    def advance(self, now: float, until: float) -> list[Any]:
        """Move every active flow's bytes from ``now`` to ``until``; the tags of the flows that finished."""
        done = []
        for key, f in list(self.flows.items()):
            if f[2] <= now + EPS:
                f[1] -= f[3] * (until - now)
                if f[1] <= 1e-9 * max(1.0, f[3]):  # bytes left below a nanosecond's worth
                    done.append(f[4])
                    del self.flows[key]
        return done


def interleaved_order(stages: Sequence[VirtualStage], devices: int, microbatches: int) -> dict[Op, float]:
    """Megatron-LM's interleaved 1F1B op order over the virtual stages (model chunks) of each device.

    Device *d* hosts chunks ``c = 0..k-1`` (its virtual stages in forward order). Its forwards
    run in groups of ``p`` = ``devices`` microbatches: chunk 0 of microbatches 0..p-1, chunk 1
    of the same, ..., then the next group; backwards in the same groups with the chunks
    reversed (Megatron's ``get_model_chunk_id``). Warm-up: ``2 (p - d - 1) + (k - 1) p``
    forwards (Megatron's ``num_warmup_microbatches``; ``p - d - 1`` with one chunk, plain
    1F1B), then alternately one forward and one backward, then the backwards left.

    Megatron's warm-up counts assume its loop placement (chunk *c* of device *d* is stage
    ``c p + d``). On a V-shaped plan the deepest device has one chunk in the middle of the
    chain, and its count (0) deadlocks the order; each device whose order cannot proceed
    gets one more warm-up forward until the whole order runs (:func:`order_runs`: the
    fewest extra warm-ups found device by device, never fewer than Megatron's).

    Returns:
        a sort key per op, increasing along each device's order (for ``simulate(order=...)``).
    """
    extra = [0] * devices
    warmups: list[int] = []
    while True:
        order: dict[Op, float] = {}
        previous, warmups = warmups, []
        for d in range(devices):
            chunks = [v for v, s in enumerate(stages) if s.device == d]
            k = len(chunks)
            groups = [range(g, min(g + devices, microbatches)) for g in range(0, microbatches, devices)]
            fwd: list[Op] = [("F", chunks[c], m) for g in groups for c in range(k) for m in g]
            bwd: list[Op] = [("B", chunks[c], m) for g in groups for c in reversed(range(k)) for m in g]
            warmup = min(len(fwd), extra[d] + (2 * (devices - d - 1) + (k - 1) * devices if k > 1 else devices - d - 1))
            warmups.append(warmup)
            seq = fwd[:warmup]
            for i in range(len(fwd) - warmup):
                seq += [fwd[warmup + i], bwd[i]]
            seq += bwd[len(fwd) - warmup :]
            order |= {op: float(i) for i, op in enumerate(seq)}
        stuck = order_runs(stages, order, microbatches)
        if not stuck:
            return order
        if warmups == previous:  # every stuck device already warms up with all its forwards
            raise RuntimeError(f"interleaved order deadlocks on devices {stuck}")  # a bug: all forwards first always runs
        for d in stuck:
            extra[d] += 1


def order_runs(stages: Sequence[VirtualStage], order: Mapping[Op, float], microbatches: int) -> list[int]:
    """Whether per-device op orders can run: the devices stuck on a backward when none can proceed (empty: it runs).

    Plays the orders as a token game on the dependencies of the module doc (times do not
    matter: an order deadlocks or not whatever the durations).
    """
    n_v = len(stages)
    queues: dict[int, list[Op]] = defaultdict(list)
    for op in sorted(order, key=lambda o: (order[o], o)):
        queues[stages[op[1]].device].append(op)
    heads = dict.fromkeys(queues, 0)
    done: set[Op] = set()

    def can(op: Op) -> bool:
        kind, v, m = op
        if kind == "F":
            return v == 0 or ("F", v - 1, m) in done
        if kind == "W":
            return ("B", v, m) in done
        return ("F", v, m) in done and (v == n_v - 1 or ("B", v + 1, m) in done)

    moved = True
    while moved:
        moved = False
        for d, q in queues.items():
            while heads[d] < len(q) and can(q[heads[d]]):
                done.add(q[heads[d]])
                heads[d] += 1
                moved = True
    return [d for d, q in queues.items() if heads[d] < len(q) and q[heads[d]][0] == "B"]


def zb_h1_cap(stages: Sequence[VirtualStage], microbatches: int) -> int:
    """Microbatches a device may hold (forward done, weight gradient not) under ZB-H1: the most any device holds under 1F1B."""
    n_v = len(stages)
    held: dict[int, int] = defaultdict(int)
    for v, s in enumerate(stages):
        held[s.device] += min(microbatches, n_v - v)
    return max(held.values())


def zb_h1_order(stages: Sequence[VirtualStage], one_f_one_b: Sequence[Span], microbatches: int) -> dict[Op, float]:
    """ZB-H1's op order per device, built on 1F1B's: each ``W`` deferred as far as the memory budget allows.

    Device *d* runs its forwards and input-gradient backwards ``B`` in the order 1F1B ran
    them (``one_f_one_b``: replica 0's timeline), and after each ``B`` the oldest pending
    ``W`` once more than ``D_d`` are pending, where ``D_d`` is :func:`zb_h1_cap` minus what
    *d* holds under 1F1B; the rest at the end. On a block-wise plan stage *i* holds at most
    ``p - i`` microbatches under 1F1B, so it defers ``i`` W passes: the schedule of Qi et
    al.'s Figure 3 (stage 0: ``F^p (B W F)* ...``; the last stage: ``(F B)^p`` then ``W F B``
    cycles). Derivation of its bubble for uniform stages (``F``, ``B``, ``W`` each one unit,
    ``m >= p``): the last stage starts at ``(p - 1) F`` and never idles; because it defers
    ``p - 1`` W passes, its last ``B`` ends ``(p - 1) W`` before its end; the gradient then
    takes ``(p - 1) B`` to reach stage 0, which ends with its last ``W``: makespan =
    ``(p - 1) F + m (F + B + W) - (p - 1) W + (p - 1) B`` , i.e. an idle time of
    ``(p - 1)(F + B - W)`` per device (the paper's ZB-H1 bubble), against 1F1B's
    ``(p - 1)(F + B + W)``.

    Returns:
        a sort key per op (``F``, ``B``, ``W``), increasing along each device's order.
    """
    n_v = len(stages)
    cap = zb_h1_cap(stages, microbatches)
    order: dict[Op, float] = {}
    per_device: dict[int, list[Span]] = defaultdict(list)
    for span in one_f_one_b:
        if span.replica == 0:
            per_device[stages[span.op[1]].device].append(span)
    for d, spans in per_device.items():
        delay = cap - sum(min(microbatches, n_v - v) for v, s in enumerate(stages) if s.device == d)
        seq: list[Op] = []
        pending: list[Op] = []
        for span in sorted(spans, key=lambda s: s.start):
            seq.append(span.op)
            if span.op[0] == "B":
                pending.append(("W", span.op[1], span.op[2]))
                if len(pending) > delay:
                    seq.append(pending.pop(0))
        seq += pending
        order |= {op: float(i) for i, op in enumerate(seq)}
    return order


def check_timeline(
    stages: Sequence[VirtualStage],
    cluster: Cluster,
    timeline: Sequence[Span],
    *,
    microbatches: int,
    replicas: int = 1,
    split_backward: bool = False,
    skips: Sequence[tuple[int, int, int]] = (),
) -> None:
    """Raise ``ValueError`` unless ``timeline`` is a valid pipeline step.

    Valid: every op of every replica (``F``, ``B`` and, with ``split_backward``, ``W`` of each
    virtual stage and microbatch) ran exactly once, on its stage's device; a device ran one
    op at a time; ``F(v, m)`` started after ``F(v-1, m)`` ended plus the transfer between
    their devices alone on its path (contention only lengthens it), ``B(v, m)`` after
    ``F(v, m)`` and after ``B(v+1, m)`` plus the transfer back, ``W(v, m)`` after ``B(v, m)``;
    for each direct skip ``(producer stage, consumer stage, bytes)`` in ``skips``, the
    consumer's ``F`` after the producer's ``F`` plus that transfer alone, and the producer's
    ``B`` after the consumer's ``B`` plus the transfer back.
    """
    n_v, n_dev = len(stages), 1 + max(s.device for s in stages)
    seen = _spans_once(stages, timeline, microbatches=microbatches, replicas=replicas, split_backward=split_backward)
    _one_op_at_a_time(timeline)

    def after(r: int, later: Op, earlier: Op, gap: float) -> None:
        if seen[r, later].start < seen[r, earlier].end + gap - EPS:
            raise ValueError(
                f"replica {r}: {later} starts at {seen[r, later].start:.6g}, before {earlier} ends plus {gap:.3g} s of transfer"
            )

    for r in range(replicas):
        for m in range(microbatches):
            for v in range(n_v):
                if v > 0:
                    hop = cluster.transfer_s(r * n_dev + stages[v - 1].device, r * n_dev + stages[v].device, stages[v - 1].send_bytes)
                    after(r, ("F", v, m), ("F", v - 1, m), hop)
                    back = cluster.transfer_s(r * n_dev + stages[v].device, r * n_dev + stages[v - 1].device, stages[v - 1].send_bytes)
                    after(r, ("B", v - 1, m), ("B", v, m), back)
                after(r, ("B", v, m), ("F", v, m), 0.0)
                if split_backward:
                    after(r, ("W", v, m), ("B", v, m), 0.0)
            for src_v, dst_v, nbytes in skips:
                producer, consumer = r * n_dev + stages[src_v].device, r * n_dev + stages[dst_v].device
                after(r, ("F", dst_v, m), ("F", src_v, m), cluster.transfer_s(producer, consumer, nbytes))
                after(r, ("B", src_v, m), ("B", dst_v, m), cluster.transfer_s(consumer, producer, nbytes))


def _spans_once(
    stages: Sequence[VirtualStage], timeline: Sequence[Span], *, microbatches: int, replicas: int, split_backward: bool
) -> dict[tuple[int, Op], Span]:
    """Every expected op of every replica ran exactly once, on its stage's device (:func:`check_timeline`); the spans by (replica, op)."""
    n_v, n_dev = len(stages), 1 + max(s.device for s in stages)
    kinds = ("F", "B", "W") if split_backward else ("F", "B")
    expected = {(r, (k, v, m)) for r in range(replicas) for k in kinds for v in range(n_v) for m in range(microbatches)}
    seen: dict[tuple[int, Op], Span] = {}
    for span in timeline:
        key = (span.replica, span.op)
        if key not in expected:
            raise ValueError(f"unexpected op {span.op} of replica {span.replica}")
        if key in seen:
            raise ValueError(f"op {span.op} of replica {span.replica} ran twice")
        if span.device != span.replica * n_dev + stages[span.op[1]].device or span.end < span.start:
            raise ValueError(f"op {span.op} of replica {span.replica} ran on device {span.device} from {span.start} to {span.end}")
        seen[key] = span
    if missing := expected - seen.keys():
        raise ValueError(f"{len(missing)} ops never ran, e.g. {min(missing)}")
    return seen


def _one_op_at_a_time(timeline: Sequence[Span]) -> None:
    """No device runs two ops at once (:func:`check_timeline`)."""
    per_device: dict[int, list[Span]] = defaultdict(list)
    for span in timeline:
        per_device[span.device].append(span)
    for device, spans in per_device.items():
        spans.sort(key=lambda s: (s.start, s.end))
        for a, b in itertools.pairwise(spans):
            if b.start < a.end - EPS:
                raise ValueError(f"device {device} runs {a.op} and {b.op} at once ({b.start:.6g} < {a.end:.6g})")


def simulate(
    profile: ModelProfile,
    plan: Plan,
    cluster: Cluster,
    *,
    schedule: str,
    microbatches: int,
    order: Mapping[Op, float] | None = None,
    recompute: bool = PIPELINE.recompute,
    data_parallel: int = PIPELINE.data_parallel,
) -> StepResult:
    """Simulate one training step of ``microbatches`` microbatches (see module doc).

    Args:
        order: replay this op order per device (sort key per op) instead of a schedule rule;
            ``schedule`` then only names the result.
        recompute: activation checkpointing (module doc).
        data_parallel: replicas of the pipeline, each stage's gradients ring-all-reduced (module doc).

    Raises:
        UserInputError: unknown schedule, no microbatches, more devices than the cluster has,
            or an ``order`` that cannot run.
    """
    _check_step_args(plan, cluster, schedule=schedule, microbatches=microbatches, order=order, data_parallel=data_parallel)
    stages = virtual_stages(profile, plan, **cluster.rates)
    if schedule == "interleaved" and order is None:
        order = interleaved_order(stages, plan.devices, microbatches)
    if schedule == "zb-h1" and order is None:
        base = simulate(profile, plan, cluster, schedule="1f1b", microbatches=microbatches, recompute=recompute)
        order = zb_h1_order(stages, base.timeline, microbatches)
    step = _Step(
        profile, plan, cluster, stages, schedule=schedule, microbatches=microbatches, order=order, recompute=recompute, dp=data_parallel
    )
    step.run()
    return step.result()


def _check_step_args(
    plan: Plan, cluster: Cluster, *, schedule: str, microbatches: int, order: Mapping[Op, float] | None, data_parallel: int
) -> None:
    """The arguments of :func:`simulate` that no simulation can take, as a :class:`UserInputError`."""
    if schedule not in SCHEDULES and not (order is not None and schedule == "ilp"):
        raise UserInputError(f"unknown schedule {schedule!r}; choose from {', '.join(SCHEDULES)}")
    if microbatches < 1:
        raise UserInputError(f"microbatches must be at least 1, got {microbatches}")
    if data_parallel < 1:
        raise UserInputError(f"data_parallel must be at least 1, got {data_parallel}")
    if plan.devices * data_parallel > cluster.devices:
        raise UserInputError(
            f"the plan uses {plan.devices} x {data_parallel} (data-parallel) devices but cluster {cluster.name} has {cluster.devices}"
        )


class _Ring:
    """The data-parallel gradient all-reduce: one ring per pipeline stage over its replicas (module doc).

    Cluster device ``g``'s ring successor is the same stage of the next replica. A member
    starts round ``k`` once its gradients are final (``ops_left`` 0) and it has received
    round ``k - 1``'s chunk; ``2 (dp - 1)`` rounds in all.
    """

    def __init__(self, net: _Network, param_bytes: Sequence[int], n_dev: int, dp: int) -> None:
        self.net, self.param_bytes, self.n_dev, self.dp = net, param_bytes, n_dev, dp
        self.n_g = n_dev * dp
        self.rounds = 2 * (dp - 1)
        self.sent = [0] * self.n_g  # rounds whose chunk a member has sent
        self.received = [0] * self.n_g  # rounds whose chunk it has received from its ring predecessor
        self.sending = [False] * self.n_g
        self.end = 0.0
        self.bytes = 0

    def successor(self, g: int) -> int:
        """The ring successor of cluster device ``g``."""
        return (g + self.n_dev) % self.n_g

    def step(self, g: int, now: float, ops_left: int) -> None:
        """Start member ``g``'s next ring round when its gradients are final and the previous chunk has arrived."""
        k = self.sent[g]
        if self.sending[g] or ops_left > 0 or k >= self.rounds or self.received[g] < k:
            if k >= self.rounds and self.received[g] >= self.rounds:
                self.end = max(self.end, now)
            return
        chunk = self.param_bytes[g % self.n_dev] / self.dp
        if chunk <= 0:
            self.sent[g], self.received[self.successor(g)] = self.rounds, self.rounds
            self.end = max(self.end, now)
            return
        self.sending[g] = True
        self.bytes += int(chunk)
        self.net.add(now, g, self.successor(g), chunk, ("ar", g))

    def chunk_sent(self, g: int) -> None:
        """Member ``g``'s chunk of its current round has reached its successor."""
        self.sending[g] = False
        self.sent[g] += 1
        self.received[self.successor(g)] += 1

    def finished(self) -> bool:
        """Every member has sent and received every round."""
        return all(self.sent[g] >= self.rounds and self.received[g] >= self.rounds for g in range(self.n_g))


class _Step:
    """The list-scheduling event loop of :func:`simulate` over every replica's devices (module doc).

    Phases of one event (:meth:`run`): transfers ending now land, idle devices start their
    preferred admissible ready op (:meth:`_start_idle`), time moves to the next op end or
    transfer event, and ops ending then complete (:meth:`_complete`), which sends their
    activations or gradients on and may start a device's all-reduce.
    """

    def __init__(
        self,
        profile: ModelProfile,
        plan: Plan,
        cluster: Cluster,
        stages: Sequence[VirtualStage],
        *,
        schedule: str,
        microbatches: int,
        order: Mapping[Op, float] | None,
        recompute: bool,
        dp: int,
    ) -> None:
        self.profile, self.plan, self.cluster, self.stages = profile, plan, cluster, stages
        self.schedule, self.microbatches, self.order, self.dp = schedule, microbatches, order, dp
        self.n_v, self.n_dev = len(stages), plan.devices
        self.n_g = self.n_dev * dp  # cluster devices in use: replica r's device d is r * n_dev + d
        self.split = schedule == "zb-h1"
        bwd_factor = TRAIN_FLOPS_FACTOR - 1.0 + (1.0 if recompute else 0.0)
        weight_factor = (TRAIN_FLOPS_FACTOR - 1.0) / 2  # ZB: W is half the backward (recompute stays in B)
        self.duration = {"F": 1.0, "B": bwd_factor - weight_factor if self.split else bwd_factor, "W": weight_factor}
        self.stashed = [stash_bytes(profile, stages, v, recompute) for v in range(self.n_v)]
        self.live = [transient_bytes(stages, v, recompute) for v in range(self.n_v)]
        self._wire_skips()
        self.waiting: dict[tuple[int, Op], int] = {}  # (cluster device, op) -> messages still to arrive
        self.ready: list[dict[Op, float]] = [{} for _ in range(self.n_g)]
        for r in range(dp):
            for m in range(microbatches):
                self.ready[r * self.n_dev + stages[0].device]["F", 0, m] = 0.0
        self.running: dict[int, tuple[Op, float, float]] = {}  # cluster device -> (op, start, end)
        self.link_bytes: dict[tuple[int, int], int] = defaultdict(int)
        self.busy = [0.0] * self.n_g
        self.inflight = [[0] * self.n_v for _ in range(dp)]
        self.stash = [0] * self.n_g
        self.peak = [0] * self.n_g
        kinds = 3 if self.split else 2
        self.forwards_left = [sum(microbatches for s in stages if s.device == g % self.n_dev) for g in range(self.n_g)]
        self.ops_left = [kinds * self.forwards_left[g] for g in range(self.n_g)]
        self.done_at = [0.0] * self.n_g
        self.timeline: list[Span] = []
        self.queues = self._queues()
        self.net = _Network(cluster)
        self.ring = _Ring(self.net, plan.param_bytes, self.n_dev, dp)

    def _wire_skips(self) -> None:
        """Direct skips (producer, consumer, bytes), and the messages each op waits for."""
        self.skip_sends: list[tuple[int, int, int]] = []  # direct plans: (producer stage, consumer stage, bytes) per skip sent
        if self.plan.direct_skips:
            sends = direct_sends(self.plan.device_of, self.profile.skip_edges)
            self.skip_sends = [(src_v, dst_v, self.profile.blocks[b].out_bytes) for src_v, dst_v, b in sends]
        self.skips_out: dict[int, list[tuple[int, int]]] = defaultdict(list)  # direct plans: producer stage -> (consumer stage, bytes)
        self.skips_in: dict[int, list[tuple[int, int]]] = defaultdict(list)  # consumer stage -> (producer stage, bytes)
        for src_v, dst_v, nbytes in self.skip_sends:
            self.skips_out[src_v].append((dst_v, nbytes))
            self.skips_in[dst_v].append((src_v, nbytes))
        # messages each op waits for: F(v) its input and the direct skips into v; B(v) the gradient
        # from v + 1 (or, on the last stage, its own F) and the gradients of v's direct skips
        n_v = self.n_v
        self.needs = {
            "F": [(1 if v > 0 else 0) + len(self.skips_in[v]) for v in range(n_v)],
            "B": [1 + len(self.skips_out[v]) for v in range(n_v)],
            "W": [1] * n_v,
        }

    def _queues(self) -> list[list[Op]]:
        """With a given ``order``: each cluster device's ops, reversed (the next one last, to pop)."""
        queues: list[list[Op]] = [[] for _ in range(self.n_g)]
        order = self.order
        if order is None:
            return queues
        for op in sorted(order, key=lambda o: (order[o], o)):
            for r in range(self.dp):
                queues[r * self.n_dev + self.stages[op[1]].device].append(op)
        return [q[::-1] for q in queues]

    def _admissible(self, g: int, op: Op) -> bool:
        """Whether cluster device ``g`` may start the ready ``op`` under the schedule rule (or the given order)."""
        kind, v, _ = op
        if self.order is not None:
            return bool(self.queues[g]) and self.queues[g][-1] == op
        if kind == "B":
            return self.schedule != "gpipe" or self.forwards_left[g] == 0
        if self.schedule == "gpipe":
            return True
        return self.inflight[g // self.n_dev][v] < self.n_v - v

    def _priority(self, op: Op) -> tuple[int, int, int]:
        """The schedule's preference among admissible ops (smallest first)."""
        kind, v, m = op
        first = 0 if (kind == "B") != (self.schedule == "gpipe") else 1
        return (first, m, -v if kind != "F" else v)

    def _deliver(self, g: int, op: Op, now: float) -> None:
        """One message ``op`` waits for has arrived on cluster device ``g``; ready when it was the last."""
        left = self.waiting.get((g, op), self.needs[op[0]][op[1]]) - 1
        if left > 0:
            self.waiting[g, op] = left
            return
        self.waiting.pop((g, op), None)
        self.ready[g][op] = now

    def _send(self, r: int, src_v: int, dst: Op, now: float, nbytes: int) -> None:
        """Replica ``r``'s stage ``src_v`` sends ``nbytes`` that ``dst`` waits for (delivered at once on one device)."""
        a, b = r * self.n_dev + self.stages[src_v].device, r * self.n_dev + self.stages[dst[1]].device
        if a == b or nbytes == 0:
            self._deliver(b, dst, now)
            return
        self.net.add(now, a, b, nbytes, ("op", b, dst))
        if r == 0:
            self.link_bytes[a, b] += nbytes

    def _forward_done(self, g: int, r: int, v: int, m: int, now: float) -> None:
        self.forwards_left[g] -= 1
        self.inflight[r][v] += 1
        self.stash[g] += self.stashed[v]
        self.peak[g] = max(self.peak[g], self.stash[g])
        if v + 1 < self.n_v:
            self._send(r, v, ("F", v + 1, m), now, self.stages[v].send_bytes)
        else:
            self._deliver(g, ("B", v, m), now)
        for dst_v, nbytes in self.skips_out[v]:  # direct skips: one flow each, point to point
            self._send(r, v, ("F", dst_v, m), now, nbytes)

    def _backward_done(self, g: int, r: int, v: int, m: int, now: float) -> None:
        self.peak[g] = max(self.peak[g], self.stash[g] + self.live[v])  # one block's saved tensors live during its backward (recompute)
        self.inflight[r][v] -= 1
        if self.split:
            self._deliver(g, ("W", v, m), now)
        else:
            self.stash[g] -= self.stashed[v]
        if v > 0:
            self._send(r, v, ("B", v - 1, m), now, self.stages[v - 1].send_bytes)
        for src_v, nbytes in self.skips_in[v]:  # the direct skips' gradients back to their producers
            self._send(r, v, ("B", src_v, m), now, nbytes)

    def _weight_done(self, g: int, v: int) -> None:
        self.peak[g] = max(self.peak[g], self.stash[g] + self.live[v])  # W needs the block's saved tensors again (recompute: recomputed)
        self.stash[g] -= self.stashed[v]

    def _complete(self, g: int, op: Op, now: float) -> None:
        """``op`` ended on cluster device ``g`` at ``now``: memory, messages on, and the all-reduce once ``g`` is done."""
        kind, v, m = op
        r = g // self.n_dev
        self.ops_left[g] -= 1
        if kind == "F":
            self._forward_done(g, r, v, m, now)
        elif kind == "B":
            self._backward_done(g, r, v, m, now)
        else:
            self._weight_done(g, v)
        if self.ops_left[g] == 0:
            self.done_at[g] = now
            if self.dp > 1:
                self.ring.step(g, now, self.ops_left[g])

    def _arrive(self, tags: list[Any], now: float) -> None:
        """Transfers that ended: an op's message, or a ring round's chunk."""
        for tag in tags:
            if tag[0] == "op":
                self._deliver(tag[1], tag[2], now)
            else:
                g = tag[1]
                self.ring.chunk_sent(g)
                self.ring.step(g, now, self.ops_left[g])
                nxt = self.ring.successor(g)
                self.ring.step(nxt, now, self.ops_left[nxt])

    def _pick(self, g: int, now: float) -> Op | None:
        """The op an idle cluster device ``g`` starts at ``now``: its preferred admissible ready op, if any."""
        best: tuple[tuple[int, int, int], Op] | None = None
        for op, t in self.ready[g].items():
            if t <= now + EPS and self._admissible(g, op) and (best is None or self._priority(op) < best[0]):
                best = (self._priority(op), op)
        return None if best is None else best[1]

    def _start_idle(self, now: float) -> None:
        """Every idle device starts the op it picks."""
        for g in range(self.n_g):
            if g in self.running:
                continue
            op = self._pick(g, now)
            if op is None:
                continue
            del self.ready[g][op]
            if self.order is not None:
                self.queues[g].pop()
            end = now + self.stages[op[1]].forward_s * self.duration[op[0]]
            self.running[g] = (op, now, end)

    def run(self) -> None:
        """Run every op and the all-reduce to the end.

        Raises:
            UserInputError: a given ``order`` that cannot run.
        """
        now = 0.0
        while True:
            # transfers ending within float slack of now land before devices choose (as if they took no time)
            while (soon := self.net.next_event(now)) <= now + EPS:
                self._arrive(self.net.advance(now, soon), now)
            self._start_idle(now)
            upcoming = min((end for _, _, end in self.running.values()), default=float("inf"))
            upcoming = min(upcoming, self.net.next_event(now))
            if upcoming == float("inf"):
                break
            arrived = self.net.advance(now, upcoming)
            now = upcoming
            for g in [g for g, (_, _, end) in self.running.items() if end <= now + EPS]:
                op, start, end = self.running.pop(g)
                self.busy[g] += end - start
                self.timeline.append(Span(op, g // self.n_dev, g, start, end))
                self._complete(g, op, end)
            self._arrive(arrived, now)
        self._check_finished()

    def _check_finished(self) -> None:
        """Every op ran, every ring finished, and the timeline obeys the dependencies (:func:`check_timeline`)."""
        if any(self.ops_left):
            stuck = {g: self.queues[g][-1] for g in range(self.n_g) if self.ops_left[g] and self.queues[g]}
            if self.order is not None:
                raise UserInputError(
                    f"the given op order cannot run: each device's next op waits for an op queued behind another ({stuck})"
                )
            raise RuntimeError("pipeline simulation deadlocked (a schedule rule admits no ready op)")  # a bug, not user input
        if self.dp > 1 and not self.ring.finished():
            raise RuntimeError("gradient all-reduce did not finish")  # a bug
        check_timeline(
            self.stages,
            self.cluster,
            self.timeline,
            microbatches=self.microbatches,
            replicas=self.dp,
            split_backward=self.split,
            skips=self.skip_sends,
        )

    def result(self) -> StepResult:
        """The step as simulated (after :meth:`run`)."""
        makespan = max(s.end for s in self.timeline)
        params = [sum(self.profile.blocks[i].param_bytes for i in s.blocks) for s in self.stages]
        param_dev = [0] * self.n_dev
        for s, pb in zip(self.stages, params, strict=True):
            param_dev[s.device] += pb
        memory = tuple(pb * OPTIMIZER_BYTES_PER_PARAM_BYTE + pk for pb, pk in zip(param_dev, self.peak[: self.n_dev], strict=True))
        step_s = max(makespan, self.ring.end)
        return StepResult(
            schedule=self.schedule,
            microbatches=self.microbatches,
            makespan_s=makespan,
            bubble_ratio=1.0 - sum(self.busy) / (self.n_g * makespan),
            samples_per_s=self.microbatches * self.profile.microbatch * self.dp / step_s,
            link_bytes=dict(self.link_bytes),
            peak_memory_bytes=memory,
            virtual_stages=self.n_v,
            device_done_s=tuple(self.done_at[: self.n_dev]),
            data_parallel=self.dp,
            step_s=step_s,
            allreduce_bytes=self.ring.bytes,
            timeline=tuple(self.timeline),
        )
