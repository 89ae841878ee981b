"""SteppingNet: nested subnets at rising MAC budgets, where a larger subnet reuses the smaller one's activations.

>>> from coevo.sim.stepping import build, StepRunner
>>> built = build("cnn-digits", [0.25, 0.5, 0.75, 1.0], epochs=10)      # doctest: +SKIP
>>> runner = StepRunner(built.net)                                       # doctest: +SKIP
>>> runner.start(x).labels; runner.step_up().labels                      # doctest: +SKIP

Each layer's units are split into step groups; group ``g`` reads only groups ``0..g`` of the
layer below, so stepping up computes only the new group's units (the MACs executed equal
``MAC(s + 1) - MAC(s)``). Baselines at the same MACs: a slimmable net (shared weights,
switchable BatchNorm) and independently trained dense nets. Units are put in step groups by
importance while training (SteppingNet's rule, ``assign="importance"``) or by a fixed index
partition (``assign="index"``, the ablation). See docs/stepping.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coevo.sim._lazy import lazy_exports

if TYPE_CHECKING:  # the names load on first use (sim/_lazy.py): listing problems or tools imports no torch
    from coevo.sim.stepping._assign import Reassignment, permute_units, rank_order, reassign, unit_importance
    from coevo.sim.stepping._build import KINDS, Assign, Built, Kind, build, stepping_root, zoo_setup
    from coevo.sim.stepping._nets import IndependentCNNs, SlimmableCNN, SteppingCNN, make_net, step_logits
    from coevo.sim.stepping._plan import Arch, StepPlan, check_fractions, dense_layer_macs, dense_macs, plan, step_up_macs, stepping_macs
    from coevo.sim.stepping._runner import Prediction, StepLatency, StepRunner, budget_step, measure_latency
    from coevo.sim.stepping._train import ASSIGNS, TrainConfig, accuracies, joint_loss, train

__all__ = [
    "ASSIGNS",
    "KINDS",
    "Arch",
    "Assign",
    "Built",
    "IndependentCNNs",
    "Kind",
    "Prediction",
    "Reassignment",
    "SlimmableCNN",
    "StepLatency",
    "StepPlan",
    "StepRunner",
    "SteppingCNN",
    "TrainConfig",
    "accuracies",
    "budget_step",
    "build",
    "check_fractions",
    "dense_layer_macs",
    "dense_macs",
    "joint_loss",
    "make_net",
    "measure_latency",
    "permute_units",
    "plan",
    "rank_order",
    "reassign",
    "step_logits",
    "step_up_macs",
    "stepping_macs",
    "stepping_root",
    "train",
    "unit_importance",
    "zoo_setup",
]

__getattr__ = lazy_exports(__name__, __file__)
