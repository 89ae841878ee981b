"""Each family's configuration is the one declaration of its defaults: the tools' arguments, the problems' options and
the simulators' keyword defaults all hold its values (NoC, pipeline, accelerator/compression, sparse attention, circuit
GNN, ZO-QAT, FPGA transformer, freezing, SpMM, HE, pruning, quantization, ReRAM, SteppingNet).

The tables name which field stands for which setting; every value compared is read from the two sides (the pydantic
field info, the function signature, the configuration dataclass), so a default or bound edited in one place only fails
here.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, get_args

import annotated_types
import pytest
from pydantic import BaseModel

from coevo.search.compress.problem import CompressOptions
from coevo.search.deploy_cnn.problem import DeployCnnOptions
from coevo.search.deploy_cnn.sparsity import SparsityOptions
from coevo.search.deploy_lm.bits import LmBitsOptions
from coevo.search.deploy_lm.problem import DeployLmOptions
from coevo.search.fpga.problem import PES_MAX, PES_MIN, Board, FpgaOptions
from coevo.search.freeze.problem import FreezeOptions
from coevo.search.lingcn.problem import LinGcnOptions
from coevo.search.noc.problem import NocOptions
from coevo.search.pipeline.problem import PipelineOptions
from coevo.search.prune.problem import PruneOptions
from coevo.search.prune.run import prune_zoo
from coevo.search.quant.problem import QuantOptions
from coevo.search.reram.problem import ReramOptions
from coevo.search.spmm.problem import SpmmOptions
from coevo.search.stepping.problem import SteppingOptions
from coevo.sim.accel.compress import Compressor, compress, compressor
from coevo.sim.accel.config import ACCEL, AccelConfig
from coevo.sim.accel.systolic import map_layer
from coevo.sim.attention.config import ATTENTION, AttentionFamilyConfig
from coevo.sim.attention.evaluate import evaluate_sparse, evaluate_sparse_model
from coevo.sim.attention.model import SparseConfig
from coevo.sim.fpga.config import FpgaConfig
from coevo.sim.fpga.model import DEVICES, KEY_BITS_MAX, KEY_BITS_MIN, Accelerator, AttentionConfig
from coevo.sim.freeze.config import FreezeFamilyConfig
from coevo.sim.freeze.settings import FreezeConfig
from coevo.sim.gnn.bench import train_eval
from coevo.sim.gnn.config import GNN, GnnFamilyConfig
from coevo.sim.gnn.model import Config as GnnModelConfig
from coevo.sim.gnn.model import build
from coevo.sim.graph.bench import benchmark
from coevo.sim.graph.config import SpmmConfig
from coevo.sim.he.ckks import encrypted_forward, params_for_depth
from coevo.sim.he.config import HeConfig
from coevo.sim.he.recipe import Recipe
from coevo.sim.he.run import he_gcn
from coevo.sim.noc.benes import BenesConfig, bit_blocking_model, mean_link_utilisation_model, simulate_benes, zero_load_delay
from coevo.sim.noc.config import NOC, NocFamilyConfig
from coevo.sim.noc.mesh import MeshSim, simulate_mesh
from coevo.sim.pipeline.config import PIPELINE, PipelineConfig
from coevo.sim.pipeline.ilp import synthesize
from coevo.sim.pipeline.profile import profile
from coevo.sim.pipeline.simulate import simulate
from coevo.sim.pipeline.tune import tune
from coevo.sim.prune.config import PruneConfig
from coevo.sim.quant.config import QuantConfig
from coevo.sim.quant.mixed import greedy_search, quantize
from coevo.sim.reram.config import ReramConfig
from coevo.sim.reram.crossbar import CrossbarConfig
from coevo.sim.reram.model import Protection
from coevo.sim.stepping._build import build as build_stepping
from coevo.sim.stepping.config import SteppingConfig
from coevo.sim.zoqat.config import ZOQAT, ZoQatConfig
from coevo.sim.zoqat.job import Spec
from coevo.sim.zoqat.qat import zo_qat
from coevo.tools.attention import SparseArgs
from coevo.tools.fpga import LengthAwareArgs
from coevo.tools.freeze import FreezeArgs
from coevo.tools.gnn import GnnCircuitArgs
from coevo.tools.he import HEGcnArgs
from coevo.tools.kernels import SpmmArgs
from coevo.tools.noc import CompressArgs, NocArgs, NocPlotArgs, SystolicArgs
from coevo.tools.pipeline import PlanArgs, ProfileArgs, SimulateArgs, TuneArgs
from coevo.tools.prune import PruneArgs
from coevo.tools.quant import QuantArgs
from coevo.tools.reram import ReramArgs
from coevo.tools.stepping import BuildArgs as SteppingBuildArgs
from coevo.tools.stepping import RunArgs as SteppingRunArgs
from coevo.tools.zoqat import ZoQatArgs

ZOQAT_SHARED = ("model", "w_bits", "a_bits", "steps", "method", "eps", "seed", "batch_size", "train_weights", "eval_batches")
ZOQAT_SHARED += ("rank", "probes", "refresh", "smooth_alpha")  # P-GAP's window and ZeroQAT's smoothing (issue 31)

BOUNDS = {annotated_types.Ge: "ge", annotated_types.Gt: "gt", annotated_types.Le: "le", annotated_types.Lt: "lt"}

SHARED = "shared"
"""The adapter field carries the configuration's bounds."""
OWN = "own"
"""The adapter field leaves the range to the simulator's check (``config_field(..., bounds=False)``): no pydantic bound."""
Bounds = str | dict[str, float]
"""SHARED, OWN, or the adapter's own narrower bounds (``config_field(..., ge=..., le=...)``), given as a dict."""

FPGA_SHARED = ("device", "split", "tile_m", "tile_n", "tile_k", "reconfig_cycles", "change_rule", "model", "batch", "draws", "seed")
FPGA_SEARCH_PES = {"ge": PES_MIN, "le": max(DEVICES[b].max_pes(Accelerator.lanes) for b in get_args(Board))}
"""The problems' PE range: the largest offered board's DSP slices / the lanes per PE (read from the device table)."""
FPGA_SEARCH_BUCKETS = {"ge": 1, "le": 64}

# (adapter model, its field, the family configuration, the configuration's field, whose bounds the adapter checks)
ADAPTERS: dict[str, list[tuple[type[BaseModel], str, type, str, Bounds]]] = {
    "noc": [
        (NocArgs, "n", NocFamilyConfig, "n_ports", OWN),
        (NocArgs, "k", NocFamilyConfig, "k", OWN),
        (NocOptions, "k", NocFamilyConfig, "k", SHARED),
        (NocArgs, "routing", NocFamilyConfig, "routing", SHARED),
        (NocArgs, "load", NocFamilyConfig, "load", OWN),
        (NocOptions, "load", NocFamilyConfig, "load", SHARED),
        (NocArgs, "traffic", NocFamilyConfig, "traffic", SHARED),
        (NocOptions, "traffic", NocFamilyConfig, "search_traffic", SHARED),
        (NocArgs, "injection", NocFamilyConfig, "injection", SHARED),
        (NocArgs, "setup_cycles", NocFamilyConfig, "setup_cycles", SHARED),
        (NocArgs, "ack_cycles", NocFamilyConfig, "ack_cycles", SHARED),
        (NocArgs, "hold_cycles", NocFamilyConfig, "hold_cycles", SHARED),
        (NocArgs, "gt_share", NocFamilyConfig, "gt_share", SHARED),
        (NocOptions, "gt_share", NocFamilyConfig, "search_gt_share", SHARED),
        (NocArgs, "subchannels", NocFamilyConfig, "subchannels", SHARED),
        (NocArgs, "gt_width", NocFamilyConfig, "gt_width", SHARED),
        (NocArgs, "gt_fill", NocFamilyConfig, "gt_fill", SHARED),
        (NocArgs, "cycles", NocFamilyConfig, "cycles", SHARED),
        (NocPlotArgs, "cycles", NocFamilyConfig, "cycles", SHARED),
        (NocOptions, "cycles", NocFamilyConfig, "search_cycles", SHARED),
        (NocArgs, "seed", NocFamilyConfig, "seed", OWN),
        (NocOptions, "traffic_seed", NocFamilyConfig, "seed", SHARED),
    ],
    "pipeline": [
        *[(m, "model", PipelineConfig, "model", SHARED) for m in (ProfileArgs, PlanArgs, SimulateArgs, TuneArgs, PipelineOptions)],
        *[(m, "cluster", PipelineConfig, "cluster", SHARED) for m in (PlanArgs, SimulateArgs, TuneArgs, PipelineOptions)],
        *[
            (m, "resolution", PipelineConfig, "resolution", SHARED)
            for m in (ProfileArgs, PlanArgs, SimulateArgs, TuneArgs, PipelineOptions)
        ],
        *[(m, "microbatch", PipelineConfig, "microbatch", SHARED) for m in (ProfileArgs, PlanArgs, SimulateArgs)],
        *[(m, "balance", PipelineConfig, "balance", SHARED) for m in (PlanArgs, SimulateArgs, TuneArgs)],
        *[(m, "devices", PipelineConfig, "devices", SHARED) for m in (PlanArgs, SimulateArgs)],
        *[(m, "global_batch", PipelineConfig, "global_batch", SHARED) for m in (TuneArgs, PipelineOptions)],
        (PlanArgs, "method", PipelineConfig, "plan_method", SHARED),
        (SimulateArgs, "method", PipelineConfig, "method", SHARED),
        (SimulateArgs, "schedule", PipelineConfig, "schedule", SHARED),
        (SimulateArgs, "microbatches", PipelineConfig, "microbatches", SHARED),
        (SimulateArgs, "recompute", PipelineConfig, "recompute", SHARED),
        (SimulateArgs, "time_limit_s", PipelineConfig, "ilp_time_limit_s", SHARED),
        (SimulateArgs, "ilp_memory", PipelineConfig, "ilp_memory", SHARED),
        (SimulateArgs, "ilp_split_backward", PipelineConfig, "ilp_split_backward", SHARED),
        (SimulateArgs, "data_parallel", PipelineConfig, "data_parallel", SHARED),
        (TuneArgs, "top", PipelineConfig, "top", SHARED),
    ],
    "accel": [
        (SystolicArgs, "rows", AccelConfig, "rows", SHARED),
        (SystolicArgs, "cols", AccelConfig, "cols", SHARED),
        (SystolicArgs, "dataflow", AccelConfig, "dataflow", SHARED),
        (SystolicArgs, "ifmap_kb", AccelConfig, "ifmap_kb", SHARED),
        (SystolicArgs, "filter_kb", AccelConfig, "filter_kb", SHARED),
        (SystolicArgs, "ofmap_kb", AccelConfig, "ofmap_kb", SHARED),
        (CompressArgs, "model", AccelConfig, "model", SHARED),
        (CompressOptions, "model", AccelConfig, "model", SHARED),
        (CompressArgs, "accuracy_drop_max", AccelConfig, "accuracy_drop_max", SHARED),
        (CompressArgs, "seed", AccelConfig, "seed", SHARED),
        (CompressOptions, "train_seed", AccelConfig, "seed", SHARED),
        (CompressOptions, "energy_scope", AccelConfig, "energy_scope", SHARED),
    ],
    "attention": [
        (SparseArgs, "model", AttentionFamilyConfig, "model", SHARED),
        (SparseArgs, "method", AttentionFamilyConfig, "method", SHARED),
        (SparseArgs, "top_k", AttentionFamilyConfig, "top_k", OWN),
        (SparseArgs, "key_bits", AttentionFamilyConfig, "key_bits", OWN),
        (SparseArgs, "window", AttentionFamilyConfig, "window", OWN),
        (SparseArgs, "n_global", AttentionFamilyConfig, "n_global", OWN),
        (SparseArgs, "split", AttentionFamilyConfig, "split", SHARED),
        (SparseArgs, "max_batches", AttentionFamilyConfig, "max_batches", OWN),
    ],
    "gnn": [
        (GnnCircuitArgs, "design", GnnFamilyConfig, "design", SHARED),
        (GnnCircuitArgs, "label", GnnFamilyConfig, "label", SHARED),
        (GnnCircuitArgs, "dynamic_relu_k", GnnFamilyConfig, "dynamic_relu_k", SHARED),
        (GnnCircuitArgs, "concurrency", GnnFamilyConfig, "tool_concurrency", SHARED),
        (GnnCircuitArgs, "parallel", GnnFamilyConfig, "parallel", SHARED),
        (GnnCircuitArgs, "hidden", GnnFamilyConfig, "hidden", SHARED),
        (GnnCircuitArgs, "layers", GnnFamilyConfig, "layers", SHARED),
        (GnnCircuitArgs, "epochs", GnnFamilyConfig, "epochs", SHARED),
        (GnnCircuitArgs, "test_share", GnnFamilyConfig, "test_share", SHARED),
        (GnnCircuitArgs, "compare_dense", GnnFamilyConfig, "compare_dense", SHARED),
        (GnnCircuitArgs, "timing_repeats", GnnFamilyConfig, "timing_repeats", SHARED),
        (GnnCircuitArgs, "seed", GnnFamilyConfig, "seed", SHARED),
    ],
    "zoqat": [(ZoQatArgs, name, ZoQatConfig, name, SHARED) for name in ZOQAT_SHARED],
    "fpga": [
        *[(LengthAwareArgs, name, FpgaConfig, name, SHARED) for name in (*FPGA_SHARED, "pes", "buckets")],
        (LengthAwareArgs, "top_k", AttentionFamilyConfig, "top_k", SHARED),
        (LengthAwareArgs, "key_bits", AttentionFamilyConfig, "key_bits", {"ge": KEY_BITS_MIN, "le": KEY_BITS_MAX}),
        (LengthAwareArgs, "window", AttentionFamilyConfig, "window", SHARED),
        (LengthAwareArgs, "n_global", AttentionFamilyConfig, "n_global", SHARED),
        (FpgaOptions, "model", FpgaConfig, "search_model", SHARED),
        (FpgaOptions, "device", FpgaConfig, "device", SHARED),
        (FpgaOptions, "pes", FpgaConfig, "pes", FPGA_SEARCH_PES),
        (FpgaOptions, "batch", FpgaConfig, "search_batch", SHARED),
        (FpgaOptions, "draws", FpgaConfig, "search_draws", SHARED),
        (FpgaOptions, "buckets", FpgaConfig, "buckets", FPGA_SEARCH_BUCKETS),
        (FpgaOptions, "reconfig_cycles", FpgaConfig, "reconfig_cycles", SHARED),
        (FpgaOptions, "change_rule", FpgaConfig, "change_rule", SHARED),
        (FpgaOptions, "seed", FpgaConfig, "seed", SHARED),
        (DeployLmOptions, "model", FpgaConfig, "search_model", SHARED),
        (DeployLmOptions, "board", FpgaConfig, "device", SHARED),
        (DeployLmOptions, "pes", FpgaConfig, "pes", FPGA_SEARCH_PES),
        (DeployLmOptions, "batch", FpgaConfig, "search_batch", SHARED),
        (DeployLmOptions, "draws", FpgaConfig, "search_draws", SHARED),
        (DeployLmOptions, "buckets", FpgaConfig, "buckets", FPGA_SEARCH_BUCKETS),
        (DeployLmOptions, "seed", FpgaConfig, "seed", SHARED),
        (LmBitsOptions, "model", FpgaConfig, "search_model", SHARED),
    ],
    "freeze": [
        *[
            (FreezeArgs, name, FreezeFamilyConfig, name, SHARED)
            for name in ("model", "method", "schedule", "criterion", "augment", "share", "versions", "max_frozen", "seed")
        ],
        (FreezeArgs, "cache", FreezeFamilyConfig, "codec", SHARED),
        (FreezeOptions, "model", FreezeFamilyConfig, "search_model", SHARED),
        (FreezeOptions, "epochs", FreezeFamilyConfig, "search_epochs", SHARED),
        (FreezeOptions, "codec", FreezeFamilyConfig, "codec", SHARED),
        (FreezeOptions, "versions", FreezeFamilyConfig, "versions", {"ge": 1, "le": 8}),
        (FreezeOptions, "seed", FreezeFamilyConfig, "seed", SHARED),
    ],
    "spmm": [
        *[(SpmmArgs, name, SpmmConfig, name, SHARED) for name in ("graph", "feature_dim", "repeats", "dtype")],
        (SpmmOptions, "graph", SpmmConfig, "search_graph", SHARED),
        *[(SpmmOptions, name, SpmmConfig, name, SHARED) for name in ("feature_dim", "repeats", "dtype")],
    ],
    "he": [
        *[
            (HEGcnArgs, name, HeConfig, name, SHARED)
            for name in ("dataset", "budget", "distill", "feature_distill", "poly_init", "epochs", "teacher_epochs", "scale_bits", "seed")
        ],
        *[(LinGcnOptions, name, HeConfig, name, SHARED) for name in ("dataset", "hidden", "teacher_epochs", "scale_bits", "seed")],
        (LinGcnOptions, "epochs", HeConfig, "search_epochs", SHARED),
    ],
    "prune": [
        *[(PruneArgs, name, PruneConfig, name, SHARED) for name in ("model", "sparsity", "pattern", "score", "calib_tokens", "seed")],
        *[(m, "score", PruneConfig, "score", SHARED) for m in (PruneOptions, DeployLmOptions)],
        *[(m, "calib_tokens", PruneConfig, "calib_tokens", SHARED) for m in (PruneOptions, DeployLmOptions)],
        *[(m, "calib_seed", PruneConfig, "seed", SHARED) for m in (PruneOptions, DeployLmOptions)],
        *[(m, "eval_batches", PruneConfig, "eval_batches", SHARED) for m in (PruneOptions, DeployLmOptions, LmBitsOptions)],
        (PruneOptions, "model", PruneConfig, "model", SHARED),
    ],
    "quant": [
        *[(QuantArgs, name, QuantConfig, name, SHARED) for name in ("model", "method", "finetune_epochs", "accuracy_drop_max", "seed")],
        (QuantArgs, "avg_bits", QuantConfig, "avg_bits", OWN),
        (QuantOptions, "model", QuantConfig, "model", SHARED),
        (QuantOptions, "finetune_epochs", QuantConfig, "search_finetune_epochs", SHARED),
        (QuantOptions, "seed", QuantConfig, "seed", SHARED),
        *[(m, "model", QuantConfig, "model", SHARED) for m in (DeployCnnOptions, SparsityOptions)],
    ],
    "reram": [
        *[
            (ReramArgs, name, ReramConfig, name, SHARED)
            for name in ("model", "sa0_sa1", "protection", "knowledge", "prune_method", "finetune_epochs", "fault_maps")
        ],
        *[(ReramArgs, name, ReramConfig, name, OWN) for name in ("fault_rate", "rows", "cols", "weight_bits", "bits_per_cell")],
        *[
            (ReramOptions, name, ReramConfig, name, SHARED)
            for name in ("model", "fault_rate", "sa0_sa1", "finetune_epochs", "prune_method")
        ],
        (ReramOptions, "fault_maps", ReramConfig, "search_fault_maps", SHARED),
        (ReramOptions, "knowledge", ReramConfig, "search_knowledge", SHARED),
    ],
    "stepping": [
        *[
            (m, name, SteppingConfig, name, SHARED)
            for m in (SteppingBuildArgs, SteppingRunArgs)
            for name in ("model", "seed", "distill", "assign")
        ],
        (SteppingOptions, "model", SteppingConfig, "model", SHARED),
        (SteppingOptions, "epochs", SteppingConfig, "search_epochs", SHARED),
        (SteppingOptions, "seed", SteppingConfig, "seed", SHARED),
    ],
}

# (function or class, its keyword, the family's defaults instance, the field it must default to)
SIMULATORS: dict[str, list[tuple[Callable[..., Any], str, Any, str]]] = {
    "noc": [
        *[
            (simulate_benes, p, NOC, f)
            for p, f in [
                ("n_ports", "n_ports"),
                ("routing", "routing"),
                ("load", "load"),
                ("packet_flits", "benes_packet_flits"),
                ("traffic", "traffic"),
                ("injection", "injection"),
                ("setup_cycles", "setup_cycles"),
                ("ack_cycles", "ack_cycles"),
                ("hold_cycles", "hold_cycles"),
                ("cycles", "benes_cycles"),
                ("seed", "seed"),
            ]
        ],
        *[
            (fn, p, NOC, p)
            for fn in (zero_load_delay, bit_blocking_model, mean_link_utilisation_model)
            for p in ("setup_cycles", "ack_cycles")
        ],
        *[(BenesConfig, p, NOC, p) for p in ("setup_cycles", "ack_cycles", "hold_cycles")],
        *[
            (simulate_mesh, p, NOC, f)
            for p, f in [
                ("k", "k"),
                ("routing", "mesh_routing"),
                ("load", "load"),
                ("gt_share", "gt_share"),
                ("traffic", "traffic"),
                ("subchannels", "subchannels"),
                ("packet_flits", "mesh_packet_flits"),
                ("gt_width", "gt_width"),
                ("gt_hold", "gt_hold"),
                ("gt_fill", "gt_fill"),
                ("cycles", "cycles"),
                ("seed", "seed"),
                ("scouts", "scouts"),
                ("alpha", "alpha"),
                ("detour", "detour"),
                ("ksp", "ksp"),
                ("forage_period", "forage_period"),
                ("half_life", "half_life"),
            ]
        ],
        *[(MeshSim, p, NOC, p) for p in ("scouts", "alpha", "detour", "gt_fill", "ksp", "forage_period", "half_life")],
        (MeshSim, "packet_flits", NOC, "mesh_packet_flits"),
    ],
    "pipeline": [
        (profile, "resolution", PIPELINE, "resolution"),
        (profile, "microbatch", PIPELINE, "microbatch"),
        (profile, "dtype_bytes", PIPELINE, "dtype_bytes"),
        (tune, "resolution", PIPELINE, "resolution"),
        (tune, "microbatches", PIPELINE, "tune_microbatches"),
        (tune, "balance", PIPELINE, "balance"),
        (simulate, "recompute", PIPELINE, "recompute"),
        (simulate, "data_parallel", PIPELINE, "data_parallel"),
        (synthesize, "memory", PIPELINE, "ilp_memory"),
        (synthesize, "split_backward", PIPELINE, "ilp_split_backward"),
        (synthesize, "time_limit_s", PIPELINE, "synthesize_time_limit_s"),
    ],
    "accel": [
        *[(map_layer, p, ACCEL, p) for p in ("ifmap_kb", "filter_kb", "ofmap_kb")],
        (compress, "model", ACCEL, "model"),
        (compress, "accuracy_drop_max", ACCEL, "accuracy_drop_max"),
        (compress, "seed", ACCEL, "seed"),
        (compressor, "model", ACCEL, "model"),
        (compressor, "seed", ACCEL, "seed"),
        *[
            (Compressor, p, ACCEL, f)
            for p, f in [
                ("model", "model"),
                ("seed", "seed"),
                ("qat_epochs", "qat_epochs"),
                ("rows", "compress_rows"),
                ("cols", "compress_cols"),
                ("batch", "batch"),
                ("buffer_kb", "compress_buffer_kb"),
                ("energy_samples", "energy_samples"),
                ("positions", "positions"),
            ]
        ],
    ],
    "attention": [
        *[(SparseConfig, p, ATTENTION, p) for p in ("method", "top_k", "key_bits", "window", "n_global")],
        *[
            (evaluate_sparse, p, ATTENTION, p)
            for p in ("model", "method", "top_k", "key_bits", "window", "n_global", "split", "max_batches")
        ],
        *[(evaluate_sparse_model, p, ATTENTION, p) for p in ("split", "max_batches")],
        *[(AttentionConfig, p, ATTENTION, p) for p in ("top_k", "key_bits", "window", "n_global")],  # the FPGA model's cost of it
    ],
    "fpga": [(Accelerator, p, FpgaConfig(), p) for p in ("lanes", "tile_m", "tile_n", "tile_k", "reconfig_cycles", "change_rule")],
    "freeze": [
        (FreezeConfig, p, FreezeFamilyConfig(), p)
        for p in ("method", "schedule", "criterion", "augment", "codec", "bits", "quality", "share", "versions", "max_frozen", "seed")
    ],
    "spmm": [(benchmark, "repeats", SpmmConfig(), "repeats")],
    "he": [
        *[
            (Recipe, p, HeConfig(), p)
            for p in ("dataset", "budget", "distill", "feature_distill", "poly_init", "epochs", "teacher_epochs", "seed")
        ],
        *[(fn, "scale_bits", HeConfig(), "scale_bits") for fn in (params_for_depth, encrypted_forward, he_gcn)],
    ],
    "prune": [(prune_zoo, p, PruneConfig(), p) for p in ("pattern", "score", "calib_tokens", "seed")],
    "quant": [
        *[(quantize, p, QuantConfig(), p) for p in ("method", "finetune_epochs", "seed")],
        *[(greedy_search, p, QuantConfig(), p) for p in ("finetune_epochs", "seed")],
        (greedy_search, "max_drop", QuantConfig(), "accuracy_drop_max"),
    ],
    "reram": [(CrossbarConfig, p, ReramConfig(), p) for p in ("rows", "cols", "weight_bits", "bits_per_cell")],
    "stepping": [(build_stepping, p, SteppingConfig(), p) for p in ("seed", "distill", "assign")],
    "gnn": [
        (GnnModelConfig, "hidden", GNN, "hidden"),
        (GnnModelConfig, "layers", GNN, "layers"),
        (GnnModelConfig, "k", GNN, "dynamic_relu_k"),
        (GnnModelConfig, "concurrency", GNN, "concurrency"),
        (train_eval, "lr", GNN, "lr"),
        (build, "seed", GNN, "seed"),
    ],
    "zoqat": [
        *[(zo_qat, p, ZOQAT, p) for p in ("w_bits", "a_bits", "method", "steps", "eps", "seed", "train_weights", "smooth_alpha")],
        *[
            (Spec, p, ZOQAT, f)
            for p, f in [
                ("model", "model"),
                ("w_bits", "w_bits"),
                ("a_bits", "a_bits"),
                ("method", "method"),
                ("steps", "steps"),
                ("lr", "spec_lr"),
                ("eps", "eps"),
                ("seed", "seed"),
                ("batch_size", "batch_size"),
                ("train_weights", "train_weights"),
                ("eval_batches", "eval_batches"),
                ("rank", "rank"),
                ("probes", "probes"),
                ("refresh", "refresh"),
                ("smooth_alpha", "smooth_alpha"),
            ]
        ],
    ],
}


def _config_field(config: type, name: str) -> dataclasses.Field[Any]:
    return {f.name: f for f in dataclasses.fields(config)}[name]


def _bounds(model: type[BaseModel], name: str) -> dict[str, Any]:
    return {BOUNDS[type(m)]: getattr(m, BOUNDS[type(m)]) for m in model.model_fields[name].metadata if type(m) in BOUNDS}


@pytest.mark.parametrize("family", sorted(ADAPTERS))
def test_tool_and_problem_defaults_are_the_family_configuration(family: str) -> None:
    for model, name, config, field, bounds in ADAPTERS[family]:
        declared = _config_field(config, field)
        where = f"{model.__name__}.{name} vs {config.__name__}.{field}"
        assert model.model_fields[name].default == declared.default, where
        if isinstance(bounds, dict):
            expected = bounds
        else:
            expected = {k: declared.metadata[k] for k in BOUNDS.values() if k in declared.metadata} if bounds == SHARED else {}
        assert _bounds(model, name) == expected, where


@pytest.mark.parametrize("family", sorted(SIMULATORS))
def test_simulator_keyword_defaults_are_the_family_configuration(family: str) -> None:
    for fn, param, defaults, field in SIMULATORS[family]:
        target = fn.__init__ if inspect.isclass(fn) and not dataclasses.is_dataclass(fn) else fn
        got = inspect.signature(target).parameters[param].default
        assert got == getattr(defaults, field), f"{fn.__name__}({param}=) vs {type(defaults).__name__}.{field}"


@pytest.mark.parametrize(
    "defaults",
    [
        *(NOC, PIPELINE, ACCEL, ATTENTION, GNN, ZOQAT),
        *(FpgaConfig(), FreezeFamilyConfig(), SpmmConfig(), HeConfig(), PruneConfig(), QuantConfig(), ReramConfig(), SteppingConfig()),
    ],
    ids=lambda d: type(d).__name__,
)
def test_each_default_lies_within_its_declared_bounds(defaults: Any) -> None:
    """A family's own defaults satisfy the bounds it declares (a bad edit of one or the other fails here)."""
    checks = {"ge": lambda v, b: v >= b, "gt": lambda v, b: v > b, "le": lambda v, b: v <= b, "lt": lambda v, b: v < b}
    for f in dataclasses.fields(defaults):
        value = getattr(defaults, f.name)
        assert f.metadata.get("help"), f"{type(defaults).__name__}.{f.name} has no help"
        for key, ok in checks.items():
            if key in f.metadata and value is not None:
                assert ok(value, f.metadata[key]), f"{type(defaults).__name__}.{f.name}={value} breaks {key}={f.metadata[key]}"


def test_an_adapter_refuses_what_its_family_bounds_refuse() -> None:
    """The bounds travel with the default: one past a declared limit fails in the tool and in the problem alike."""
    k_max = _config_field(NocFamilyConfig, "k").metadata["le"]
    with pytest.raises(ValueError, match="less than or equal to"):
        NocOptions(k=k_max + 1)
    resolution_max = _config_field(PipelineConfig, "resolution").metadata["le"]
    for model in (ProfileArgs, PipelineOptions):
        with pytest.raises(ValueError, match="less than or equal to"):
            model(resolution=resolution_max + 1)
    drop_max = _config_field(AccelConfig, "accuracy_drop_max").metadata["le"]
    with pytest.raises(ValueError, match="less than or equal to"):
        CompressArgs(accuracy_drop_max=drop_max + 1)


def test_renamed_options_still_read_their_old_names() -> None:
    """Studies made before coevo 0.2 stored ``seed``; the pipeline tools take ``batch`` for ``microbatch``."""
    assert NocOptions(seed=3).traffic_seed == 3
    assert CompressOptions(seed=2).train_seed == 2
    assert SimulateArgs(batch=4).microbatch == 4


def test_a_protection_part_named_takes_the_reram_configuration_settings() -> None:
    """``Protection.parse`` gives a named part ReramConfig's settings, and the tool's help quotes the same values."""
    cfg = ReramConfig()
    got = Protection.parse("prune+msb+spare", knowledge="known")
    for name in ("prune_rows", "prune_cols", "msb", "spare_rows", "spare_cols"):
        assert getattr(got, name) == getattr(cfg, name), name
        assert f"(default {getattr(cfg, name):g})" in str(ReramArgs.model_fields[name].description), name


def test_the_fpga_problems_pe_range_is_the_device_table_and_key_bits_the_int8_lanes() -> None:
    """One PE past the largest offered board is refused by both problems; the tool's key bits stop at the int8 lane."""
    assert DEVICES["alveo-u280"].max_pes(Accelerator.lanes) == PES_MAX
    for model in (FpgaOptions, DeployLmOptions):
        with pytest.raises(ValueError, match="less than or equal to"):
            model(pes=PES_MAX + 1)
    with pytest.raises(ValueError, match="less than or equal to"):
        LengthAwareArgs(key_bits=KEY_BITS_MAX + 1)
    assert AttentionConfig() == AttentionConfig("dense", *(getattr(ATTENTION, f) for f in ("top_k", "key_bits", "window", "n_global")))
