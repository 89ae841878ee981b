"""Cluster specs for the pipeline planner: device speed and memory, intra- and inter-node links.

Presets are named ``<gpu>x<count>-<interconnect>``; a user file is JSON with the same
fields (``coevo tools run pipeline.simulate --args '{"cluster": "my.json", ...}'``).
Bandwidths are per direction, in GB/s (1e9 bytes/s); latency in microseconds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypedDict

from sim.errors import UserInputError


class DeviceRates(TypedDict):
    """Keyword arguments of the partitioners that describe one device's speed."""

    flops_per_s: float
    kernel_s: float


@dataclass(frozen=True)
class Cluster:
    """A homogeneous GPU cluster.

    Attributes:
        name: preset name or file name.
        devices: GPUs in total.
        per_node: GPUs per node (they share the intra-node link).
        device_tflops: sustained training TFLOP/s of one GPU (not the datasheet peak).
        memory_gb: memory of one GPU.
        intra_gbs: GPU-to-GPU bandwidth inside a node, GB/s.
        inter_gbs: bandwidth between nodes, GB/s.
        latency_us: per-message latency.
        kernel_us: fixed time per compute op (kernel launch and framework dispatch), paid per
            op and microbatch whatever its size: why very small microbatches run below the
            FLOP rate. 0 models a device that is always at its FLOP rate.
    """

    name: str
    devices: int
    per_node: int
    device_tflops: float
    memory_gb: float
    intra_gbs: float
    inter_gbs: float
    latency_us: float = 10.0
    kernel_us: float = 0.0

    @property
    def flops_per_s(self) -> float:
        """Sustained FLOP/s of one device."""
        return self.device_tflops * 1e12

    @property
    def kernel_s(self) -> float:
        """Seconds per compute op (see ``kernel_us``)."""
        return self.kernel_us * 1e-6

    @property
    def rates(self) -> DeviceRates:
        """The device as the partitioners see it: ``partition(profile, method, n, **cluster.rates)``."""
        return {"flops_per_s": self.flops_per_s, "kernel_s": self.kernel_s}

    def bandwidth(self, a: int, b: int) -> float:
        """Bytes/s between devices ``a`` and ``b``."""
        same_node = a // self.per_node == b // self.per_node
        return (self.intra_gbs if same_node else self.inter_gbs) * 1e9

    def transfer_s(self, a: int, b: int, nbytes: float) -> float:
        """Seconds to send ``nbytes`` from device ``a`` to ``b`` (0 on the same device)."""
        if a == b or nbytes <= 0:
            return 0.0
        return self.latency_us * 1e-6 + nbytes / self.bandwidth(a, b)


_V100 = {"device_tflops": 50.0, "memory_gb": 32.0, "per_node": 8, "intra_gbs": 150.0, "latency_us": 10.0, "kernel_us": 10.0}
PRESETS: dict[str, Cluster] = {
    "v100x16-ib10": Cluster("v100x16-ib10", devices=16, inter_gbs=10.0, **_V100),  # type: ignore[arg-type]
    "v100x16-ib300": Cluster("v100x16-ib300", devices=16, inter_gbs=300.0, **_V100),  # type: ignore[arg-type]
    "v100x8-pcie": Cluster("v100x8-pcie", devices=8, inter_gbs=10.0, **{**_V100, "intra_gbs": 10.0}),  # type: ignore[arg-type]
}
"""V100 nodes of 8 (NVLink 150 GB/s inside) joined by a 10 GB/s or a 300 GB/s link; one PCIe-only node.
Sustained 50 TFLOP/s is 40 % of the V100's fp16 tensor-core peak; 10 us per compute op is an
assumed eager-PyTorch dispatch plus launch cost (not measured here), which makes a 64x64 SD
UNet forward at microbatch 1 about 38 % slower than its FLOPs alone."""


def get_cluster(name_or_file: str) -> Cluster:
    """A preset, or a JSON file with :class:`Cluster`'s fields.

    Raises:
        UserInputError: unknown preset, unreadable or malformed file (the message names the field).
    """
    if name_or_file in PRESETS:
        return PRESETS[name_or_file]
    path = Path(name_or_file)
    if not path.is_file():
        raise UserInputError(f"unknown cluster {name_or_file!r}: presets are {', '.join(PRESETS)}, or give a JSON file")
    try:
        data: Any = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserInputError(f"cluster file {path}: not readable JSON ({exc})") from None
    known = {f.name for f in fields(Cluster)}
    if not isinstance(data, dict):
        raise UserInputError(f"cluster file {path}: expected a JSON object with {', '.join(sorted(known))}")
    data.setdefault("name", path.stem)
    optional = {"latency_us", "kernel_us"}
    missing, extra = known - data.keys() - optional, data.keys() - known
    if missing or extra:
        raise UserInputError(f"cluster file {path}: missing {sorted(missing)}, unknown {sorted(extra)}; fields: {', '.join(sorted(known))}")
    for key in known - {"name"}:
        value = data.get(key, 1)
        if not isinstance(value, int | float) or isinstance(value, bool) or value < 0 or (value == 0 and key not in optional):
            kind = "a number >= 0" if key in optional else "a positive number"
            raise UserInputError(f"cluster file {path}: {key} must be {kind}, got {data.get(key)!r}")
    return Cluster(**data)
