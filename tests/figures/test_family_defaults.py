"""The figures of the method families take their defaults from the families' configurations (sim/<family>/config.py).

Each test reads a figure's argparse defaults (``module.parser()``) and module settings, and checks
them against the family's configuration, so that a default written again in a figure, or a
configuration that moves away from what a figure uses, fails here. Where the committed data record
the setting (a model name, a split, a protection label), the test also checks that the data were made
with it: a configuration that drifts from the committed figures fails too.
"""

from __future__ import annotations

import argparse
import inspect
import typing
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from coevo.figures import (
    attention,
    circuit_gnn,
    fpga_schedule,
    freeze,
    he_gcn,
    noc,
    noc_bee,
    noc_benes,
    noc_energy,
    pipeline_cpsat_gloo,
    pipeline_fair,
    pipeline_schedules,
    prune,
    quant,
    reram,
    spmm,
    stepping,
    zoqat,
)
from coevo.figures._common import read_csv
from coevo.search.lingcn.problem import LinGcnOptions
from coevo.sim.accel.compress import compress
from coevo.sim.accel.config import ACCEL
from coevo.sim.attention.config import ATTENTION
from coevo.sim.fpga.config import FpgaConfig
from coevo.sim.freeze.config import FreezeFamilyConfig
from coevo.sim.gnn.config import GNN
from coevo.sim.graph.config import SpmmConfig
from coevo.sim.he.ckks import compile_plan, depth_and_counts, params_for_depth
from coevo.sim.he.config import HeConfig
from coevo.sim.he.data import load_dataset
from coevo.sim.he.model import Recipe
from coevo.sim.he.run import he_gcn as run_he_gcn
from coevo.sim.noc.config import NOC
from coevo.sim.pipeline.cluster import PRESETS
from coevo.sim.pipeline.config import PIPELINE
from coevo.sim.pipeline.ilp import synthesize
from coevo.sim.prune.config import PruneConfig
from coevo.sim.quant import greedy_search
from coevo.sim.quant.config import QuantConfig
from coevo.sim.reram import CrossbarConfig, Protection
from coevo.sim.reram.config import ReramConfig
from coevo.sim.stepping.config import SteppingConfig
from coevo.sim.zoqat.config import DEFAULT_LR, ZOQAT
from coevo.tools.fpga import LengthAwareArgs
from coevo.tools.he import HEGcnArgs
from coevo.tools.quant import QuantArgs

BENCH = Path(__file__).resolve().parents[2] / "docs" / "bench"


def defaults(module: ModuleType) -> argparse.Namespace:
    """The options a figure runs with when none is given."""
    return module.parser().parse_args([])


def literal_values(model: Any, field: str) -> set[str]:
    return set(typing.get_args(model.model_fields[field].annotation))


def test_reram_figure_uses_the_family_crossbar_model_and_ratio() -> None:
    models = defaults(reram).models.split(",")
    assert models[0] == ReramConfig.compare_model  # the cross-validated classifier (issue 31 item 1)
    assert reram.CFG == ReramConfig().crossbar() == CrossbarConfig()
    assert ReramConfig.sa0_sa1 == reram.RATIO
    rows = read_csv(BENCH / "reram" / "reram.csv")
    assert {r["model"] for r in rows} == set(models)
    # every scheme's protection is the one the committed data were measured with (its label names each setting)
    for model in models:
        label = {name: p.label for name, p in reram.schemes(model)}
        assert {(r["scheme"], r["protection"]) for r in rows if r["model"] == model} == set(label.items())
        # at the family's ratio every scheme runs; the other ratio has only some of them
        at_default = {r["scheme"] for r in rows if r["model"] == model and r["sa0_sa1"] == ReramConfig.sa0_sa1}
        assert at_default == set(label)
    ft = reram.FT[ReramConfig.compare_model]
    assert ft == reram.FT[ReramConfig.model] == ReramConfig.finetune_epochs
    pruned = dict(reram.schemes(ReramConfig.compare_model))[reram.HEADLINE]  # the headline: the vote, fault maps unknown
    assert pruned == Protection(prune_rows=0.1, prune_cols=0.1, dup=True, msb=1, knowledge="unknown", finetune_epochs=ft)
    assert {p.finetune_epochs for _, p in reram.schemes(ReramConfig.compare_model)} == {ft}  # the same fine-tuning for every scheme


def test_prune_figure_uses_the_family_model_pattern_score_and_sparsity() -> None:
    assert defaults(prune).model == PruneConfig.model
    assert prune.PATTERNS[0] == PruneConfig.pattern
    assert PruneConfig.score in prune.SCORES
    rows = read_csv(BENCH / "prune" / "prune.csv")
    assert {r["model"] for r in rows} == {PruneConfig.model}
    assert {r["pattern"] for r in rows} == set(prune.PATTERNS)
    assert {r["score"] for r in rows} == set(prune.SCORES)
    assert {float(r["sparsity"]) for r in rows} == {PruneConfig.sparsity}


def test_quant_figure_uses_the_family_comparison_model_and_greedy_tolerance() -> None:
    args = defaults(quant)
    assert args.model == QuantConfig.compare_model
    # one tolerance: the tool's accuracy_drop_max and the simulator's own default
    assert QuantArgs.model_fields["accuracy_drop_max"].default == QuantConfig.accuracy_drop_max
    assert inspect.signature(greedy_search).parameters["max_drop"].default == QuantConfig.accuracy_drop_max
    rows = read_csv(BENCH / "quant" / "quant.csv")
    assert {r["model"] for r in rows} == {QuantConfig.compare_model}
    assert {r["method"] for r in rows} == set(quant.METHODS)


def test_freeze_figure_trains_the_family_search_model() -> None:
    assert defaults(freeze).model == FreezeFamilyConfig.search_model
    assert {r["model"] for r in read_csv(BENCH / "freeze" / "freeze.csv")} == {FreezeFamilyConfig.search_model}


def test_stepping_figure_uses_the_family_model_and_steps() -> None:
    args = defaults(stepping)
    assert args.models[0] == SteppingConfig.model
    assert args.steps == list(SteppingConfig.steps)
    assert SteppingConfig.model in {e.split("=")[0] for e in args.epochs}  # every default model has its epochs
    rows = read_csv(BENCH / "stepping" / "stepping.csv")
    assert {r["model"] for r in rows} == set(args.models)
    assert sorted({float(r["target"]) for r in rows}) == list(SteppingConfig.steps)


def test_fpga_figure_uses_the_family_split_and_the_tool_the_same() -> None:
    assert next(iter(fpga_schedule.SPLITS)) == FpgaConfig.split == LengthAwareArgs.model_fields["split"].default
    assert fpga_schedule.SPLITS[FpgaConfig.split] == (4.0, 3.0, 1.0)
    assert {r["split"] for r in read_csv(BENCH / "fpga" / "schedule.csv")} == set(fpga_schedule.SPLITS)


def test_fpga_figure_reproduces_its_committed_rows_with_the_family_accelerator() -> None:
    # the model, board, PEs, buckets and draw seed of the family give the committed cycle counts (first draw, batch 8)
    fields = ("split", "batch", "draw", "attention", "method", "pe_split", "makespan_cycles", "lower_bound_cycles")
    # hindsight rows are left out: the offline optimum's first batch depends on the later draws of its stream
    offline = set(fpga_schedule.HINDSIGHT.values())
    committed = [
        r for r in read_csv(BENCH / "fpga" / "schedule.csv") if r["batch"] == "8" and r["draw"] == "0" and r["method"] not in offline
    ]
    assert committed
    measured = [r for r in fpga_schedule.run_batches([8], 1) if r["method"] not in offline]
    assert [tuple(str(r[k]) for k in fields) for r in measured] == [tuple(r[k] for k in fields) for r in committed]
    # part 2 (the family's search model on the same board): everything but CP-SAT's own answer, which its time limit sets
    fields = (
        "cores", "draw", "lengths", "tasks", "simple_bound_cycles", "realloc_split", "realloc_min_bound_cycles",
        *(f"{m}_cycles" for m in fpga_schedule.CPSAT_METHODS),
    )  # fmt: skip
    committed = [r for r in read_csv(BENCH / "fpga" / "schedule_cpsat.csv") if r["draw"] == "0"]
    assert committed
    measured = fpga_schedule.run_cpsat(1, 1.0, 4)  # CP-SAT needs time to find any schedule on a loaded machine (0.2 s failed at load 5)
    assert [tuple(str(r[k]) for k in fields) for r in measured] == [tuple(r[k] for k in fields) for r in committed]


def test_he_figure_uses_the_family_datasets_width_and_budgets() -> None:
    assert he_gcn.DATASETS[0] == HeConfig.dataset
    assert set(he_gcn.DATASETS) == literal_values(HEGcnArgs, "dataset") == literal_values(LinGcnOptions, "dataset")
    assert (HeConfig.hidden,) * 2 == he_gcn.HIDDEN
    assert he_gcn.ENCRYPTED in he_gcn.DATASETS and defaults(he_gcn).encrypt == [he_gcn.ENCRYPTED]
    # the figure's budgets are the family's, which are the recipe's and the runner's own defaults
    assert {"teacher_epochs": Recipe.teacher_epochs, "epochs": Recipe.epochs} == he_gcn.BUDGET
    assert inspect.signature(run_he_gcn).parameters["scale_bits"].default == HeConfig.scale_bits
    assert {r["dataset"] for r in read_csv(BENCH / "he" / "he.csv")} == set(he_gcn.DATASETS)


@pytest.mark.parametrize("dataset", he_gcn.DATASETS)
def test_he_figure_width_and_scale_give_the_committed_baseline_counts(dataset: str) -> None:
    # the all-polynomial baseline's CKKS plan depends on the structure only (widths, nodes, scale), not on trained
    # values: compiled with any nonzero weights at the figure's widths it has the committed depth, ring, chain and counts
    data = load_dataset(dataset)
    n, (h1, h2) = data.adj.shape[0], he_gcn.HIDDEN
    rng = np.random.default_rng(0)
    # two blocks: graph conv, node-wise linear, graph conv, node-wise linear; every position kept (all polynomial)
    shapes = [((3, h1), True), ((h1, h1), False), ((h1, h2), True), ((h2, h2), False)]
    linears = [(rng.uniform(0.5, 1.0, shape), np.zeros(shape[1]), graph) for shape, graph in shapes]
    head = (np.ones((n * h2, 10)), np.zeros(10))
    plan = compile_plan(data.adj, data.coords, linears, np.ones((4, n, 3)), np.ones((4, n)), [1.0] * 4, head, "flatten")
    depth, counts, _ = depth_and_counts(plan)
    params = params_for_depth(depth, HeConfig.scale_bits)
    committed = [r for r in read_csv(BENCH / "he" / "he.csv") if r["dataset"] == dataset and float(r["budget"]) == 1.0]
    assert committed
    for r in committed:
        assert (int(r["depth"]), int(r["poly_modulus_degree"]), int(r["chain_bits"])) == (
            depth,
            params.poly_modulus_degree,
            params.total_bits,
        )
        assert (int(r["mul_plain"]), int(r["ct_mul"])) == (counts["mul_plain"], counts["mul"])


def test_spmm_figure_tunes_at_every_width_it_reports_with_the_family_repeats(monkeypatch: pytest.MonkeyPatch) -> None:
    args = defaults(spmm)
    built: list[dict[str, Any]] = []

    class Stop(Exception):
        pass

    def record(**options: Any) -> None:
        built.append(options)
        raise Stop  # the options are all this test needs: no search runs

    monkeypatch.setattr(spmm, "SpmmProblem", record)
    for width in args.widths:
        with pytest.raises(Stop):
            spmm.tune(args.budget, max(args.threads), width, seed=0)
    assert [b["feature_dim"] for b in built] == args.widths  # a design tuned at one width is timed at that width only
    assert all(b["graph"] == "rmat-1m@1" and b["repeats"] == SpmmConfig.repeats and b["threads"] == 2 for b in built)
    assert built[0]["graph"].split("@")[0] == SpmmConfig.search_graph
    # the committed page states the tuning's settings: they are the family's
    page = (BENCH / "spmm" / "spmm.md").read_text()
    assert f"on **{built[0]['graph']}** (R-MAT seed 1) at each width F" in page
    assert f"{SpmmConfig.repeats} timed runs per design" in page


def test_noc_mesh_figure_runs_the_family_mesh_and_run_length(monkeypatch: pytest.MonkeyPatch) -> None:
    args = defaults(noc)
    assert args.cycles == NOC.benes_cycles
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    class Stop(Exception):
        pass

    def record(*given: Any, **options: Any) -> None:
        calls.append((given, options))
        raise Stop  # the arguments are all this test needs: no simulation runs

    monkeypatch.setattr(noc, "simulate_mesh", record)
    with pytest.raises(Stop):
        noc.simulate(1, args.cycles, Path("unused"), "python -m coevo.figures noc")
    ((given, options),) = calls
    assert given == (NOC.k,)
    assert options["cycles"] == NOC.benes_cycles // 2
    # the GT share is the figure's own setting, not the family's
    assert options["gt_share"] == noc.GT_SHARE == 0.5 != NOC.gt_share


def test_noc_benes_figure_uses_the_family_control_ports_and_packets() -> None:
    args = defaults(noc_benes)
    assert args.cycles == NOC.benes_cycles
    assert (NOC.setup_cycles, NOC.ack_cycles) == (noc_benes.SETUP, noc_benes.ACK)
    assert (NOC.n_ports, NOC.benes_packet_flits) == (noc_benes.N_PORTS, noc_benes.FLITS)
    assert NOC.hold_cycles != noc_benes.HOLD  # the hold variants' bound is the figure's own
    # the committed runs are exactly the runs the figure plans with these defaults (5 seeds)
    fields = ("part", "variant", "n", "packet_flits", "load", "seed", "cycles")
    committed = {tuple(r[k] for k in fields) for r in read_csv(BENCH / "noc" / "runs.csv")}
    planned = {tuple(str(t[k]) for k in fields) for t in noc_benes.tasks(args.seeds, args.cycles)}
    assert planned == committed
    curve = [r for r in read_csv(BENCH / "noc" / "runs.csv") if r["part"] == "curve"]
    assert {int(r["n"]) for r in curve} == {NOC.n_ports, 64}
    assert {int(r["packet_flits"]) for r in curve} == {NOC.benes_packet_flits}
    assert {int(r["hold_cycles"]) for r in curve} == {0, noc_benes.HOLD}


def test_noc_bee_figure_runs_the_family_mesh() -> None:
    args = defaults(noc_bee)
    setup = noc_bee.SETUP
    assert (setup["k"], setup["subchannels"], setup["packet_flits"]) == (NOC.k, NOC.subchannels, NOC.mesh_packet_flits)
    assert (setup["gt_width"], setup["gt_hold"], setup["gt_fill"]) == (NOC.gt_width, NOC.gt_hold, NOC.gt_fill)
    assert setup["gt_share"] == noc_bee.GT_SHARE != NOC.gt_share  # the figure's own share
    assert args.cycles != NOC.cycles  # the figure's own run length
    rows = read_csv(BENCH / "noc" / "bee-runs.csv")
    for column in ("k", "subchannels", "packet_flits", "cycles"):
        assert {int(r[column]) for r in rows} == {args.cycles if column == "cycles" else setup[column]}
    assert {float(r["gt_share"]) for r in rows} == {noc_bee.GT_SHARE}


def test_noc_energy_figure_uses_the_family_model_and_tolerance() -> None:
    args = defaults(noc_energy)
    assert args.models.split(",")[0] == ACCEL.model
    assert args.drop == ACCEL.accuracy_drop_max == inspect.signature(compress).parameters["accuracy_drop_max"].default
    runs = {p.name.removeprefix("steps-").removesuffix(".csv").removesuffix("-psumfit") for p in (BENCH / "noc").glob("steps-*.csv")}
    assert runs == set(args.models.split(","))  # -psumfit: the same models with fitted partial-sum registers


def test_pipeline_figures_use_the_family_model_cluster_and_batch() -> None:
    assert pipeline_fair.MODELS[0] == pipeline_schedules.MODELS[0] == (PIPELINE.model, PIPELINE.resolution)
    assert PIPELINE.global_batch == pipeline_fair.GLOBAL_BATCH
    rows = read_csv(BENCH / "pipeline" / "fair.csv")
    assert {r["model"] for r in rows} == {m for m, _ in pipeline_fair.MODELS}
    # every row splits the family's global batch over its replicas and microbatches
    assert {int(r["dp"]) * int(r["microbatches"]) * pipeline_fair.MICROBATCH for r in rows} == {PIPELINE.global_batch}
    # the replicas fill the figure's 16 devices (the deepest skip-aware depths, 12 and 14 stages, leave some idle at DP 1)
    assert {(int(r["pp"]), int(r["dp"])) for r in rows} == {(4, 4), (8, 2), (12, 1), (14, 1), (16, 1)}
    best = read_csv(BENCH / "pipeline" / "best.csv")
    assert PIPELINE.cluster in {r["cluster"] for r in best}
    assert pipeline_fair.cluster(8, 10.0) == replace(PRESETS[PIPELINE.cluster], name="8pn-10", per_node=8, intra_gbs=150.0)
    assert PIPELINE.cluster in pipeline_schedules.CLUSTERS
    schedules = read_csv(BENCH / "pipeline" / "pipeline-schedules.csv")
    assert {r["cluster"] for r in schedules} == set(pipeline_schedules.CLUSTERS)
    assert {r["model"] for r in schedules} == {m for m, _ in pipeline_schedules.MODELS}


def test_pipeline_cpsat_limits_are_the_family_and_synthesize_reads_them() -> None:
    assert defaults(pipeline_schedules).time_limit == PIPELINE.ilp_time_limit_s
    assert defaults(pipeline_cpsat_gloo).cpsat_limit == PIPELINE.synthesize_time_limit_s
    params = inspect.signature(synthesize).parameters
    assert params["time_limit_s"].default == PIPELINE.synthesize_time_limit_s
    assert params["memory"].default == PIPELINE.ilp_memory
    assert params["split_backward"].default is PIPELINE.ilp_split_backward


def test_attention_figure_uses_the_family_model_and_operator_settings() -> None:
    args = defaults(attention)
    assert args.models[0] == args.length_model == ATTENTION.model
    rows = read_csv(BENCH / "attention" / "attention-length.csv")
    assert {r["model"] for r in rows} == {ATTENTION.model}
    topk = {(int(r["top_k"]), int(r["key_bits"])) for r in rows if r["method"] == "topk-quantized-keys"}
    local = {(int(r["window"]), int(r["n_global"])) for r in rows if r["method"] == "local-global"}
    assert (ATTENTION.top_k, ATTENTION.key_bits) in topk
    assert (ATTENTION.window, ATTENTION.n_global) in local
    timed = {r["method"] for r in read_csv(BENCH / "attention" / "attention-time.csv")}
    assert {f"topk-q{ATTENTION.key_bits}-fp32gemm", f"topk-q{ATTENTION.key_bits}-int8gemm", "local-global"} <= timed


def test_circuit_gnn_figure_uses_the_family_model() -> None:
    assert circuit_gnn.HIDDEN[0] == GNN.hidden
    assert (GNN.dynamic_relu_k, GNN.tool_concurrency) == (circuit_gnn.K, circuit_gnn.CONCURRENCY)
    assert float(circuit_gnn.LR_TEXT) == GNN.lr
    rows = read_csv(BENCH / "gnn" / "circuit.csv")
    assert {int(r["hidden"]) for r in rows} == set(circuit_gnn.HIDDEN)
    assert {(int(r["k"]), int(r["concurrency"])) for r in rows} == {(GNN.dynamic_relu_k, GNN.tool_concurrency)}
    labels = read_csv(BENCH / "gnn" / "circuit_labels.csv")
    assert f"dynamic_relu_k{GNN.dynamic_relu_k}" in {r["variant"] for r in labels}
    page = (BENCH / "gnn" / "circuit.md").read_text()
    assert f"hidden {GNN.hidden}, {GNN.layers} layers, full-batch Adam (lr {circuit_gnn.LR_TEXT}," in page
    assert f"Model: {GNN.layers} layers" in page


def test_zoqat_figure_uses_the_family_training_settings() -> None:
    args = defaults(zoqat)
    assert (args.steps, args.w_bits, args.a_bits) == (ZOQAT.steps, ZOQAT.w_bits, ZOQAT.a_bits)
    assert (args.batch_size, args.eps, args.eval_batches) == (ZOQAT.batch_size, ZOQAT.eps, ZOQAT.eval_batches)
    rows = read_csv(BENCH / "quant" / "zoqat.csv")
    trained = [r for r in rows if r["phase"] == "test" and r["method"] not in ("rtn", "gptq")]
    assert trained and {int(r["steps"]) for r in trained} == {ZOQAT.steps}
    assert {(r["model"], int(r["w_bits"]), int(r["a_bits"]), int(r["batch_size"]), float(r["eps"])) for r in rows} == {
        (args.model, ZOQAT.w_bits, ZOQAT.a_bits, ZOQAT.batch_size, ZOQAT.eps)
    }
    assert set(DEFAULT_LR) >= {m for m, _ in zoqat.CONFIGS.values()}
