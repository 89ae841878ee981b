"""Reality check of the planner: run a plan's training step over torch.distributed (gloo) and count bytes and time.

Each rank (one process per device, on loopback) builds the same small model (same seed),
runs the blocks the plan puts on its device in forward order, and at every virtual-stage
boundary sends exactly what the next stage needs: the boundary activation plus the skips
in flight across it whose producer and consumer sit on different devices (relayed stage
by stage, as :mod:`sim.pipeline.partition` counts them); a direct plan
(``blockwise-direct``) sends each skip instead once, from its producer's rank to its
consumer's, right after the producer runs. The backward pass walks these sends in reverse
and sends the gradient of every tensor that crossed, back over the same link. Every
``dist.send`` is counted.

The check passes when the bytes sent forward and backward each equal the planner's count,
the output equals a single-process forward pass, and every parameter gradient equals a
single-process backward pass.

Timing (:func:`calibrate`): the same step (one microbatch, so the stages run one after the
other, as GPipe/1F1B with one microbatch do) is timed over ``repeats`` runs; the simulator
predicts it from this machine's measured compute rate (FLOP/s of a single-process forward
and backward) and loopback link (gloo send bandwidth and latency), and the relative error
is reported.
"""

from __future__ import annotations

import os
import socket
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from coevo.sim.pipeline.blocks import Block, BlockNet
from coevo.sim.pipeline.cluster import Cluster
from coevo.sim.pipeline.partition import partition
from coevo.sim.pipeline.profile import build_model, profile
from coevo.sim.pipeline.simulate import boundary_tensors, simulate


@dataclass(frozen=True)
class CheckResult:
    """Bytes the run sent vs the planner's count, output and gradient agreement, and step times."""

    method: str
    devices: int
    bytes_sent: int
    bytes_planned: int
    output_matches: bool
    backward_bytes_sent: int = 0
    grads_match: bool = False
    step_s: tuple[float, ...] = ()

    @property
    def ok(self) -> bool:
        """Bytes equal (both directions), output and gradients equal."""
        same = self.bytes_sent == self.bytes_planned == self.backward_bytes_sent
        return same and self.output_matches and self.grads_match


def _inputs(model: str, resolution: int, microbatch: int) -> tuple[BlockNet, torch.Tensor]:
    torch.manual_seed(0)
    built = build_model(model)
    net = BlockNet(built)
    torch.manual_seed(1)
    return net, torch.randn(built.input_shape(microbatch, resolution))


@dataclass(frozen=True)
class _RankStep:
    """What one rank's forward + backward sent, and its share of the output and gradients (numpy: it crosses processes)."""

    sent: int
    sent_back: int
    out: np.ndarray | None
    grads: dict[str, np.ndarray]


def _step(
    rank: int,
    net: BlockNet,
    x: torch.Tensor,
    device_of: list[int],
    boundaries: list[Any],
    shapes: list[Any],
    direct: Sequence[tuple[int, int]] = (),
) -> _RankStep:
    """One forward + backward over the ranks; returns bytes sent and this rank's output and gradients.

    ``direct``: skips (producer, consumer) sent point to point right after the producer runs
    (a direct plan; ``boundaries`` then carry no skips). Every rank walks the same sequence of
    sends (forward order, then reversed), so blocking sends and receives always pair up."""
    step = _RankPass(rank, net, device_of, boundaries, shapes, direct)
    step.forward(x)
    step.backward()
    return step.result()


class _RankPass:
    """One rank's part of a training step: :meth:`forward` runs its blocks and the sends in block order,
    :meth:`backward` walks the same send events in reverse with the gradients."""

    def __init__(
        self, rank: int, net: BlockNet, device_of: list[int], boundaries: list[Any], shapes: list[Any], direct: Sequence[tuple[int, int]]
    ) -> None:
        self.rank, self.device_of, self.shapes, self.direct = rank, device_of, shapes, direct
        self.blocks = list(net.blocks)
        net.zero_grad(set_to_none=True)
        self.outputs: dict[int, torch.Tensor] = {}
        self.received: dict[int, list[tuple[int, torch.Tensor]]] = {}  # send event -> (block, leaf tensor)
        self.events: list[tuple[int, int, list[int]]] = []  # (from rank, to rank, block outputs) in forward order
        self.boundary_after = {tensors[0]: (src, dst, tensors) for src, dst, tensors in boundaries}
        self.pending: list[tuple[torch.Tensor, torch.Tensor]] = []  # (tensor, its gradient) to run backward from
        self.sent = self.sent_back = 0
        self.last = len(self.blocks) - 1

    def forward(self, x: torch.Tensor) -> None:
        """Run this rank's blocks in order; after each block, the sends that follow it (boundary, then direct skips)."""
        device_of, outputs = self.device_of, self.outputs
        for i, block in enumerate(self.blocks):
            if device_of[i] == self.rank:
                h = x if i == 0 else outputs[i - 1]
                assert isinstance(block, Block)
                skip_from = block.skip_from
                outputs[i] = block(h, outputs[skip_from] if skip_from is not None else None)
            here = [self.boundary_after[i]] if i in self.boundary_after else []
            here += [(device_of[s], device_of[c], [s]) for s, c in self.direct if s == i]
            for src, dst, tensors in here:
                self._exchange(len(self.events), src, dst, tensors)
                self.events.append((src, dst, tensors))

    def _exchange(self, k: int, src: int, dst: int, tensors: list[int]) -> None:
        """Send event ``k`` forward: ``src`` sends the block outputs ``tensors``, ``dst`` receives them as leaves."""
        for t in tensors:
            if self.rank == src:
                out = self.outputs[t]
                dist.send(out.detach().contiguous(), dst)
                self.sent += out.numel() * out.element_size()
            elif self.rank == dst:
                buf = torch.empty(self.shapes[t])
                dist.recv(buf, src)
                self.outputs[t] = buf.requires_grad_(True)
                self.received.setdefault(k, []).append((t, self.outputs[t]))

    def _run_pending(self) -> None:
        if self.pending:
            torch.autograd.backward([t for t, _ in self.pending], [g for _, g in self.pending], retain_graph=True)
            self.pending.clear()

    def backward(self) -> None:
        """The loss on the last block's rank, then each send event in reverse: receivers send their leaves' gradients back."""
        if self.device_of[self.last] == self.rank:
            out = self.outputs[self.last]
            self.pending.append((out.square().mean(), torch.tensor(1.0)))
        for k in reversed(range(len(self.events))):
            src, dst, tensors = self.events[k]
            if self.rank == dst:
                self._run_pending()
                for _t, leaf in self.received.get(k, []):
                    grad = leaf.grad if leaf.grad is not None else torch.zeros_like(leaf)
                    dist.send(grad.contiguous(), src)
                    self.sent_back += grad.numel() * grad.element_size()
            elif self.rank == src:
                for t in tensors:
                    grad = torch.empty(self.shapes[t])
                    dist.recv(grad, dst)
                    self.pending.append((self.outputs[t], grad))
        self._run_pending()

    def result(self) -> _RankStep:
        """Bytes sent both ways, this rank's output (the last block's rank only) and its gradients."""
        grads = {
            f"{i}.{name}": param.grad.numpy().copy()
            for i, block in enumerate(self.blocks)
            if self.device_of[i] == self.rank
            for name, param in block.named_parameters()
            if param.grad is not None
        }
        out = self.outputs[self.last].detach().numpy().copy() if self.device_of[self.last] == self.rank else None
        return _RankStep(self.sent, self.sent_back, out, grads)


def _rank_main(
    rank: int,
    world: int,
    port: int,
    model: str,
    resolution: int,
    microbatch: int,
    device_of: list[int],
    direct_skips: bool,
    repeats: int,
    queue: Any,
) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)  # one core per rank, as one device per rank
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        net, x = _inputs(model, resolution, microbatch)
        p = profile(model, resolution=resolution, microbatch=microbatch, dtype_bytes=4)
        boundaries = boundary_tensors(device_of, p.skip_edges, direct=direct_skips)
        direct = [(s, c) for s, c in p.skip_edges if device_of[s] != device_of[c]] if direct_skips else []
        shapes = [b.out_shape for b in p.blocks]
        result = _step(rank, net, x, device_of, boundaries, shapes, direct)
        times = []
        for _ in range(repeats):
            dist.barrier()
            start = time.perf_counter()
            _step(rank, net, x, device_of, boundaries, shapes, direct)
            dist.barrier()
            times.append(time.perf_counter() - start)
        # numpy, not tensors: a tensor would travel as shared memory this process is about to release
        queue.put((rank, result, times))
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def check(
    model: str = "unet-tiny", *, devices: int = 2, method: str = "skip-aware", resolution: int = 8, microbatch: int = 1, repeats: int = 0
) -> CheckResult:
    """Run ``method``'s plan over ``devices`` gloo processes; compare bytes, output and gradients (module doc).

    Args:
        repeats: also time this many steps after the checked one (``step_s``).
    """
    p = profile(model, resolution=resolution, microbatch=microbatch, dtype_bytes=4)  # the run is float32
    plan = partition(p, method, devices, flops_per_s=1e12)
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    args = (devices, _free_port(), model, resolution, microbatch, list(plan.device_of), plan.direct_skips, repeats, queue)
    procs = [ctx.Process(target=_rank_main, args=(r, *args)) for r in range(devices)]
    for proc in procs:
        proc.start()
    results = [queue.get() for _ in procs]
    for proc in procs:
        proc.join(60)
    runs: list[_RankStep] = [r[1] for r in results]
    out = next(r.out for r in runs if r.out is not None)
    grads = {k: v for r in runs for k, v in r.grads.items()}
    net, x = _inputs(model, resolution, microbatch)
    reference = net(x)
    reference.square().mean().backward()
    expected = {f"{i}.{n}": prm.grad.numpy() for i, b in enumerate(net.blocks) for n, prm in b.named_parameters() if prm.grad is not None}
    grads_match = grads.keys() == expected.keys() and all(np.allclose(grads[k], expected[k], atol=1e-5, rtol=1e-4) for k in expected)
    step_s = tuple(max(r[2][i] for r in results) for i in range(repeats))
    return CheckResult(
        method,
        devices,
        sum(r.sent for r in runs),
        plan.total_bytes,
        bool(np.allclose(out, reference.detach().numpy(), atol=1e-5)),
        sum(r.sent_back for r in runs),
        grads_match,
        step_s,
    )


@dataclass(frozen=True)
class Calibration:
    """Measured vs simulated step time of a gloo pipeline run."""

    method: str
    devices: int
    flops_per_s: float
    link_gbs: float
    latency_us: float
    measured_s: float
    predicted_s: float

    @property
    def error(self) -> float:
        """Relative error of the prediction: predicted / measured - 1."""
        return self.predicted_s / self.measured_s - 1.0

    def calibrated_cluster(self) -> Cluster:
        """This machine as a cluster whose compute rate is scaled so the simulator reproduces the measured step.

        Save it with ``json.dumps(dataclasses.asdict(...))`` and pass the file as ``cluster``."""
        rate = self.flops_per_s * self.predicted_s / self.measured_s
        return Cluster("loopback-calibrated", self.devices, self.devices, rate / 1e12, 1e3, self.link_gbs, self.link_gbs, self.latency_us)


def measure_compute(model: str, resolution: int, microbatch: int, repeats: int = 5) -> float:
    """FLOP/s of a single-thread forward + backward of the whole model on this machine (median of ``repeats``)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each rank runs
    try:
        net, x = _inputs(model, resolution, microbatch)
        flops = profile(model, resolution=resolution, microbatch=microbatch, dtype_bytes=4).total("flops") * 3  # fwd + bwd
        times = []
        for _ in range(repeats + 1):  # the first run warms up allocators and is dropped
            net.zero_grad(set_to_none=True)
            start = time.perf_counter()
            net(x).square().mean().backward()
            times.append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
    return flops / statistics.median(times[1:])


def _link_main(rank: int, port: int, sizes: list[int], repeats: int, queue: Any) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        out = []
        for n in sizes:
            buf = torch.zeros(n // 4)
            times = []
            for _ in range(repeats):
                dist.barrier()
                start = time.perf_counter()
                if rank == 0:
                    dist.send(buf, 1)
                    dist.recv(buf, 1)
                else:
                    dist.recv(buf, 0)
                    dist.send(buf, 0)
                times.append((time.perf_counter() - start) / 2)
            out.append(statistics.median(times))
        if rank == 0:
            queue.put(out)
    finally:
        dist.destroy_process_group()


def measure_link(repeats: int = 20) -> tuple[float, float]:
    """(bytes/s, latency s) of a gloo send over loopback: ping-pong of 4 KiB and 4 MiB tensors, medians."""
    sizes = [4096, 4 << 20]
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    port = _free_port()
    procs = [ctx.Process(target=_link_main, args=(r, port, sizes, repeats, queue)) for r in range(2)]
    for proc in procs:
        proc.start()
    small, large = queue.get()
    for proc in procs:
        proc.join(60)
    bandwidth = (sizes[1] - sizes[0]) / max(large - small, 1e-9)
    return bandwidth, max(small - sizes[0] / bandwidth, 0.0)


def calibrate(
    model: str = "unet-small", *, devices: int = 2, method: str = "skip-aware", resolution: int = 32, microbatch: int = 4, repeats: int = 5
) -> Calibration:
    """Time the gloo step and compare with the simulator fed this machine's measured rates (module doc)."""
    rate = measure_compute(model, resolution, microbatch)
    bandwidth, latency = measure_link()
    result = check(model, devices=devices, method=method, resolution=resolution, microbatch=microbatch, repeats=repeats)
    p = profile(model, resolution=resolution, microbatch=microbatch, dtype_bytes=4)
    cluster = Cluster("loopback", devices, devices, rate / 1e12, 1e3, bandwidth / 1e9, bandwidth / 1e9, latency * 1e6)
    plan = partition(p, method, devices, flops_per_s=rate)
    predicted = simulate(p, plan, cluster, schedule="gpipe", microbatches=1).makespan_s
    return Calibration(method, devices, rate, bandwidth / 1e9, latency * 1e6, statistics.median(result.step_s), predicted)
