"""Cycle-level model of an FPGA-style transformer accelerator and length-aware scheduling on it.

* :mod:`sim.fpga.model`: devices, engines (PE split, cores), tiles, DDR; the cost formulas.
* :mod:`sim.fpga.dag`: the per-layer task DAG of a batch, grouped as a scheduler processes it.
* :mod:`sim.fpga.alloc`: length-aware PE re-allocation (the split that balances a batch's length mix).
* :mod:`sim.fpga.sched`: pad-to-batch-max, bucketing, length-aware (upward rank), FIFO and re-allocated
  (``realloc``) list scheduling; the schedule checker; makespan, PE utilisation, padding waste.
* :mod:`sim.fpga.switch`: when ``realloc`` changes split over a stream (myopic, ski-rental break-even) and the
  hindsight optimum (Viterbi over the batches).
* :mod:`sim.fpga.cpsat`: the CP-SAT optimum on small instances (the bound).
* :mod:`sim.fpga.lengths`: sentence lengths of Python's pydoc topics, random batches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coevo.sim._lazy import lazy_exports

if TYPE_CHECKING:  # the names load on first use (sim/_lazy.py): listing problems or tools imports no torch
    from coevo.sim.fpga.alloc import Allocation, candidates, reallocate, tune_static
    from coevo.sim.fpga.cpsat import Optimum, cpsat_schedule
    from coevo.sim.fpga.dag import Task, build_tasks, check_lengths, group_cycles, useful_ops_total
    from coevo.sim.fpga.lengths import CORPORA, corpus_lengths, draw_batches, pydoc_sentences, resolve_lengths
    from coevo.sim.fpga.model import (
        CHANGE_RULE,
        CHANGE_RULES,
        DEVICES,
        ENGINES,
        MODELS,
        RECONFIG_CYCLES,
        Accelerator,
        AttentionConfig,
        Core,
        Device,
        TransformerShape,
        device,
        dfx_reconfig_cycles,
        engine_core,
        gemm_cycles,
        gemm_rows_cycles,
        model_shape,
        split_pes,
        tile_bytes,
        vector_cycles,
    )
    from coevo.sim.fpga.sched import (
        METHODS,
        InvalidScheduleError,
        Metrics,
        Schedule,
        check_schedule,
        compare_methods,
        groups_for,
        list_schedule,
        lower_bound,
        metrics,
        realloc_candidates,
        realloc_stream,
        reconfigured,
        schedule_batch,
        split_makespans,
        split_schedule,
        upward_ranks,
    )
    from coevo.sim.fpga.switch import BreakEven, amortized_path, hindsight_path, myopic_path, path_cycles

__all__ = [
    "CHANGE_RULE",
    "CHANGE_RULES",
    "CORPORA",
    "DEVICES",
    "ENGINES",
    "METHODS",
    "MODELS",
    "RECONFIG_CYCLES",
    "Accelerator",
    "Allocation",
    "AttentionConfig",
    "BreakEven",
    "Core",
    "Device",
    "InvalidScheduleError",
    "Metrics",
    "Optimum",
    "Schedule",
    "Task",
    "TransformerShape",
    "amortized_path",
    "build_tasks",
    "candidates",
    "check_lengths",
    "check_schedule",
    "compare_methods",
    "corpus_lengths",
    "cpsat_schedule",
    "device",
    "dfx_reconfig_cycles",
    "draw_batches",
    "engine_core",
    "gemm_cycles",
    "gemm_rows_cycles",
    "group_cycles",
    "groups_for",
    "hindsight_path",
    "list_schedule",
    "lower_bound",
    "metrics",
    "model_shape",
    "myopic_path",
    "path_cycles",
    "pydoc_sentences",
    "realloc_candidates",
    "realloc_stream",
    "reallocate",
    "reconfigured",
    "resolve_lengths",
    "schedule_batch",
    "split_makespans",
    "split_pes",
    "split_schedule",
    "tile_bytes",
    "tune_static",
    "upward_ranks",
    "useful_ops_total",
    "vector_cycles",
]

__getattr__ = lazy_exports(__name__, __file__)
