"""Gate-level netlists (from Yosys JSON or built by hand) and the labels computed from them.

A netlist is cells (a type, input pins -> nets, output pins -> nets) and nets (bits). The
labels are static-analysis facts computed with networkx topological passes over the
cell graph (u -> v when an output net of u feeds v), where flip-flops cut the graph: a
flip-flop is a timing startpoint (its inputs end paths, its output starts them).

* ``depth``: logic depth in cells: 1 + the deepest combinational predecessor (flip-flops
  and cells fed only by primary inputs or constants have depth 1).
* ``arrival``: static-timing arrival time at the cell's output with per-type delays
  (:data:`GATE_DELAY`; a flip-flop's is its clock-to-Q delay): delay(v) + max over
  combinational predecessors of their arrival.
* ``fanout_cone``: the number of cells in the transitive fan-out of the cell, along
  combinational paths; a flip-flop reached is counted and not gone through.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np

from coevo.sim.errors import UserInputError

CELL_TYPES: tuple[str, ...] = ("BUF", "NOT", "AND", "NAND", "OR", "NOR", "XOR", "XNOR", "ANDNOT", "ORNOT", "MUX", "DFF", "OTHER")
"""The cell vocabulary (one-hot features); Yosys's $_DFF*/$_SDFF*/latch cells all map to DFF."""

GATE_DELAY: dict[str, float] = {
    "BUF": 1.0,
    "NOT": 1.0,
    "NAND": 1.0,
    "NOR": 1.2,
    "AND": 1.3,
    "ANDNOT": 1.3,
    "OR": 1.5,
    "ORNOT": 1.5,
    "XOR": 2.0,
    "XNOR": 2.0,
    "MUX": 2.2,
    "DFF": 2.0,
    "OTHER": 1.5,
}
"""Relative gate delays for ``arrival`` (illustrative, in the spirit of logical effort: inverting
gates fastest, XOR/MUX slowest; a DFF's is clock-to-Q). Not a characterised library."""

LABELS: tuple[str, ...] = ("depth", "arrival", "fanout_cone")
"""The labels :func:`labels` computes."""

OUTPUT_PINS = frozenset({"Y", "Q"})


def cell_kind(yosys_type: str) -> str:
    """The vocabulary name of a Yosys cell type (``$_AND_`` -> ``AND``, ``$_SDFFE_PP0P_`` -> ``DFF``)."""
    core = yosys_type.strip("$_")
    if "DFF" in core or "DLATCH" in core or core.startswith("SR_") or core == "SR":
        return "DFF"
    return core if core in CELL_TYPES else "OTHER"


@dataclass
class Cell:
    """One cell: its vocabulary type and its pins (pin name -> net id)."""

    name: str
    kind: str
    inputs: dict[str, int]
    outputs: dict[str, int]

    @property
    def sequential(self) -> bool:
        """Whether it is a flip-flop or latch (a timing startpoint/endpoint)."""
        return self.kind == "DFF"


@dataclass
class Netlist:
    """A flat gate-level netlist.

    Attributes:
        name: the design's name.
        cells: the cells, in a fixed order (node order of the graph).
        n_nets: nets are ``0 .. n_nets-1``.
        inputs: primary-input nets, outputs: primary-output nets.
        const: constant nets (net id -> 0 or 1).
        net_names: a readable name per net where Yosys gave one.
        ports: port name -> its nets, least significant bit first.
    """

    name: str
    cells: list[Cell]
    n_nets: int
    inputs: list[int]
    outputs: list[int]
    const: dict[int, int] = field(default_factory=dict)
    net_names: dict[int, str] = field(default_factory=dict)
    ports: dict[str, list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        drivers: dict[int, int] = {}
        for i, c in enumerate(self.cells):
            for net in c.outputs.values():
                if net in drivers:
                    raise UserInputError(f"netlist {self.name}: net {net} has two drivers ({self.cells[drivers[net]].name}, {c.name})")
                drivers[net] = i
            for net in (*c.inputs.values(), *c.outputs.values()):
                if not 0 <= net < self.n_nets:
                    raise UserInputError(f"netlist {self.name}: cell {c.name} uses net {net} outside 0..{self.n_nets - 1}")
        self.driver = drivers

    def cell_graph(self) -> nx.DiGraph:
        """Cells as nodes (0..n-1), u -> v when an output net of u is an input of v; edges into flip-flops dropped.

        Dropping edges into sequential cells makes every register-to-register path a path
        from a startpoint; what remains must be acyclic (a combinational loop is an error).
        """
        g = nx.DiGraph()
        g.add_nodes_from(range(len(self.cells)))
        for v, c in enumerate(self.cells):
            if c.sequential:
                continue
            for net in c.inputs.values():
                u = self.driver.get(net)
                if u is not None:
                    g.add_edge(u, v)
        if not nx.is_directed_acyclic_graph(g):
            cycle = nx.find_cycle(g)
            raise UserInputError(f"netlist {self.name} has a combinational loop through cells {[self.cells[u].name for u, _ in cycle]}")
        return g

    def sink_count(self) -> np.ndarray:
        """Per net, how many cell input pins it feeds."""
        out = np.zeros(self.n_nets, dtype=np.int64)
        for c in self.cells:
            for net in c.inputs.values():
                out[net] += 1
        return out

    def evaluate(self, values: Mapping[int, int], state: Mapping[int, int] | None = None) -> dict[int, int]:
        """Evaluate the combinational logic: every net's 0/1 value given primary inputs and flip-flop outputs.

        Args:
            values: a value for every primary-input net.
            state: a value for each flip-flop's output net (default 0).
        """
        val: dict[int, int] = {**self.const, **{int(k): int(v) & 1 for k, v in values.items()}}
        for c in self.cells:
            if c.sequential:
                for net in c.outputs.values():
                    val[net] = int((state or {}).get(net, 0))
        for v in nx.topological_sort(self.cell_graph()):
            c = self.cells[v]
            if not c.sequential:
                (net,) = c.outputs.values()
                val[net] = _gate(c.kind, {p: val[n] for p, n in c.inputs.items()})
        return val


def _gate(kind: str, pins: Mapping[str, int]) -> int:
    a, b = pins.get("A", 0), pins.get("B", 0)
    table = {
        "BUF": a,
        "NOT": 1 - a,
        "AND": a & b,
        "NAND": 1 - (a & b),
        "OR": a | b,
        "NOR": 1 - (a | b),
        "XOR": a ^ b,
        "XNOR": 1 - (a ^ b),
        "ANDNOT": a & (1 - b),
        "ORNOT": a | (1 - b),
        "MUX": b if pins.get("S", 0) else a,
    }
    if kind not in table:
        raise UserInputError(f"cannot evaluate a cell of type {kind}")
    return table[kind]


def labels(netlist: Netlist, *, delays: Mapping[str, float] | None = None) -> dict[str, np.ndarray]:
    """The per-cell labels ``depth``, ``arrival`` and ``fanout_cone`` (float64 arrays in cell order).

    Args:
        netlist: the netlist.
        delays: per-type delays for ``arrival`` (default :data:`GATE_DELAY`).
    """
    delay = dict(GATE_DELAY if delays is None else delays)
    g = netlist.cell_graph()
    order = list(nx.topological_sort(g))
    n = len(netlist.cells)
    depth = np.zeros(n)
    arrival = np.zeros(n)
    for v in order:
        preds = list(g.predecessors(v))
        depth[v] = 1 + max((depth[u] for u in preds), default=0.0)
        arrival[v] = delay.get(netlist.cells[v].kind, delay.get("OTHER", 1.0)) + max((arrival[u] for u in preds), default=0.0)
    # fan-out cone: bitsets (Python ints) in reverse topological order; edges into
    # flip-flops are absent from g, so add them back as cone members that are not gone through
    cone = [0] * n
    ff_sinks: dict[int, list[int]] = {}
    for v, c in enumerate(netlist.cells):
        if c.sequential:
            for net in c.inputs.values():
                u = netlist.driver.get(net)
                if u is not None:
                    ff_sinks.setdefault(u, []).append(v)
    for v in reversed(order):
        bits = 0
        for s in g.successors(v):
            bits |= cone[s] | (1 << s)
        for s in ff_sinks.get(v, ()):
            bits |= 1 << s
        cone[v] = bits
    fanout_cone = np.array([bin(b).count("1") for b in cone], dtype=np.float64)
    return {"depth": depth, "arrival": arrival, "fanout_cone": fanout_cone}


def from_yosys(module: Mapping[str, Any], name: str) -> Netlist:
    """Build a :class:`Netlist` from Yosys's JSON module (``write_json``), nets renumbered from 0.

    Bits are Yosys's integer bit ids; the constant bits ``"0"``/``"1"`` (and ``"x"``/``"z"``,
    taken as 0) become one constant net each.
    """
    ids: dict[Any, int] = {}
    const: dict[int, int] = {}

    def net(bit: Any) -> int:
        if bit not in ids:
            ids[bit] = len(ids)
            if isinstance(bit, str):
                const[ids[bit]] = 1 if bit == "1" else 0
        return ids[bit]

    inputs: list[int] = []
    outputs: list[int] = []
    ports: dict[str, list[int]] = {}
    for pname, port in module.get("ports", {}).items():
        bits = ports[pname] = [net(b) for b in port["bits"]]
        if port["direction"] == "input":
            inputs.extend(b for b in bits if b not in const)
        else:
            outputs.extend(bits)
    cells: list[Cell] = []
    for cname, cell in sorted(module.get("cells", {}).items()):
        dirs = cell.get("port_directions", {})
        ins: dict[str, int] = {}
        outs: dict[str, int] = {}
        for pin, bits in sorted(cell["connections"].items()):
            if len(bits) != 1:
                raise UserInputError(f"{name}: cell {cname} ({cell['type']}) has a {len(bits)}-bit pin {pin}; expected single-bit gates")
            is_out = dirs.get(pin, "output" if pin in OUTPUT_PINS else "input") == "output"
            (outs if is_out else ins)[pin] = net(bits[0])
        cells.append(Cell(cname, cell_kind(cell["type"]), ins, outs))
    names: dict[int, str] = {}
    for nname, info in module.get("netnames", {}).items():
        if not info.get("hide_name", 0):
            for i, b in enumerate(info["bits"]):
                if b in ids:
                    names.setdefault(ids[b], f"{nname}[{i}]")
    return Netlist(name, cells, len(ids), inputs, outputs, const, names, ports)


def hand_netlist(
    name: str, cells: Sequence[tuple[str, str, dict[str, int], dict[str, int]]], n_nets: int, inputs: Sequence[int], outputs: Sequence[int]
) -> Netlist:
    """A netlist from ``(name, kind, inputs, outputs)`` tuples (for tests and examples)."""
    return Netlist(name, [Cell(n, k, dict(i), dict(o)) for n, k, i, o in cells], n_nets, list(inputs), list(outputs))
