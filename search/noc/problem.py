"""Mesh NoC design as a coevo problem: maximise GT acceptance, minimise sub-channels per link.

A point is a design of a ``k x k`` SDM mesh (:mod:`sim.noc.mesh`): sub-channels per link
(wires, hence area and power) and the routing of guaranteed-bandwidth requests (XY,
minimal adaptive, widest-shortest, k-shortest, or distributed bee foraging with its scout
count, recruitment exponent and detour probability). The workload is fixed by the problem's options (traffic pattern, offered
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
from typing import Annotated, Any, ClassVar, Literal, NamedTuple, cast

import numpy as np
import optuna
from pydantic import AliasChoices, Field

from coevo.search.errors import UserInputError
from coevo.search.niches import Niche
from coevo.search.problem import Evolvable, Objective, Problem, ProblemOptions, config_field, read_key_values
from coevo.sim.noc.config import NocFamilyConfig
from coevo.sim.noc.mesh import ROUTINGS, simulate_mesh

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


def subchannel_niches() -> tuple[Niche, ...]:
    """Mesh designs by sub-channels per link: cheap thin links to wide, costly ones."""

    def sc(point: Any) -> int:
        return int(point[0])

    return (
        Niche("s1-2", "thin links: 1-2 sub-channels per link (least wiring; routing must work hardest)", lambda d: sc(d) <= 2),
        Niche("s3-4", "3-4 sub-channels per link", lambda d: 3 <= sc(d) <= 4),
        Niche("s6-8", "wide links: 6-8 sub-channels per link (most wiring)", lambda d: sc(d) >= 6),
    )


class NocOptions(ProblemOptions):
    """Options of the ``noc`` problem (the workload every design is simulated under)."""

    topology: Literal["mesh"] = Field(
        "mesh", description="mesh: the designs searched (compare the Benes NoC's two routings with the noc.plot tool)"
    )
    k: int = config_field(NocFamilyConfig, "k")
    traffic: Literal["uniform", "transpose", "tornado", "hotspot"] = config_field(NocFamilyConfig, "search_traffic")
    load: float = config_field(NocFamilyConfig, "load", description="offered load, a fraction of a 4-sub-channel link")
    gt_share: float = config_field(NocFamilyConfig, "search_gt_share")
    cycles: int = config_field(NocFamilyConfig, "search_cycles")
    traffic_seed: Annotated[int, Field(validation_alias=AliasChoices("traffic_seed", "seed"))] = config_field(
        NocFamilyConfig,
        "seed",
        description="seed of the simulated traffic",
    )  # "seed" in studies made before coevo 0.2


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
    Options = NocOptions
    run_group = "traffic"
    example_options: ClassVar[Mapping[str, Any]] = {"k": 4, "cycles": 600}
    design_label = "design"
    objectives = (
        Objective("gt_acceptance", "maximize", "share", "expensive", bounds=(0.0, 1.0)),
        Objective("subchannels", "minimize", "sub-channels/link", "cheap", depends_on=()),
    )
    design_format = (
        f"key=value pairs: subchannels=({'|'.join(map(str, SUBCHANNELS))}) routing=({'|'.join(ROUTINGS)}) "
        f"scouts=({'|'.join(map(str, SCOUTS))}) alpha=({'|'.join(f'{a:g}' for a in ALPHAS)}) "
        f"detour=({'|'.join(f'{d:g}' for d in DETOURS)}); scouts, alpha and detour only matter for bee-qos"
    )

    def __init__(self, options: NocOptions | None = None, /, **values: Any) -> None:
        super().__init__(options, **values)
        o = self.options
        self.k, self.traffic, self.load, self.gt_share, self.cycles, self.seed = (
            o.k,
            o.traffic,
            o.load,
            o.gt_share,
            o.cycles,
            o.traffic_seed,
        )
        self._cache: dict[MeshDesign, dict[str, float]] = {}

    def niches(self) -> tuple[Niche, ...]:
        return subchannel_niches()

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
            acceptance = r.stats.gt_acceptance
            self._cache[d] = {"gt_acceptance": float(acceptance) if acceptance == acceptance else 1.0, "subchannels": float(d.subchannels)}
        return dict(self._cache[d])

    def acquisition_bounds(self) -> tuple[float, float]:
        return 0.0, float(max(SUBCHANNELS)) + 1.0

    # ---- operators for the co-evolution engine (Evolvable)

    def neighbours(self, point: Any) -> list[MeshDesign]:
        d = canonical(MeshDesign(*point))
        # canonical designs only: a bee parameter changed under XY routing is the same design, not a neighbour
        out = {
            canonical(d._replace(**{f: v})): None for f, choices in zip(MeshDesign._fields, self._choices(), strict=True) for v in choices
        }
        out.pop(d, None)
        return list(out)

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
