"""ReRAM crossbars with stuck-at faults, and protection schemes that cost no extra crossbars.

:mod:`sim.reram.crossbar`: crossbar geometry, quantization and bit-slicing, conductance
levels, stuck-at fault maps. :mod:`sim.reram.layer`: one layer's layout on crossbars
(differential pairs, column copies, MSB copies), spare-line repair, and inference read
bitline by bitline through a faulty map. :mod:`sim.reram.model`: a whole model, the
protection schemes (pruning, duplication with voting, MSB duplication, spare lines), the
crossbar budget, and a metric over many fault maps.

>>> from coevo.sim.reram import CrossbarConfig, Protection, plan_model
>>> cfg = CrossbarConfig(rows=64, cols=64, weight_bits=8, bits_per_cell=2)
>>> Protection.parse("prune+dup+msb").label
'prune(r0.1,c0.1)+dup+msb1'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coevo.sim._lazy import lazy_exports

if TYPE_CHECKING:  # the names load on first use (sim/_lazy.py): listing problems or tools imports no torch
    from coevo.sim.reram.crossbar import (
        OK,
        SA0,
        SA1,
        CrossbarConfig,
        check_rate,
        harmful,
        parse_ratio,
        quantize_magnitudes,
        sample_faults,
        slice_levels,
        stuck,
        unslice,
    )
    from coevo.sim.reram.layer import CrossbarLayer, FaultyLayer, LayerPlan, assign_duplicates, plan_layer, realise, repair_with_spares
    from coevo.sim.reram.model import (
        PRUNE_METHODS,
        SCHEME_PARTS,
        ModelPlan,
        Protection,
        Summary,
        apply_masks,
        check_budget,
        crossbars_needed,
        evaluate_under_faults,
        faulty_layers,
        faulty_model,
        layer_rng,
        layout_area,
        learn_masks,
        mapped_layers,
        plan_model,
        prepare,
        prune_masks,
        pruned_model,
        with_knowledge,
    )

__all__ = [
    "OK",
    "PRUNE_METHODS",
    "SA0",
    "SA1",
    "SCHEME_PARTS",
    "CrossbarConfig",
    "CrossbarLayer",
    "FaultyLayer",
    "LayerPlan",
    "ModelPlan",
    "Protection",
    "Summary",
    "apply_masks",
    "assign_duplicates",
    "check_budget",
    "check_rate",
    "crossbars_needed",
    "evaluate_under_faults",
    "faulty_layers",
    "faulty_model",
    "harmful",
    "layer_rng",
    "layout_area",
    "learn_masks",
    "mapped_layers",
    "parse_ratio",
    "plan_layer",
    "plan_model",
    "prepare",
    "prune_masks",
    "pruned_model",
    "quantize_magnitudes",
    "realise",
    "repair_with_spares",
    "sample_faults",
    "slice_levels",
    "stuck",
    "unslice",
    "with_knowledge",
]

__getattr__ = lazy_exports(__name__, __file__)
