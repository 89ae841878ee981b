"""Mesh NoC design as a coevo problem: maximise GT acceptance, minimise sub-channels per link.

A point is a design of a ``k x k`` SDM mesh (:mod:`sim.noc.mesh`): sub-channels per link
(wires, hence area and power) and the routing of guaranteed-bandwidth requests (XY,
minimal adaptive, or bee-inspired QoS with its scout count, quality exponent and detour
probability). The workload is fixed by the problem's options (traffic pattern, offered
load as a fraction of a 4-sub-channel link, GT share), so designs with more sub-channels
see the same traffic with more room.

Objectives: ``gt_acceptance`` (maximised, expensive: one deterministic simulation per
design) and ``subchannels`` (minimised, cheap). The exact front is not known without
simulating every design, so :meth:`reference` is None and searches report their found
front without an HV ratio.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, cast

import numpy as np
import optuna

from search.errors import UserInputError
from search.problem import Evolvable, Objective, Problem, read_key_values
from sim.noc.mesh import ROUTINGS, TRAFFIC, simulate_mesh

SUBCHANNELS = (1, 2, 3, 4, 6, 8)
SCOUTS = (2, 4, 8, 16)
ALPHAS = (0.5, 1.0, 2.0, 4.0)
DETOURS = (0.0, 0.1, 0.3)
REFERENCE_CAPACITY = 4
"""Load 1.0 is 4 flits per node per cycle whatever the design's sub-channels."""


class MeshDesign(NamedTuple):
    """One mesh design (a point of the ``noc`` problem)."""

    subchannels: int
    routing: str
    scouts: int
    alpha: float
    detour: float


def canonical(d: MeshDesign) -> MeshDesign:
    """The design with the bee-qos parameters reset unless it routes by bee-qos (they change nothing else)."""
    return d if d.routing == "bee-qos" else d._replace(scouts=SCOUTS[0], alpha=ALPHAS[0], detour=DETOURS[0])


class NocProblem(Problem, Evolvable):
    """SDM mesh designs under a fixed workload (module doc).

    Example:
        >>> p = NocProblem(k=4, cycles=600)
        >>> d = p.parse_design("subchannels=2 routing=bee-qos scouts=4 alpha=2 detour=0.1")
        >>> p.describe(d)
        'subchannels=2 routing=bee-qos scouts=4 alpha=2 detour=0.1'
        >>> 0 <= p.evaluate(d)["gt_acceptance"] <= 1
        True
    """

    name = "noc"
    design_label = "design"
    objectives = (
        Objective("gt_acceptance", "maximize", "share", "expensive"),
        Objective("subchannels", "minimize", "sub-channels/link", "cheap"),
    )
    design_format = (
        f"key=value pairs: subchannels=({'|'.join(map(str, SUBCHANNELS))}) routing=({'|'.join(ROUTINGS)}) "
        f"scouts=({'|'.join(map(str, SCOUTS))}) alpha=({'|'.join(f'{a:g}' for a in ALPHAS)}) "
        f"detour=({'|'.join(f'{d:g}' for d in DETOURS)}); scouts, alpha and detour only matter for bee-qos"
    )

    def __init__(
        self,
        *,
        topology: str = "mesh",
        k: int = 8,
        traffic: str = "hotspot",
        load: float = 0.3,
        gt_share: float = 0.7,
        cycles: int = 3000,
        seed: int = 0,
    ) -> None:
        if topology != "mesh":
            raise UserInputError(
                f"the noc search problem designs meshes (--topology mesh); got {topology!r}. "
                "For the Benes NoC compare its two routings with the noc.plot tool"
            )
        if traffic not in TRAFFIC:
            raise UserInputError(f"unknown traffic {traffic!r}; choose from {', '.join(TRAFFIC)}")
        if not 2 <= k <= 16 or not 0 < load <= 1 or not 0 <= gt_share <= 1 or cycles < 100:
            raise UserInputError(
                f"need 2 <= k <= 16, 0 < load <= 1, 0 <= gt_share <= 1 and cycles >= 100; got {k}, {load}, {gt_share}, {cycles}"
            )
        self.k, self.traffic, self.load, self.gt_share, self.cycles, self.seed = (
            int(k),
            traffic,
            float(load),
            float(gt_share),
            int(cycles),
            int(seed),
        )
        self._cache: dict[MeshDesign, dict[str, float]] = {}

    def spec(self) -> dict[str, Any]:
        return {
            "problem": self.name,
            "topology": "mesh",
            "k": self.k,
            "traffic": self.traffic,
            "load": self.load,
            "gt_share": self.gt_share,
            "cycles": self.cycles,
            "seed": self.seed,
        }

    def _choices(self) -> tuple[tuple[Any, ...], ...]:
        return (SUBCHANNELS, ROUTINGS, SCOUTS, ALPHAS, DETOURS)

    def distributions(self) -> dict[str, optuna.distributions.BaseDistribution]:
        return {f: optuna.distributions.CategoricalDistribution(c) for f, c in zip(MeshDesign._fields, self._choices(), strict=True)}

    def from_params(self, params: Mapping[str, Any]) -> MeshDesign:
        try:
            design = MeshDesign(
                int(params["subchannels"]), str(params["routing"]), int(params["scouts"]), float(params["alpha"]), float(params["detour"])
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise UserInputError(f"noc params need {', '.join(MeshDesign._fields)}; got {dict(params)!r}") from exc
        for value, choices, label in zip(design, self._choices(), MeshDesign._fields, strict=True):
            if value not in choices:
                raise UserInputError(f"{label}={value} is outside the space; choose from {', '.join(map(str, choices))}")
        return canonical(design)

    def to_params(self, point: Any) -> dict[str, Any]:
        return dict(canonical(MeshDesign(*point))._asdict())

    def point_id(self, point: Any) -> str:
        d = canonical(MeshDesign(*point))
        return f"s{d.subchannels}-{d.routing}-n{d.scouts}-a{d.alpha:g}-d{d.detour:g}"

    def describe(self, point: Any) -> str:
        d = MeshDesign(*point)
        return f"subchannels={d.subchannels} routing={d.routing} scouts={d.scouts} alpha={d.alpha:g} detour={d.detour:g}"

    def parse_design(self, text: str) -> MeshDesign:
        """Read ``key=value`` pairs as :meth:`describe` writes them."""
        return cast(MeshDesign, read_key_values(self, text, "a mesh design")[0])  # from_params returns a MeshDesign

    def evaluate(self, point: Any) -> dict[str, float]:
        d = canonical(MeshDesign(*point))
        if d not in self._cache:
            r = simulate_mesh(
                self.k,
                routing=d.routing,
                load=self.load,
                gt_share=self.gt_share,
                traffic=self.traffic,
                subchannels=d.subchannels,
                cycles=self.cycles,
                seed=self.seed,
                scouts=d.scouts,
                alpha=d.alpha,
                detour=d.detour,
                capacity=REFERENCE_CAPACITY,
            )
            acceptance = r.extra["gt_acceptance"]
            self._cache[d] = {"gt_acceptance": float(acceptance) if acceptance == acceptance else 1.0, "subchannels": float(d.subchannels)}
        return dict(self._cache[d])

    def acquisition_bounds(self) -> tuple[float, float]:
        return 0.0, float(max(SUBCHANNELS)) + 1.0

    # ---- operators for the co-evolution engine (Evolvable)

    def neighbours(self, point: Any) -> list[MeshDesign]:
        d = MeshDesign(*point)
        return [
            d._replace(**{f: v})
            for f, choices in zip(MeshDesign._fields, self._choices(), strict=True)
            for v in choices
            if v != getattr(d, f)
        ]

    def crossover(self, a: Any, b: Any, rng: random.Random) -> MeshDesign:
        return canonical(MeshDesign(*(x if rng.random() < 0.5 else y for x, y in zip(a, b, strict=True))))

    def random_point(self, rng: random.Random) -> MeshDesign:
        return canonical(MeshDesign(*(rng.choice(c) for c in self._choices())))

    def features(self, points: Sequence[Any]) -> np.ndarray:
        """log2 sub-channels, one-hot routing, and the bee parameters (zeroed unless bee-qos)."""
        rows = []
        for point in points:
            d = MeshDesign(*point)
            bee = float(d.routing == "bee-qos")
            rows.append(
                [np.log2(d.subchannels)]
                + [float(d.routing == r) for r in ROUTINGS]
                + [bee * np.log2(d.scouts), bee * d.alpha, bee * d.detour]
            )
        return np.asarray(rows, dtype=float).reshape(len(rows), 4 + len(ROUTINGS))

    def cheap_values(self, points: Sequence[Any]) -> dict[str, np.ndarray]:
        return {"subchannels": np.array([float(MeshDesign(*p).subchannels) for p in points])}
