"""Importance-driven assignment of units to step groups (SteppingNet's neuron moving), ending at each step's MAC budget.

SteppingNet (Sun et al., DATE 2023) builds its subnets by moving neurons: a subnet starts with
more neurons than its MAC budget allows, and its least important neurons move to the next larger
subnet, round by round while the network trains, until every subnet meets its MAC budget. Here,
with importance-driven assignment (``TrainConfig(assign="importance")``):

* training starts with every unit in group 0 (subnet 0 is the whole dense net; every MAC budget
  but the largest is exceeded);
* at each of ``rounds`` points during training, :func:`reassign` measures every unit's
  importance, keeps the most important units of each group, and moves the rest up: the group
  ends shrink from the full widths towards the plan's group ends (:func:`group_ends`, linear in
  the round), and the last round reaches the plan's exactly, so the trained net's subnets have
  the plan's MACs (within each step's budget) and train on at those widths;
* a unit only ever moves up (to a larger subnet), as in the paper.

**Importance** of a unit in group ``g``: how much the cross-entropy of subnet ``g`` (the smallest
subnet holding it) on a fixed batch of training images rises when the unit's output is zeroed:
the loss change of removing it, measured by ablation (BatchNorm in eval mode).

**Moving** permutes each layer's parameters (and the optimiser's moments) so that every group is
a contiguous index range; the masks are then rebuilt for the new group ends. Stored weights are
multiplied by the old masks first, so the connections a move opens (a unit moved up reads more
of the layer below) start at zero and a move up does not change what the unit computes; the
connections a move closes (a unit of the layer above that no longer may read a moved unit) are
the pruning the smaller subnet pays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from coevo.sim.stepping._nets import SteppingCNN
from coevo.sim.stepping._nets import _groups_of as _groups

LAYERS = ("conv1", "conv2", "conv3", "fc1")

Cum = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class Reassignment:
    """What one :func:`reassign` did.

    Attributes:
        importance: per layer (conv1, conv2, conv3, fc1), each unit's loss rise when removed, in the order before the move.
        order: per layer, the old index of the unit now at each position (position ``i`` holds old unit ``order[i]``).
        cum: the group ends after the move (``cum[l][s]``: units of layer ``l`` in groups ``0..s``).
        moved: per layer, how many units changed group.
    """

    importance: tuple[torch.Tensor, ...]
    order: tuple[torch.Tensor, ...]
    cum: Cum
    moved: tuple[int, ...]


def group_ends(target: Cum, round_: int, rounds: int) -> Cum:
    """The group ends after round ``round_`` of ``rounds``: from the full widths (round 0) linearly to ``target`` (the last round)."""
    out = []
    for ends in target:
        full = ends[-1]
        out.append(tuple(round(full - (full - e) * round_ / rounds) for e in ends))
    return tuple(out)


def _rest(net: SteppingCNN, layer: int, h: torch.Tensor) -> torch.Tensor:
    """fc1's output from the output ``h`` of conv ``layer`` (0-2, after BN, ReLU and pool) onward."""
    pools = net.plan.arch.pools
    for i in range(layer + 1, 3):
        conv = net.conv(i)
        h = F.relu(net.bn(i)(F.conv2d(h, conv.weight * net.mask(i), conv.bias, padding=1)))
        h = F.max_pool2d(h, 2) if pools[i] else h
    return F.relu(F.linear(h.flatten(1), net.fc1.weight * net.mask(3), net.fc1.bias))


def _step_loss(net: SteppingCNN, z: torch.Tensor, step: int, y: torch.Tensor) -> torch.Tensor:
    end = net.cum[3][step]
    return F.cross_entropy(F.linear(z[:, :end], net.head.weight[:, :end]) + net.head_bias[step], y)


@torch.no_grad()
def unit_importance(net: SteppingCNN, x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    """Each unit's importance: the rise of the mean cross-entropy on ``(x, y)`` of the smallest subnet holding it when its output is zeroed.

    Returns one tensor per layer (conv1, conv2, conv3, fc1), one value per unit (a negative value:
    the loss falls without the unit). Evaluated with BatchNorm in eval mode (running statistics),
    so removing a unit changes nothing but its own contribution.
    """
    was = net.training
    net.eval()
    pools = net.plan.arch.pools
    acts: list[torch.Tensor] = []
    h = x
    for i in range(3):
        conv = net.conv(i)
        h = F.relu(net.bn(i)(F.conv2d(h, conv.weight * net.mask(i), conv.bias, padding=1)))
        h = F.max_pool2d(h, 2) if pools[i] else h
        acts.append(h)
    z = _rest(net, 2, acts[2])
    base = [_step_loss(net, z, s, y) for s in range(net.steps)]
    out: list[torch.Tensor] = []
    for layer in range(3):
        groups = _groups(net.cum[layer])
        rises = torch.empty(acts[layer].shape[1])
        for unit in range(acts[layer].shape[1]):
            cut = acts[layer].clone()
            cut[:, unit] = 0.0
            g = int(groups[unit])
            rises[unit] = _step_loss(net, _rest(net, layer, cut), g, y) - base[g]
        out.append(rises)
    groups = _groups(net.cum[3])
    rises = torch.empty(z.shape[1])
    for unit in range(z.shape[1]):
        cut = z.clone()
        cut[:, unit] = 0.0
        g = int(groups[unit])
        rises[unit] = _step_loss(net, cut, g, y) - base[g]
    out.append(rises)
    net.train(was)
    return out


def rank_order(importance: torch.Tensor, cum: Sequence[int]) -> torch.Tensor:
    """The new order of a layer's units: each group's units by falling importance, groups in their order (ties keep index order).

    When the group ends then shrink, the least important units of each group are the ones past
    its new end: they move up to a larger group.
    """
    parts, start = [], 0
    for end in cum:
        parts.append(start + torch.sort(importance[start:end], descending=True, stable=True).indices)
        start = end
    return torch.cat(parts)


def _apply(param: torch.Tensor, opt: torch.optim.Optimizer | None, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Replace ``param``'s data (and its optimiser moments of the same shape) by ``fn(tensor)``."""
    param.data = fn(param.data).contiguous()
    if opt is not None and param in opt.state:
        state = opt.state[param]
        for name, value in list(state.items()):
            if isinstance(value, torch.Tensor) and value.shape == param.shape:
                state[name] = fn(value).contiguous()


@torch.no_grad()
def permute_units(net: SteppingCNN, orders: Sequence[torch.Tensor], opt: torch.optim.Optimizer | None = None) -> None:
    """Move every layer's units to the positions ``orders`` give (position ``i`` gets old unit ``orders[l][i]``).

    Inactive (masked) weights are zeroed first, with their optimiser moments, so connections a
    later change of the group ends opens start at zero. Biases, BatchNorm parameters and
    statistics, the next layer's input columns and the head's columns follow their unit.
    """
    fs2 = net.plan.arch.feature_side**2
    masked: list[tuple[torch.Tensor, torch.Tensor]] = [(net.conv(i).weight, net.mask(i)) for i in range(3)]
    masked.append((net.fc1.weight, net.mask(3)))
    for param, mask in masked:

        def keep(t: torch.Tensor, m: torch.Tensor = mask) -> torch.Tensor:
            return t * m

        _apply(param, opt, keep)
    for layer, order in enumerate(orders):

        def rows(t: torch.Tensor, idx: torch.Tensor = order) -> torch.Tensor:
            return t.index_select(0, idx)

        def cols(t: torch.Tensor, idx: torch.Tensor = order) -> torch.Tensor:
            return t.index_select(1, idx)

        if layer < 3:
            conv, bn = net.conv(layer), net.bn(layer)
            assert conv.bias is not None and bn.running_mean is not None and bn.running_var is not None
            for p in (conv.weight, conv.bias, bn.weight, bn.bias):
                _apply(p, opt, rows)
            bn.running_mean.copy_(bn.running_mean[order])
            bn.running_var.copy_(bn.running_var[order])
            if layer < 2:
                _apply(net.conv(layer + 1).weight, opt, cols)
            else:  # fc1 reads conv3 channel-major: channel c owns features c*fs2 .. c*fs2+fs2-1
                feat = (order[:, None] * fs2 + torch.arange(fs2)[None, :]).flatten()

                def features(t: torch.Tensor, idx: torch.Tensor = feat) -> torch.Tensor:
                    return t.index_select(1, idx)

                _apply(net.fc1.weight, opt, features)
        else:
            for p in (net.fc1.weight, net.fc1.bias):
                _apply(p, opt, rows)
            _apply(net.head.weight, opt, cols)


def reassign(
    net: SteppingCNN, x: torch.Tensor, y: torch.Tensor, cum: Sequence[Sequence[int]], opt: torch.optim.Optimizer | None = None
) -> Reassignment:
    """One round of moving: measure importance on ``(x, y)``; each group keeps its most important units up to the new ends ``cum``.

    The units past a group's new end move up to the larger groups.

    ``cum`` must not let any group end grow (units only move up); the last round passes the plan's ends.

    Raises:
        ValueError: a group end in ``cum`` above the current one, or ends that do not fit the net.
    """
    new = tuple(tuple(int(v) for v in c) for c in cum)
    if any(n > o for c_new, c_old in zip(new, net.cum, strict=True) for n, o in zip(c_new, c_old, strict=True)):
        raise ValueError(f"group ends only shrink (units move up to larger subnets): {new} against the current {net.cum}")
    importance = unit_importance(net, x, y)
    orders = [rank_order(imp, ends) for imp, ends in zip(importance, net.cum, strict=True)]
    moved = []
    for layer, order in enumerate(orders):
        before, after = _groups(net.cum[layer]), _groups(new[layer])
        moved.append(int((before[order] != after).sum()))  # the unit now at position i sat in group before[order[i]]
    permute_units(net, orders, opt)
    net.set_groups(new)
    return Reassignment(tuple(importance), tuple(orders), new, tuple(moved))
