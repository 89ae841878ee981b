"""Silicon area of a systolic array with its three SRAM buffers, at 45 nm: a stated model, not a layout.

**Processing element** (one int8 x int8 multiply-accumulate into a 22-bit partial sum):

* an 8-bit integer multiplier, 282 um^2, and a 32-bit integer adder, 137 um^2, from Horowitz,
  "Computing's energy problem (and what we can do about it)", ISSCC 2014 (45 nm), the same
  table :mod:`sim.accel.energy` takes its picojoules from. The 22-bit partial-sum adder is
  scaled from the 32-bit one by width (22/32), as :mod:`sim.accel.energy` scales its energy;
* 38 flip-flops (8-bit weight, 8-bit activation, 22-bit partial sum registers) of 4.522 um^2
  each, the D flip-flop ``DFF_X1`` of the NanGate FreePDK45 Open Cell Library.

**SRAM**: a 6T bit cell of 0.346 um^2 (Intel 45 nm, Mistry et al., IEDM 2007) over an
**assumed** array efficiency of 50 % (bit cells over macro area; decoders, sense amplifiers and
wiring are the rest; a typical figure for small macros, not a measured one).

What is left out (assumptions): the array's interconnect and control, the DRAM interface,
clock tree and pads; the clock frequency does not change the area (no extra pipelining).
"""

from __future__ import annotations

MULT8_UM2 = 282.0
"""Horowitz ISSCC 2014, 45 nm: 8-bit integer multiplier."""
ADD32_UM2 = 137.0
"""Horowitz ISSCC 2014, 45 nm: 32-bit integer adder."""
PSUM_BITS = 22
"""Width of the partial-sum adder and register (as :mod:`sim.accel.energy`)."""
DFF_UM2 = 4.522
"""NanGate FreePDK45 Open Cell Library, DFF_X1."""
PE_FLIPFLOPS = 8 + 8 + PSUM_BITS
"""Weight, activation and partial-sum registers of one PE."""
SRAM_CELL_UM2 = 0.346
"""Intel 45 nm 6T SRAM bit cell (Mistry et al., IEDM 2007)."""
SRAM_EFFICIENCY = 0.5
"""Assumed share of an SRAM macro's area that is bit cells."""


def pe_um2() -> float:
    """Area of one processing element, um^2 (module doc)."""
    return MULT8_UM2 + ADD32_UM2 * PSUM_BITS / 32 + PE_FLIPFLOPS * DFF_UM2


def sram_mm2(kib: float) -> float:
    """Area of a ``kib`` KiB SRAM buffer, mm^2 (module doc)."""
    return kib * 1024 * 8 * SRAM_CELL_UM2 / SRAM_EFFICIENCY / 1e6


def array_mm2(rows: int, cols: int, ifmap_kb: float, filter_kb: float, ofmap_kb: float) -> float:
    """Area of a ``rows x cols`` array and its input, weight and output buffers, mm^2."""
    return rows * cols * pe_um2() / 1e6 + sram_mm2(ifmap_kb) + sram_mm2(filter_kb) + sram_mm2(ofmap_kb)


def constants() -> dict[str, float | str]:
    """The area constants in force and their sources, for reports."""
    return {
        "source": "Horowitz ISSCC 2014 (mult, add); NanGate FreePDK45 DFF_X1; Mistry et al. IEDM 2007 (6T cell); "
        "50 % SRAM efficiency assumed",
        "pe_um2": round(pe_um2(), 2),
        "sram_mm2_per_kib": round(sram_mm2(1.0), 6),
    }
