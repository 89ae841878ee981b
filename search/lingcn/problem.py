"""LinGCN structural linearization as a coevo problem: accuracy vs encrypted latency and multiplicative depth.

A design chooses, for a 2-block LinGCN on a digits grid graph (:mod:`sim.he`): the
linearization budget (the share of the 4 non-linear positions per node kept as trainable
degree-2 polynomials; the others become linear and fuse into the next linear operation), the
logit and feature distillation weights, and the polynomials' initialisation. Objectives:

* ``accuracy`` (maximised, expensive): validation accuracy (%) of the student trained briefly
  (``epochs``), computed by the compiled plan in float64 (what the encrypted pass computes;
  val only, the test split is never read by the search).
* ``latency_s`` (minimised, cheap): predicted time of one encrypted pass: the op counts of the
  compiled network built from the design's structure (the kept (block, rank) rows as hardening
  assigns them at equal indicators: rank 0 of each block first, every node keeping the same
  positions; a trained mask may keep other positions per node, which changes the counts a
  little but not the depth) times the per-op costs measured once per CKKS parameter set on
  this machine (cached beside the model cache). Not a timing per trial.
* ``depth`` (minimised, cheap): exact multiplicative depth, ``1 + 2 * kept rows``; the CKKS ring follows from it.

Niches: nothing kept (a linear network), partly linearized, all polynomial (the CryptoGCN-style baseline).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

import numpy as np

from coevo.search.niches import Niche
from coevo.search.problem import LevelProblem, Levels, Objective, ProblemOptions, config_field
from coevo.sim.he.ckks import cached_op_costs, compile_plan, depth_and_counts, params_for_depth, plain_logits, predict_seconds
from coevo.sim.he.config import HeConfig
from coevo.sim.he.data import load_dataset
from coevo.sim.he.recipe import Recipe
from coevo.sim.zoo.recipes import cache_dir

CHOICES: dict[str, tuple[Any, ...]] = {
    "budget": (0.0, 0.25, 0.5, 0.75, 1.0),
    "distill": (0.0, 0.25, 0.5, 0.75, 1.0),
    "feature_distill": (0.0, 0.5, 1.0, 2.0),
    "poly_init": ("relu-fit", "square"),
}
"""Each design parameter's ordered choices."""
PARAMS = tuple(CHOICES)
TABLE = {k: Levels(v) for k, v in CHOICES.items()}
Design = tuple[Any, ...]


class LinGcnOptions(ProblemOptions):
    """Options of the ``lingcn`` problem."""

    dataset: Literal["digits-grid", "digits-grid4", "digits-grid16"] = config_field(HeConfig, "dataset")
    hidden: int = config_field(HeConfig, "hidden", description="channels of each of the 2 blocks")
    epochs: int = config_field(HeConfig, "search_epochs")
    teacher_epochs: int = config_field(HeConfig, "teacher_epochs")
    scale_bits: int = config_field(HeConfig, "scale_bits")
    seed: int = config_field(HeConfig, "seed")


@functools.cache
def _costs(n: int, bits: tuple[int, ...]) -> dict[str, float]:
    from coevo.sim.he.ckks import HEParams

    return cached_op_costs(HEParams(n, bits), cache_dir().parent / "he" / "op_costs.json")


class LinGcnProblem(LevelProblem):
    """Linearization budget, logit and feature distillation, polynomial initialisation (module doc)."""

    name = "lingcn"
    Options = LinGcnOptions
    run_group = "dataset"
    design_label = "design"
    design_noun = "a lingcn design"
    levels = TABLE
    design_format = "key=value per parameter: " + " ".join(f"{k}=V" for k in PARAMS)
    example_options: ClassVar[Mapping[str, Any]] = {"dataset": "digits-grid4", "hidden": 2, "epochs": 2, "teacher_epochs": 3}
    objectives = (
        Objective("accuracy", "maximize", "%", "expensive", bounds=(0.0, 100.0)),
        Objective("latency_s", "minimize", "s", "cheap", depends_on=("dataset", "hidden", "scale_bits")),
        Objective("depth", "minimize", "levels", "cheap", depends_on=()),
    )

    def __init__(self, options: LinGcnOptions | None = None, /, **values: Any) -> None:
        super().__init__(options, **values)
        self._cache: dict[Design, dict[str, float]] = {}
        self._structures: dict[float, tuple[int, float]] = {}

    def _recipe(self, d: Design) -> Recipe:
        p = dict(zip(PARAMS, d, strict=True))
        o = self.options
        return Recipe(
            dataset=o.dataset, hidden=(o.hidden, o.hidden), budget=p["budget"], poly_init=p["poly_init"], distill=p["distill"],
            feature_distill=p["feature_distill"], epochs=o.epochs, teacher_epochs=o.teacher_epochs, seed=o.seed,
        )  # fmt: skip

    def _structure(self, d: Design) -> tuple[int, float]:
        """(depth, predicted pass seconds) from the design's structure alone (its budget: 5 distinct)."""
        budget = float(d[PARAMS.index("budget")])
        if budget not in self._structures:
            self._structures[budget] = self._count(budget)
        return self._structures[budget]

    def _count(self, budget: float) -> tuple[int, float]:
        import torch

        from coevo.sim.he.model import harden

        data = _graph(self.options.dataset)
        n, h = data.adj.shape[0], self.options.hidden
        rng = np.random.default_rng(0)  # nonzero weights: every term of the fused combinations is present
        linears = [
            (rng.uniform(0.5, 1.0, (3, h)), np.zeros(h), True),
            (rng.uniform(0.5, 1.0, (h, h)), np.zeros(h), False),
            (rng.uniform(0.5, 1.0, (h, h)), np.zeros(h), True),
            (rng.uniform(0.5, 1.0, (h, h)), np.zeros(h), False),
        ]
        rows = round(budget * 4)
        mask = harden(torch.ones(2, 2, n), rows).numpy().reshape(4, n)  # equal indicators: hardening's own tie order
        plan = compile_plan(
            data.adj, data.coords, linears, np.ones((4, n, 3)), mask, [1.0] * 4, (np.ones((n * h, 10)), np.zeros(10)), "flatten"
        )
        depth, counts, _ = depth_and_counts(plan)
        params = params_for_depth(depth, self.options.scale_bits)
        return depth, predict_seconds(counts, _costs(params.poly_modulus_degree, params.coeff_mod_bit_sizes), depth, params.levels)

    def niches(self) -> tuple[Niche, ...]:
        def budget(p: Any) -> float:
            return float(p[PARAMS.index("budget")])

        return (
            Niche("linear", "every non-linearity removed: a linear network of depth 1", lambda p: budget(p) == 0.0),
            Niche("partial", "some non-linearities removed: 2 levels fewer for each", lambda p: 0.0 < budget(p) < 1.0),
            Niche("all-poly", "every non-linearity a polynomial: the CryptoGCN-style baseline, the deepest", lambda p: budget(p) == 1.0),
        )

    def explain_encoding(self) -> str:
        return (
            f"A design sets a 2-block LinGCN ({self.options.hidden} channels, {self.options.dataset}) for CKKS inference: budget "
            "is the share of the 4 non-linear positions per node (2 per block: after the graph conv and after the node-wise "
            "linear) kept as trainable degree-2 polynomials, the others removed (the node is linear and fuses into the next "
            "linear operation); every node of a block keeps the same count, so each kept position adds 2 levels on every path. "
            "distill and feature_distill weigh logit and block-feature distillation from the all-ReLU teacher; poly_init "
            "starts the polynomials at a ReLU fit or at z^2. The depth sets the CKKS ring size and so the latency. "
            f"Written as {self.design_format}."
        )

    def evaluate(self, point: Any) -> dict[str, float]:
        d = tuple(point)
        if d not in self._cache:
            from coevo.sim.he.model import train
            from coevo.sim.he.run import plan_of

            trained = train(self._recipe(d))
            plan = plan_of(trained)
            x, y = trained.data.x["val"], trained.data.y["val"]
            acc = float((plain_logits(plan, x).argmax(1) == y).mean() * 100.0)
            depth, latency = self._structure(d)
            self._cache[d] = {"accuracy": acc, "latency_s": latency, "depth": float(depth)}
        return dict(self._cache[d])

    def acquisition_bounds(self) -> tuple[float, float]:
        """Accuracy floor 50 % (well above the 10 % of chance; a problem constant), latency reference: the all-polynomial baseline."""
        return 50.0, self._structure((1.0, 0.0, 0.0, "relu-fit"))[1] + 1e-9

    # ---- operators for the co-evolution engine (Evolvable)

    def features(self, points: Sequence[Any]) -> np.ndarray:
        """Choice index per parameter."""
        return np.array([[CHOICES[k].index(v) for k, v in zip(PARAMS, p, strict=True)] for p in points], dtype=float).reshape(
            len(points), len(PARAMS)
        )

    def cheap_values(self, points: Sequence[Any]) -> dict[str, np.ndarray]:
        s = [self._structure(tuple(p)) for p in points]
        return {"latency_s": np.array([v[1] for v in s], dtype=float), "depth": np.array([float(v[0]) for v in s], dtype=float)}


@functools.cache
def _graph(dataset: str) -> Any:
    return load_dataset(dataset)
