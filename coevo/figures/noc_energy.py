"""Issue 18 figures: energy-aware compression on a simulated weight-stationary systolic array, and SCALE-Sim cycle agreement.

    nice -n 10 python -m coevo.figures noc-energy [--models cnn-digits,cnn-mnist5k] [--seeds 5] [--drop 2.0] [--out docs/bench/noc]
        [--psum-bits 22|0] [--no-compress] [--no-occupancy] [--no-scalesim]

For every model and seed (the zoo model trained with that seed, QAT and energy sampling seeded
alike) it runs :func:`sim.accel.compress.compress` (INT8, layer-agnostic and layer-wise
restriction, every step chosen on the validation split) and saves:

* ``steps-<model>.csv``: every restriction step scored (validation and test accuracy, compute / memory / total pJ);
* ``choices-<model>.csv``: INT8 and the two schemes' choices per model and seed, with reductions;
* ``groups-<model>.csv``: per layer of the INT8 model, partial-sum transitions and cost per MSB-distance group;
* ``mapping-<model>.csv``: per layer the weight-stationary mapping (cycles, utilisation, SRAM / DRAM bytes, memory pJ);
* ``scalesim.csv``: cycles of all three dataflows against SCALE-Sim on a few layers;
* ``msb-occupancy-<model>.csv``: per seed and layer of the INT8 model, partial-sum transitions per MSB-distance group at
  accumulation lengths 16, 64, 256 and the whole dot product, with the paper's 22-bit register, the worst-case register of
  that length and a register fitted to the sums (where the groups beyond the sign flip are populated);

``--psum-bits 0`` runs the compression with fitted registers and writes its CSVs as ``<name>-<model>-psumfit.csv``
(column ``register``); every energy column names its scope (compute = MAC only, on-chip = compute + SRAM, total =
compute + SRAM + DRAM).

(each rewritten after every seed), then writes ``energy.md`` from those CSVs only. Models can
run in separate processes (``--models cnn-digits`` and ``--models cnn-mnist5k``, then
``--report-only``). 95 % intervals are Student t over seeds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from coevo.figures._common import command_line, figure_parser, read_csv, write_csv, write_markdown
from coevo.search.stats import t_interval
from coevo.sim.accel import scalesim_ref
from coevo.sim.accel.compress import CompressionReport, compress, compressor
from coevo.sim.accel.config import ACCEL, LEVELS
from coevo.sim.accel.energy import GROUPS, constants, worst_case_psum_bits
from coevo.sim.accel.systolic import Layer, map_layer

NAME = "noc-energy"

SCALESIM_LAYERS = [  # rows, cols, input h = w (padded), kernel, c_in, c_out, stride
    (8, 8, 7, 1, 70, 40, 1),
    (16, 16, 16, 3, 16, 32, 1),
    (16, 16, 9, 3, 32, 64, 1),
    (8, 16, 11, 3, 8, 24, 2),
    (32, 8, 10, 3, 16, 20, 1),
    (32, 32, 58, 3, 64, 64, 1),
]


def _read(path: Path) -> list[dict[str, str]]:
    """The rows of ``path``, or for ``name.csv`` that does not exist, of every ``name-<model>.csv`` beside it."""
    paths = [path] if path.exists() else sorted(path.parent.glob(f"{path.stem}-*.csv"))
    rows: list[dict[str, str]] = []
    for p in paths:
        rows += read_csv(p)
    return rows


def _levels(levels: dict[str, int]) -> str:
    return "/".join(str(k) for k in levels.values())


PAPER_REDUCTION = 0.586
"""The paper's headline (Fang, Zhang, Huang, arXiv 2511.17123): "up to 58.6 % energy reduction with 2-3 % accuracy drop"."""

OCCUPANCY_ROWS = (16, 64, 256, 0)
"""Accumulation lengths (array rows) of the occupancy table; 0: the whole dot product (rows >= K)."""


def _register(bits: int) -> str:
    """The label of a compression run's register (the ``register`` column)."""
    return "fitted" if bits == 0 else f"{bits} bits"


def _suffix(bits: int) -> str:
    return "" if bits == ACCEL.psum_bits else ("-psumfit" if bits == 0 else f"-psum{bits}")


def run(models: list[str], seeds: int, drop: float, out: Path, command: str, psum_bits: int = ACCEL.psum_bits) -> None:
    """Score every model and seed; the CSVs of a model (``steps-<model>.csv``, ...) are rewritten after each seed."""
    register = _register(psum_bits)
    for model in models:
        steps: list[dict[str, Any]] = []
        choices: list[dict[str, Any]] = []
        groups: list[dict[str, Any]] = []
        mapping: list[dict[str, Any]] = []
        for seed in range(seeds):
            started = time.perf_counter()
            rep: CompressionReport = compress(model, accuracy_drop_max=drop, seed=seed, psum_bits=psum_bits)
            print(f"{model} seed {seed}: {len(rep.steps)} steps, {time.perf_counter() - started:.0f} s", flush=True)
            for s in rep.steps:
                steps.append(
                    {
                        "model": model, "seed": seed, "register": register, "scheme": s.scheme, "step": s.step, "layer": s.layer,
                        "levels": _levels(s.levels), "val_accuracy": round(s.val_accuracy, 3), "test_accuracy": round(s.accuracy, 3),
                        "within_budget": s.within_budget, "compute_pj": round(s.compute_pj, 2), "onchip_pj": round(s.onchip_pj, 2),
                        "memory_pj": round(s.memory_pj, 2), "total_pj": round(s.energy, 2),
                    }
                )  # fmt: skip
            for s in (rep.int8, rep.layer_agnostic, rep.layer_wise):
                choices.append(
                    {
                        "model": model, "seed": seed, "register": register, "scheme": s.scheme,
                        "levels": _levels(s.levels), "layers": "/".join(s.levels),
                        "val_accuracy": round(s.val_accuracy, 3), "val_drop": round(rep.accuracy_drop(s), 3),
                        "test_accuracy": round(s.accuracy, 3), "test_drop": round(rep.int8.accuracy - s.accuracy, 3),
                        "compute_pj": round(s.compute_pj, 2), "onchip_pj": round(s.onchip_pj, 2), "memory_pj": round(s.memory_pj, 2),
                        "total_pj": round(s.energy, 2),
                        "compute_reduction_vs_int8": round(rep.compute_reduction(s), 5),
                        "total_reduction_vs_int8": round(rep.energy_reduction(s), 6),
                        "onchip_reduction_vs_int8": round(rep.onchip_reduction(s), 6),
                        "compute_reduction_vs_agnostic": round(1 - s.compute_pj / rep.layer_agnostic.compute_pj, 5),
                        "total_reduction_vs_agnostic": round(1 - s.energy / rep.layer_agnostic.energy, 6),
                        "steps": len(rep.steps), "wall_s": rep.wall_s,
                    }
                )  # fmt: skip
            if seed == 0:
                comp = compressor(model, seed, psum_bits)
                for layer, act in comp.int8_measured.activity.items():
                    for g in range(GROUPS):
                        groups.append(
                            {
                                "model": model,
                                "register": register,
                                "layer": layer,
                                "msb_distance": g,
                                "transitions": int(act.group_counts[g]),
                                "cost_toggles": round(float(act.group_cost[g]), 4),
                            }
                        )
                for layer, m in rep.mapping.items():
                    mapping.append(
                        {
                            "model": model,
                            "layer": layer,
                            **{k: (" ".join(map(str, v)) if isinstance(v, list) else v) for k, v in m.items()},
                            "int8_compute_pj": round(rep.int8.energy_by_layer[layer], 2),
                        }
                    )
            for name, rows in (("steps", steps), ("choices", choices), ("groups", groups), ("mapping", mapping)):
                write_csv(out / f"{name}-{model}{_suffix(psum_bits)}.csv", rows, command=command)


def occupancy(models: list[str], seeds: int, out: Path, command: str) -> None:
    """Transitions per MSB-distance group of every INT8 model (model, seed) at several accumulation lengths and registers."""
    for model in models:
        rows: list[dict[str, Any]] = []
        for seed in range(seeds):
            comp = compressor(model, seed)
            for length in OCCUPANCY_ROWS:
                acc = length or 1 << 20  # longer than any layer's K: the whole dot product in one column
                for label, bits in (("22 bits", 22), ("worst case", worst_case_psum_bits(acc) if length else 0), ("fitted", 0)):
                    if label == "worst case" and not length:
                        continue  # the whole dot product has no fixed worst case across layers
                    for layer, (width, counts, cost) in comp.msb_occupancy(acc, bits).items():
                        rows.append(
                            {
                                "model": model, "seed": seed, "layer": layer, "rows": length or "K", "register": label, "bits": width,
                                **{f"n{g}": int(counts[g]) for g in range(GROUPS)},
                                **{f"cost{g}": round(float(cost[g]), 4) for g in range(GROUPS)},
                            }
                        )  # fmt: skip
            print(f"{model} seed {seed}: occupancy measured", flush=True)
            write_csv(out / f"msb-occupancy-{model}.csv", rows, command=command)


def cross_check(out: Path, command: str) -> None:
    rows = []
    if not scalesim_ref.available():
        print("scalesim is not installed: no SCALE-Sim cross-check (pip install scalesim)")
        return
    for r, c, size, kernel, c_in, c_out, stride in SCALESIM_LAYERS:
        for flow in ("ws", "os", "is"):
            ours = map_layer(Layer("conv", c_in=c_in, h=size, w=size, c_out=c_out, kernel=kernel, stride=stride), r, c, flow).cycles
            theirs = scalesim_ref.scalesim_cycles(flow, r, c, size, size, kernel, c_in, c_out, stride)
            rows.append(
                {
                    "array": f"{r}x{c}", "layer": f"{size}x{size}x{c_in} k{kernel} s{stride} -> {c_out}", "dataflow": flow,
                    "coevo_cycles": ours, "scalesim_cycles": theirs, "diff_pct": round(100 * (ours - theirs) / theirs, 4),
                }
            )  # fmt: skip
    write_csv(out / "scalesim.csv", rows, command=command)


def _ci(values: list[float], pct: bool = True) -> str:
    mean, half = t_interval(values)
    scale = 100 if pct else 1
    return f"{scale * mean:.2f} ± {scale * half:.2f}" if half == half else f"{scale * mean:.2f}"


def report(out: Path, drop: float, command: str) -> None:
    choices = _read(out / "choices.csv")
    steps = _read(out / "steps.csv")
    models = list(dict.fromkeys(r["model"] for r in choices))
    lines = [
        "# Issue 18: energy-aware compression on a simulated systolic array",
        "",
        f"Written by `{command}` (here run as one process per model, `--models NAME --no-scalesim`, after the SCALE-Sim "
        "check, then `--report-only`; seeds 0-4; a shared 2-core machine) from the CSVs beside this file (steps-, choices-, "
        "groups-, mapping-<model>.csv, scalesim.csv). "
        "Everything is simulated: bit-level switching on real activations, Horowitz ISSCC 2014 45 nm costs; accuracies are measured.",
        "",
        "Method (sim/accel/compress.py, energy.py, systolic.py): every Conv2d/Linear layer INT8 (weights and activations); a "
        "restriction step keeps a layer's K cheapest currently allowed weight values by its energy table, **measured again on the "
        "restricted, retrained model before every step**, then QAT (3 epochs). Partial-sum transitions are grouped by the Hamming "
        "distance of consecutive partial sums in their 6 MSBs; each group has its own cost per transition (its measured low-bit "
        "toggles + one unit per MSB flip, equal capacitance per bit) and the partial-sum energy is sum over groups of count x cost. "
        f"K is chosen on the **validation split** (budget: {drop:g} points below INT8's validation accuracy); test accuracy is "
        "reported, never used. Energy per inference = compute (MACs x measured pJ per MAC) + SRAM + DRAM accesses of each layer's "
        "weight-stationary mapping on a 16x16 array, batch 1, 32 KB buffers.",
        "",
        "Energy constants: " + ", ".join(f"{k} {v}" for k, v in constants().items()) + ".",
        "",
    ]
    for model in models:
        rows = [r for r in choices if r["model"] == model]
        seeds = sorted({int(r["seed"]) for r in rows})
        by = {s: [r for r in rows if r["scheme"] == s] for s in ("int8", "layer-agnostic", "layer-wise")}
        n_steps = [int(r["steps"]) for r in by["int8"]]
        lines += [
            f"## {model} ({rows[0]['layers'].replace('/', ', ')}; seeds {seeds[0]}-{seeds[-1]})",
            "",
            "| seed | INT8 val / test | agnostic K | agnostic val / test | layer-wise K | layer-wise val / test | "
            "compute vs INT8: agnostic, layer-wise | total vs INT8: agnostic, layer-wise | layer-wise vs agnostic: compute, total |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for i8, ag, lw in zip(by["int8"], by["layer-agnostic"], by["layer-wise"], strict=True):
            lines.append(
                f"| {i8['seed']} | {float(i8['val_accuracy']):.2f} / {float(i8['test_accuracy']):.2f} | {ag['levels'].split('/')[0]} | "
                f"{float(ag['val_accuracy']):.2f} / {float(ag['test_accuracy']):.2f} | {lw['levels']} | "
                f"{float(lw['val_accuracy']):.2f} / {float(lw['test_accuracy']):.2f} | "
                f"-{100 * float(ag['compute_reduction_vs_int8']):.1f}%, -{100 * float(lw['compute_reduction_vs_int8']):.1f}% | "
                f"-{100 * float(ag['total_reduction_vs_int8']):.3f}%, -{100 * float(lw['total_reduction_vs_int8']):.3f}% | "
                f"-{100 * float(lw['compute_reduction_vs_agnostic']):.1f}%, -{100 * float(lw['total_reduction_vs_agnostic']):.3f}% |"
            )
        int8 = by["int8"][0]
        headline = [
            ("compute energy vs INT8", "compute_reduction_vs_int8", True, True),
            ("on-chip energy (compute + SRAM) vs INT8", "onchip_reduction_vs_int8", True, True),
            ("total energy (compute + SRAM + DRAM) vs INT8", "total_reduction_vs_int8", True, True),
            ("layer-wise vs layer-agnostic, compute", "compute_reduction_vs_agnostic", True, False),
            ("layer-wise vs layer-agnostic, total", "total_reduction_vs_agnostic", True, False),
            ("validation drop (points)", "val_drop", False, True),
            ("test drop (points, reported only)", "test_drop", False, True),
        ]
        lines += [
            "",
            f"Headline, mean ± 95 % t half-width over {len(seeds)} seeds (within a {drop:g}-point validation drop), percent:",
            "",
            "| reduction | layer-agnostic | layer-wise |",
            "|---|---|---|",
        ]
        for label, key, pct, both in headline:
            agn = _ci([float(r[key]) for r in by["layer-agnostic"]], pct) if both else ""
            lines.append(f"| {label} | {agn} | {_ci([float(r[key]) for r in by['layer-wise']], pct)} |")
        lines += [
            "",
            f"INT8 energy per inference (seed {int8['seed']}): compute {float(int8['compute_pj']) / 1e3:.1f} nJ, memory "
            f"{float(int8['memory_pj']) / 1e3:.1f} nJ: memory is {float(int8['memory_pj']) / float(int8['total_pj']):.1%} of the total "
            "and does not change with the weight values, so it dilutes every compute saving. Steps scored per seed: "
            f"{statistics.median(n_steps):.0f} (median); QAT runs per step: 1.",
            "",
        ]
        lines += _mapping_table(out, model)
        lines += _groups_table(out, model)
        within = [r for r in steps if r["model"] == model and r["within_budget"] == "False"]
        lines += [
            f"Steps that broke the budget (and stopped their ladder): {len(within)} of {sum(r['model'] == model for r in steps)}.",
            "",
        ]
    lines += _scalesim_table(out)
    write_markdown(out / "energy.md", "\n".join(lines) + "\n", command)


def issue8_section(out: Path, doc: Path, drop: float) -> None:
    """Rewrite the compression section of ``doc`` (docs/bench/noc/issue8-noc.md) with the fair numbers from ``out``'s CSVs."""
    choices = _read(out / "choices.csv")
    lines = [
        "### Energy-aware compression (rewritten by `python -m coevo.figures noc-energy`, issue 18)",
        "",
        "The table first shown here (issue 8) chose K on test accuracy, ranked values with the first step's table only and counted "
        "MAC toggles alone; it is superseded. Now K is chosen on the validation split, each step's table is re-measured on the "
        "restricted model, partial-sum transitions are costed per MSB-distance group, and the energy per inference adds the SRAM "
        f"and DRAM accesses of the systolic mapping (Horowitz 45 nm). Within a {drop:g}-point validation drop, mean ± 95 % t "
        "half-width over seeds (simulated energy; details and every step in [energy.md](energy.md)):",
        "",
        "| model | seeds | layer-wise vs INT8, compute | layer-wise vs INT8, total | layer-agnostic vs INT8, compute "
        "| layer-agnostic vs INT8, total | layer-wise vs layer-agnostic, compute | layer-wise vs layer-agnostic, total |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for model in dict.fromkeys(r["model"] for r in choices):
        rows = [r for r in choices if r["model"] == model]
        wise = [r for r in rows if r["scheme"] == "layer-wise"]
        agn = [r for r in rows if r["scheme"] == "layer-agnostic"]

        def neg(rs: list[dict[str, str]], key: str) -> str:
            return "-" + _ci([float(r[key]) for r in rs]) + " %"

        lines.append(
            f"| {model} | {len(wise)} | {neg(wise, 'compute_reduction_vs_int8')} | {neg(wise, 'total_reduction_vs_int8')} | "
            f"{neg(agn, 'compute_reduction_vs_int8')} | {neg(agn, 'total_reduction_vs_int8')} | "
            f"{neg(wise, 'compute_reduction_vs_agnostic')} | {neg(wise, 'total_reduction_vs_agnostic')} |"
        )
    text = doc.read_text()
    start = text.index("### Energy-aware compression")
    end = text.find("\n### ", start + 1)
    doc.write_text(text[:start] + "\n".join(lines) + "\n\n" + (text[end + 1 :] if end >= 0 else ""))


def _mapping_table(out: Path, model: str) -> list[str]:
    rows = [r for r in _read(out / "mapping.csv") if r["model"] == model]
    lines = [
        "Weight-stationary mapping per layer (seed 0; per inference):",
        "",
        "| layer | GEMM M K N | cycles | utilisation | SRAM bytes | DRAM bytes | MACs | SRAM nJ | SRAM + DRAM nJ | INT8 compute nJ |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['layer']} | {r['gemm_mkn']} | {r['cycles']} | {float(r['utilisation']):.3f} | {r['sram_bytes_per_inference']} | "
            f"{r['dram_bytes_per_inference']} | {r['macs_per_inference']} | {float(r['sram_pj_per_inference']) / 1e3:.1f} | "
            f"{float(r['memory_pj_per_inference']) / 1e3:.1f} | "
            f"{float(r['int8_compute_pj']) / 1e3:.2f} |"
        )
    return [*lines, ""]


def _groups_table(out: Path, model: str) -> list[str]:
    rows = [r for r in _read(out / "groups.csv") if r["model"] == model]
    layers = list(dict.fromkeys(r["layer"] for r in rows))
    lines = [
        "Partial-sum transitions of the INT8 model's real weights by MSB Hamming distance (seed 0): share of transitions / cost "
        "per transition in bit toggles (a group with no transitions shows its nominal cost and weighs nothing):",
        "",
        "| layer | " + " | ".join(f"d={g}" for g in range(GROUPS)) + " |",
        "|---|" + "---|" * GROUPS,
    ]
    for layer in layers:
        rs = [r for r in rows if r["layer"] == layer]
        total = sum(int(r["transitions"]) for r in rs)
        cells = [f"{int(r['transitions']) / total:.3f} / {float(r['cost_toggles']):.2f}" for r in rs]
        lines.append(f"| {layer} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _scalesim_table(out: Path) -> list[str]:
    path = out / "scalesim.csv"
    if not path.exists():
        return ["## Cycles against SCALE-Sim", "", "scalesim was not installed when this page was written: no cross-check.", ""]
    rows = _read(path)
    worst = {f: max(abs(float(r["diff_pct"])) for r in rows if r["dataflow"] == f) for f in ("ws", "os", "is")}
    lines = [
        "## Cycles against SCALE-Sim 3.0",
        "",
        "sim/accel/systolic.py against SCALE-Sim's stall-free compute cycles (rows of its compute unit's demand matrices: weight "
        "or input preload, stream, fill/drain skew per fold; sim/accel/scalesim_ref.py says why its memory simulation is left out: "
        "it only adds stalls, which coevo does not model, and it crashes under NumPy 2). tests/sim/test_accel.py fails beyond 1 %. "
        "Largest difference: " + ", ".join(f"{f.upper()} {w:.2f} %" for f, w in worst.items()) + ".",
        "",
        "| array | layer | dataflow | coevo cycles | SCALE-Sim cycles | difference % |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['array']} | {r['layer']} | {r['dataflow']} | {r['coevo_cycles']} | {r['scalesim_cycles']} | {r['diff_pct']} |" for r in rows
    ]
    return [*lines, ""]


def parser() -> argparse.ArgumentParser:
    """The figure's options; the first model and the accuracy tolerance are the family's (``ACCEL``)."""
    ap = figure_parser(NAME, __doc__)
    ap.add_argument("--models", default=f"{ACCEL.model},cnn-mnist5k")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--drop", type=float, default=ACCEL.accuracy_drop_max, help="largest accuracy drop vs INT8 (percentage points)")
    ap.add_argument("--issue8", type=Path, default=None, help="page whose compression section to rewrite (default: OUT/issue8-noc.md)")
    ap.add_argument("--no-scalesim", action="store_true", help="skip the SCALE-Sim cross-check (keep scalesim.csv)")
    ap.add_argument(
        "--psum-bits", type=int, default=ACCEL.psum_bits, help="partial-sum register of the compression runs (0: fitted per layer)"
    )
    ap.add_argument("--no-compress", action="store_true", help="skip the compression runs (keep their CSVs)")
    ap.add_argument("--no-occupancy", action="store_true", help="skip the MSB-group occupancy measurement (keep its CSVs)")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Measure (unless ``--report-only``), then write energy.md and rewrite the issue 8 page's compression section."""
    args = parser().parse_args(argv)
    assert LEVELS[0] == 256  # the tables say INT8: the first level of the ladder
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    # the page names the measuring command: the same whether this call measures or only re-renders
    given = sys.argv[1:] if argv is None else argv
    command = command_line(NAME, [a for a in given if a not in ("--report-only", "--no-scalesim", "--no-compress", "--no-occupancy")])
    issue8 = args.issue8 if args.issue8 is not None else args.out / "issue8-noc.md"
    if args.psum_bits != 0 and not 2 <= args.psum_bits <= 62:
        print(f"--psum-bits must be 0 (fitted per layer) or between 2 and 62 (register bits), got {args.psum_bits}", file=sys.stderr)
        return 2
    if not args.report_only:
        if not args.no_scalesim:
            cross_check(args.out, command)
        if not args.no_occupancy:
            occupancy(args.models.split(","), args.seeds, args.out, command)
        if not args.no_compress:
            run(args.models.split(","), args.seeds, args.drop, args.out, command, args.psum_bits)
    report(args.out, args.drop, command)
    if issue8.exists():
        issue8_section(args.out, issue8, args.drop)
    print((args.out / "energy.md").read_text())
    return 0
