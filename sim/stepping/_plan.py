"""Layer shapes, MAC counts and the channel widths that put each step at a MAC fraction.

Every net here (stepping, slimmable, independent) is the zoo's small CNN
(conv1-conv2-conv3-fc1-head, 3x3 convolutions with padding 1, max-pools where the zoo's
architecture has them) with BatchNorm after each convolution. MACs count multiply-accumulates
of the convolutions and linear layers per image; BatchNorm (folded into the convolution at
inference), ReLU, pooling and bias additions are not counted.

A stepping net partitions each layer's units (conv channels, fc1 units) into step groups; unit
group ``g`` of a layer reads only the groups ``0..g`` of the layer below (block lower-triangular
weights), so subnet ``s`` (groups ``0..s``) never reads what a larger subnet adds. With ``c_l[g]``
the units of layer ``l`` in group ``g`` and ``C_l(g)`` the cumulative units of groups ``0..g``::

    MAC(s) = sum_l sum_{g<=s} c_l[g] * C_{l-1}(g) * m_l  +  classes * C_fc1(s)

where ``m_l`` is the cost of one (output unit, input channel) pair: ``9 * H * W`` for a 3x3
convolution with an ``H x W`` output, ``side^2`` for fc1 reading a ``side x side`` map per channel,
1 for the head. A dense net of widths ``D_l`` costs ``sum_l D_l * D_{l-1} * m_l + classes * D_fc1``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from coevo.sim.errors import UserInputError


@dataclass(frozen=True)
class Arch:
    """The zoo architecture the nets share.

    Attributes:
        kind: the zoo class it follows (``DigitsCNN`` or ``MnistCNN``).
        side: input image side (8 or 28).
        widths: full channels of conv1, conv2, conv3 and units of fc1 (the zoo model's widths).
        pools: whether a 2x2 max-pool follows conv1, conv2, conv3.
        classes: output classes.
    """

    kind: str
    side: int
    widths: tuple[int, int, int, int]
    pools: tuple[bool, bool, bool]
    classes: int = 10

    @classmethod
    def from_zoo(cls, arch: dict[str, object]) -> Arch:
        """The architecture of a zoo recipe's ``arch`` entry (``DigitsCNN`` or ``MnistCNN``)."""
        kind = str(arch["kind"])
        width, hidden = int(arch["width"]), int(arch["hidden"])  # type: ignore[call-overload]
        widths = (width, 2 * width, 4 * width, hidden)
        if kind == "DigitsCNN":
            return cls(kind, 8, widths, (False, True, True))
        if kind == "MnistCNN":
            return cls(kind, 28, widths, (True, True, True))
        raise UserInputError(f"stepping nets follow the zoo's CNN classifiers (DigitsCNN, MnistCNN), not {kind}")

    @property
    def conv_sides(self) -> tuple[int, int, int]:
        """Output side of each convolution (before its pool)."""
        sides, side = [], self.side
        for pool in self.pools:
            sides.append(side)
            side = side // 2 if pool else side
        return sides[0], sides[1], sides[2]

    @property
    def feature_side(self) -> int:
        """Side of the map fc1 reads."""
        side = self.side
        for pool in self.pools:
            side = side // 2 if pool else side
        return side

    @property
    def pair_costs(self) -> tuple[int, int, int, int]:
        """MACs per image of one (output unit, input channel) pair of conv1, conv2, conv3, fc1."""
        a, b, c = (9 * s * s for s in self.conv_sides)
        return a, b, c, self.feature_side**2


def dense_macs(arch: Arch, widths: Sequence[int]) -> int:
    """MACs per image of a dense net with these conv1, conv2, conv3, fc1 widths (the head included)."""
    ins = (1, *widths[:3])
    return sum(w * i * m for w, i, m in zip(widths, ins, arch.pair_costs, strict=True)) + arch.classes * widths[3]


def dense_layer_macs(arch: Arch, widths: Sequence[int]) -> list[int]:
    """MACs per image of each layer (conv1, conv2, conv3, fc1, head) of a dense net."""
    ins = (1, *widths[:3])
    return [w * i * m for w, i, m in zip(widths, ins, arch.pair_costs, strict=True)] + [arch.classes * widths[3]]


def stepping_macs(arch: Arch, cum: Sequence[Sequence[int]], step: int) -> int:
    """MACs per image of stepping subnet ``step``; ``cum[l][g]`` is layer ``l``'s units in groups ``0..g``."""
    total = 0
    for g in range(step + 1):
        total += step_up_macs(arch, cum, g)
    return total


def step_up_macs(arch: Arch, cum: Sequence[Sequence[int]], step: int) -> int:
    """MACs per image that group ``step``'s units add (stepping up from ``step - 1``, or starting at step 0)."""
    total = 0
    for layer, m in enumerate(arch.pair_costs):
        new = cum[layer][step] - (cum[layer][step - 1] if step else 0)
        reads = 1 if layer == 0 else cum[layer - 1][step]
        total += new * reads * m
    new_hidden = cum[3][step] - (cum[3][step - 1] if step else 0)
    return total + arch.classes * new_hidden


def check_fractions(fractions: Sequence[float]) -> tuple[float, ...]:
    """The step MAC fractions as a tuple, or :class:`UserInputError` unless strictly increasing within (0, 1]."""
    fr = tuple(float(f) for f in fractions)
    if not fr:
        raise UserInputError("steps is empty: give the MAC fraction of each step, e.g. [0.25, 0.5, 0.75, 1.0]")
    bad = [f for f in fr if not 0.0 < f <= 1.0]
    if bad:
        raise UserInputError(f"step fractions must lie in (0, 1] (a share of the full model's MACs); got {bad} in {list(fr)}")
    if any(b <= a for a, b in itertools.pairwise(fr)):
        raise UserInputError(f"step fractions must be strictly increasing (each step adds MACs); got {list(fr)}")
    return fr


@dataclass(frozen=True)
class StepPlan:
    """The channel widths of a stepping net and of its same-MAC baselines.

    Attributes:
        arch: the shared architecture.
        fractions: the target MAC fraction of each step (of :attr:`full_macs`).
        full_macs: MACs of the dense zoo architecture at its own widths (fraction 1.0).
        cum: ``cum[l][s]``: units of layer ``l`` (conv1, conv2, conv3, fc1) in stepping groups ``0..s``.
        dense: ``dense[s]``: widths of the dense (independent / slimmable) net matched to step ``s``.
    """

    arch: Arch
    fractions: tuple[float, ...]
    full_macs: int
    cum: tuple[tuple[int, ...], ...]
    dense: tuple[tuple[int, int, int, int], ...]

    @property
    def steps(self) -> int:
        """Number of steps."""
        return len(self.fractions)

    def macs(self, step: int) -> int:
        """MACs per image of stepping subnet ``step``."""
        return stepping_macs(self.arch, self.cum, step)

    def dense_macs(self, step: int) -> int:
        """MACs per image of the dense net matched to ``step``."""
        return dense_macs(self.arch, self.dense[step])

    def groups(self, layer: int) -> list[int]:
        """Units of each step group of ``layer``."""
        c = self.cum[layer]
        return [c[0]] + [c[s] - c[s - 1] for s in range(1, len(c))]


def _stepping_cum(arch: Arch, prev: list[list[int]], r: float) -> list[list[int]]:
    """``prev`` extended by one step whose cumulative widths are ``round(r * full)``, at least one new unit per layer."""
    out = []
    for layer, full in enumerate(arch.widths):
        last = prev[layer][-1] if prev[layer] else 0
        out.append([*prev[layer], max(last + 1, round(r * full))])
    return out


def _solve(cost: Callable[[float], int], lo: float, hi: float, target: float) -> float:
    """The largest ``r`` in [lo, hi] whose (monotone, stepwise) ``cost(r)`` is at most ``target`` (bisection); ``lo`` if none is."""
    a, b = lo, hi
    if cost(b) <= target:
        return b
    for _ in range(60):
        mid = (a + b) / 2
        if cost(mid) <= target:
            a = mid
        else:
            b = mid
    return a


def plan(arch: Arch, fractions: Sequence[float]) -> StepPlan:
    """Solve the widths: each step's stepping subnet, and a dense net per step, with the most MACs integers allow within ``f * full``.

    The stepping groups are solved one step at a time (a step's MACs depend on the groups
    below it): the cumulative widths of every layer scale by one factor ``r`` of the zoo widths
    (``r`` may exceed 1: block-triangular weights cost fewer MACs than dense ones, so the
    largest subnet is wider than the zoo model at the same MACs). The dense nets scale the zoo
    widths by one factor each. Achieved fractions are reported, not assumed.

    Raises:
        UserInputError: fractions not strictly increasing or outside (0, 1], or a first step too small to hold one unit per layer.
    """
    fr = check_fractions(fractions)
    full = dense_macs(arch, arch.widths)
    cum: list[list[int]] = [[] for _ in arch.widths]
    for s, f in enumerate(fr):
        prev = cum

        def cost(r: float, prev: list[list[int]] = prev, s: int = s) -> int:
            return stepping_macs(arch, _stepping_cum(arch, prev, r), s)

        cum = _stepping_cum(arch, prev, _solve(cost, 0.0, 4.0, f * full))
        if stepping_macs(arch, cum, s) > f * full:
            need = stepping_macs(arch, cum, s) / full
            what = f"the first step ({f}) is too small" if s == 0 else f"step {s} ({f}) is too close to step {s - 1} ({fr[s - 1]})"
            raise UserInputError(
                f"{what}: even one more unit per layer costs {need:.4f} of the full {full} MACs, more than {f}; "
                "give a larger first step and steps further apart"
            )
    dense = []
    for f in fr:

        def dcost(w: float) -> int:
            return dense_macs(arch, _dense_widths(arch, w))

        dense.append(_dense_widths(arch, _solve(dcost, 0.0, 1.0, f * full)))
    return StepPlan(arch, fr, full, tuple(tuple(c) for c in cum), tuple(dense))


def _dense_widths(arch: Arch, w: float) -> tuple[int, int, int, int]:
    a, b, c, d = (max(1, round(w * full)) for full in arch.widths)
    return a, b, c, d
