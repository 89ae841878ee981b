"""The offline reasoner (no LLM): statistics for knowledge, guided variation for proposals.

Knowledge update (documented rule):

* For every categorical parameter value (for NB201: an op on an edge) and each objective,
  the effect is ``mean(objective | value) - mean(objective | other values)`` over all paid
  evaluations, with a Welch standard error and a 95 % interval. It becomes a heuristic
  when |t| >= 2.5 with at least 5 evaluations on each side, globally and per niche (the
  strongest few per niche), **and** it survives the Benjamini-Hochberg procedure at a false
  discovery rate of 5 % over every comparison the round made (all values, objectives and
  niches; two-sided Welch t p-values, Welch-Satterthwaite degrees of freedom): a round tests
  a few hundred comparisons, so |t| >= 2.5 alone (p ~ 0.01 each) would let a few claims
  through on noise alone. The procedure is per round (each knowledge update is one family
  of tests); a claim found in an earlier round and not re-found is re-measured instead (below).
* Status: ``validated`` once |t| >= 4 with >= 15 evaluations on each side; an existing
  heuristic whose interval now contains 0, or whose sign flipped, is ``refuted`` (it stays
  in the knowledge base with its history, and is no longer used). Human statuses
  (accepted / rejected) are never overwritten, nor is ``unhelpful`` (the validation loop's
  verdict on following the claim, which re-measuring its effect does not answer).
* Confidence shrinks with the sample size: ``(1 - p) x n_eff / (n_eff + 1)``, with ``p``
  the two-sided normal p-value of t and ``n_eff = n_with x n_without / (n_with + n_without)``
  the effective count of a difference of two means (its variance is the data's variance
  over ``n_eff``). The factor is the weight a normal prior on the effect, as wide as the
  data's own spread, leaves to the measurement, so a claim can never be surer than its
  counts allow: 5 vs 6 evaluations give at most 0.73 however large t is, 15 vs 15 at most
  0.88, 40 vs 160 at most 0.97; it tends to 1 as both counts grow.
* Text: every stored claim's words are written from its stored figure
  (:func:`knowledge.heuristics.effect_text`): ``edge_1_2=nor_conv_1x1 (vs other edge_1_2
  values) raises accuracy by 2.10 ± 0.71 pp (95% CI; 5 vs 6 evaluations)``. The comparison
  is the mean over evaluations holding the value against the mean over those holding any
  other value of the parameter; effects on a ``%`` objective are in percentage points.
  Whenever a claim is re-measured (re-mined, or re-checked when it is no longer among a
  round's strongest), its figure and text are replaced together; a claim refuted by a
  re-measurement says so, with the refuting figure and counts, and keeps what it claimed
  (``claimed_effect``).
* Proposals cite the heuristics whose favourable direction a change follows (a value
  claimed to raise a maximised objective or to lower a minimised one), so the validation
  loop tests claims by what their proposals achieve.

Proposals, per niche: a pool of mutations of the niche's elites (every single change,
plus second changes sampled with weights from the heuristics about the problem's expensive
objectives, the ones a search pays to learn; see :func:`value_weights`), and crossovers of
elite pairs, kept inside the niche and unseen; then, when a model of the first objective is
given, a greedy batch by expected HV improvement (each ensemble member a sample; earlier
picks of the batch enter the front at their predicted mean; the second objective is cheap,
known for every candidate). Without heuristics and model (the ``nokb`` ablation) the pool
is built with uniform weights and sampled uniformly.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from coevo.agent.reasoners._base import KnowledgeContext, ProposeRequest, Reasoner
from coevo.knowledge import Heuristic, KnowledgeBase
from coevo.knowledge.heuristics import effect_text, effect_unit, sig
from coevo.search.acquisition import greedy_ehvi
from coevo.search.informed import free_pool
from coevo.search.niches import Niche, niche_of
from coevo.search.problem import Evolvable, Objective, Point, Problem
from coevo.search.proposers import Evaluation, Proposal

MIN_T = 2.5
FDR = 0.05  # Benjamini-Hochberg false discovery rate over a round's comparisons (module doc)
VALIDATED_T = 4.0
MIN_N = 5
VALIDATED_N = 15
PER_NICHE = 4
MAX_EVIDENCE_IDS = 200


@dataclass(frozen=True)
class _Claim:
    """A measured effect of one parameter value on one objective, in one niche (or all)."""

    objective: Objective
    niche: str | None
    param: str
    value: Any
    effect: float
    se: float
    df: float  # Welch-Satterthwaite degrees of freedom of the comparison
    n_with: int
    n_without: int
    holders: np.ndarray  # trial numbers holding the value
    on_side: np.ndarray  # which holders lie on the claimed side of the others' mean
    deviation: np.ndarray  # each holder's value minus the others' mean

    @property
    def key(self) -> str:
        return f"pv:{self.objective.name}:{self.param}:{self.value}:{self.niche or '*'}"

    @property
    def t(self) -> float:
        return self.effect / self.se if self.se > 0 else 0.0

    @property
    def p_value(self) -> float:
        """Two-sided p-value of the Welch t test (1 when the spread is 0 and so is the effect)."""
        from scipy import stats  # lazy: scipy.stats costs ~1.5 s of every coevo start-up

        if self.se <= 0:
            return 0.0 if self.effect else 1.0
        return float(2.0 * stats.t.sf(abs(self.t), self.df))

    @property
    def confidence(self) -> float:
        """Confidence in the claimed sign (the rule in the module doc)."""
        return claim_confidence(self.t, self.n_with, self.n_without)

    @property
    def measured(self) -> str:
        """The measurement in a few words, for notes and change logs."""
        unit = effect_unit(self.objective.unit)
        sign = "+" if self.effect > 0 else ""
        return f"{sign}{sig(self.effect)} ± {sig(1.96 * self.se, 2)} {unit} (t={self.t:.1f}, n={self.n_with}/{self.n_without})"

    def text(self) -> str:
        return effect_text(self.structured())

    def structured(self) -> dict[str, Any]:
        return {
            "kind": "param_value_effect",
            "objective": self.objective.name,
            "param": self.param,
            "value": self.value,
            "niche": self.niche,
            "effect": self.effect,
            "ci95": 1.96 * self.se,
            "n_with": self.n_with,
            "n_without": self.n_without,
            "unit": self.objective.unit,
        }


def claim_confidence(t: float, n_with: int, n_without: int) -> float:
    """``(1 - p) x n_eff / (n_eff + 1)``: confidence that a measured effect has its sign (see the module doc).

    Example:
        >>> round(claim_confidence(50.0, 5, 6), 3), round(claim_confidence(50.0, 400, 400), 3)
        (0.732, 0.995)
    """
    from scipy import stats  # lazy: scipy.stats costs ~1.5 s of every coevo start-up

    if n_with <= 0 or n_without <= 0:
        return 0.0
    n_eff = n_with * n_without / (n_with + n_without)
    return (1.0 - 2.0 * float(stats.norm.sf(abs(t)))) * n_eff / (n_eff + 1.0)


def fdr_discoveries(p_values: Sequence[float], rate: float) -> list[bool]:
    """Which of ``p_values`` the Benjamini-Hochberg procedure keeps at false discovery rate ``rate``.

    Example (the largest k with p_(k) <= k/m x rate is 2 here: 0.01 <= 0.0125 and 0.02 <= 0.025, 0.04 > 0.0375):
        >>> fdr_discoveries([0.04, 0.01, 0.5, 0.02], 0.05)
        [False, True, False, True]
    """
    if not p_values:
        return []
    from scipy import stats  # lazy: scipy.stats costs ~1.5 s of every coevo start-up

    adjusted = stats.false_discovery_control(np.asarray(p_values, dtype=float), method="bh")
    return [bool(q <= rate) for q in adjusted]


def _measure(
    objective: Objective, niche: str | None, param: str, value: Any, y: np.ndarray, holds: np.ndarray, trials: np.ndarray
) -> _Claim | None:
    """Welch comparison of ``y`` where ``holds`` against where it does not."""
    a, b = y[holds], y[~holds]
    if len(a) < 2 or len(b) < 2:
        return None
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(va + vb)
    # Welch-Satterthwaite; with no spread at all the t test is undefined and df is moot (p_value handles se == 0)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1)) if va + vb > 0 else float(len(a) + len(b) - 2)
    effect = float(a.mean() - b.mean())
    on_side = a > b.mean() if effect > 0 else a < b.mean()
    return _Claim(objective, niche, param, value, effect, se, df, len(a), len(b), trials[holds], on_side, a - b.mean())


@dataclass(frozen=True)
class _Evidence:
    """The paid evaluations as columns, built once per knowledge update."""

    columns: dict[str, np.ndarray]  # parameter name -> value of each evaluation
    values: dict[str, np.ndarray]  # objective name -> value of each evaluation
    niches: np.ndarray  # niche id of each evaluation
    trials: np.ndarray  # trial number of each evaluation

    @classmethod
    def of(cls, problem: Problem, niches: Sequence[Niche], paid: Sequence[Evaluation]) -> _Evidence:
        params = [problem.to_params(e.point) for e in paid]
        return cls(
            columns={name: np.array([p[name] for p in params], dtype=object) for name in params[0]},
            values={o.name: values_of(paid, o.name) for o in problem.objectives},
            niches=np.array([niche_of(niches, e.point) for e in paid]),
            trials=np.array([e.trial_number for e in paid]),
        )

    def rows(self, niche: str | None) -> np.ndarray:
        """Mask of the evaluations in ``niche`` (all of them for None)."""
        return np.ones(len(self.trials), bool) if niche is None else self.niches == niche


class OfflineReasoner(Reasoner):
    """Statistics-driven reasoner; the embedded default when no LLM endpoint is configured.

    Args:
        guided: False for the ``nokb`` ablation: no heuristics, no model, uniform sampling.

    Example:
        >>> OfflineReasoner().label
        'offline (no LLM)'
    """

    note = "reasoner: offline (no LLM)"
    """The line that announces this reasoner (:func:`agent.reasoners.offline_note` sets why it runs)."""

    def __init__(self, *, guided: bool = True) -> None:
        super().__init__()
        self.guided = guided
        self.ranks_candidates = guided  # its pool is ranked by the request's model (when given)
        self.label = "offline (no LLM)" if guided else "offline (no LLM), unguided"

    def config(self) -> dict[str, Any]:
        return {"kind": "offline", "guided": self.guided}

    # ------------------------------------------------------------ knowledge

    def update_knowledge(self, kb: KnowledgeBase, evidence: Sequence[Evaluation], ctx: KnowledgeContext) -> list[str]:
        paid = [e for e in ctx.evaluations if e.query]
        if len(paid) < 2 * MIN_N:
            return []
        table = _Evidence.of(ctx.problem, ctx.niches, paid)
        claims = {c.key: c for c in self._mine(ctx.problem, ctx.niches, table)}
        changes = []
        for claim in claims.values():
            h, created = self._store(kb, claim, ctx)
            if created:
                changes.append(f"created {h.id}: {h.text}")
        changes += self._remeasure_stale(kb, ctx, table, claims)
        return changes

    @staticmethod
    def _store(kb: KnowledgeBase, claim: _Claim, ctx: KnowledgeContext, *, note: str = "measured") -> tuple[Heuristic, bool]:
        """Write ``claim``'s measurement, words, confidence, status and evidence into its heuristic."""
        existing = kb.by_key(claim.key)
        # a person's decision stands; so does the validation loop's "unhelpful", which a re-measured effect does not answer
        kept = existing is not None and existing.status in ("accepted", "rejected", "unhelpful")
        strong = abs(claim.t) >= VALIDATED_T and min(claim.n_with, claim.n_without) >= VALIDATED_N
        support, refute = claim.holders[claim.on_side][:MAX_EVIDENCE_IDS], claim.holders[~claim.on_side][:MAX_EVIDENCE_IDS]
        shown = set(support.tolist()) | set(refute.tolist())
        return kb.upsert(
            claim.key,
            ctx.round,
            text=claim.text(),
            scope={**ctx.problem.spec(), "niche": claim.niche},
            structured=claim.structured(),
            confidence=round(claim.confidence, 4),
            status=existing.status if kept and existing else ("validated" if strong else "proposed"),
            author="offline",
            support=[int(x) for x in support],
            refute=[int(x) for x in refute],
            effects={int(t): round(float(d), 4) for t, d in zip(claim.holders, claim.deviation, strict=True) if t in shown},
            note=f"{note} {claim.measured}",
        )

    def _mine(self, problem: Problem, niches: Sequence[Niche], table: _Evidence) -> list[_Claim]:
        """The round's claims: |t| and counts over their floors, Benjamini-Hochberg over all comparisons (module doc)."""
        tested = [c for c in self._comparisons(problem, niches, table) if min(c.n_with, c.n_without) >= MIN_N]
        discoveries = fdr_discoveries([c.p_value for c in tested], FDR)
        out: list[_Claim] = []
        by_group: dict[tuple[str, str | None], list[_Claim]] = defaultdict(list)
        for claim, kept in zip(tested, discoveries, strict=True):
            if kept and abs(claim.t) >= MIN_T:
                by_group[(claim.objective.name, claim.niche)].append(claim)
        for (_, niche), found in by_group.items():
            found.sort(key=lambda c: -abs(c.t))
            out += found if niche is None else found[:PER_NICHE]
        return out

    @staticmethod
    def _comparisons(problem: Problem, niches: Sequence[Niche], table: _Evidence) -> list[_Claim]:
        """Every (objective, niche or all, parameter value) comparison the round can make."""
        out: list[_Claim] = []
        for objective in problem.objectives:
            y = table.values[objective.name]
            for niche in (None, *[n.id for n in niches]):
                rows = table.rows(niche)
                if rows.sum() < 2 * MIN_N:
                    continue
                for name, full_column in table.columns.items():
                    column = full_column[rows]
                    for value in sorted(set(column.tolist()), key=str):
                        claim = _measure(objective, niche, name, value, y[rows], column == value, table.trials[rows])
                        if claim is not None:
                            out.append(claim)
        return out

    def _remeasure_stale(self, kb: KnowledgeBase, ctx: KnowledgeContext, table: _Evidence, claims: dict[str, _Claim]) -> list[str]:
        """Re-measure active offline claims not re-found this round: update those still supported, refute the others."""
        changes = []
        objectives = {o.name: o for o in ctx.problem.objectives}
        for h in list(kb.heuristics.values()):
            s = h.structured or {}
            if h.author != "offline" or s.get("kind") != "param_value_effect" or h.key in claims or not h.active or h.status == "accepted":
                continue
            if s.get("objective") not in objectives or s.get("param") not in table.columns:
                continue  # imported from a part's study: a claim about the part's own objective (quant's avg_bits) is not measurable here
            rows = table.rows(s.get("niche"))
            column = table.columns[s["param"]][rows]
            y = table.values[s["objective"]][rows]
            now = _measure(objectives[s["objective"]], s.get("niche"), s["param"], s["value"], y, column == s["value"], table.trials[rows])
            if now is None or min(now.n_with, now.n_without) < MIN_N:
                continue
            ci = 1.96 * now.se
            if now.effect * s["effect"] > 0 and abs(now.effect) > ci:
                self._store(kb, now, ctx, note="re-measured (no longer among the round's strongest claims):")
                continue
            why = "the 95% CI contains 0" if abs(now.effect) <= ci else "the sign flipped"
            structured = {**now.structured(), "claimed_effect": s["effect"], "refuted": why}
            kb.upsert(
                h.key,
                ctx.round,
                text=effect_text(structured),
                status="refuted",
                confidence=0.0,
                structured=structured,
                note=f"refuted: re-measured {now.measured}: {why}",
            )
            claimed = f"{'+' if s['effect'] > 0 else ''}{sig(s['effect'])} {effect_unit(now.objective.unit)}"
            changes.append(f"refuted {h.id}: re-measured {now.measured}: {why} (claimed {claimed})")
        return changes

    # ------------------------------------------------------------ proposals

    def propose(self, request: ProposeRequest) -> list[Proposal]:
        problem = request.problem
        if not isinstance(problem, Evolvable):
            raise TypeError(f"the offline reasoner needs an Evolvable problem, got {type(problem).__name__}")
        rng = request.rng
        weights = value_weights(problem, request.heuristics, request.evaluations) if self.guided else {}
        pool: dict[Point, tuple[Evaluation | None, str]] = {}
        seen = set(request.seen)

        def offer(point: Point, parent: Evaluation | None, how: str) -> None:
            if point in pool or not request.niche.contains(point):
                return
            if problem.point_id(point) in seen:
                return
            pool[point] = (parent, how)

        for elite in request.elites:
            for n1 in problem.neighbours(elite.point):
                offer(n1, elite, "mutation")
                for k in range(4):
                    # half the second changes follow the heuristics, half are uniform: a pool
                    # biased only by heuristics loses the diversity the model's ranking needs
                    offer(self._mutate(problem, n1, weights if k % 2 == 0 else {}, rng), elite, "double mutation")
        elites = list(request.elites)
        for _ in range(min(40, len(elites) * (len(elites) - 1))):
            a, b = rng.sample(elites, 2)
            offer(problem.crossover(a.point, b.point, rng), a, f"crossover with trial {b.trial_number}")
        for point in _predicted_best(problem, request):
            offer(point, None, "a free design of the niche the predictor ranks high")
        tries = 0
        while len(pool) < max(request.quota * 3, 30) and tries < 20000:
            tries += 1
            offer(problem.random_point(rng), None, "random point of the niche")
        if not pool:
            return []
        points = list(pool)
        chosen: list[tuple[int, tuple[float, float] | None]]
        if self.guided and request.model is not None:
            chosen = list(greedy_ehvi(problem, request.model, request.evaluations, points, request.quota))
        else:
            chosen = [(i, None) for i in rng.sample(range(len(points)), min(request.quota, len(points)))]
        directions = {o.name: o.direction for o in problem.objectives}
        out = []
        for i, predicted in chosen:
            point = points[i]
            parent, how = pool[point]
            cited, why = self._explain(problem, parent, point, request.heuristics, directions)
            rationale = f"{how} of trial {parent.trial_number}" if parent else how
            if why:
                rationale += f"; {why}"
            if predicted is not None:
                first = problem.objectives[0]
                rationale += f"; predicted {first.name} {sig(predicted[0])} {first.unit}, expected HV gain {predicted[1]:.3g}"
            out.append(
                Proposal(
                    point,
                    rationale=rationale,
                    heuristics=tuple(cited),
                    # the prediction made before paying: the engine checks it against the paid value (trust)
                    attrs={"niche": request.niche.id, "reasoner": self.label, **({"predicted": predicted[0]} if predicted else {})},
                )
            )
        return out

    @staticmethod
    def _mutate(problem: Any, point: Point, weights: dict[tuple[str, Any], float], rng: Any) -> Point:
        options = problem.neighbours(point)
        if not weights:
            return rng.choice(options)
        base = problem.to_params(point)
        w = []
        for child in options:
            params = problem.to_params(child)
            changed = [(k, v) for k, v in params.items() if base[k] != v]
            w.append(math.prod(weights.get(c, 1.0) for c in changed))
        return rng.choices(options, weights=w, k=1)[0]

    @staticmethod
    def _explain(
        problem: Problem, parent: Evaluation | None, point: Point, heuristics: Sequence[Heuristic], directions: Mapping[str, str]
    ) -> tuple[list[str], str]:
        if parent is None:
            return [], ""
        before, after = problem.to_params(parent.point), problem.to_params(point)
        changed = {(k, v) for k, v in after.items() if before[k] != v}
        cited = []
        notes = []
        for h in heuristics:
            s = h.structured or {}
            favourable = s.get("effect", 0) > 0 if directions.get(s.get("objective", "")) == "maximize" else s.get("effect", 0) < 0
            if s.get("kind") == "param_value_effect" and (s.get("param"), s.get("value")) in changed and favourable:
                cited.append(h.id)
                notes.append(f"{h.id}: {s['param']}={s['value']} {s['effect']:+.2g} {effect_unit(str(s.get('unit', '')))} {s['objective']}")
        return cited, "; ".join(notes)


POOL_PICKS = 2
"""Per paid slot, the best-predicted unseen designs of the problem's free pool (features known for free,
NB201: the shipped proxy table's cells) offered besides the elites' variations: a strong predictor
reaches across the niche, not only one or two changes from its elites."""


def _predicted_best(problem: Any, request: ProposeRequest) -> list[Point]:
    """The niche's unseen free designs the request's predictor ranks best (none without a ranking predictor or a free pool)."""
    model = request.model
    if model is None or not callable(getattr(model, "score", None)):
        return []
    pool = free_pool(problem) + list(getattr(model, "transferred_points", ()))
    members = list({p: None for p in pool if request.niche.contains(p) and problem.point_id(p) not in request.seen})
    if not members:
        return []
    score = np.asarray(model.score(members))  # type: ignore[attr-defined]
    keep = max(POOL_PICKS * request.quota, 10)
    return [members[i] for i in np.argsort(-score, kind="stable")[:keep]]


WEIGHT_PER_SPREAD = 2.5
"""Log-weight per robust spread of effect: a value claimed to improve an objective by one spread
(IQR / 1.349 of its paid values) is sampled e^2.5 = 12 times as often. On NB201 accuracy the
spread is about 5 points, so this reproduces the fixed 2-point scale used before weights were
objective-neutral."""


def value_weights(problem: Problem, heuristics: Sequence[Heuristic], evaluations: Sequence[Evaluation]) -> dict[tuple[str, Any], float]:
    """Sampling weights of parameter values for second mutations, from heuristics about expensive objectives.

    Each ``param_value_effect`` claim on an expensive objective (the ones a search pays to
    learn; cheap ones are known for every candidate and ranked exactly) gives its value the
    weight ``exp(clip(WEIGHT_PER_SPREAD x favourable effect / spread, -6, 6))``: the effect in
    the objective's direction, in units of the objective's robust spread over the paid
    evaluations, so the same rule serves accuracy in points, throughput in samples/s and an
    acceptance share. When several claims concern one value (a niche's and the global one
    measure the same effect), the one measured on the most evaluations sets its weight.
    """
    weights: dict[tuple[str, Any], float] = defaultdict(lambda: 1.0)
    support: dict[tuple[str, Any], int] = {}
    expensive = {o.name: o for o in problem.objectives if o.cost == "expensive"}
    spread: dict[str, float] = {}
    for name in expensive:
        y = values_of([e for e in evaluations if name in e.values], name)
        q75, q25 = np.percentile(y, [75, 25]) if len(y) >= 4 else (1.0, 0.0)
        spread[name] = float(q75 - q25) / 1.349 or 1.0  # a constant objective so far: effects in its own unit
    for h in heuristics:
        s = h.structured or {}
        objective = expensive.get(str(s.get("objective")))
        if s.get("kind") != "param_value_effect" or objective is None or "claimed_effect" in s:
            continue
        sign = 1.0 if objective.direction == "maximize" else -1.0
        log_w = max(-6.0, min(6.0, WEIGHT_PER_SPREAD * sign * float(s["effect"]) / spread[objective.name]))
        key, n = (s["param"], s["value"]), int(s.get("n_with", 0)) + int(s.get("n_without", 0))
        if n >= support.get(key, -1):
            weights[key], support[key] = math.exp(log_w), n
    return weights


def values_of(evaluations: Sequence[Evaluation], objective: str) -> np.ndarray:
    """One objective's values over evaluations, as an array."""
    return np.array([e.values[objective] for e in evaluations])
