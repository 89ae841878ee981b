"""Reality check of the planner's byte counts: run a plan's forward pass over torch.distributed (gloo).

Each rank (one process per device, on loopback) builds the same small UNet (same seed),
runs the blocks the plan puts on its device in forward order, and at every virtual-stage
boundary sends exactly what the next stage needs: the boundary activation plus the skips
in flight across it whose producer and consumer sit on different devices (relayed stage
by stage, as :mod:`sim.pipeline.partition` counts them). Every ``dist.send`` is counted.
The check passes when the bytes sent equal the planner's count and the output equals a
single-process forward pass.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from sim.pipeline.partition import blockwise, skip_aware
from sim.pipeline.simulate import boundary_tensors
from sim.pipeline.unet import UNet, get_config, profile


@dataclass(frozen=True)
class CheckResult:
    """Bytes the run sent vs the planner's count, and whether the output matched."""

    method: str
    devices: int
    bytes_sent: int
    bytes_planned: int
    output_matches: bool

    @property
    def ok(self) -> bool:
        """Bytes equal and output equal."""
        return self.bytes_sent == self.bytes_planned and self.output_matches


def _rank_main(rank: int, world: int, port: int, model: str, resolution: int, device_of: list[int], queue: Any) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        cfg = get_config(model)
        net = UNet(cfg)
        p = profile(cfg, resolution=resolution, dtype_bytes=4)
        boundaries = boundary_tensors(device_of, p.skip_edges)
        torch.manual_seed(1)
        x = torch.randn(1, cfg.in_channels, resolution, resolution)
        outputs: dict[int, torch.Tensor] = {}
        sent = 0
        blocks = list(net.blocks)
        boundary_after = {}  # last block of a virtual stage -> boundary index
        for k, (_src, _dst, tensors) in enumerate(boundaries):
            boundary_after[tensors[0]] = k
        with torch.no_grad():
            for i, block in enumerate(blocks):
                if device_of[i] == rank:
                    h = x if i == 0 else outputs[i - 1]
                    skip_from = p.blocks[i].skip_from
                    skip = outputs[skip_from] if skip_from is not None else None
                    outputs[i] = block(h, skip)
                if i in boundary_after:
                    src, dst, tensors = boundaries[boundary_after[i]]
                    for t in tensors:
                        if rank == src:
                            dist.send(outputs[t].contiguous(), dst)
                            sent += outputs[t].numel() * outputs[t].element_size()
                        elif rank == dst:
                            buf = torch.empty(p.blocks[t].out_shape)
                            dist.recv(buf, src)
                            outputs[t] = buf
        last = len(blocks) - 1
        # numpy, not a tensor: a tensor would travel as shared memory this process is about to release
        queue.put((rank, sent, outputs[last].numpy().copy() if device_of[last] == rank else None))
    finally:
        dist.destroy_process_group()


def check(model: str = "unet-tiny", *, devices: int = 2, method: str = "skip-aware", resolution: int = 8) -> CheckResult:
    """Run ``method``'s plan over ``devices`` gloo processes and compare bytes and output (see module doc)."""
    p = profile(model, resolution=resolution, dtype_bytes=4)  # the run is float32
    plan = (skip_aware if method == "skip-aware" else blockwise)(p, devices, flops_per_s=1e12)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    procs = [
        ctx.Process(target=_rank_main, args=(r, devices, port, model, resolution, list(plan.device_of), queue)) for r in range(devices)
    ]
    for proc in procs:
        proc.start()
    results = [queue.get() for _ in procs]
    for proc in procs:
        proc.join(60)
    sent = sum(r[1] for r in results)
    out = next(r[2] for r in results if r[2] is not None)
    torch.manual_seed(0)
    reference_net = UNet(get_config(model))
    torch.manual_seed(1)
    x = torch.randn(1, get_config(model).in_channels, resolution, resolution)
    with torch.no_grad():
        reference = reference_net(x)
    return CheckResult(method, devices, sent, plan.total_bytes, bool(torch.allclose(torch.from_numpy(out), reference, atol=1e-5)))
