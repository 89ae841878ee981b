"""NB201 x HW-NAS-Bench as a coevo problem: maximise test accuracy, minimise latency.

Options: the dataset (accuracy), the device (latency) and the mode (``query``: accuracy is
paid for from the table; ``few-shot``: a few paid accuracies train a predictor on zero-cost
proxies, see :mod:`search.nb201.few_shot_problem`; ``zero-cost``: estimated by zero-cost
proxies, see :mod:`search.nb201.zero_cost_problem`). Niches: PEL-NAS's complexity bands.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import optuna
from pydantic import Field, field_validator

from coevo.search.errors import UserInputError
from coevo.search.metrics import FrontReference
from coevo.search.nb201.proxy_table import DEFAULT_CONFIG, FreeProxies, ProxyConfig, free_proxies
from coevo.search.nb201.space import (
    EDGES,
    N_OPS,
    OPS,
    Cell,
    crossover,
    format_arch,
    mutations,
    parse_arch,
    random_cell,
)
from coevo.search.nb201.table import USEFUL_FLOOR, Dataset, NB201Table, load_table
from coevo.search.niches import Niche
from coevo.search.plugins import load_reference
from coevo.search.problem import Evolvable, Objective, Predictable, Problem, ProblemContext, ProblemOptions

PARAM_NAMES: tuple[str, ...] = tuple(f"edge_{src}_{dst}" for src, dst in EDGES)
"""Optuna parameter names, one per edge (``edge_<source>_<target>``)."""

MODES: dict[str, str] = {
    "few-shot": "coevo.search.nb201.few_shot_problem:FewShotNB201",
    "zero-cost": "coevo.search.nb201.zero_cost_problem:ZeroCostNB201",
}
"""The classes of the modes other than ``query``, as ``module:Class`` references loaded when that mode is built.

They subclass :class:`NB201Problem`, so this module names them instead of importing them (an import
would be a circle), and a query-mode search never loads their proxy machinery (PyTorch) at all."""


_C3 = OPS.index("nor_conv_3x3")
_C1 = OPS.index("nor_conv_1x1")


def complexity_niches() -> tuple[Niche, ...]:
    """The six PEL-NAS niches of NB201 by the count of 3x3 (and 1x1) convolutions."""

    def c3(cell: Hashable) -> int:
        return sum(op == _C3 for op in cell)  # type: ignore[attr-defined]

    def c1(cell: Hashable) -> int:
        return sum(op == _C1 for op in cell)  # type: ignore[attr-defined]

    return (
        Niche("conv0", "no convolution at all (only none / skip / avg-pool): the fastest cells", lambda c: c3(c) == 0 and c1(c) == 0),
        Niche("c1x1", "no 3x3 convolution, at least one 1x1 convolution", lambda c: c3(c) == 0 and c1(c) >= 1),
        Niche("c3x3_1", "exactly one 3x3 convolution", lambda c: c3(c) == 1),
        Niche("c3x3_2", "exactly two 3x3 convolutions", lambda c: c3(c) == 2),
        Niche("c3x3_3", "exactly three 3x3 convolutions", lambda c: c3(c) == 3),
        Niche("c3x3_4p", "four or more 3x3 convolutions: the most accurate, slowest cells", lambda c: c3(c) >= 4),
    )


class NB201Options(ProblemOptions):
    """Options of the ``nb201`` problem."""

    dataset: Dataset = Field("cifar10", description="dataset of the test accuracy")
    device: str = Field("fpga", description="latency device: a column of the table (fpga, raspi4, pixel3, eyeriss, 1080ti_1, ...)")
    mode: Literal["query", "few-shot", "zero-cost"] = Field(
        "query",
        description="query: accuracy is paid for from the table; few-shot: the budget's queries train a predictor on zero-cost "
        "proxies that scores the rest; zero-cost: estimated by zero-cost proxies, never read",
    )

    @field_validator("device")
    @classmethod
    def _known_device(cls, device: str) -> str:
        devices = load_table().devices
        if device not in devices:
            raise ValueError(f"unknown device {device!r}; valid devices: {', '.join(sorted(devices))}")
        return device


class NB201Problem(Problem, Evolvable, Predictable):
    """NAS-Bench-201 cells on one dataset and one device.

    Points are cells (tuples of 6 op codes); the point id is the NAS-Bench-201 index.
    Accuracy is the expensive objective (it stands for training); latency is a free lookup,
    and so are the zero-cost proxies of the cells of the shipped proxy table
    (:class:`search.nb201.proxy_table.FreeProxies`): the search's predictor reads them in
    every mode, and never computes one for a cell the table lacks.

    Example:
        >>> p = NB201Problem(dataset="cifar10", device="fpga")
        >>> cell = p.parse_design("|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|")
        >>> p.evaluate(cell)
        {'accuracy': 94.3633, 'latency_ms': 7.42096}
    """

    name = "nb201"
    Options = NB201Options
    run_group = "device"
    design_label = "arch"
    design_format = (
        "NB201 arch string |OP~0|+|OP~0|OP~1|+|OP~0|OP~1|OP~2| giving the op on each edge into nodes 1, 2 and 3, "
        "OP one of " + ", ".join(OPS)
    )
    objectives = (
        Objective("accuracy", "maximize", "%", "expensive", depends_on=("dataset",), bounds=(0.0, 100.0)),
        Objective("latency_ms", "minimize", "ms", "cheap", depends_on=("device",), bounds=(0.0, None)),
    )

    def explain_encoding(self) -> str:
        return (
            "A design is one NAS-Bench-201 cell, stacked to build the network (3 stages of 5 cells, with a residual "
            "down-sampling block between stages). The cell is a small graph of 4 nodes: node 0 is the cell's input, node 3 "
            "its output, and each node adds up what its incoming edges bring. Parameter edge_i_j is the operation on the edge "
            f"from node i to node j ({', '.join(PARAM_NAMES)}), one of: none (no connection), skip_connect (identity), "
            "nor_conv_1x1 and nor_conv_3x3 (ReLU, convolution, batch norm), avg_pool_3x3 (3x3 average pooling). "
            "The arch string lists the edges into node 1, then node 2, then node 3 (groups separated by +), each as "
            "op~i with i the source node, so the six slots of |a~0|+|b~0|c~1|+|d~0|e~1|f~2| hold the ops of edge_0_1 (a), "
            "edge_0_2 (b), edge_1_2 (c), edge_0_3 (d), edge_1_3 (e) and edge_2_3 (f). For example "
            "|nor_conv_3x3~0|+|none~0|skip_connect~1|+|... puts a 3x3 convolution on edge_0_1, no connection on edge_0_2 "
            "and an identity on edge_1_2."
        )

    def __init__(self, options: NB201Options | None = None, /, *, table: NB201Table | None = None, **values: Any) -> None:
        super().__init__(options, **values)
        if type(self) is NB201Problem and self.options.mode != "query":
            raise UserInputError(
                "NB201Problem runs mode='query'; build the others with make_problem('nb201', {'mode': 'few-shot'}) "
                "or make_problem('nb201', {'mode': 'zero-cost'})"
            )
        self.table = table or load_table()
        self.dataset: str = self.options.dataset
        self.device: str = self.options.device
        self._acc = self.table.acc(self.dataset)
        self._lat = self.table.lat(self.device)
        self._reference: FrontReference | None = None

    @classmethod
    def create(cls, options: Any, context: ProblemContext) -> NB201Problem:
        """The query-mode problem, or the class :data:`MODES` names for another mode (proxy scores cached in the context's storage)."""
        if options.mode in MODES:
            mode_class = load_reference(MODES[options.mode], what=f"nb201 mode {options.mode!r}")
            problem: NB201Problem = mode_class(options, storage=context.storage)
            return problem
        return cls(options)

    def spec(self) -> dict[str, Any]:
        # query-mode studies keep the spec they had before mode became an option (default study names unchanged)
        return {"problem": self.name, "dataset": self.dataset, "device": self.device}

    def niches(self) -> tuple[Niche, ...]:
        return complexity_niches()

    def distributions(self) -> dict[str, optuna.distributions.BaseDistribution]:
        return {name: optuna.distributions.CategoricalDistribution(OPS) for name in PARAM_NAMES}

    def from_params(self, params: Mapping[str, Any]) -> Cell:
        try:
            return tuple(OPS.index(params[name]) for name in PARAM_NAMES)
        except (KeyError, ValueError) as exc:
            raise UserInputError(
                f"NB201 params need {', '.join(PARAM_NAMES)} with ops from {', '.join(OPS)}; got {dict(params)!r}"
            ) from exc

    def to_params(self, point: Any) -> dict[str, Any]:
        return {name: OPS[c] for name, c in zip(PARAM_NAMES, point, strict=True)}

    def parse_design(self, text: str) -> Cell:
        """Parse an arch string (raises ``UserInputError`` with the expected format)."""
        return parse_arch(text)

    def index(self, point: Cell) -> int:
        """NAS-Bench-201 index of a cell."""
        return self.table.index_of(point)

    def point_id(self, point: Any) -> str:
        return str(self.table.index_of(point))

    def describe(self, point: Any) -> str:
        return format_arch(point)

    def evaluate(self, point: Any) -> dict[str, float]:
        i = self.table.index_of(point)
        return {"accuracy": float(self._acc[i]), "latency_ms": float(self._lat[i])}

    def acquisition_bounds(self) -> tuple[float, float]:
        # the useful-region floor is a constant of the dataset; latency is a free lookup
        return self.floor, float(self._lat.max())

    @property
    def floor(self) -> float:
        """Accuracy floor (%) of the useful region for this dataset."""
        return USEFUL_FLOOR[self.dataset]

    def reference(self) -> FrontReference:
        if self._reference is None:
            self._reference = FrontReference.from_space(self._acc, self._lat, self.floor)
        return self._reference

    # ---- operators for the co-evolution engine (Evolvable)

    def neighbours(self, point: Any) -> list[Cell]:
        return mutations(point)

    def crossover(self, a: Any, b: Any, rng: random.Random) -> Cell:
        return crossover(a, b, rng)

    def random_point(self, rng: random.Random) -> Cell:
        return random_cell(rng)

    def features(self, points: Sequence[Any]) -> np.ndarray:
        """One-hot op per edge (30), op counts (5) and a disconnected-cell flag (1)."""
        ops = np.asarray(points, dtype=np.int64).reshape(-1, len(EDGES))
        onehot = np.zeros((len(ops), len(EDGES) * N_OPS))
        for e in range(len(EDGES)):
            onehot[np.arange(len(ops)), e * N_OPS + ops[:, e]] = 1.0
        counts = np.stack([(ops == k).sum(axis=1) for k in range(N_OPS)], axis=1)
        disconnected = self.table.disconnected[self.table.rows(ops)].astype(float).reshape(-1, 1)
        return np.hstack([onehot, counts, disconnected])

    # ---- what is free about a cell besides its encoding (Predictable)

    proxy_config: ProxyConfig = DEFAULT_CONFIG
    """Proxy settings of the free proxies (the shipped table is read when it was made with them)."""

    def free_proxies(self) -> FreeProxies:
        """The shipped table's proxies of :attr:`proxy_config` (read once per process)."""
        return free_proxies(self.proxy_config)

    def prior(self, points: Sequence[Any]) -> np.ndarray:
        """Label-free estimate from the shipped table's proxies; NaN for cells it lacks (query mode computes none)."""
        return self.free_proxies().prior(list(points))

    def free_features(self, points: Sequence[Any]) -> np.ndarray:
        """Robust z of each feature proxy and the prior, from the shipped table; NaN rows for cells it lacks."""
        return self.free_proxies().features(list(points))

    def predictor_features(self, points: Sequence[Any]) -> np.ndarray:
        return self.free_features(points)

    def free_designs(self) -> list[Any] | None:
        """The shipped proxy table's cells (their proxies cost nothing)."""
        return self.free_proxies().cells() or None

    def free_description(self) -> str:
        """What is free besides the encoding, in one phrase (a result's information line)."""
        return self.free_proxies().describe()

    def cheap_values(self, points: Sequence[Any]) -> dict[str, np.ndarray]:
        return {"latency_ms": self._lat[self.table.rows(points)]}
