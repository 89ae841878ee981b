"""``nsga2-screened`` and ``smsemoa-screened``: pymoo's NSGA-II and SMS-EMOA with model-screened offspring.

Standard evolutionary baselines given exactly the free information and the same model the
co-evolution engine has, and none of its structure:

* encoding: each parameter of :meth:`Problem.distributions` as an integer, the index of its
  choice (categorical) or its value (integer); uniform crossover and random-reset mutation
  (each parameter redrawn with probability 1 / number of parameters), the operators of
  Optuna's NSGA-II for categorical parameters; pymoo's own selection and survival
  (NSGA-II: rank and crowding; SMS-EMOA: least hypervolume contribution);
* initial population: the latency-stratified design of ``mobo`` and ``qnehvi``
  (:func:`search.proposers._design.stratified_design`), ``round_size`` designs;
* every generation the algorithm (``ask``) breeds ``screen x round_size`` offspring; the
  extra-trees surrogate of the engine (:class:`search.surrogate.TreeSurrogate`) with its
  acquisition (greedy expected HV improvement, the cheap objective known:
  :func:`search.acquisition.greedy_ehvi`) picks ``round_size`` unseen ones to pay for, and
  only those go back to the algorithm (``tell``), with offspring that were evaluated before
  (their recorded values, at no cost). With fewer than :data:`MIN_PAID` paid evaluations
  there is no screening: the first ``round_size`` unseen offspring are paid for.

The algorithm lives in the proposer between rounds. A proposer that finds the study holding
evaluations it was not told of (a resumed study, a new process, another worker's round)
rebuilds the algorithm with every paid evaluation as its initial population, reduced to
``population`` by the algorithm's own survival.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import optuna

from coevo.search.acquisition import greedy_ehvi
from coevo.search.errors import UserInputError
from coevo.search.problem import Point, Problem
from coevo.search.proposers._base import Evaluation, Proposal, Proposer, RoundContext
from coevo.search.proposers._design import MIN_PAID, ROUND_SIZE, require_evolvable, stratified_design
from coevo.search.surrogate import TreeSurrogate

Algorithm = Literal["nsga2", "smsemoa"]
SCREEN = 10
"""Offspring bred per paid slot: the model screens ``SCREEN x round_size`` offspring down to a round."""
POPULATION = 20
"""The algorithm's population size (survivors kept from the paid evaluations)."""
MAX_ASKS = 5
"""Generations bred per round at most while fewer than ``round_size`` unseen offspring turned up (small spaces)."""


class _Encoding:
    """Design points <-> integer vectors, from a problem's Optuna distributions."""

    def __init__(self, problem: Problem, proposer: str) -> None:
        self.problem = problem
        self.values: dict[str, list[Any]] = {}
        for name, dist in problem.distributions().items():
            if isinstance(dist, optuna.distributions.CategoricalDistribution):
                self.values[name] = list(dist.choices)
            elif isinstance(dist, optuna.distributions.IntDistribution) and not dist.log:
                self.values[name] = list(range(dist.low, dist.high + 1, dist.step))
            else:
                raise UserInputError(
                    f"{proposer} needs categorical or linear integer parameters; {problem.name}'s {name!r} is {type(dist).__name__}"
                )
        self.upper = np.array([len(v) - 1 for v in self.values.values()])

    def encode(self, point: Point) -> np.ndarray:
        params = self.problem.to_params(point)
        return np.array([v.index(params[name]) for name, v in self.values.items()])

    def decode(self, row: np.ndarray) -> Point | None:
        """The point a row encodes, or None where the problem rejects the combination."""
        try:
            return self.problem.from_params({name: v[int(i)] for (name, v), i in zip(self.values.items(), row, strict=True)})
        except UserInputError:
            return None


class ScreenedEAProposer(Proposer):
    """A pymoo evolutionary algorithm whose offspring are screened by the engine's surrogate and acquisition.

    Args:
        algorithm: ``nsga2`` or ``smsemoa``.
        round_size: offspring paid for per generation (the engine's round, 20).
        screen: offspring bred per paid one (the algorithm breeds ``screen x round_size``).
        population: the algorithm's population size.

    Example:
        >>> from coevo.search.proposers import get_proposer
        >>> get_proposer("nsga2-screened", {"screen": 5}).options()
        {'round_size': 20, 'screen': 5, 'population': 20}
    """

    sees_cheap_objectives = True

    def __init__(self, algorithm: Algorithm, *, round_size: int = ROUND_SIZE, screen: int = SCREEN, population: int = POPULATION) -> None:
        self.name = f"{algorithm}-screened"
        if round_size < 1 or screen < 1 or population < 2:
            raise UserInputError(
                f"{self.name} needs round_size >= 1, screen >= 1 and population >= 2; got {round_size}, {screen}, {population}"
            )
        self.algorithm = algorithm
        self.round_size = round_size
        self.screen = screen
        self.population = population
        self._algo: Any = None
        self._lookup: Any = None
        self._told: set[str] = set()
        self._pending: dict[str, np.ndarray] = {}
        self._again: list[tuple[np.ndarray, Evaluation]] = []
        self._encoding: _Encoding | None = None

    def options(self) -> dict[str, Any]:
        return {"round_size": self.round_size, "screen": self.screen, "population": self.population}

    def sampler(self, problem: Problem, seed: int) -> optuna.samplers.BaseSampler:
        return optuna.samplers.RandomSampler(seed=seed)  # only for a trial with no proposal left

    def propose(self, ctx: RoundContext) -> list[Proposal]:
        problem = ctx.problem
        evolvable = require_evolvable(problem, self.name)
        if self._encoding is None or self._encoding.problem is not problem:
            self._encoding, self._algo, self._told, self._pending, self._again = _Encoding(problem, self.name), None, set(), {}, []
        rng = random.Random(ctx.seed * 100_003 + ctx.round)
        quota = min(self.round_size, ctx.remaining)
        if quota <= 0:
            return []
        paid = {e.point_id: e for e in ctx.evaluations if e.query}
        known = {e.point_id: e for e in ctx.evaluations}
        self._tell_last_round(paid, known)
        if self._algo is None or self._told != paid.keys():
            if not paid:
                rationale = "initial population, stratified by the cheap objective"
                return [Proposal(p, rationale=rationale) for p in stratified_design(problem, ctx.seen, rng, quota, 2000)]
            self._start(list(paid.values()), seed=ctx.seed)
            self._told = set(paid)
        offspring, again = self._breed(problem, known, quota)
        self._fill_random(evolvable, known, offspring, quota, rng)
        pids = list(offspring)
        picks = self._screen(evolvable, paid, [offspring[pid][0] for pid in pids], quota, rng)[: len(pids)]
        self._pending = {pids[i]: offspring[pids[i]][1] for i, _ in picks}
        self._again = list({tuple(x): (x, e) for x, e in again}.values())
        return [
            Proposal(offspring[pids[i]][0], rationale=why, attrs={"screened_from": len(pids), "generation": int(self._algo.n_gen)})
            for i, why in picks
        ]

    def _tell_last_round(self, paid: dict[str, Evaluation], known: dict[str, Evaluation]) -> None:
        """Tell the algorithm last round's offspring (paid, or evaluated before) as one generation."""
        if self._algo is not None and (self._pending or self._again):
            self._tell([(x, known[pid]) for pid, x in self._pending.items() if pid in known] + self._again)
            self._told |= self._pending.keys() & paid.keys()
        self._pending, self._again = {}, []

    def _breed(
        self, problem: Problem, known: dict[str, Evaluation], quota: int
    ) -> tuple[dict[str, tuple[Point, np.ndarray]], list[tuple[np.ndarray, Evaluation]]]:
        """Up to :data:`MAX_ASKS` generations of offspring: the unseen ones by id, and those evaluated before (told again)."""
        assert self._encoding is not None
        offspring: dict[str, tuple[Point, np.ndarray]] = {}
        again: list[tuple[np.ndarray, Evaluation]] = []
        for _ in range(MAX_ASKS):
            for x in self._algo.ask().get("X").astype(int):
                point = self._encoding.decode(x)
                if point is None:
                    continue
                pid = problem.point_id(point)
                if pid in known:
                    again.append((x, known[pid]))
                elif pid not in offspring:
                    offspring[pid] = (point, x)
            if len(offspring) >= quota:
                break
        return offspring, again

    def _fill_random(
        self,
        evolvable: Any,
        known: dict[str, Evaluation],
        offspring: dict[str, tuple[Point, np.ndarray]],
        quota: int,
        rng: random.Random,
    ) -> None:
        """A small space ran out of new offspring: random unseen designs fill the round (in place)."""
        assert self._encoding is not None
        for _ in range(quota * 20):
            if len(offspring) >= quota:
                break
            point = evolvable.random_point(rng)
            if evolvable.point_id(point) not in known:
                offspring.setdefault(evolvable.point_id(point), (point, self._encoding.encode(point)))

    def _screen(
        self, evolvable: Any, paid: dict[str, Evaluation], points: list[Point], quota: int, rng: random.Random
    ) -> list[tuple[int, str]]:
        """The offspring to pay for (index into ``points``, rationale): ranked by the surrogate once :data:`MIN_PAID` are paid."""
        if len(paid) < MIN_PAID:
            return [(i, f"offspring of generation {self._algo.n_gen}, unscreened (fewer than {MIN_PAID} paid)") for i in range(quota)]
        first = evolvable.front_objectives[0]
        evaluations = list(paid.values())
        y1 = np.array([e.values[first] for e in evaluations])
        features = evolvable.features([e.point for e in evaluations])
        model = TreeSurrogate(features, y1, bounds=evolvable.objectives[0].bounds, seed=rng.randrange(2**31))
        return [
            (i, f"offspring of generation {self._algo.n_gen} screened: expected HV gain {gain:.3g} (predicted {first} {mean:.4g})")
            for i, (mean, gain) in greedy_ehvi(evolvable, model, evaluations, points, quota)
        ]

    def _start(self, paid: Sequence[Evaluation], *, seed: int) -> None:
        """A new algorithm whose initial population is ``paid`` (survivors of it, when more than ``population``)."""
        from pymoo.algorithms.moo.nsga2 import NSGA2
        from pymoo.algorithms.moo.sms import SMSEMOA
        from pymoo.core.population import Population
        from pymoo.operators.crossover.ux import UniformCrossover

        assert self._encoding is not None
        self._lookup = _lookup_problem(self._encoding.upper)
        kind = NSGA2 if self.algorithm == "nsga2" else SMSEMOA
        x = np.stack([self._encoding.encode(e.point) for e in paid])
        self._algo = kind(
            pop_size=self.population,
            n_offsprings=self.screen * self.round_size,
            sampling=Population.new(X=x),
            crossover=UniformCrossover(),
            mutation=_random_reset(),
            eliminate_duplicates=True,
        )
        self._algo.setup(self._lookup, seed=seed, termination=("n_gen", 10**9), verbose=False)
        self._tell(list(zip(x, paid, strict=True)), initial=self._algo.ask())
        if len(self._algo.pop) > self.population:
            self._algo.pop = self._algo.survival.do(
                self._lookup, self._algo.pop, n_survive=self.population, algorithm=self._algo, random_state=self._algo.random_state
            )

    def _tell(self, results: Sequence[tuple[np.ndarray, Evaluation]], initial: Any = None) -> None:
        """Tell the algorithm the objectives of evaluated rows (as minimised values) through its own evaluator."""
        from pymoo.core.evaluator import Evaluator
        from pymoo.core.population import Population

        if not results:
            return
        first, second = self._encoding.problem.front_objectives if self._encoding else ("", "")
        for x, e in results:
            self._lookup.values[tuple(int(v) for v in x)] = (-e.values[first], e.values[second])
        pop = initial if initial is not None else Population.new(X=np.stack([x for x, _ in results]))
        Evaluator().eval(self._lookup, pop)
        self._algo.tell(infills=pop)


def _lookup_problem(upper: np.ndarray) -> Any:
    """A pymoo problem over integer vectors whose objectives are looked up from values the proposer set."""
    from pymoo.core.problem import Problem as PymooProblem

    class Lookup(PymooProblem):
        def __init__(self) -> None:
            super().__init__(n_var=len(upper), n_obj=2, xl=np.zeros(len(upper)), xu=upper, vtype=int)
            self.values: dict[tuple[int, ...], tuple[float, float]] = {}

        def _evaluate(self, x: np.ndarray, out: dict[str, Any], *args: Any, **kwargs: Any) -> None:
            out["F"] = np.array([self.values[tuple(int(v) for v in row)] for row in np.atleast_2d(x)], dtype=float)

    return Lookup()


def _random_reset() -> Any:
    """Random-reset mutation: each variable redrawn uniformly from its range with probability 1 / n_var."""
    from pymoo.core.mutation import Mutation

    class RandomReset(Mutation):
        def _do(self, problem: Any, X: np.ndarray, *args: Any, random_state: Any = None, **kwargs: Any) -> np.ndarray:
            X = np.array(X, dtype=int)
            redraw = random_state.random(X.shape) < 1.0 / problem.n_var
            fresh = random_state.integers(problem.xl.astype(int), problem.xu.astype(int) + 1, size=X.shape)
            return np.where(redraw, fresh, X)

    return RandomReset()
