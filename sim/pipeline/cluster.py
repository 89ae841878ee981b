"""Cluster specs for the pipeline planner: device speed and memory, intra-node links and node NICs.

A cluster is ``nodes`` nodes of ``per_node`` GPUs. Inside a node, each ordered GPU pair has
its own ``intra_gbs`` link (NVLink, or PCIe on a PCIe-only node). Between nodes, traffic
leaves through the sending node's NICs and enters through the receiving node's: each node
has ``nics_per_node`` NICs of ``inter_gbs`` each (per direction, full duplex), and GPU
``l`` of a node (local index) uses NIC ``l * nics_per_node // per_node`` (consecutive GPUs
share a NIC, as GPU pairs behind one PCIe switch do on a DGX). All GPUs of a node that use
one NIC share its bandwidth: :mod:`sim.pipeline.simulate` gives concurrent transfers
max-min fair shares of each NIC direction and intra-node link they cross.

Presets are named ``<gpu>x<count>-<interconnect>``; a user file is JSON
(``coevo tools run pipeline.simulate --args '{"cluster": "my.json", ...}'``) with either
the node fields ``nodes``, ``gpus_per_node``, ``nic_gbs``, ``nics_per_node`` or the older
``devices``, ``per_node``, ``inter_gbs`` (one NIC per node of ``inter_gbs``: what a file
written before NICs were modelled meant by its single inter-node bandwidth), plus
``device_tflops``, ``memory_gb``, ``intra_gbs`` and optionally ``latency_us``, ``kernel_us``.
Bandwidths are per direction, in GB/s (1e9 bytes/s); latency in microseconds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypedDict

from coevo.sim.errors import UserInputError


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
        per_node: GPUs per node.
        device_tflops: sustained training TFLOP/s of one GPU (not the datasheet peak).
        memory_gb: memory of one GPU.
        intra_gbs: GPU-to-GPU bandwidth inside a node, GB/s.
        inter_gbs: bandwidth of one NIC per direction, GB/s (the node's GPUs behind it share it).
        latency_us: per-message latency.
        kernel_us: fixed time per compute op (kernel launch and framework dispatch), paid per
            op and microbatch whatever its size: why very small microbatches run below the
            FLOP rate. 0 models a device that is always at its FLOP rate.
        nics_per_node: NICs per node (must divide ``per_node``).
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
    nics_per_node: int = 1

    def __post_init__(self) -> None:
        if self.nics_per_node < 1 or self.per_node % self.nics_per_node:
            raise UserInputError(
                f"cluster {self.name}: nics_per_node must divide gpus per node ({self.per_node}), got {self.nics_per_node}"
            )
        if self.devices % self.per_node:
            raise UserInputError(f"cluster {self.name}: {self.devices} devices are not whole nodes of {self.per_node}")

    @property
    def nodes(self) -> int:
        """Number of nodes."""
        return self.devices // self.per_node

    @property
    def nic_gbs(self) -> float:
        """Bandwidth of one NIC per direction, GB/s (the field is ``inter_gbs``)."""
        return self.inter_gbs

    def node(self, device: int) -> int:
        """The node holding ``device``."""
        return device // self.per_node

    def nic(self, device: int) -> tuple[int, int]:
        """(node, NIC index) that ``device`` sends and receives inter-node traffic through."""
        return device // self.per_node, (device % self.per_node) * self.nics_per_node // self.per_node

    def resources(self, a: int, b: int) -> tuple[tuple[str, int, int], ...]:
        """The shared resources a transfer from device ``a`` to ``b`` occupies (empty on one device).

        Inside a node: the directed GPU link ``("link", a, b)``. Between nodes: the sender's NIC
        transmit side ``("tx", node, nic)`` and the receiver's receive side ``("rx", node, nic)``.
        """
        if a == b:
            return ()
        if self.node(a) == self.node(b):
            return (("link", a, b),)
        return (("tx", *self.nic(a)), ("rx", *self.nic(b)))

    def capacity(self, resource: tuple[str, int, int]) -> float:
        """Bytes/s of one resource from :meth:`resources`."""
        return (self.intra_gbs if resource[0] == "link" else self.inter_gbs) * 1e9

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
        """Bytes/s between devices ``a`` and ``b`` when nothing else uses the path."""
        same_node = a // self.per_node == b // self.per_node
        return (self.intra_gbs if same_node else self.inter_gbs) * 1e9

    def transfer_s(self, a: int, b: int, nbytes: float) -> float:
        """Seconds to send ``nbytes`` from device ``a`` to ``b`` alone on its path (0 on the same device)."""
        if a == b or nbytes <= 0:
            return 0.0
        return self.latency_us * 1e-6 + nbytes / self.bandwidth(a, b)


_V100 = {"device_tflops": 50.0, "memory_gb": 32.0, "per_node": 8, "intra_gbs": 150.0, "latency_us": 10.0, "kernel_us": 10.0}
PRESETS: dict[str, Cluster] = {
    "v100x16-ib10": Cluster("v100x16-ib10", devices=16, inter_gbs=10.0, **_V100),  # type: ignore[arg-type]
    "v100x16-ib300": Cluster("v100x16-ib300", devices=16, inter_gbs=300.0, **_V100),  # type: ignore[arg-type]
    "v100x8-pcie": Cluster("v100x8-pcie", devices=8, inter_gbs=10.0, **{**_V100, "intra_gbs": 10.0}),  # type: ignore[arg-type]
    "v100x16-4nic": Cluster("v100x16-4nic", devices=16, inter_gbs=12.5, nics_per_node=4, **_V100),  # type: ignore[arg-type]
}
"""V100 nodes of 8 (NVLink 150 GB/s inside); two nodes with one shared 10 GB/s or 300 GB/s NIC each, or
with four 12.5 GB/s (100 Gb/s EDR InfiniBand) NICs, one per GPU pair, as a DGX-1 has; one PCIe-only node.
Sustained 50 TFLOP/s is 40 % of the V100's fp16 tensor-core peak; 10 us per compute op is an
assumed eager-PyTorch dispatch plus launch cost (not measured here), which makes a 64x64 SD
UNet forward at microbatch 1 about 38 % slower than its FLOPs alone."""


_NEW_NAMES = {"gpus_per_node": "per_node", "nic_gbs": "inter_gbs"}
"""Node-style file fields and the :class:`Cluster` field each one sets."""


def get_cluster(name_or_file: str) -> Cluster:
    """A preset, or a JSON cluster file (module doc: node fields, or the older device fields).

    Raises:
        UserInputError: unknown preset, unreadable or malformed file (the message names the field).
    """
    if name_or_file in PRESETS:
        return PRESETS[name_or_file]
    path = Path(name_or_file)
    if not path.is_file():
        if path.suffix == ".json" or path.parent != Path():  # a path, not a preset's name
            what = "is a folder" if path.is_dir() else "does not exist"
            raise UserInputError(f"cluster file {name_or_file!r} {what}; give a JSON cluster file or a preset: {', '.join(PRESETS)}")
        raise UserInputError(f"unknown cluster {name_or_file!r}: presets are {', '.join(PRESETS)}, or give a JSON file")
    try:
        data: Any = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserInputError(f"cluster file {path}: not readable JSON ({exc})") from None
    known = {f.name for f in fields(Cluster)}
    accepted = known | set(_NEW_NAMES) | {"nodes"}
    if not isinstance(data, dict):
        raise UserInputError(f"cluster file {path}: expected a JSON object with {', '.join(sorted(accepted))}")
    data = _device_fields(dict(data), path, accepted)
    _check_values(data, path, known, accepted)
    return Cluster(**data)


_OPTIONAL = frozenset({"latency_us", "kernel_us", "nics_per_node"})
"""Cluster-file fields that may be left out (the :class:`Cluster` defaults) or be 0."""


def _device_fields(data: dict[str, Any], path: Path, accepted: set[str]) -> dict[str, Any]:
    """A cluster file's fields in :class:`Cluster`'s terms: its name, node-style names renamed, ``nodes`` as ``devices``."""
    data.setdefault("name", path.stem)
    for new, old in _NEW_NAMES.items():
        if new in data:
            if old in data:
                raise UserInputError(f"cluster file {path}: give {new} or {old}, not both (they are the same field)")
            data[old] = data.pop(new)
    extra = data.keys() - accepted
    if extra:
        raise UserInputError(f"cluster file {path}: unknown {sorted(extra)}; fields: {', '.join(sorted(accepted - {'name'}))}")
    if "nodes" in data:
        nodes, per_node = data.pop("nodes"), data.get("per_node")
        for key, value in (("nodes", nodes), ("gpus_per_node", per_node)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise UserInputError(f"cluster file {path}: {key} must be a positive integer, got {value!r}")
        if "devices" in data and data["devices"] != nodes * per_node:
            raise UserInputError(f"cluster file {path}: devices {data['devices']!r} is not nodes x gpus_per_node = {nodes * per_node}")
        data["devices"] = nodes * per_node
    return data


def _check_values(data: dict[str, Any], path: Path, known: set[str], accepted: set[str]) -> None:
    """Every required field present, every value a number in range (counts positive integers)."""
    missing = known - data.keys() - _OPTIONAL
    if missing:
        names = sorted({next((n for n, o in _NEW_NAMES.items() if o == m), m) for m in missing})
        raise UserInputError(f"cluster file {path}: missing {names}; fields: {', '.join(sorted(accepted - {'name'}))}")
    for key in known - {"name"}:
        value = data.get(key, 1)
        if not isinstance(value, int | float) or isinstance(value, bool) or value < 0 or (value == 0 and key not in _OPTIONAL):
            kind = "a number >= 0" if key in _OPTIONAL else "a positive number"
            raise UserInputError(f"cluster file {path}: {key} must be {kind}, got {data.get(key)!r}")
    for key in ("devices", "per_node", "nics_per_node"):
        if not isinstance(data.get(key, 1), int) or data.get(key, 1) < 1:
            raise UserInputError(f"cluster file {path}: {key} must be a positive integer, got {data.get(key)!r}")
