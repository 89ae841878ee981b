"""HE-friendly GCN linearization as a coevo problem: accuracy vs encrypted latency and multiplicative depth.

A design chooses, for a 2-layer GCN on a digits grid graph (:mod:`sim.he`): the share of nodes
that keep their ReLU in each layer (the rest use a trainable polynomial), the polynomial's
degree and initialisation, the degree of the Chebyshev polynomial that replaces a kept ReLU
under CKKS, and the distillation weight. Objectives:

* ``accuracy`` (maximised, expensive): validation accuracy (%) of the student trained briefly
  (``epochs``) and evaluated **with the ReLU approximation** the encrypted pass computes
  (val only; the test split is never read by the search).
* ``latency_s`` (minimised, cheap): predicted time of one encrypted pass: the op counts of the
  compiled network (from the design's structure: kept-node counts per layer, degrees; the kept
  nodes taken as the first ones, which changes the counts by a few boundary neighbours at most)
  times the per-op costs measured once per CKKS parameter set on this machine (cached beside
  the model cache). Not a timing per trial: identical designs get identical values.
* ``depth`` (minimised, cheap): exact multiplicative depth; the CKKS ring dimension follows from it.

Niches: how many layers keep any ReLU (0, 1, 2): each such layer adds levels.
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
from coevo.sim.he.model import Recipe, train
from coevo.sim.he.run import plan_of
from coevo.sim.zoo import cache_dir

CHOICES: dict[str, tuple[Any, ...]] = {
    "keep_l1": (0.0, 0.125, 0.25, 0.5, 0.75, 1.0),
    "keep_l2": (0.0, 0.125, 0.25, 0.5, 0.75, 1.0),
    "poly_degree": (2, 3, 4),
    "relu_degree": (3, 4, 6, 8),
    "distill": (0.0, 0.25, 0.5, 0.75, 1.0),
    "poly_init": ("relu-fit", "square"),
}
"""Each design parameter's ordered choices."""
PARAMS = tuple(CHOICES)
TABLE = {k: Levels(v) for k, v in CHOICES.items()}
Design = tuple[Any, ...]


class LinGcnOptions(ProblemOptions):
    """Options of the ``lingcn`` problem."""

    dataset: Literal["digits-grid", "digits-grid4"] = config_field(HeConfig, "dataset")
    hidden: int = config_field(HeConfig, "hidden", description="channels of each of the 2 graph convolutions")
    epochs: int = config_field(HeConfig, "search_epochs")
    teacher_epochs: int = config_field(HeConfig, "teacher_epochs")
    scale_bits: int = config_field(HeConfig, "scale_bits")
    seed: int = config_field(HeConfig, "seed")


@functools.cache
def _costs(n: int, bits: tuple[int, ...]) -> dict[str, float]:
    from coevo.sim.he.ckks import HEParams

    return cached_op_costs(HEParams(n, bits), cache_dir().parent / "he" / "op_costs.json")


class LinGcnProblem(LevelProblem):
    """Per-layer ReLU keep shares, polynomial and ReLU-approximation degrees, distillation (module doc)."""

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
        self._structures: dict[tuple[Any, ...], tuple[int, float]] = {}

    def _recipe(self, d: Design) -> Recipe:
        p = dict(zip(PARAMS, d, strict=True))
        o = self.options
        return Recipe(
            dataset=o.dataset, hidden=(o.hidden, o.hidden), keep=(p["keep_l1"], p["keep_l2"]), poly_degree=p["poly_degree"],
            poly_init=p["poly_init"], distill=p["distill"], epochs=o.epochs, teacher_epochs=o.teacher_epochs, seed=o.seed,
        )  # fmt: skip

    def _structure(self, d: Design) -> tuple[int, float]:
        """(depth, predicted pass seconds) from the design's structure alone (keep shares and degrees; 432 distinct)."""
        p = dict(zip(PARAMS, d, strict=True))
        key = (p["keep_l1"], p["keep_l2"], p["poly_degree"], p["relu_degree"])
        if key not in self._structures:
            self._structures[key] = self._count(p)
        return self._structures[key]

    def _count(self, p: dict[str, Any]) -> tuple[int, float]:
        data = _graph(self.options.dataset)
        n, h = data.adj.shape[0], self.options.hidden
        rng = np.random.default_rng(0)  # nonzero weights: every term of the fused combinations is present
        convs = [(rng.uniform(0.5, 1.0, (3, h)), np.zeros(h)), (rng.uniform(0.5, 1.0, (h, h)), np.zeros(h))]
        coef = np.ones((2, n, p["poly_degree"] + 1))
        mask = np.zeros((2, n))
        for layer, key in enumerate(("keep_l1", "keep_l2")):
            mask[layer, : round(p[key] * n)] = 1.0
        plan = compile_plan(
            data.adj, data.coords, convs, coef, mask, [1.0, 1.0], (np.ones((n * h, 10)), np.zeros(10)), "flatten", p["relu_degree"]
        )
        depth, counts, _ = depth_and_counts(plan)
        params = params_for_depth(depth, self.options.scale_bits)
        return depth, predict_seconds(counts, _costs(params.poly_modulus_degree, params.coeff_mod_bit_sizes), depth, params.levels)

    def niches(self) -> tuple[Niche, ...]:
        def layers(p: Any) -> int:
            return int(p[0] > 0) + int(p[1] > 0)

        return (
            Niche("no-relu", "no layer keeps a ReLU: the all-polynomial depth (CryptoGCN-style)", lambda p: layers(p) == 0),
            Niche("one-layer", "exactly one layer keeps ReLUs: its depth grows by the ReLU polynomial's levels", lambda p: layers(p) == 1),
            Niche("both-layers", "both layers keep ReLUs: the deepest designs", lambda p: layers(p) == 2),
        )

    def explain_encoding(self) -> str:
        return (
            f"A design sets a 2-layer GCN ({self.options.hidden} channels, {self.options.dataset}) for CKKS inference: keep_l1 and "
            "keep_l2 are the shares of nodes that keep their ReLU in layers 1 and 2 (the others use a trainable polynomial of "
            "degree poly_degree, initialised by a ReLU fit or as z^2 per poly_init); relu_degree is the degree of the Chebyshev "
            "polynomial that replaces a kept ReLU under encryption (ceil(log2 d) levels; more accuracy, more depth); distill "
            "weighs distillation from the all-ReLU teacher against cross-entropy. Any kept ReLU in a layer raises that layer's "
            f"depth; the depth sets the CKKS ring size and so the latency. Written as {self.design_format}."
        )

    def evaluate(self, point: Any) -> dict[str, float]:
        d = tuple(point)
        if d not in self._cache:
            trained = train(self._recipe(d))
            plan = plan_of(trained, d[PARAMS.index("relu_degree")])
            x, y = trained.data.x["val"], trained.data.y["val"]
            acc = float((plain_logits(plan, x).argmax(1) == y).mean() * 100.0)
            depth, latency = self._structure(d)
            self._cache[d] = {"accuracy": acc, "latency_s": latency, "depth": float(depth)}
        return dict(self._cache[d])

    def acquisition_bounds(self) -> tuple[float, float]:
        """Accuracy floor 50 % (well above the 10 % of chance; a problem constant), latency reference: all ReLUs, degree 8."""
        return 50.0, self._structure((1.0, 1.0, 4, 8, 0.0, "relu-fit"))[1] + 1e-9

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
