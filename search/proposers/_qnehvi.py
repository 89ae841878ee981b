"""``qnehvi``: BoTorch multi-objective Bayesian optimisation (GP + qLogNEHVI) with the cheap objective known.

The standard GP baseline, given exactly the free information the co-evolution engine gets:

* initial design: the same latency-stratified design as ``mobo``
  (:func:`search.proposers._design.stratified_design`);
* model: a ``SingleTaskGP`` (BoTorch's defaults: RBF kernel with dimension-scaled
  lengthscale priors, standardised outcomes, fit by ``fit_gpytorch_mll``) of the first
  objective on :meth:`Evolvable.features`, scaled to [0, 1]; the second objective, known
  exactly for every candidate, is a ``GenericDeterministicModel`` reading it from an extra
  input column the GP's kernel ignores; both in one ``ModelList``;
* the first objective is modelled through the same target transform as the tree surrogate
  (:class:`search.surrogate.TopTransform`: -log of the distance to the top of its range,
  which keeps the ~10 % of NB201 cells at chance accuracy from dominating the fit), and the
  acquisition maps the samples back, so hypervolumes are in the objective's own unit;
* acquisition: ``qLogNoisyExpectedHypervolumeImprovement`` with the reference point of
  :meth:`Problem.acquisition_bounds` (never :meth:`Problem.reference`: that is built from the
  true front), the second objective given to it exactly through the MC objective (it reads the
  candidate's extra input column), maximised by ``optimize_acqf_discrete`` (sequential greedy,
  ``round_size`` per round) over the same candidates as ``mobo``
  (:func:`search.proposers._design.front_candidates`).

Cost control on a 2-core machine shared by two bench jobs (full BoTorch settings took about
10 minutes a run at 300 queries there): the sequential greedy batch, whose every step
evaluates the joint posterior of each choice with the baseline and the earlier picks, runs
over a shortlist (``shortlist``, default 100) of the candidates with the highest single-point
acquisition value (one batched evaluation of all of them); the MC sample count is 32; a GP
fit is capped at :data:`FIT_ITERATIONS` L-BFGS iterations, one attempt; the GP is trained on
at most ``max_train`` (160) paid points: the paid front, then the best first objective, the
region where the acquisition's improvements lie.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import optuna

from coevo.search.errors import UserInputError
from coevo.search.metrics import pareto_mask
from coevo.search.problem import Point, Problem
from coevo.search.proposers._base import Evaluation, Proposal, Proposer, RoundContext
from coevo.search.proposers._design import CANDIDATES, MIN_PAID, ROUND_SIZE, front_candidates, require_evolvable, round_start
from coevo.search.surrogate import TopTransform

FIT_ITERATIONS = 100
"""L-BFGS iterations of a GP fit (BoTorch's default is unbounded, with up to 5 restarts: minutes per
round on 2 cores at a few hundred points, for hyperparameters that move little after the first tens)."""

SINGLE_BATCH = 512
"""Candidates per batched single-point acquisition evaluation (memory, not results)."""


class QNEHVIProposer(Proposer):
    """GP + qLogNEHVI Bayesian optimisation (BoTorch) that sees the cheap objective of every candidate.

    Args:
        round_size: proposals per round (the engine's default, 20): the q of the batch.
        candidates: designs the acquisition is maximised over each round (as ``mobo``).
        shortlist: candidates with the best single-point acquisition that the q-batch is
            chosen from.
        mc_samples: quasi-MC samples of the acquisition.
        max_train: most paid points the GP is trained on.

    Example:
        >>> from coevo.search.proposers import get_proposer
        >>> get_proposer("qnehvi", {"shortlist": 100}).options()["shortlist"]
        100
    """

    name = "qnehvi"
    sees_cheap_objectives = True

    def __init__(
        self,
        *,
        round_size: int = ROUND_SIZE,
        candidates: int = CANDIDATES,
        shortlist: int = 100,
        mc_samples: int = 32,
        max_train: int = 160,
    ) -> None:
        if round_size < 1 or not round_size <= shortlist <= candidates or mc_samples < 1 or max_train < MIN_PAID:
            raise UserInputError(
                f"qnehvi needs 1 <= round_size <= shortlist <= candidates, mc_samples >= 1 and max_train >= {MIN_PAID}; "
                f"got round_size {round_size}, shortlist {shortlist}, candidates {candidates}, "
                f"mc_samples {mc_samples}, max_train {max_train}"
            )
        self.round_size = round_size
        self.candidates = candidates
        self.shortlist = shortlist
        self.mc_samples = mc_samples
        self.max_train = max_train

    def options(self) -> dict[str, Any]:
        return {
            "round_size": self.round_size,
            "candidates": self.candidates,
            "shortlist": self.shortlist,
            "mc_samples": self.mc_samples,
            "max_train": self.max_train,
        }

    def sampler(self, problem: Problem, seed: int) -> optuna.samplers.BaseSampler:
        return optuna.samplers.RandomSampler(seed=seed)  # only for a trial with no proposal left

    def propose(self, ctx: RoundContext) -> list[Proposal]:
        problem = ctx.problem
        require_evolvable(problem, "qnehvi")
        if problem.objectives[0].direction != "maximize" or problem.objectives[1].direction != "minimize":
            raise UserInputError(f"qnehvi needs a maximised first and a minimised second objective; {problem.name} has others")
        rng, quota, paid, early = round_start(ctx, self.round_size, self.candidates)
        if early is not None:
            return early
        points = front_candidates(problem, paid, ctx.seen, rng, self.candidates)
        if not points:
            return []
        picks = self._select(problem, self._training_set(problem, paid), points, quota, seed=rng.randrange(2**31))
        first = problem.front_objectives[0]
        return [
            Proposal(points[i], rationale=f"qLogNEHVI batch pick {k + 1} (GP mean {first} {mean:.4g})") for k, (i, mean) in enumerate(picks)
        ]

    def _training_set(self, problem: Problem, paid: list[Evaluation]) -> list[Evaluation]:
        """At most ``max_train`` paid evaluations: the paid front, then the best first objective."""
        if len(paid) <= self.max_train:
            return paid
        first, second = problem.front_objectives
        y1 = np.array([e.values[first] for e in paid])
        on_front = pareto_mask(y1, np.array([e.values[second] for e in paid]))
        order = np.lexsort((-y1, ~on_front))  # front first, then by the first objective
        return [paid[i] for i in sorted(order[: self.max_train].tolist())]

    def _select(self, problem: Problem, paid: list[Evaluation], points: list[Any], quota: int, *, seed: int) -> list[tuple[int, float]]:
        """``quota`` indices into ``points`` chosen by qLogNEHVI, with the GP's mean of the first objective."""
        import torch
        from botorch.acquisition.multi_objective.logei import qLogNoisyExpectedHypervolumeImprovement
        from botorch.acquisition.multi_objective.objective import GenericMCMultiOutputObjective
        from botorch.optim import optimize_acqf_discrete
        from botorch.sampling import SobolQMCNormalSampler

        fit = fit_gp(problem, paid, points, seed=seed)
        choices = fit.x_points

        def objectives(samples: torch.Tensor, X: torch.Tensor | None = None) -> torch.Tensor:
            # (samples x batch x q x 1) GP samples -> the first objective; the second is known: minus the last input column
            assert X is not None
            known = -X[..., -1:].expand(samples.shape)
            return torch.cat([fit.to_values(samples), known], dim=-1)

        first = problem.front_objectives[0]
        bounds = problem.acquisition_bounds()
        cheapest = float(max(fit.x_paid[:, -1].max(), fit.x_points[:, -1].max()))
        floor, ceiling = bounds if bounds else (float(np.min([e.values[first] for e in paid])), cheapest)
        acqf = qLogNoisyExpectedHypervolumeImprovement(
            model=fit.gp,
            ref_point=[floor, -ceiling],
            X_baseline=fit.x_paid,
            objective=GenericMCMultiOutputObjective(objectives),
            sampler=SobolQMCNormalSampler(sample_shape=torch.Size([self.mc_samples]), seed=seed),
            prune_baseline=True,
        )
        with torch.no_grad():
            single = torch.cat([acqf(batch.unsqueeze(-2)) for batch in choices.split(SINGLE_BATCH)])
        short = torch.argsort(single, descending=True, stable=True)[: self.shortlist]
        chosen, _ = optimize_acqf_discrete(acqf, q=min(quota, len(short)), choices=choices[short], unique=True)
        index = {tuple(row): int(i) for i, row in reversed(list(zip(short.tolist(), choices[short].tolist(), strict=True)))}
        picks = [index[tuple(row)] for row in chosen.tolist()]
        mean = fit.mean(picks)
        return [(i, float(m)) for i, m in zip(picks, mean, strict=True)]


@dataclass
class FittedGP:
    """A GP of the first objective fit on paid evaluations, with the inputs of the candidates.

    Attributes:
        gp: the BoTorch ``SingleTaskGP`` (on transformed targets, see :func:`fit_gp`).
        x_paid: (n, d + 1) inputs of the paid points: scaled features, then the cheap objective.
        x_points: (k, d + 1) inputs of the candidates, the same way.
        transform: the target transform (values -> GP targets).
    """

    gp: Any
    x_paid: Any
    x_points: Any
    transform: TopTransform

    def to_values(self, raw: Any) -> Any:
        """GP targets (a tensor) -> values of the first objective."""
        import torch

        return raw if self.transform.top is None else self.transform.top - torch.exp(-raw)

    def mean(self, rows: Sequence[int]) -> np.ndarray:
        """The first objective at the posterior mean of the targets, for candidates ``rows``."""
        import torch

        with torch.no_grad():
            return np.asarray(self.to_values(self.gp.posterior(self.x_points[list(rows)]).mean.squeeze(-1)).numpy())


def fit_gp(problem: Problem, paid: Sequence[Evaluation], points: Sequence[Point], *, seed: int) -> FittedGP:
    """Fit qnehvi's GP of the first objective on ``paid``; encode ``points`` as its candidates.

    Features are scaled to [0, 1] over paid points and candidates together; the cheap (second
    front) objective is appended as a last input column that the kernel ignores (the MC
    objective reads it). Targets go through :class:`TopTransform`.
    """
    # BoTorch and its dependencies load here: only runs that use this proposer pay their import time
    import torch
    from botorch.exceptions.warnings import OptimizationWarning
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from botorch.models.utils.gpytorch_modules import get_covar_module_with_dim_scaled_prior
    from gpytorch.mlls import ExactMarginalLogLikelihood

    evolvable = require_evolvable(problem, "qnehvi")
    first, second = problem.front_objectives
    torch.manual_seed(seed)
    feats = evolvable.features([e.point for e in paid] + list(points)).astype(float)
    low, span = feats.min(axis=0), np.ptp(feats, axis=0)
    feats = (feats - low) / np.where(span > 0, span, 1.0)
    cheap = np.concatenate([[e.values[second] for e in paid], evolvable.cheap_values(list(points))[second]])
    x = torch.tensor(np.hstack([feats, cheap[:, None]]), dtype=torch.double)
    d = feats.shape[1]
    transform = TopTransform(problem.objectives[0].bounds)
    y = transform.forward(np.array([e.values[first] for e in paid], dtype=float))
    train_y = torch.tensor(y, dtype=torch.double).unsqueeze(-1)
    covar = get_covar_module_with_dim_scaled_prior(ard_num_dims=d, active_dims=list(range(d)))
    gp = SingleTaskGP(x[: len(paid)], train_y, covar_module=covar)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OptimizationWarning)  # the iteration cap is ours: see FIT_ITERATIONS
        fit_gpytorch_mll(
            ExactMarginalLogLikelihood(gp.likelihood, gp), optimizer_kwargs={"options": {"maxiter": FIT_ITERATIONS}}, max_attempts=1
        )
    return FittedGP(gp, x[: len(paid)], x[len(paid) :], transform)
