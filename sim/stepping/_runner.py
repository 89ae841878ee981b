"""On-the-fly stepping: start at the smallest subnet, step up reusing every cached activation.

Usage (``net`` a trained :class:`SteppingCNN`, ``x`` a batch)::

    runner = StepRunner(net)
    first = runner.start(x)                # step 0: logits, MACs
    better = runner.step_up()              # step 1: computes only the units step 1 adds
    runner.run(x, mac_budget=0.6)          # the largest step within 60 % of the full MACs

The runner keeps, per layer, the activations of the groups computed so far (after BatchNorm,
ReLU and pooling) and the head's running sum. Stepping up from ``s`` to ``s + 1`` computes, in
every layer, only group ``s + 1``'s units from the cached inputs of groups ``0..s + 1``, then adds
the head's new inputs' share to the running sum. Every executed convolution and linear op is
counted from its operand shapes (:attr:`StepRunner.macs`), so a test can compare what ran with
the plan's ``MAC(s + 1) - MAC(s)``.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from coevo.sim.errors import UserInputError
from coevo.sim.stepping._nets import SteppingCNN
from coevo.sim.stepping._plan import StepPlan


@dataclass(frozen=True)
class Prediction:
    """What one step gave.

    Attributes:
        step: the subnet that produced it.
        logits: ``[B, classes]``.
        macs: MACs per image executed since :meth:`StepRunner.start` (all steps so far).
        added_macs: MACs per image this call executed.
    """

    step: int
    logits: torch.Tensor = field(repr=False)
    macs: int
    added_macs: int

    @property
    def labels(self) -> torch.Tensor:
        """Predicted classes ``[B]``."""
        return self.logits.argmax(-1)


class StepRunner:
    """Runs a trained :class:`SteppingCNN` step by step on one batch, caching activations (module doc)."""

    def __init__(self, net: SteppingCNN) -> None:
        if net.cum != net.plan.cum:
            raise ValueError("the net's step groups are not its plan's yet (it is still being assigned): finish training first")
        self.net = net.eval()
        self.plan = net.plan
        self.step = -1
        self.macs = 0
        self._acts: list[torch.Tensor] = []
        self._logits: torch.Tensor | None = None
        # each group's weight block, copied contiguous once (as a deployment stores them): slicing the full
        # weight at every call would copy it each time. The runner snapshots the weights: train first, then build it.
        self._blocks: list[list[tuple[torch.Tensor, ...]]] = []
        with torch.no_grad():
            for layer in range(3):
                conv, bn = net.conv(layer), net.bn(layer)
                assert bn.running_mean is not None and bn.running_var is not None and conv.bias is not None
                rows = []
                for g in range(self.plan.steps):
                    lo, hi = self._span(layer, g)
                    cin = self._ins(layer, g)
                    parts = (conv.weight[lo:hi, :cin], conv.bias[lo:hi], bn.running_mean[lo:hi], bn.running_var[lo:hi])
                    rows.append(tuple(t.detach().contiguous() for t in (*parts, bn.weight[lo:hi], bn.bias[lo:hi])))
                self._blocks.append(rows)
            fs2 = self.plan.arch.feature_side**2
            fc1 = []
            for g in range(self.plan.steps):
                lo, hi = self._span(3, g)
                w = net.fc1.weight[lo:hi, : self.plan.cum[2][g] * fs2]
                fc1.append(
                    (w.detach().contiguous(), net.fc1.bias[lo:hi].detach().contiguous(), net.head.weight[:, lo:hi].detach().contiguous())
                )
            self._fc1 = fc1

    # ---- the public API

    @torch.no_grad()
    def start(self, x: torch.Tensor) -> Prediction:
        """Run step 0 on ``x`` ``[B, 1, side, side]`` (forgetting any earlier batch)."""
        self.step, self.macs = -1, 0
        self._acts = [x, *(x.new_zeros(x.shape[0], 0, 1, 1) for _ in range(3)), x.new_zeros(x.shape[0], 0)]
        self._logits = x.new_zeros(x.shape[0], self.plan.arch.classes)
        return self._advance()

    @torch.no_grad()
    def step_up(self) -> Prediction:
        """Run the next step, computing only its new units; :class:`UserInputError` at the last step or before :meth:`start`."""
        if self.step < 0:
            raise UserInputError("nothing to step up from: call start(x) first")
        if self.step >= self.plan.steps - 1:
            raise UserInputError(f"already at the largest step ({self.step} of {self.plan.steps - 1}); there is nothing to add")
        return self._advance()

    def budget_step(self, mac_budget: float) -> int:
        """The largest step whose MACs fit ``mac_budget`` (:func:`budget_step`)."""
        return budget_step(self.plan, mac_budget)

    @torch.no_grad()
    def run(self, x: torch.Tensor, mac_budget: float = 1.0) -> Prediction:
        """Start on ``x`` and step up to the largest step within ``mac_budget`` (:meth:`budget_step`)."""
        target = self.budget_step(mac_budget)
        out = self.start(x)
        while out.step < target:
            out = self.step_up()
        return out

    @torch.no_grad()
    def subnet(self, x: torch.Tensor, step: int) -> torch.Tensor:
        """Logits of subnet ``step`` computed from scratch (layer by layer, every group ``0..step``; no cache is read or kept)."""
        h = x
        for layer in range(3):
            parts = [self._conv_group(layer, g, h[:, : self._ins(layer, g)]) for g in range(step + 1)]
            h = torch.cat(parts, 1)
        flat = h.flatten(1)
        fs2 = self.plan.arch.feature_side**2
        z = torch.cat([self._fc1_group(g, flat[:, : self.plan.cum[2][g] * fs2]) for g in range(step + 1)], 1)
        end = self.plan.cum[3][step]
        self._count(self.plan.arch.classes * end)
        return F.linear(z, self.net.head.weight[:, :end]) + self.net.head_bias[step]

    # ---- one group of one layer, counted

    def _ins(self, layer: int, group: int) -> int:
        return 1 if layer == 0 else self.plan.cum[layer - 1][group]

    def _span(self, layer: int, group: int) -> tuple[int, int]:
        cum = self.plan.cum[layer]
        return (cum[group - 1] if group else 0), cum[group]

    def _count(self, macs: int) -> None:
        self.macs += macs

    def _conv_group(self, layer: int, group: int, inp: torch.Tensor) -> torch.Tensor:
        w, b, mean, var, gamma, beta = self._blocks[layer][group]
        y = F.conv2d(inp, w, b, padding=1)
        self._count(y.shape[1] * y.shape[2] * y.shape[3] * w.shape[1] * w.shape[2] * w.shape[3])
        y = F.relu(F.batch_norm(y, mean, var, gamma, beta, False, 0.0, self.net.bn(layer).eps))
        return F.max_pool2d(y, 2) if self.plan.arch.pools[layer] else y

    def _fc1_group(self, group: int, flat: torch.Tensor) -> torch.Tensor:
        w, b, _ = self._fc1[group]
        self._count(w.shape[0] * w.shape[1])
        return F.relu(F.linear(flat, w, b))

    def _advance(self) -> Prediction:
        g = self.step + 1
        before = self.macs
        acts = self._acts
        for layer in range(3):  # acts[layer] holds groups 0..g of the layer below (just extended), acts[layer + 1] groups 0..g-1
            new = self._conv_group(layer, g, acts[layer])
            acts[layer + 1] = new if g == 0 else torch.cat([acts[layer + 1], new], 1)
        z_new = self._fc1_group(g, acts[3].flatten(1))
        acts[4] = torch.cat([acts[4], z_new], 1)
        head = self._fc1[g][2]
        self._count(head.shape[0] * head.shape[1])
        assert self._logits is not None
        self._logits = self._logits + F.linear(z_new, head)
        self.step = g
        return Prediction(g, self._logits + self.net.head_bias[g], self.macs, self.macs - before)


def budget_step(plan: StepPlan, mac_budget: float) -> int:
    """The largest step of ``plan`` whose MACs fit ``mac_budget`` (a fraction of the full model's MACs).

    Raises:
        UserInputError: a budget outside (0, 1] or below the smallest subnet (the message gives its MACs).
    """
    if not 0.0 < mac_budget <= 1.0:
        raise UserInputError(f"mac_budget must lie in (0, 1] (a share of the full model's {plan.full_macs} MACs); got {mac_budget}")
    allowed = mac_budget * plan.full_macs
    fits = [s for s in range(plan.steps) if plan.macs(s) <= allowed]
    if not fits:
        smallest = plan.macs(0)
        raise UserInputError(
            f"mac_budget {mac_budget} ({allowed:.0f} MACs) is below the smallest subnet: step 0 needs {smallest} MACs "
            f"({smallest / plan.full_macs:.4f} of the full {plan.full_macs}); give at least that"
        )
    return fits[-1]


@dataclass(frozen=True)
class StepLatency:
    """Measured CPU latency of one step (medians over repeats, milliseconds per batch)."""

    step: int
    batch: int
    incremental_ms: float
    """Stepping up to this step from the one below (or starting, at step 0), the cache kept."""
    cumulative_ms: float
    """Start plus every step-up to this step: what the on-the-fly path pays to reach it."""
    scratch_ms: float
    """This subnet from scratch (:meth:`StepRunner.subnet`)."""
    dense_ms: float | None = None
    """The dense net of the same MACs (``dense(x, step)``, one op per layer), when one was given."""
    to_scratch: tuple[float, ...] = ()
    """Per repeat, ``cumulative / scratch`` of that repeat (the two are timed interleaved): paired ratios for a verdict."""


@torch.no_grad()
def measure_latency(
    net: SteppingCNN, x: torch.Tensor, repeats: int = 30, warmup: int = 3, dense: torch.nn.Module | None = None
) -> list[StepLatency]:
    """Per-step latency on ``x``: incremental, cumulative, from scratch (and ``dense(x, s)``), interleaved, medians over ``repeats``."""
    runner, scratch = StepRunner(net), StepRunner(net)
    steps = net.plan.steps
    inc: list[list[float]] = [[] for _ in range(steps)]
    cum: list[list[float]] = [[] for _ in range(steps)]
    fresh: list[list[float]] = [[] for _ in range(steps)]
    flat: list[list[float]] = [[] for _ in range(steps)]
    if dense is not None:
        dense.eval()
    for rep in range(warmup + repeats):
        total = 0.0
        for s in range(steps):
            t0 = time.perf_counter()
            runner.start(x) if s == 0 else runner.step_up()
            t1 = time.perf_counter()
            scratch.subnet(x, s)
            t2 = time.perf_counter()
            if dense is not None:
                dense(x, s)
            t3 = time.perf_counter()
            total += t1 - t0
            if rep >= warmup:
                inc[s].append(t1 - t0)
                cum[s].append(total)
                fresh[s].append(t2 - t1)
                flat[s].append(t3 - t2)

    def ms(values: list[float]) -> float:
        return 1e3 * statistics.median(values)

    batch = int(x.shape[0])
    return [
        StepLatency(
            s,
            batch,
            ms(inc[s]),
            ms(cum[s]),
            ms(fresh[s]),
            ms(flat[s]) if dense is not None else None,
            tuple(c / f for c, f in zip(cum[s], fresh[s], strict=True) if f > 0),
        )
        for s in range(steps)
    ]
