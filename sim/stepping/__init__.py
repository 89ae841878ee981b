"""SteppingNet: nested subnets at rising MAC budgets, where a larger subnet reuses the smaller one's activations.

>>> from coevo.sim.stepping import build, StepRunner
>>> built = build("cnn-digits", [0.25, 0.5, 0.75, 1.0], epochs=10)      # doctest: +SKIP
>>> runner = StepRunner(built.net)                                       # doctest: +SKIP
>>> runner.start(x).labels; runner.step_up().labels                      # doctest: +SKIP

Each layer's units are split into step groups; group ``g`` reads only groups ``0..g`` of the
layer below, so stepping up computes only the new group's units (the MACs executed equal
``MAC(s + 1) - MAC(s)``). Baselines at the same MACs: a slimmable net (shared weights,
switchable BatchNorm) and independently trained dense nets. See docs/stepping.md.
"""

from coevo.sim.stepping._build import KINDS, Built, Kind, build, stepping_root, zoo_setup
from coevo.sim.stepping._nets import IndependentCNNs, SlimmableCNN, SteppingCNN, make_net, step_logits
from coevo.sim.stepping._plan import Arch, StepPlan, check_fractions, dense_layer_macs, dense_macs, plan, step_up_macs, stepping_macs
from coevo.sim.stepping._runner import Prediction, StepLatency, StepRunner, budget_step, measure_latency
from coevo.sim.stepping._train import TrainConfig, accuracies, joint_loss, train

__all__ = [
    "KINDS",
    "Arch",
    "Built",
    "IndependentCNNs",
    "Kind",
    "Prediction",
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
    "plan",
    "step_logits",
    "step_up_macs",
    "stepping_macs",
    "stepping_root",
    "train",
    "zoo_setup",
]
