"""The parametric Verilog designs shipped with coevo (package data in ``designs/``) and their named instances."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources

from coevo.sim.errors import unknown_name


@dataclass(frozen=True)
class Design:
    """One synthesisable instance: a Verilog file, its top module and the parameters to set.

    Attributes:
        name: the instance's name (``alu32``).
        family: what it is (``alu``), for splitting designs into train/test by family.
        source: file name under ``sim/gnn/designs/``.
        top: the top module.
        params: Verilog parameters set with Yosys ``chparam`` before elaboration.
    """

    name: str
    family: str
    source: str
    top: str
    params: dict[str, int] = field(default_factory=dict)

    def verilog(self) -> str:
        """The Verilog source text."""
        return resources.files("coevo.sim.gnn").joinpath("designs", self.source).read_text()


def _instances() -> dict[str, Design]:
    out: list[Design] = []
    for w in (8, 16, 32, 64):
        out.append(Design(f"adder{w}", "adder", "adder_ripple.v", "adder_ripple", {"W": w}))
        out.append(Design(f"cla{w}", "cla", "adder_cla.v", "adder_cla", {"W": w}))
        out.append(Design(f"alu{w}", "alu", "alu.v", "alu", {"W": w}))
    for w in (4, 8, 12, 16, 24, 32):
        out.append(Design(f"mul{w}", "mul", "mul_array.v", "mul_array", {"W": w}))
    for depth, width in ((4, 8), (8, 16), (16, 16), (16, 32), (32, 32)):
        out.append(Design(f"fifo{depth}x{width}", "fifo", "fifo.v", "fifo", {"DEPTH": depth, "WIDTH": width}))
    return {d.name: d for d in out}


DESIGNS: dict[str, Design] = _instances()
"""Every named design: ``adder<W>`` (ripple carry), ``cla<W>`` (Kogge-Stone carry lookahead),
``mul<W>`` (W x W array multiplier), ``alu<W>``, ``fifo<DEPTH>x<WIDTH>``."""


def get_design(name: str) -> Design:
    """The named design; an unknown name is a :class:`sim.errors.UserInputError` listing the valid ones."""
    try:
        return DESIGNS[name]
    except KeyError:
        raise unknown_name("design", name, DESIGNS) from None
