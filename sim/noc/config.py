"""The NoC family's configuration: every default and bound its simulators, tools and problem share, declared once.

:class:`NocFamilyConfig` holds the Benes and the mesh simulators' keyword defaults, the
``noc.simulate`` / ``noc.plot`` tools' defaults and the ``noc`` problem's workload. ``tools/noc.py``
and ``search/noc/problem.py`` read their defaults and bounds from here (through
``coevo.search.problem.config_field``); :func:`~coevo.sim.noc.benes.simulate_benes` and
:func:`~coevo.sim.noc.mesh.simulate_mesh` take their keyword defaults from :data:`NOC`.

Where an entry point has a default of its own, the field says whose it is:

* ``benes_cycles`` (20,000) is :func:`simulate_benes`'s run length; the tools run ``cycles``
  (10,000), which is also :func:`simulate_mesh`'s.
* ``mesh_routing`` (bee-qos) is :func:`simulate_mesh`'s routing; the tools' ``routing`` (adaptive)
  serves both topologies.
* Fields with a ``search_`` prefix are the ``noc`` problem's workload (hotspot traffic, 70 % of
  the load guaranteed-bandwidth, 3,000 cycles a design): its studies and the figures quoted from
  them were made under these values, so they stay apart from the tools' defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_CONTROL_CYCLES = 16
"""Largest ``setup_cycles`` / ``ack_cycles`` accepted (an electronic control hop slower than this is a different design)."""
MAX_HOLD_CYCLES = 4096
"""Largest ``hold_cycles`` accepted."""


@dataclass(frozen=True)
class NocFamilyConfig:
    """Defaults and bounds of the NoC family (each field's ``metadata``: ``help``, ``unit``, bounds)."""

    # ---- both topologies
    routing: str = field(default="adaptive", metadata={"help": "routing of the tools (valid on a Benes NoC and on a mesh)"})
    load: float = field(
        default=0.3, metadata={"help": "offered load, a fraction of a port's (or node's) capacity", "unit": "share", "gt": 0, "le": 1}
    )
    traffic: str = field(default="uniform", metadata={"help": "traffic pattern"})
    cycles: int = field(default=10_000, metadata={"help": "cycles to simulate", "unit": "cycles", "ge": 100, "le": 5_000_000})
    seed: int = field(default=0, metadata={"help": "random seed (results are deterministic per seed)", "ge": 0})
    # ---- Benes (sim/noc/benes.py)
    n_ports: int = field(default=16, metadata={"help": "Benes ports, a power of two 8..64", "unit": "ports"})
    benes_packet_flits: int = field(default=16, metadata={"help": "flits per packet on a Benes NoC", "unit": "flits", "ge": 1, "le": 4096})
    injection: str = field(default="poisson", metadata={"help": "Benes arrivals: poisson (Bernoulli) or bursty (on/off)"})
    setup_cycles: int = field(
        default=2,
        metadata={"help": "cycles each switch stage takes to process a setup header", "unit": "cycles", "ge": 1, "le": MAX_CONTROL_CYCLES},
    )
    ack_cycles: int = field(
        default=1,
        metadata={"help": "cycles per stage for the ACK (or NACK) back to the source", "unit": "cycles", "ge": 0, "le": MAX_CONTROL_CYCLES},
    )
    hold_cycles: int = field(
        default=0,
        metadata={
            "help": "cycles a blocked setup may wait at a switch before tearing down (0: tear down at once)",
            "unit": "cycles",
            "ge": 0,
            "le": MAX_HOLD_CYCLES,
        },
    )
    benes_cycles: int = field(default=20_000, metadata={"help": "simulate_benes's run length", "unit": "cycles", "ge": 100})
    # ---- mesh (sim/noc/mesh.py)
    k: int = field(default=8, metadata={"help": "mesh side: k x k nodes", "unit": "nodes per side", "ge": 2, "le": 16})
    mesh_routing: str = field(default="bee-qos", metadata={"help": "simulate_mesh's routing"})
    mesh_packet_flits: int = field(
        default=4, metadata={"help": "flits per best-effort packet on a mesh", "unit": "flits", "ge": 1, "le": 4096}
    )
    gt_share: float = field(
        default=0.3, metadata={"help": "share of the load that arrives as guaranteed-bandwidth flows", "unit": "share", "ge": 0, "le": 1}
    )
    subchannels: int = field(
        default=4, metadata={"help": "sub-channels per link (one flit/cycle each)", "unit": "sub-channels", "ge": 1, "le": 64}
    )
    gt_width: int = field(default=1, metadata={"help": "sub-channels each GT flow reserves", "unit": "sub-channels", "ge": 1})
    gt_hold: int = field(default=400, metadata={"help": "mean lifetime of a GT flow", "unit": "cycles", "ge": 1})
    gt_fill: float = field(
        default=0.8,
        metadata={"help": "share of its reserved bandwidth a GT flow sends (flit by flit)", "unit": "share", "gt": 0, "le": 1},
    )
    scouts: int = field(default=8, metadata={"help": "bee-qos: scouts per request", "ge": 1})
    alpha: float = field(default=2.0, metadata={"help": "bee-qos: recruitment exponent"})
    detour: float = field(default=0.1, metadata={"help": "bee-qos: probability a forager takes a non-minimal hop", "ge": 0, "le": 1})
    ksp: int = field(default=8, metadata={"help": "k-shortest: candidate paths per pair", "ge": 1})
    forage_period: int = field(default=100, metadata={"help": "bee-qos: cycles between foraging rounds", "unit": "cycles", "ge": 1})
    half_life: float = field(default=400.0, metadata={"help": "bee-qos: half-life of the path qualities", "unit": "cycles", "gt": 0})
    # ---- the noc problem's workload (search/noc/problem.py)
    search_traffic: str = field(default="hotspot", metadata={"help": "traffic pattern"})
    search_gt_share: float = field(
        default=0.7, metadata={"help": "share of the load in guaranteed-bandwidth flows", "unit": "share", "ge": 0, "le": 1}
    )
    search_cycles: int = field(default=3000, metadata={"help": "simulated cycles per design", "unit": "cycles", "ge": 100, "le": 1_000_000})


NOC = NocFamilyConfig()
"""The defaults (an instance, so a simulator's keyword default reads ``NOC.field``)."""

__all__ = ["MAX_CONTROL_CYCLES", "MAX_HOLD_CYCLES", "NOC", "NocFamilyConfig"]
