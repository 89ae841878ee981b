"""Stage partitioners for pipeline-parallel UNets, with exact cross-device bytes per microbatch.

* :func:`blockwise`: the conventional baseline: cut the forward block order into
  ``devices`` contiguous stages minimising the slowest stage (dynamic programming, exact).
* :func:`skip_aware`: PULSE's symmetric collocation: encoder block *k* and the decoder
  block that consumes its skip are one unit and always share a device (the middle block
  joins the deepest unit, the output head joins unit 0); the chain of units is cut into
  contiguous groups minimising the slowest device (same exact DP). Skips never leave a
  device; the activation stream goes down the devices through the encoder and back up
  through the decoder (each boundary is crossed twice).

Three block-wise baselines, each selectable by name (:data:`PARTITIONERS`), so that
skip-aware plans are compared at equal depth and equal settings:

* ``blockwise``: compute-balanced cuts; skips relayed stage by stage, as 1F1B / GPipe
  implementations pass tensors only between adjacent stages (Megatron, DeepSpeed).
* ``blockwise-direct``: the same cuts; each skip sent once, point to point, from the
  producing stage's device to the consuming stage's device (torchgpipe's skip portals).
* ``blockwise-bytes``: byte-aware cuts with the balance tolerance the skip-aware plan
  gets (below), skips relayed: the baseline given the same freedom to trade balance for bytes.

Traffic per microbatch, forward (the backward pass sends gradients of the same sizes over
the same links): a sequential edge whose two blocks sit on different devices sends the
producer's output once; a skip whose ends sit on different devices is, when relayed, sent
once per stage boundary it crosses (``skip_bytes``), and when sent directly once
(``skip_bytes_direct``); :attr:`Plan.total_bytes` counts the plan's own transport.

Stages are balanced on time, not FLOPs: a block's forward takes its FLOPs at the device's
rate plus a fixed ``kernel_s`` per compute op (:func:`work`), so with a launch cost the
many small ops of a block weigh more than their FLOPs.

Communication-aware cuts (``blockwise-bytes``, and ``skip-aware`` with ``balance_tolerance``
> 0): among the partitions whose slowest device is within ``1 + tolerance`` of the best
balance, take the one sending the fewest bytes (exact DP over the cut positions; a cut's
bytes are additive over cuts). A little imbalance buys cuts at low-resolution points,
where activations are small. ``blockwise`` and ``blockwise-direct`` are the plain
compute-balanced baselines and take no tolerance.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from coevo.sim.errors import UserInputError

if TYPE_CHECKING:  # sim.pipeline.profile imports torch and networkx; only its types are needed here
    from coevo.sim.pipeline.profile import BlockProfile, ModelProfile

TRAIN_FLOPS_FACTOR = 3.0
"""Forward + backward FLOPs per forward FLOP (backward ~2x forward)."""


def work(block: BlockProfile, flops_per_s: float, kernel_s: float = 0.0) -> float:
    """A block's forward work in FLOP-equivalents: its FLOPs plus ``kernel_s`` per compute op at ``flops_per_s``."""
    return block.flops + block.kernels * kernel_s * flops_per_s


@dataclass(frozen=True)
class Plan:
    """A stage-to-device mapping and what it costs per microbatch.

    Attributes:
        method: a :data:`PARTITIONERS` name.
        device_of: device of each block (forward order).
        compute_s: training compute time of each device per microbatch.
        boundary_bytes: forward bytes of sequential edges crossing devices.
        skip_bytes: forward bytes of skip activations crossing devices, relayed per boundary.
        skip_bytes_direct: the same skips sent point to point once each.
        param_bytes: parameter bytes held by each device.
        balance_tolerance: slowest-stage slack allowed for fewer bytes (0: pure balance).
        direct_skips: skips crossing devices are sent point to point (``blockwise-direct``),
            not relayed stage by stage.
    """

    method: str
    device_of: tuple[int, ...]
    compute_s: tuple[float, ...]
    boundary_bytes: int
    skip_bytes: int
    skip_bytes_direct: int
    param_bytes: tuple[int, ...]
    balance_tolerance: float = 0.0
    direct_skips: bool = False

    @property
    def devices(self) -> int:
        """Number of devices (stages)."""
        return len(self.compute_s)

    @property
    def total_bytes(self) -> int:
        """Forward bytes per microbatch crossing devices: boundaries plus skips as this plan sends them (relayed or direct)."""
        return self.boundary_bytes + (self.skip_bytes_direct if self.direct_skips else self.skip_bytes)

    @property
    def imbalance(self) -> float:
        """Slowest device over the mean (1.0 is perfect balance)."""
        mean = sum(self.compute_s) / len(self.compute_s)
        return max(self.compute_s) / mean if mean > 0 else 1.0

    def as_dict(self, profile: ModelProfile) -> dict[str, Any]:
        """JSON-friendly form with each device's blocks by name."""
        names = [b.name for b in profile.blocks]
        return {
            "method": self.method,
            "devices": self.devices,
            "stages": [[names[i] for i, d in enumerate(self.device_of) if d == s] for s in range(self.devices)],
            "compute_ms": [round(t * 1e3, 4) for t in self.compute_s],
            "imbalance": round(self.imbalance, 4),
            "boundary_bytes": self.boundary_bytes,
            "skip_bytes": self.skip_bytes,
            "skip_bytes_direct": self.skip_bytes_direct,
            "skip_transport": "direct" if self.direct_skips else "relayed",
            "total_bytes_per_microbatch_forward": self.total_bytes,
            "param_bytes": list(self.param_bytes),
            "balance_tolerance": self.balance_tolerance,
            "device_of": list(self.device_of),
        }


def min_max_split(costs: Sequence[float], parts: int) -> list[int]:
    """Cut ``costs`` into ``parts`` contiguous non-empty groups minimising the largest group sum.

    Returns:
        the group index of each item. Exact (O(n^2 * parts) dynamic programming).

    Example:
        >>> min_max_split([1, 1, 1, 3], 2)
        [0, 0, 0, 1]
    """
    n = len(costs)
    if not 1 <= parts <= n:
        raise UserInputError(f"cannot split {n} blocks into {parts} non-empty stages; use between 1 and {n} devices")
    return _contiguous_dp(costs, parts, lambda prev, group, _j: max(prev, group))


def _contiguous_dp(costs: Sequence[float], parts: int, extend: Callable[[float, float, int], float | None]) -> list[int]:
    """Best split of ``costs`` into ``parts`` contiguous non-empty groups, by dynamic programming.

    ``extend(best of the first j items in k - 1 groups, sum of items j..i-1, j)`` scores the
    first ``i`` items with a last group starting at ``j`` (None: not allowed); the smallest
    score over ``j`` wins. Returns each item's group.
    """
    n = len(costs)
    prefix = [0.0]
    for c in costs:
        prefix.append(prefix[-1] + c)
    inf = float("inf")
    best = [[inf] * (n + 1) for _ in range(parts + 1)]
    cut = [[0] * (n + 1) for _ in range(parts + 1)]
    best[0][0] = 0.0
    for k in range(1, parts + 1):
        for i in range(k, n - (parts - k) + 1):
            for j in range(k - 1, i):
                if best[k - 1][j] == inf:
                    continue
                value = extend(best[k - 1][j], prefix[i] - prefix[j], j)
                if value is not None and value < best[k][i] - 1e-12:
                    best[k][i], cut[k][i] = value, j
    if best[parts][n] == inf:
        raise ValueError("no split satisfies the constraint")  # callers make the unconstrained optimum feasible
    groups = [0] * n
    i = n
    for k in range(parts, 0, -1):
        j = cut[k][i]
        for x in range(j, i):
            groups[x] = k - 1
        i = j
    return groups


def min_bytes_split(costs: Sequence[float], cut_bytes: Sequence[float], parts: int, tolerance: float) -> list[int]:
    """Contiguous split into ``parts`` groups with the fewest cut bytes among near-balanced ones.

    Args:
        costs: cost of each item.
        cut_bytes: bytes of a cut between item ``j`` and ``j + 1`` (``len(costs) - 1`` values).
        parts: number of groups.
        tolerance: each group's sum may reach ``(1 + tolerance)`` times the best possible
            largest group sum (:func:`min_max_split`); 0 gives a balanced split with the fewest bytes.

    Example:
        >>> min_bytes_split([2, 2, 2, 2], [9, 1, 9], 2, 0.0)
        [0, 0, 1, 1]
        >>> min_bytes_split([2, 1, 2, 2], [1, 9, 9], 2, 0.0), min_bytes_split([2, 1, 2, 2], [1, 9, 9], 2, 1.0)
        ([0, 0, 1, 1], [0, 1, 1, 1])
    """
    if tolerance < 0:
        raise UserInputError(f"balance tolerance must be >= 0, got {tolerance}")
    n = len(costs)
    if len(cut_bytes) != n - 1:
        raise ValueError(f"{n} items need {n - 1} cut costs, got {len(cut_bytes)}")
    groups = min_max_split(costs, parts)
    optimum = max(sum(c for c, g in zip(costs, groups, strict=True) if g == k) for k in range(parts))
    bound = optimum * (1 + tolerance) * (1 + 1e-9) + 1e-12

    def extend(prev: float, group: float, j: int) -> float | None:
        return None if group > bound else prev + (cut_bytes[j - 1] if j > 0 else 0.0)

    return _contiguous_dp(costs, parts, extend)


def _plan(
    method: str, profile: ModelProfile, device_of: Sequence[int], flops_per_s: float, kernel_s: float, tolerance: float = 0.0
) -> Plan:
    devices = max(device_of) + 1
    compute = [0.0] * devices
    params = [0] * devices
    for b, d in zip(profile.blocks, device_of, strict=True):
        compute[d] += work(b, flops_per_s, kernel_s) * TRAIN_FLOPS_FACTOR / flops_per_s
        params[d] += b.param_bytes
    boundary = sum(profile.blocks[i - 1].out_bytes for i in range(1, len(device_of)) if device_of[i - 1] != device_of[i])
    relayed = direct = 0
    for src, dst in profile.skip_edges:
        hops = abs(device_of[dst] - device_of[src])
        relayed += hops * profile.blocks[src].out_bytes
        direct += (hops > 0) * profile.blocks[src].out_bytes
    return Plan(
        method, tuple(device_of), tuple(compute), boundary, relayed, direct, tuple(params), tolerance, direct_skips=method in DIRECT_METHODS
    )


DIRECT_METHODS = frozenset({"blockwise-direct"})
"""Partitioners whose plans send each skip point to point (all others relay skips stage by stage)."""


def _no_tolerance(method: str, balance_tolerance: float) -> None:
    if balance_tolerance != 0:
        raise UserInputError(
            f"{method} is the compute-balanced baseline and takes no balance tolerance (got {balance_tolerance:g}); "
            "for byte-aware block-wise cuts use blockwise-bytes"
        )


def _relayed_cut_bytes(profile: ModelProfile) -> list[float]:
    """Forward bytes a cut after block ``j`` adds when skips are relayed: the boundary activation and each skip spanning it."""
    skips = profile.skip_edges
    out = [b.out_bytes for b in profile.blocks]
    return [out[j] + sum(out[s] for s, c in skips if s <= j < c) for j in range(len(out) - 1)]


def blockwise(profile: ModelProfile, devices: int, *, flops_per_s: float, kernel_s: float = 0.0, balance_tolerance: float = 0.0) -> Plan:
    """Contiguous, compute-balanced stages in forward order, skips relayed (the 1F1B / GPipe baseline).

    With ``balance_tolerance`` > 0 this is :func:`blockwise_bytes` (kept for callers that pass it)."""
    if balance_tolerance != 0:
        return blockwise_bytes(profile, devices, flops_per_s=flops_per_s, kernel_s=kernel_s, balance_tolerance=balance_tolerance)
    costs = [work(b, flops_per_s, kernel_s) for b in profile.blocks]
    return _plan("blockwise", profile, min_max_split(costs, devices), flops_per_s, kernel_s)


def blockwise_direct(
    profile: ModelProfile, devices: int, *, flops_per_s: float, kernel_s: float = 0.0, balance_tolerance: float = 0.0
) -> Plan:
    """The cuts of :func:`blockwise`, each skip sent once point to point (torchgpipe's portals)."""
    _no_tolerance("blockwise-direct", balance_tolerance)
    costs = [work(b, flops_per_s, kernel_s) for b in profile.blocks]
    return _plan("blockwise-direct", profile, min_max_split(costs, devices), flops_per_s, kernel_s)


def blockwise_bytes(
    profile: ModelProfile, devices: int, *, flops_per_s: float, kernel_s: float = 0.0, balance_tolerance: float = 0.0
) -> Plan:
    """Contiguous stages with the fewest relayed bytes among those within ``1 + balance_tolerance`` of the best balance.

    At tolerance 0 the slowest stage is the optimum of :func:`blockwise`, and among the
    splits reaching it the one sending the fewest bytes is taken (the other stages may differ)."""
    costs = [work(b, flops_per_s, kernel_s) for b in profile.blocks]
    groups = min_bytes_split(costs, _relayed_cut_bytes(profile), devices, balance_tolerance)
    return _plan("blockwise-bytes", profile, groups, flops_per_s, kernel_s, balance_tolerance)


def units(profile: ModelProfile) -> list[list[int]]:
    """Collocation units of the skip-aware partitioner: [encoder k, its skip consumer, ...], encoder order.

    Raises:
        UserInputError: the model has no skips (use the block-wise partitioner).
    """
    consumer = {src: dst for src, dst in profile.skip_edges}
    producers = sorted(consumer)
    if not producers:
        raise UserInputError(f"model {profile.model} has no skip connections: skip-aware partitioning does not apply; use blockwise")
    out = [[p, consumer[p]] for p in producers]
    placed = {i for u in out for i in u}
    for i in range(len(profile.blocks)):
        if i in placed:
            continue
        if producers[-1] < i < consumer[producers[-1]]:
            out[-1].append(i)  # the middle joins the deepest unit
        else:
            out[0].append(i)  # stem/head blocks outside the skip span join the outermost unit
    return out


def skip_aware(profile: ModelProfile, devices: int, *, flops_per_s: float, kernel_s: float = 0.0, balance_tolerance: float = 0.0) -> Plan:
    """PULSE's symmetric collocation partition (see module doc); ``balance_tolerance`` as in :func:`blockwise`."""
    groups = units(profile)
    if devices > len(groups):
        raise UserInputError(
            f"{profile.model} has {len(groups)} encoder/decoder pairs, so skip-aware partitioning supports at most {len(groups)} devices "
            f"per pipeline (got {devices}); use data parallelism for the rest"
        )
    costs = [sum(work(profile.blocks[i], flops_per_s, kernel_s) for i in u) for u in groups]
    if balance_tolerance == 0:
        of_unit = min_max_split(costs, devices)
    else:
        unit_of = {i: k for k, u in enumerate(groups) for i in u}
        cut_bytes = [
            sum(profile.blocks[i - 1].out_bytes for i in range(1, len(profile.blocks)) if (unit_of[i - 1] <= j) != (unit_of[i] <= j))
            for j in range(len(groups) - 1)
        ]
        of_unit = min_bytes_split(costs, cut_bytes, devices, balance_tolerance)
    device_of = [0] * len(profile.blocks)
    for unit, group in zip(groups, of_unit, strict=True):
        for i in unit:
            device_of[i] = group
    return _plan("skip-aware", profile, device_of, flops_per_s, kernel_s, balance_tolerance)


PARTITIONERS = {"blockwise": blockwise, "blockwise-direct": blockwise_direct, "blockwise-bytes": blockwise_bytes, "skip-aware": skip_aware}
"""Partitioner name -> function: the three block-wise baselines (module doc) and PULSE's skip-aware plan."""

TOLERANT = frozenset({"blockwise-bytes", "skip-aware"})
"""Partitioners that take a balance tolerance (the others are compute-balanced baselines)."""


def partition(
    profile: ModelProfile, method: str, devices: int, *, flops_per_s: float, kernel_s: float = 0.0, balance_tolerance: float = 0.0
) -> Plan:
    """The plan of a partitioner by name (:data:`PARTITIONERS`).

    Raises:
        UserInputError: unknown name, or a balance tolerance given to a compute-balanced baseline.
    """
    if method not in PARTITIONERS:
        raise UserInputError(f"unknown partitioner {method!r}; choose from {', '.join(PARTITIONERS)}")
    if method not in TOLERANT:
        _no_tolerance(method, balance_tolerance)
    return PARTITIONERS[method](profile, devices, flops_per_s=flops_per_s, kernel_s=kernel_s, balance_tolerance=balance_tolerance)


def from_mapping(profile: ModelProfile, method: str, device_of: Sequence[int], *, flops_per_s: float, kernel_s: float = 0.0) -> Plan:
    """Rebuild a plan from a saved stage-to-device mapping (e.g. the ``plan`` a tool returned).

    Raises:
        UserInputError: the mapping does not fit the model (length, device numbering, or a
            skip-aware mapping that splits an encoder/decoder pair).
    """
    if len(device_of) != len(profile.blocks):
        raise UserInputError(f"the plan maps {len(device_of)} blocks but {profile.model} has {len(profile.blocks)}; plan and model differ")
    used = sorted(set(device_of))
    if used != list(range(len(used))):
        raise UserInputError(f"plan devices must be numbered 0..{len(used) - 1} with none skipped, got {used}")
    if method not in PARTITIONERS:
        raise UserInputError(f"unknown partitioner {method!r} in the plan; choose from {', '.join(PARTITIONERS)}")
    if method == "skip-aware" and any(device_of[a] != device_of[c] for a, c in profile.skip_edges):
        raise UserInputError("a skip-aware plan must keep each encoder block on the device of the decoder block using its skip")
    return _plan(method, profile, device_of, flops_per_s, kernel_s)
