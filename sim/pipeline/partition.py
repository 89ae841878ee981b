"""Stage partitioners for pipeline-parallel UNets, with exact cross-device bytes per microbatch.

* :func:`blockwise`: the conventional baseline: cut the forward block order into
  ``devices`` contiguous stages minimising the slowest stage (dynamic programming, exact).
* :func:`skip_aware`: PULSE's symmetric collocation: encoder block *k* and the decoder
  block that consumes its skip are one unit and always share a device (the middle block
  joins the deepest unit, the output head joins unit 0); the chain of units is cut into
  contiguous groups minimising the slowest device (same exact DP). Skips never leave a
  device; the activation stream goes down the devices through the encoder and back up
  through the decoder (each boundary is crossed twice).

Traffic per microbatch, forward (the backward pass sends gradients of the same sizes over
the same links): a sequential edge whose two blocks sit on different devices sends the
producer's output once; a skip whose ends sit on different devices is relayed stage by
stage, as 1F1B / GPipe implementations pass tensors only between adjacent stages, so it
is sent once per stage boundary it crosses (``skip_bytes``), and ``skip_bytes_direct``
gives the single point-to-point send for comparison.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from search.errors import UserInputError
from sim.pipeline.unet import ModelProfile

TRAIN_FLOPS_FACTOR = 3.0
"""Forward + backward FLOPs per forward FLOP (backward ~2x forward)."""


@dataclass(frozen=True)
class Plan:
    """A stage-to-device mapping and what it costs per microbatch.

    Attributes:
        method: ``blockwise`` or ``skip-aware``.
        device_of: device of each block (forward order).
        compute_s: training compute time of each device per microbatch.
        boundary_bytes: forward bytes of sequential edges crossing devices.
        skip_bytes: forward bytes of skip activations crossing devices, relayed per boundary.
        skip_bytes_direct: the same skips sent point to point once each.
        param_bytes: parameter bytes held by each device.
    """

    method: str
    device_of: tuple[int, ...]
    compute_s: tuple[float, ...]
    boundary_bytes: int
    skip_bytes: int
    skip_bytes_direct: int
    param_bytes: tuple[int, ...]

    @property
    def devices(self) -> int:
        """Number of devices (stages)."""
        return len(self.compute_s)

    @property
    def total_bytes(self) -> int:
        """Forward bytes per microbatch crossing devices (boundaries + relayed skips)."""
        return self.boundary_bytes + self.skip_bytes

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
            "total_bytes_per_microbatch_forward": self.total_bytes,
            "param_bytes": list(self.param_bytes),
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
    prefix = [0.0]
    for c in costs:
        prefix.append(prefix[-1] + c)
    inf = float("inf")
    # best[k][i]: smallest max group sum splitting the first i items into k groups
    best = [[inf] * (n + 1) for _ in range(parts + 1)]
    cut = [[0] * (n + 1) for _ in range(parts + 1)]
    best[0][0] = 0.0
    for k in range(1, parts + 1):
        for i in range(k, n - (parts - k) + 1):
            for j in range(k - 1, i):
                value = max(best[k - 1][j], prefix[i] - prefix[j])
                if value < best[k][i] - 1e-12:
                    best[k][i], cut[k][i] = value, j
    groups = [0] * n
    i = n
    for k in range(parts, 0, -1):
        j = cut[k][i]
        for x in range(j, i):
            groups[x] = k - 1
        i = j
    return groups


def _plan(method: str, profile: ModelProfile, device_of: Sequence[int], flops_per_s: float) -> Plan:
    devices = max(device_of) + 1
    compute = [0.0] * devices
    params = [0] * devices
    for b, d in zip(profile.blocks, device_of, strict=True):
        compute[d] += b.flops * TRAIN_FLOPS_FACTOR / flops_per_s
        params[d] += b.param_bytes
    boundary = sum(profile.blocks[i - 1].out_bytes for i in range(1, len(device_of)) if device_of[i - 1] != device_of[i])
    relayed = direct = 0
    for src, dst in profile.skip_edges:
        hops = abs(device_of[dst] - device_of[src])
        relayed += hops * profile.blocks[src].out_bytes
        direct += (hops > 0) * profile.blocks[src].out_bytes
    return Plan(method, tuple(device_of), tuple(compute), boundary, relayed, direct, tuple(params))


def blockwise(profile: ModelProfile, devices: int, *, flops_per_s: float) -> Plan:
    """Contiguous, compute-balanced stages in forward order (the 1F1B / GPipe baseline)."""
    return _plan("blockwise", profile, min_max_split([b.flops for b in profile.blocks], devices), flops_per_s)


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


def skip_aware(profile: ModelProfile, devices: int, *, flops_per_s: float) -> Plan:
    """PULSE's symmetric collocation partition (see module doc)."""
    groups = units(profile)
    if devices > len(groups):
        raise UserInputError(
            f"{profile.model} has {len(groups)} encoder/decoder pairs, so skip-aware partitioning supports at most {len(groups)} devices "
            f"per pipeline (got {devices}); use data parallelism for the rest"
        )
    of_unit = min_max_split([sum(profile.blocks[i].flops for i in u) for u in groups], devices)
    device_of = [0] * len(profile.blocks)
    for unit, group in zip(groups, of_unit, strict=True):
        for i in unit:
            device_of[i] = group
    return _plan("skip-aware", profile, device_of, flops_per_s)
