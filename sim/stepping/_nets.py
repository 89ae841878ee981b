"""The three nets compared at the same MACs: stepping (nested, incremental), slimmable (shared weights), independent.

:class:`SteppingCNN` stores each layer's full weight and a block lower-triangular mask: unit
group ``g`` of a layer reads only groups ``0..g`` of the layer below. A unit's activation is
therefore the same in every subnet that holds it, which is what lets a larger subnet reuse a
smaller one's activations, and lets one forward pass of the whole net give every step's
logits (training costs one pass, not one per step). BatchNorm after a convolution is one per
channel: a channel's input distribution does not depend on the step, so no step needs its own.

Head: one linear head whose input units are masked per step (``logits_s = W[:, :H(s)] h[:H(s)]
+ b_s``), with a bias per step. Stepping up adds ``W[:, new] h_new`` to the previous step's sum,
so the head is incremental too and costs exactly the MACs of its new inputs; the per-step bias
(additions only) lets each step re-centre its logits. A separate head per step would recompute
the whole head at each step and break the MAC equality.

:class:`SlimmableCNN` is the slimmable network of Yu et al. (ICLR 2019): one set of weights,
switch ``s`` uses the first ``D_l(s)`` channels of every layer, with switchable BatchNorm (private
BN statistics and affine per switch); every switch is trained at every iteration (the original
rule; the sandwich rule and in-place distillation of universally slimmable nets are not used).
An independent subnet is a :class:`SlimmableCNN` with one switch, trained alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from coevo.sim.stepping._plan import Arch, StepPlan


def _groups_of(cum: Sequence[int]) -> torch.Tensor:
    """The step group of each unit, from cumulative group ends."""
    out = torch.empty(cum[-1], dtype=torch.long)
    start = 0
    for g, end in enumerate(cum):
        out[start:end] = g
        start = end
    return out


class SteppingCNN(nn.Module):
    """The zoo CNN with units in step groups and block lower-triangular weights (module doc)."""

    def __init__(self, plan: StepPlan) -> None:
        super().__init__()
        self.plan = plan
        arch = plan.arch
        full = [c[-1] for c in plan.cum]
        ins = [1, *full[:3]]
        self.convs = nn.ModuleList(nn.Conv2d(ins[i], full[i], 3, padding=1) for i in range(3))
        self.bns = nn.ModuleList(nn.BatchNorm2d(full[i]) for i in range(3))
        fs2 = arch.feature_side**2
        self.fc1 = nn.Linear(full[2] * fs2, full[3])
        self.head = nn.Linear(full[3], arch.classes, bias=False)
        self.head_bias = nn.Parameter(torch.zeros(plan.steps, arch.classes))
        self.cum: tuple[tuple[int, ...], ...] = plan.cum
        for i, mask in enumerate(self._masks(plan.cum)):
            self.register_buffer(f"mask{i}", mask)

    def _masks(self, cum: tuple[tuple[int, ...], ...]) -> list[torch.Tensor]:
        groups = [_groups_of(c) for c in cum]
        out = []
        for i in range(3):
            g_in = torch.zeros(1, dtype=torch.long) if i == 0 else groups[i - 1]
            out.append((groups[i][:, None] >= g_in[None, :]).float()[:, :, None, None])
        g_feat = groups[2].repeat_interleave(self.plan.arch.feature_side**2)  # flatten is channel-major: channel c owns c*fs2 ..
        out.append((groups[3][:, None] >= g_feat[None, :]).float())
        return out

    def set_groups(self, cum: Sequence[Sequence[int]]) -> None:
        """Make ``cum[l][s]`` (units of layer ``l`` in groups ``0..s``) the current group ends, rebuilding the masks.

        Only while training (importance-driven assignment moves group ends towards the plan's); a
        trained net's groups are the plan's (``cum == plan.cum``), which the runner and the MAC counts read.
        """
        fixed = tuple(tuple(int(v) for v in c) for c in cum)
        if [c[-1] for c in fixed] != [c[-1] for c in self.plan.cum] or len(fixed[0]) != self.plan.steps:
            raise ValueError(f"group ends {fixed} do not fit the plan's layers and steps {self.plan.cum}")
        self.cum = fixed
        for i, mask in enumerate(self._masks(fixed)):
            self.mask(i).copy_(mask)

    @property
    def steps(self) -> int:
        """Number of steps."""
        return self.plan.steps

    def conv(self, layer: int) -> nn.Conv2d:
        """conv1, conv2, conv3 (0-2)."""
        m = self.convs[layer]
        assert isinstance(m, nn.Conv2d)
        return m

    def bn(self, layer: int) -> nn.BatchNorm2d:
        """The BatchNorm after conv ``layer`` (0-2)."""
        m = self.bns[layer]
        assert isinstance(m, nn.BatchNorm2d)
        return m

    def mask(self, layer: int) -> torch.Tensor:
        """The 0/1 connectivity mask of conv1, conv2, conv3 (0-2) or fc1 (3)."""
        m = getattr(self, f"mask{layer}")
        assert isinstance(m, torch.Tensor)
        return m

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of every step, ``[steps, B, classes]``, in one pass (training and reference evaluation)."""
        h = x
        for i, pool in enumerate(self.plan.arch.pools):
            conv = self.conv(i)
            h = F.relu(self.bn(i)(F.conv2d(h, conv.weight * self.mask(i), conv.bias, padding=1)))
            h = F.max_pool2d(h, 2) if pool else h
        z = F.relu(F.linear(h.flatten(1), self.fc1.weight * self.mask(3), self.fc1.bias))
        out = []
        for s, end in enumerate(self.cum[3]):
            out.append(F.linear(z[:, :end], self.head.weight[:, :end]) + self.head_bias[s])
        return torch.stack(out)


class SlimmableCNN(nn.Module):
    """The zoo CNN with shared weights and one switch per width (module doc); ``forward(x, s)`` runs switch ``s``."""

    def __init__(self, arch: Arch, switches: Sequence[Sequence[int]]) -> None:
        super().__init__()
        self.arch = arch
        self.switches = [tuple(int(w) for w in sw) for sw in switches]
        full = [max(sw[i] for sw in self.switches) for i in range(4)]
        ins = [1, *full[:3]]
        self.convs = nn.ModuleList(nn.Conv2d(ins[i], full[i], 3, padding=1) for i in range(3))
        self.bns = nn.ModuleList(nn.ModuleList(nn.BatchNorm2d(sw[i]) for i in range(3)) for sw in self.switches)
        self.fs2 = arch.feature_side**2
        self.fc1 = nn.Linear(full[2] * self.fs2, full[3])
        self.head = nn.Linear(full[3], arch.classes)

    @property
    def steps(self) -> int:
        """Number of switches."""
        return len(self.switches)

    def forward(self, x: torch.Tensor, switch: int = -1) -> torch.Tensor:
        """Logits ``[B, classes]`` of one switch (the widest by default)."""
        s = switch % len(self.switches)
        w = self.switches[s]
        ins = [1, *w[:3]]
        h = x
        for i, pool in enumerate(self.arch.pools):
            conv = self.convs[i]
            assert isinstance(conv, nn.Conv2d) and conv.bias is not None
            bn = self.bns[s][i]  # type: ignore[index]
            h = F.relu(bn(F.conv2d(h, conv.weight[: w[i], : ins[i]], conv.bias[: w[i]], padding=1)))
            h = F.max_pool2d(h, 2) if pool else h
        z = F.relu(F.linear(h.flatten(1), self.fc1.weight[: w[3], : w[2] * self.fs2], self.fc1.bias[: w[3]]))
        return F.linear(z, self.head.weight[:, : w[3]], self.head.bias)


class IndependentCNNs(nn.Module):
    """One dense net per step, each trained alone; ``forward(x, s)`` runs net ``s``."""

    def __init__(self, arch: Arch, widths: Sequence[Sequence[int]]) -> None:
        super().__init__()
        self.nets = nn.ModuleList(SlimmableCNN(arch, [w]) for w in widths)

    @property
    def steps(self) -> int:
        """Number of nets."""
        return len(self.nets)

    def forward(self, x: torch.Tensor, switch: int = -1) -> torch.Tensor:
        """Logits of net ``switch``."""
        net = self.nets[switch % len(self.nets)]
        out: torch.Tensor = net(x)
        return out


def make_net(kind: str, plan: StepPlan) -> nn.Module:
    """An untrained net of ``kind`` (``stepping``, ``slimmable``, ``independent``) for ``plan``."""
    if kind == "stepping":
        return SteppingCNN(plan)
    if kind == "slimmable":
        return SlimmableCNN(plan.arch, plan.dense)
    if kind == "independent":
        return IndependentCNNs(plan.arch, plan.dense)
    raise ValueError(f"unknown net kind {kind!r}")


def step_logits(net: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    """Logits of every step of ``net`` on ``x`` (one pass for a stepping net, one per switch otherwise)."""
    if isinstance(net, SteppingCNN):
        return list(net(x))
    steps = int(net.steps)  # type: ignore[arg-type]
    return [net(x, s) for s in range(steps)]
