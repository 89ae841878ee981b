"""NoC and accelerator tools: simulate a Benes or mesh NoC, plot load curves, map a layer onto a systolic array,
compress a CNN for energy."""

from __future__ import annotations

import time
from dataclasses import fields
from typing import Any, ClassVar, Literal

from pydantic import Field

from coevo.search.errors import UserInputError
from coevo.search.problem import config_field
from coevo.search.stats import effect_verdict
from coevo.search.work_progress import cycles, report
from coevo.sim.accel.compress import compress
from coevo.sim.accel.config import AccelConfig
from coevo.sim.accel.systolic import Layer, map_layer
from coevo.sim.noc import curves
from coevo.sim.noc.config import NOC, NocFamilyConfig
from coevo.tools._base import Target, Tool, ToolArgs, ToolResult
from coevo.tools._policy import prepare_output

_PACKET_FLITS = {f.name: f for f in fields(NocFamilyConfig)}["benes_packet_flits"].metadata
"""Bounds of a packet's flits (the same on both topologies)."""


class NocArgs(ToolArgs):
    """Arguments of ``noc.simulate``: the network (Benes or mesh), its routing, the traffic and load, the simulated cycles."""

    topology: Literal["benes", "mesh"] = Field("benes", description="benes (optical, circuit switched) or mesh (SDM, GT + best effort)")
    # n, k, routing, load and traffic are checked by the simulators, whose errors name the topology's own rule
    n: int = config_field(NocFamilyConfig, "n_ports", description="benes: ports, a power of two 8..64", bounds=False)
    k: int = config_field(NocFamilyConfig, "k", description="mesh: side (k x k nodes), 2..16", bounds=False)
    routing: str = config_field(
        NocFamilyConfig,
        "routing",
        description=(
            "benes: bit (destination tag), adaptive (look-ahead) or adaptive-local; "
            "mesh: xy, adaptive, widest-shortest, k-shortest or bee-qos"
        ),
    )
    load: float = config_field(
        NocFamilyConfig,
        "load",
        description="offered load, flits per cycle per port/node as a fraction of capacity, in (0, 1]",
        bounds=False,
    )
    packet_flits: int | None = Field(
        None,
        ge=_PACKET_FLITS["ge"],
        le=_PACKET_FLITS["le"],
        description=f"flits per packet (default {NOC.benes_packet_flits} on benes, {NOC.mesh_packet_flits} on mesh)",
    )
    traffic: str = config_field(
        NocFamilyConfig, "traffic", description="benes: uniform or permutation; mesh: uniform, transpose, tornado or hotspot"
    )
    injection: Literal["poisson", "bursty"] = config_field(
        NocFamilyConfig, "injection", description="benes: Bernoulli arrivals or on/off bursts"
    )
    setup_cycles: int = config_field(
        NocFamilyConfig, "setup_cycles", description="benes: cycles each switch stage takes to process a setup header"
    )
    ack_cycles: int = config_field(
        NocFamilyConfig, "ack_cycles", description="benes: cycles per stage for the ACK (or NACK) back to the source"
    )
    hold_cycles: int = config_field(
        NocFamilyConfig,
        "hold_cycles",
        description="benes: cycles a blocked setup may wait at a switch before tearing down (0: tear down at once)",
    )
    gt_share: float = config_field(
        NocFamilyConfig, "gt_share", description="mesh: share of the load that arrives as guaranteed-bandwidth flows"
    )
    subchannels: int = config_field(NocFamilyConfig, "subchannels", description="mesh: sub-channels per link (one flit/cycle each)")
    gt_width: int = config_field(NocFamilyConfig, "gt_width", description="mesh: sub-channels each GT flow reserves")
    gt_fill: float = config_field(
        NocFamilyConfig, "gt_fill", description="mesh: share of its reserved bandwidth a GT flow sends (flit by flit)"
    )
    cycles: int = config_field(NocFamilyConfig, "cycles", description="cycles to simulate (the first 10 %, at most 2,000, are warm-up)")
    seed: int = config_field(NocFamilyConfig, "seed", bounds=False)  # any int seeds random.Random

    def options(self) -> dict[str, Any]:
        """Keyword options of the topology's simulator."""
        common = {"routing": self.routing, "load": self.load, "traffic": self.traffic, "cycles": self.cycles, "seed": self.seed}
        if self.topology == "benes":
            return {
                "n_ports": self.n,
                "packet_flits": self.packet_flits or NOC.benes_packet_flits,
                "injection": self.injection,
                "setup_cycles": self.setup_cycles,
                "ack_cycles": self.ack_cycles,
                "hold_cycles": self.hold_cycles,
                **common,
            }
        return {
            "k": self.k,
            "packet_flits": self.packet_flits or NOC.mesh_packet_flits,
            "gt_share": self.gt_share,
            "subchannels": self.subchannels,
            "gt_width": self.gt_width,
            "gt_fill": self.gt_fill,
            **common,
        }


_WITH_UNITS = {"throughput": "throughput_share", "mean_delay": "mean_delay_cycles", "p99_delay": "p99_delay_cycles"}
"""The tools' names of the simulators' unit-less metrics (``NocResult.as_dict`` keeps its own, which the figures read):
throughput is delivered flits over the capacity, the unit of ``offered_load``; delays are in cycles."""


def with_units(result: dict[str, Any]) -> dict[str, Any]:
    """A simulation's JSON with a unit in the name of its throughput and delays (order kept)."""
    return {_WITH_UNITS.get(k, k): v for k, v in result.items()}


class NocSimulate(Tool):
    """Cycle-level simulation of a Benes optical NoC or an SDM mesh with QoS routing."""

    name = "noc.simulate"
    measured_fields = frozenset({"cycles_per_s"})  # the simulator's speed on this machine
    description = (
        "Simulate a network-on-chip cycle by cycle: a circuit-switched Benes optical NoC (bit-controlled or adaptive path "
        "setup with per-stage control latency, an ACK before data, optional holding at a blocked switch; delay, throughput, "
        "blocking rate) or a k x k mesh with sub-channel links carrying guaranteed-bandwidth "
        "flows (XY, minimal adaptive, widest-shortest, k-shortest or distributed bee foraging; GT acceptance, set-up time, "
        "GT flit latency and jitter, control overhead, violations) and best-effort packets (latency, throughput). "
        "Deterministic per seed; Ctrl-C stops early with what was measured."
    )
    Args = NocArgs
    example: ClassVar[dict[str, Any]] = {"topology": "benes", "n": 8, "routing": "adaptive", "load": 0.2, "cycles": 2000}
    long_running = True

    def run(self, args: NocArgs) -> ToolResult:
        result = curves.run(args.topology, progress=cycles(f"{args.topology} {args.routing}"), **args.options())
        messages = ["simulated (sim/noc): cycle-level model, not measured hardware"]
        if result.stopped_early:
            messages.append(f"stopped early at cycle {result.cycles}: figures cover the cycles simulated")
        return ToolResult(value=with_units(result.as_dict()), messages=messages)


class NocPlotArgs(NocArgs):
    """Arguments of ``noc.plot``: ``noc.simulate``'s arguments swept over loads, and the figure file written."""

    routings: list[str] = Field(default_factory=lambda: ["bit", "adaptive"], description="routings to compare, one curve each")
    loads: list[float] = Field(default_factory=lambda: [0.1, 0.2, 0.3, 0.4, 0.5], description="offered loads to sweep")
    out: str = Field("runs/plots/noc.png", description="PNG file to write")


class NocPlot(Tool):
    """Delay and throughput vs offered load curves (PNG) for several routings."""

    name = "noc.plot"
    measured_fields = frozenset({"cycles_per_s", "wall_s"})
    description = (
        "Sweep offered load for one or more routings of a Benes or mesh NoC and write a PNG with delay (mean and p99) and "
        "throughput vs load; returns the file, each point's numbers, and the load where each routing saturates "
        "(mean delay over 3x zero-load)."
    )
    Args = NocPlotArgs
    example: ClassVar[dict[str, Any]] = {
        "topology": "benes",
        "n": 8,
        "routings": ["bit", "adaptive"],
        "loads": [0.1, 0.3],
        "cycles": 1000,
        "out": "runs/plots/example-noc.png",
    }
    long_running = True
    writes: ClassVar[dict[str, Target]] = {"out": "file"}

    def run(self, args: NocPlotArgs) -> ToolResult:
        out = prepare_output(args.out, create=False)  # before the sweep: a bad path fails in a moment, not after minutes
        options = args.options()
        options.pop("routing")
        options.pop("load")
        started = time.perf_counter()
        results = curves.sweep(
            args.topology,
            args.routings,
            args.loads,
            on_point=lambda i, total: report(f"{args.topology}: point {i + 1} of {total}", i / total),
            **options,
        )
        size = f"N={args.n}" if args.topology == "benes" else f"{args.k}x{args.k}"
        path = curves.plot_curves(results, f"{args.topology} {size}, {args.traffic} traffic", prepare_output(out))
        saturation = {}
        for routing in args.routings:
            rs = [r for r in results if r.config.routing == routing]
            saturation[routing] = curves.saturation(rs, rs[0].stats.zero_load) if rs else None  # none: stopped before it
        messages = ["simulated (sim/noc): cycle-level model, not measured hardware"]
        if len(results) < len(args.routings) * len(args.loads):
            messages.append("stopped early: the plot shows the points simulated so far")
        return ToolResult(
            value={
                "png": str(path),
                "points": [with_units(r.as_dict()) for r in results],
                "saturation_load": saturation,
                "wall_s": round(time.perf_counter() - started, 2),
            },
            messages=messages,
        )


class SystolicArgs(ToolArgs):
    """Arguments of ``accel.systolic``: one layer's shape, the array size and dataflow, the on-chip buffers."""

    rows: int = config_field(AccelConfig, "rows")
    cols: int = config_field(AccelConfig, "cols")
    dataflow: Literal["ws", "os", "is", "all"] = config_field(
        AccelConfig, "dataflow", description="weight, output or input stationary; all compares the three"
    )
    layer: dict[str, Any] = Field(
        description='the layer: {"type": "conv", "c_in", "h", "w", "c_out", "kernel", "stride", "padding", "batch"} or '
        '{"type": "gemm", "m", "k", "n"}'
    )
    ifmap_kb: float = config_field(AccelConfig, "ifmap_kb", description="input SRAM buffer, KiB")
    filter_kb: float = config_field(AccelConfig, "filter_kb", description="weight SRAM buffer, KiB")
    ofmap_kb: float = config_field(AccelConfig, "ofmap_kb", description="output SRAM buffer, KiB")


class AccelSystolic(Tool):
    """Map a conv/GEMM layer onto a systolic array: cycles, utilisation, SRAM and DRAM traffic."""

    name = "accel.systolic"
    description = (
        "Map a conv or GEMM layer onto an R x C systolic array with a weight-, output- or input-stationary dataflow "
        "(SCALE-Sim style tiling): cycles, PE utilisation, SRAM reads/writes per operand and DRAM bytes."
    )
    Args = SystolicArgs
    example: ClassVar[dict[str, Any]] = {
        "rows": 32,
        "cols": 32,
        "dataflow": "all",
        "layer": {"type": "conv", "c_in": 64, "h": 56, "w": 56, "c_out": 64, "kernel": 3, "padding": 1},
    }

    def run(self, args: SystolicArgs) -> ToolResult:
        layer = Layer.from_dict(args.layer)
        flows = ("ws", "os", "is") if args.dataflow == "all" else (args.dataflow,)
        sizes = {"ifmap_kb": args.ifmap_kb, "filter_kb": args.filter_kb, "ofmap_kb": args.ofmap_kb}
        mappings = {f: map_layer(layer, args.rows, args.cols, f, **sizes).as_dict() for f in flows}
        value: dict[str, Any] = {"layer": args.layer, "mappings": mappings}
        if len(flows) > 1:
            value["fastest"] = min(mappings, key=lambda f: mappings[f]["cycles"])
        return ToolResult(value=value, messages=["analytical model (sim/accel/systolic.py): counts, not a measured chip"])


class CompressArgs(ToolArgs):
    """Arguments of ``compress.energy_aware``: the zoo model, the largest accuracy drop allowed, the seed, the partial-sum bits."""

    model: str = config_field(
        AccelConfig,
        "model",
        description="zoo model to compress: cnn-digits (scikit-learn's 8x8 digits) or cnn-mnist5k (5,000 real 28x28 MNIST images)",
    )
    accuracy_drop_max: float = config_field(
        AccelConfig, "accuracy_drop_max", description="largest accuracy drop allowed vs plain INT8, percentage points"
    )
    seed: int = config_field(AccelConfig, "seed")
    psum_bits: int = config_field(AccelConfig, "psum_bits")


class CompressEnergyAware(Tool):
    """Energy-aware layer-wise INT8 weight restriction inside quantization-aware training, vs layer-agnostic and INT8."""

    name = "compress.energy_aware"
    measured_fields = frozenset({"wall_s"})
    slow_example = True  # trains a CNN and its QAT variants (about 2 minutes on 2 cores)
    description = (
        "Take a zoo CNN on real digits (cnn-digits or cnn-mnist5k), measure each layer's MAC energy per INT8 weight value "
        "on its real activations and partial sums (bit-level weight-stationary model, transitions grouped by MSB Hamming "
        "distance, each group with its own cost), then restrict weights step by step to the lowest-energy values inside "
        "quantization-aware training, re-measuring the tables on the restricted model each step; hardest in the "
        "highest-energy layers, under a validation-accuracy budget. Energy per inference in three named scopes: compute "
        "(MAC only), on-chip (compute + SRAM) and total (compute + SRAM + DRAM accesses of the systolic mapping; Horowitz "
        "45 nm costs). Returns INT8, the layer-agnostic and the layer-wise restriction with the reduction in each scope."
    )
    Args = CompressArgs
    example: ClassVar[dict[str, Any]] = {"model": "cnn-digits", "accuracy_drop_max": 2.0}
    long_running = True

    def run(self, args: CompressArgs) -> ToolResult:
        steps = [0]

        def say(message: str) -> None:
            steps[0] += 1
            report(message, min(steps[0] / 30, 0.99))

        try:
            value = compress(
                args.model, accuracy_drop_max=args.accuracy_drop_max, seed=args.seed, psum_bits=args.psum_bits, progress=say
            ).as_dict()
        except KeyboardInterrupt:
            raise UserInputError("compression stopped by the user (Ctrl-C); nothing was kept") from None
        value["verdict"] = compress_verdict(value)
        return ToolResult(
            value=value,
            messages=[
                "energies simulated (bit-level model, Horowitz 45 nm costs), accuracies measured; chosen on validation",
                "energy scopes: compute_* = MAC only, onchip_* = compute + SRAM, total_* = compute + SRAM + DRAM",
                value["verdict"],
            ],
        )


def compress_verdict(value: dict[str, Any]) -> str:
    """One line judging the layer-wise restriction against its baselines in the same ``compress.energy_aware`` value.

    Energy (the paper's claim: layer-wise saves more than layer-agnostic): the compute-scope
    reductions vs INT8 compared by sign, since one seed's simulated energies carry no noise of their
    own (the seed-to-seed spread is in docs/bench/noc/energy.md). Accuracy: layer-wise test accuracy
    against INT8's by :func:`search.stats.effect_verdict`'s rule.
    """
    wise, agnostic = value["layer_wise"]["compute_reduction_vs_int8"], value["layer_agnostic"]["compute_reduction_vs_int8"]
    diff = 100 * (wise - agnostic)
    word = "positive: layer-wise saves more" if diff > 0 else "negative: layer-wise saves less" if diff < 0 else "no difference"
    energy = (
        f"layer-wise vs layer-agnostic, compute energy saved vs INT8: {100 * wise:.1f} % vs {100 * agnostic:.1f} % "
        f"({diff:+.1f} points; simulated, one seed): {word}"
    )
    accuracy = effect_verdict(
        "layer-wise vs INT8, test accuracy",
        value["layer_wise"]["test_accuracy"],
        value["int8"]["test_accuracy"],
        metric="accuracy",
        n=value["n_test"],
    )
    return f"verdict: {energy}; {accuracy.removeprefix('verdict: ')}"
