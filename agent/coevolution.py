"""PEL-NAS style co-evolution as a proposer: niches, a knowledge base, and a reasoner.

One round (docs/design.md, data path): learn from the rounds not yet learned from (the reasoner
updates the knowledge base, saved in storage), split the round's proposals across niches by
their contribution to the found front, ask the reasoner for each niche's share with its
elites and relevant heuristics, and validate what comes back (in the space, in the niche,
unseen, not proposed twice; invalid candidates go back with the reason, up to
``retries`` times). The runner then enqueues, evaluates and tells.

After the reasoner's update, the validation loop (:mod:`knowledge.validation`) scores the
proposals that cited each heuristic and may validate or refute it; the result is saved as
new versions in the knowledge store (:mod:`knowledge.store`), one knowledge base per study.

Resuming is by construction: the round number and the proposals (WAITING trials) live in
the study, the knowledge base in the store; each round's randomness is seeded from (seed,
round); and LLM replies are cached by prompt hash.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, get_args

import numpy as np
import optuna

from coevo.agent.reasoners._base import KB_TOKENS, UPDATE_TOKENS_FACTOR, KnowledgeContext, ProposeRequest, Reasoner
from coevo.knowledge import Heuristic, KnowledgeBase, retrieval, validation
from coevo.knowledge.exchange import onto_part, records_from
from coevo.knowledge.store import IMPORT_BY, KnowledgeStore, StudyKnowledge
from coevo.search.acquisition import greedy_ehvi, greedy_hv
from coevo.search.config import DEFAULT_KB_FROM_USE, KB_FROM_USES, Screen
from coevo.search.errors import CoevoError, StorageMissingError, UserInputError
from coevo.search.informed import Evidence, InformedPredictor, free_pool, point_ids
from coevo.search.metrics import model_yield, pareto_mask
from coevo.search.niches import FLOOR_SHARE, Niche, allocate, niche_of, single_niche
from coevo.search.predictor import spearman
from coevo.search.problem import Evolvable, Problem
from coevo.search.proposers import ROUND_SIZE, Evaluation, Proposal, Proposer, RoundContext, round_quota, start_quota
from coevo.search.round_log import RoundLogs
from coevo.search.surrogate import SurrogateModel

EMPTY_ROUNDS = "coevo.empty_rounds"
MAX_EMPTY_ROUNDS = 3
"""Consecutive rounds without a valid candidate before the run stops (resumable)."""
KB_ROUND = "coevo.kb.round"
"""The last round the knowledge base learned from (study attribute)."""
KB_FROM = "coevo.kb.from"
"""Where the knowledge base was seeded from (study attribute), once done."""
KB_WITHHELD = "coevo.kb.withheld"
SCREENS: tuple[str, ...] = get_args(Screen)
"""Screening of an LLM's candidates (:class:`CoevolutionProposer`'s ``screen``)."""
ENGINE = "engine (no LLM)"
"""The model name of the engine's own candidates in a screened round (their yield is reported beside the LLM's)."""


@dataclass
class _GuidedRound:
    """What the phases of one guided round share: its inputs, then what the niches add to it."""

    problem: Any
    paid: tuple[Evaluation, ...]
    where: list[str]
    """The niche of each paid evaluation."""
    y1: np.ndarray
    y2: np.ndarray
    kb: KnowledgeBase
    ctx: RoundContext
    rng: random.Random
    seen: set[str]
    """Ids evaluated or chosen so far (grows as niches are served)."""
    screening: bool
    model: SurrogateModel | None = None
    proposals: list[Proposal] = field(default_factory=list)
    feedback: list[str] = field(default_factory=list)
    screened_out: list[dict[str, Any]] = field(default_factory=list)
    from_reasoner: int = 0
    """Valid candidates the reasoner gave (the engine's own not counted)."""


def _elites(state: _GuidedRound, niche: Niche) -> list[Evaluation]:
    """A niche's elites: its non-dominated paid evaluations, then its three best by the first objective."""
    members = [k for k, w in enumerate(state.where) if w == niche.id]
    sub = pareto_mask(state.y1[members], state.y2[members])
    elites = [state.paid[members[k]] for k in np.flatnonzero(sub)]
    elites += [state.paid[members[k]] for k in np.argsort(-state.y1[members])[:3] if state.paid[members[k]] not in elites]
    return elites


class CoevolutionProposer(Proposer):
    """The ``pelnas`` proposer and its ablations, each removing one part.

    ``pelnas-noniche`` (one niche), ``pelnas-nokb`` (no knowledge base: nothing learned, no
    heuristic shapes a proposal; the surrogate still ranks) and ``pelnas-nosurrogate`` (no
    surrogate ranking: the knowledge-guided pool is sampled uniformly).

    Args:
        reasoner: who writes heuristics and proposes (offline or LLM).
        name: registry name (``pelnas``, ``pelnas-noniche``, ``pelnas-nokb``).
        niches: use the problem's niche partition (False: one niche, the ablation).
        use_knowledge: learn and use heuristics (False: the ``nokb`` ablation).
        use_surrogate: rank candidates by expected HV under a surrogate of the first objective
            (False: the ``nosurrogate`` ablation).
        round_size: proposals per round.
        init_per_niche: initial points per niche (stratified by the cheap second objective).
        retries: how often a niche's request is sent back with the reasons for rejections.
        kb_tokens: token budget of the heuristics a request carries (see :mod:`knowledge.retrieval`).
        withhold: claim keys never handed to the reasoner, or ``("*",)`` for all (ablations);
            the knowledge base is still learned and stored.
        kb_from: seed the knowledge base from this export file or study before the first round.
        kb_from_use: what ``kb_from`` seeds: ``evaluations`` (the earlier study's paid evaluations
            feed the predictor; the default, see :data:`search.config.DEFAULT_KB_FROM_USE`),
            ``heuristics`` (its knowledge base is imported) or ``both``.
        screen: when the reasoner does not rank its own candidates (an LLM), ask it for
            ``screen_factor`` times a niche's share and pay only for the share the surrogate
            ranks best by expected HV (the rest are logged as screened out, with the reason).
            ``on``: the engine's own candidates (what ``pelnas-nokb`` would pay for: surrogate-
            ranked variation of the niche's elites) are ranked with the LLM's, so a poor LLM
            cannot pull the engine below ``pelnas-nokb``; ``llm``: the LLM's candidates only;
            ``off`` (or False): pay for the reasoner's first proposals, unranked.
        screen_factor: how many candidates per paid slot a screened request asks for.
    """

    sees_cheap_objectives = True

    def __init__(
        self,
        reasoner: Reasoner,
        *,
        name: str = "pelnas",
        niches: bool = True,
        use_knowledge: bool = True,
        use_surrogate: bool = True,
        round_size: int = ROUND_SIZE,
        init_per_niche: int = 4,
        retries: int = 2,
        kb_tokens: int = KB_TOKENS,
        withhold: Sequence[str] = (),
        kb_from: str | None = None,
        kb_from_use: str = DEFAULT_KB_FROM_USE,
        screen: bool | str = "on",
        screen_factor: int = 3,
    ) -> None:
        if screen_factor < 1:
            raise UserInputError(f"the screening factor must be at least 1, got {screen_factor}")
        screen = {True: "on", False: "off"}.get(screen, screen) if isinstance(screen, bool) else screen
        if screen not in SCREENS:
            raise UserInputError(f"unknown screening {screen!r}; use one of {', '.join(SCREENS)}")
        self.screen = screen
        self.screen_factor = screen_factor
        self.name = name
        self.reasoner = reasoner
        self.use_niches = niches
        self.use_knowledge = use_knowledge
        self.use_surrogate = use_surrogate
        self.round_size = round_size
        self.init_per_niche = init_per_niche
        self.retries = retries
        if kb_tokens < 1:
            raise UserInputError(f"the knowledge token budget must be at least 1, got {kb_tokens}")
        self.kb_tokens = kb_tokens
        self.withhold = tuple(withhold)
        if kb_from_use not in KB_FROM_USES:
            raise UserInputError(f"unknown --kb-from-use {kb_from_use!r}; use one of {', '.join(KB_FROM_USES)}")
        self.kb_from = kb_from
        self.kb_from_use = kb_from_use
        self._evidence: tuple[Evidence, ...] | None = None
        parts = [f"-kbfrom-{Path(kb_from).stem}" + ("" if kb_from_use == DEFAULT_KB_FROM_USE else f"-{kb_from_use}")] if kb_from else []
        if self.withhold:
            parts.append("-withhold-all" if retrieval.WITHHOLD_ALL in self.withhold else f"-withhold-{len(self.withhold)}")
        config = reasoner.config()
        if config.get("kind") == "llm":
            # runs with other models or settings are other studies (a bench keeps them all in one storage)
            parts.append("-" + re.sub(r"[^A-Za-z0-9.-]+", "_", str(config.get("model"))).strip("_"))
            if config.get("tools") is False:
                parts.append("-notools")
        if screen != "on" and not reasoner.ranks_candidates:
            parts.append("-noscreen" if screen == "off" else "-screenllm")
        self.variant = "".join(parts)

    def options(self) -> dict[str, Any]:
        return {
            "round_size": self.round_size,
            "init_per_niche": self.init_per_niche,
            "retries": self.retries,
            "kb_tokens": self.kb_tokens,
            "kb_from": self.kb_from,
            "kb_from_use": self.kb_from_use,
            "withhold": list(self.withhold),
            "screen": self.screen,
            "screen_factor": self.screen_factor,
            "reasoner": self.reasoner.config(),
        }

    def sampler(self, problem: Problem, seed: int) -> optuna.samplers.BaseSampler:
        # only used for a trial with no enqueued proposal (a niche ran dry): uniform
        return optuna.samplers.RandomSampler(seed=seed)

    def niches_for(self, problem: Problem) -> tuple[Niche, ...]:
        """The partition this proposer uses on ``problem``."""
        return problem.niches() if self.use_niches else single_niche()

    # ------------------------------------------------------------ the round

    def propose(self, ctx: RoundContext) -> list[Proposal]:
        problem = ctx.problem
        if not isinstance(problem, Evolvable):
            raise UserInputError(f"proposer {self.name} needs a problem with mutation/crossover operators; {problem.name} has none")
        started = time.perf_counter()
        niches = self.niches_for(problem)
        rng = random.Random(f"{ctx.seed}:{ctx.round}")
        paid = tuple(e for e in ctx.evaluations if e.query)
        log: dict[str, Any] = {"round": ctx.round, "reasoner": self.reasoner.label, "changes": []}
        before = self.reasoner.usage.as_dict()
        kb = KnowledgeBase()
        if self.use_knowledge:
            store = StudyKnowledge(KnowledgeStore.for_storage(ctx.storage), ctx.study.study_name, problem.spec(), self.reasoner.label)
            self._seed_knowledge(store, ctx, log)
            kb = store.load()
            learned = int(ctx.study.user_attrs.get(KB_ROUND, -1))
            if paid and learned < ctx.round - 1:
                evidence = [e for e in paid if int(e.attrs.get("round", -1)) > learned]
                kctx = KnowledgeContext(
                    problem=problem,
                    niches=niches,
                    round=ctx.round,
                    evaluations=paid,
                    token_budget=self.kb_tokens * UPDATE_TOKENS_FACTOR,
                    study=ctx.study.study_name,
                    storage=ctx.storage,
                )
                log["changes"] = self.reasoner.update_knowledge(kb, evidence, kctx)
                changes, rows = validation.apply(
                    kb, validation.records(validation.outcomes(problem, paid)), study=ctx.study.study_name, round_no=ctx.round - 1
                )
                log["changes"] += changes
                store.extra_evidence = rows
                store.save(kb, ctx.round - 1)
                ctx.study.set_user_attr(KB_ROUND, ctx.round - 1)
                kb = store.load()  # the store's ids are final (another worker may have added claims)
        quota = round_quota(ctx, self.round_size)
        where = [niche_of(niches, e.point) for e in paid]  # niche of each paid evaluation
        if ctx.round == 0 or not paid:
            start = start_quota(ctx, self.init_per_niche * len(niches), len(niches)) - len(where)
            proposals = self._initial(problem, niches, where, ctx, rng)[: max(0, start)]
            log["initial"] = True
        else:
            try:
                proposals = self._guided(problem, niches, where, kb, paid, quota, ctx, rng, log)
            except CoevoError as exc:  # the round that stops the search (no valid candidate for rounds) is on record too
                log |= {"stopped": str(exc), **(self.reasoner.take_trace() or {})}
                RoundLogs(ctx.storage).write(ctx.study.study_name, ctx.round, log)  # a resume's round rewrites it
                raise
        trace = self.reasoner.take_trace()
        if trace:
            log.update(trace)
        models = model_yield(problem, paid)
        if models:
            log["yield"] = models
        log["usage"] = self.reasoner.usage.as_dict()  # running total of this process
        log["usage_round"] = {
            k: v - before[k] for k, v in log["usage"].items() if isinstance(v, int | float) and isinstance(before[k], int | float)
        }
        log["proposed"] = len(proposals)
        log["propose_s"] = round(time.perf_counter() - started, 4)  # the engine's own time this round (evaluations are not in it)
        RoundLogs(ctx.storage).write(ctx.study.study_name, ctx.round, log)
        return proposals

    def check_storage(self, storage: str | None) -> None:
        """The knowledge store beside ``storage``, when there is one already, must open (a new one is made in the first round)."""
        if not self.use_knowledge:
            return
        with contextlib.suppress(StorageMissingError):  # none yet: the first round creates it
            KnowledgeStore.for_storage(storage, create=False)

    def evidence(self, ctx: RoundContext) -> tuple[Evidence, ...]:
        """The earlier study's paid evaluations (``kb_from``), loaded once per process; () without one or for a file."""
        if not self.kb_from or self.kb_from_use == "heuristics":
            return ()
        if self._evidence is None:
            from coevo.search.transfer import prior_evidence  # only a seeded search reads another study

            self._evidence = (prior_evidence(ctx.problem, ctx.storage, self.kb_from),)
        return self._evidence

    @property
    def loaded_evidence(self) -> tuple[Evidence, ...]:
        """The earlier studies' evaluations this proposer has loaded (for the result's prediction stage)."""
        return self._evidence or ()

    def _seed_knowledge(self, store: StudyKnowledge, ctx: RoundContext, log: dict[str, Any]) -> None:
        """Import ``kb_from`` once, before the first round, into an empty knowledge base."""
        if self.withhold:
            ctx.study.set_user_attr(KB_WITHHELD, list(self.withhold))
        if not self.kb_from or KB_FROM in ctx.study.user_attrs:
            return
        if store.store.exists(store.kb) and store.store.latest(store.kb):
            raise UserInputError(
                f"--kb-from: study {store.kb!r} already has a knowledge base; seed a new study (another --study name) instead"
            )
        if self.kb_from_use == "evaluations" and not any(getattr(ev, "study", None) for ev in self.evidence(ctx)):
            from coevo.search.transfer import nothing_paid  # only a seeded search reads another study

            raise nothing_paid(self.kb_from)
        try:
            records = records_from(store.store, self.kb_from) if self.kb_from_use != "evaluations" else []
            records = onto_part(records, ctx.problem, source=self.kb_from)  # an earlier study of one part: scoped to that part
        except UserInputError:
            if not any(getattr(ev, "study", None) for ev in self.evidence(ctx)):
                raise
            records = []  # a study without a knowledge base: its evaluations seed the predictor, no heuristic comes
        ids = (
            store.store.import_records(store.kb, records, spec=store.spec, by=IMPORT_BY + self.kb_from, round_no=ctx.round)
            if records
            else []
        )
        ctx.study.set_user_attr(KB_FROM, self.kb_from)
        evaluations = sum(len(ev.evaluations) for ev in self.evidence(ctx))
        log["changes"].append(f"seeded with {len(ids)} heuristics and {evaluations} evaluations (for the predictor) from {self.kb_from}")

    def _initial(self, problem: Any, niches: Sequence[Niche], where: list[str], ctx: RoundContext, rng: random.Random) -> list[Proposal]:
        """Stratified start: per niche, points spread over its range of the second objective (cheap, so free to know).

        With a predictor that ranks before any label (a free prior, or an earlier study's
        evaluations) each band's point is the best it predicts among the niche's free designs
        and random members; else a random member. The proposals are ordered band by band
        across niches, so a budget smaller than the start still spreads over every niche.
        """
        taken = set(ctx.seen)
        second = problem.front_objectives[1]
        ranker = InformedPredictor(problem, (), seed=ctx.seed, evidence=self.evidence(ctx)) if self.use_surrogate else None
        if ranker is not None and ranker.ranks and problem.objectives[1].cost == "cheap":
            start = self._predicted_start(problem, niches, where, ctx, rng, ranker)
            if start:
                return start  # else nothing ranked (no free prior for any candidate): the stratified start
        by_niche: list[list[Proposal]] = []
        for niche in niches:
            need = self.init_per_niche - where.count(niche.id)
            if need <= 0:
                continue
            points = _members(problem, niche, taken, rng, ())
            if not points:
                continue
            order = np.argsort(problem.cheap_values(points)[second], kind="stable")
            picks = []
            for band, rows in enumerate(np.array_split(order, min(need, len(points)))):
                point = points[int(rng.choice(list(rows)))]
                taken.add(problem.point_id(point))
                picks.append(
                    Proposal(
                        point,
                        rationale=f"initial sample of niche {niche.id}, {second} band {band + 1}/{need}",
                        attrs={"niche": niche.id, "reasoner": self.reasoner.label},
                    )
                )
            by_niche.append(picks)
        return [p for band in itertools.zip_longest(*by_niche) for p in band if p is not None]

    def _predicted_start(
        self, problem: Any, niches: Sequence[Niche], where: list[str], ctx: RoundContext, rng: random.Random, ranker: InformedPredictor
    ) -> list[Proposal]:
        """The start when the predictor ranks before any label: the front it predicts, by greedy HV contribution.

        Candidates are the problem's free designs and random members of every niche; the start
        pays for the designs that add most hypervolume under (predicted first objective, known
        second), as many as the stratified start would (``init_per_niche`` per niche), so the
        first paid front is the zero-information front and later rounds correct it.
        """
        second = problem.front_objectives[1]
        taken = set(ctx.seen)
        pool = free_pool(problem) + list(ranker.transferred_points)
        points = list({p: None for niche in niches for p in _members(problem, niche, taken, rng, pool)})
        quota = max(0, self.init_per_niche * len(niches) - len(where))
        if not points or not quota:
            return []
        score = ranker.score(points)
        out = []
        for rank, i in enumerate(greedy_hv(score, problem.cheap_values(points)[second], quota)):
            niche = niche_of(niches, points[i])
            out.append(
                Proposal(
                    points[i],
                    rationale=f"initial sample: rank {rank + 1} of the front the predictor gives before any label (niche {niche})",
                    attrs={"niche": niche, "reasoner": self.reasoner.label, "information": "free"},
                )
            )
        return out

    def _guided(
        self,
        problem: Any,
        niches: Sequence[Niche],
        where: list[str],
        kb: KnowledgeBase,
        paid: tuple[Evaluation, ...],
        quota: int,
        ctx: RoundContext,
        rng: random.Random,
        log: dict[str, Any],
    ) -> list[Proposal]:
        """A guided round: allocate the quota over niches, fit the surrogate, ask each niche's share, screen, log."""
        first, second = problem.front_objectives
        state = _GuidedRound(
            problem=problem,
            paid=paid,
            where=where,
            y1=np.array([e.values[first] for e in paid]),
            y2=np.array([e.values[second] for e in paid]),
            kb=kb,
            ctx=ctx,
            rng=rng,
            seen=set(ctx.seen),
            screening=self._screening(),
        )
        state.model = self._round_surrogate(state, log)
        shares = self._allocation(state, niches, quota)
        log["allocation"] = shares
        by_niche = []
        for niche in niches:
            share = shares.get(niche.id, 0)
            if share > 0:
                before = len(state.proposals)
                self._niche_round(state, niche, share)
                by_niche.append(state.proposals[before:])
        # niche by niche in turn, each niche's best first: a round cut short (a budget that ends inside it, a worker
        # stopped) has paid for every niche's first picks, as a shorter round would, not for the first niches alone
        state.proposals = [p for turn in itertools.zip_longest(*by_niche) for p in turn if p is not None]
        self._log_round(state, log)
        self._count_empty(state, quota, log)
        if isinstance(state.model, InformedPredictor):
            log["predictor_s"] = round(state.model.seconds, 4)  # fitting and predicting: what the predictor costs a round
        return state.proposals

    def _screening(self) -> bool:
        """Whether this round screens the reasoner's candidates (it asks for more than it pays for)."""
        return self.screen != "off" and not self.reasoner.ranks_candidates

    @staticmethod
    def _allocation(state: _GuidedRound, niches: Sequence[Niche], quota: int) -> dict[str, int]:
        """Split the quota over niches by their contribution (plus one) to the found front, and to the predicted one.

        With a predictor and free designs, a niche's unseen free designs on the front it predicts
        (over the paid front and those designs) count too: where it expects gains; and a round
        smaller than twice the niches has no floor (a slot per niche would spend most of it where
        nothing is expected). Without them, the split is PEL-NAS's: found-front counts, a floor per niche.
        """
        on_front = pareto_mask(state.y1, state.y2)
        contribution = {n.id: 1.0 + sum(1 for k, w in enumerate(state.where) if w == n.id and on_front[k]) for n in niches}
        predicted = _predicted_front_niches(state, niches)
        if not predicted:
            return allocate(quota, contribution)
        for niche_id, count in predicted.items():
            contribution[niche_id] += count
        return allocate(quota, contribution, floor_share=FLOOR_SHARE if quota >= 2 * len(niches) else 0.0)

    def _round_surrogate(self, state: _GuidedRound, log: dict[str, Any]) -> SurrogateModel | None:
        """The round's model of the first objective, or None (ablation, too few evaluations, costly second, low trust)."""
        problem, paid = state.problem, state.paid
        trust = surrogate_trust(paid, state.ctx.round, problem.front_objectives[0])
        if trust is not None:
            log["trust"] = trust
        if not self.use_surrogate or problem.objectives[1].cost != "cheap" or (trust and trust["low"]):
            return None
        # one predictor of the first objective from everything free, paid and transferred; candidates are
        # ranked by expected HV with the second objective known exactly
        model = InformedPredictor(problem, paid, seed=state.rng.randrange(2**31), evidence=self.evidence(state.ctx))
        log["information"] = model.information.as_dict()
        return model if model.fitted else None

    def _niche_round(self, state: _GuidedRound, niche: Niche, share: int) -> None:
        """One niche's share: its elites and heuristics, the reasoner's valid candidates, then screening."""
        elites = _elites(state, niche)
        heuristics = self._heuristics(state, niche)
        wanted = share * self.screen_factor if state.screening else share
        got, feedback = self._ask(state, niche, share, wanted, elites, heuristics)
        state.from_reasoner += len(got)
        if state.screening:
            if self.screen == "on":
                got += self._engine_candidates(state.problem, niche, share, elites, state.paid, state.seen, state.ctx, state.model)
            got, out = screen(state.problem, got, share, state.model, state.paid)
            state.screened_out += [{"niche": niche.id, **row} for row in out]
            for row in out:
                state.seen.discard(row["point_id"])  # not paid for: a later round may propose it again
        state.proposals += got
        state.feedback += feedback

    def _heuristics(self, state: _GuidedRound, niche: Niche) -> tuple[Heuristic, ...]:
        """The heuristics a niche's request carries (none for the ``nokb`` ablation)."""
        if not self.use_knowledge:
            return ()
        problem = state.problem
        return tuple(
            retrieval.retrieve(
                state.kb.heuristics.values(),
                problem.spec(),
                niche.id,
                token_budget=self.kb_tokens,
                withhold=self.withhold,
                objectives=problem.objectives,
            )
        )

    def _ask(
        self,
        state: _GuidedRound,
        niche: Niche,
        share: int,
        wanted: int,
        elites: Sequence[Evaluation],
        heuristics: tuple[Heuristic, ...],
    ) -> tuple[list[Proposal], list[str]]:
        """Ask the reasoner for ``wanted`` valid candidates, sending invalid ones back with the reason (``retries`` times)."""
        problem, seen = state.problem, state.seen
        feedback: list[str] = []
        got: list[Proposal] = []
        for _attempt in range(self.retries + 1):
            request = ProposeRequest(
                problem=problem,
                niche=niche,
                quota=wanted - len(got),
                elites=tuple(elites),
                heuristics=heuristics,
                evaluations=state.paid,
                seen=frozenset(seen),
                round=state.ctx.round,
                rng=state.rng,
                model=state.model,
                feedback=tuple(feedback),
                study=state.ctx.study.study_name,
                storage=state.ctx.storage,
            )
            for prop in self.reasoner.propose(request):
                reason = self._invalid(problem, niche, prop, seen)
                if reason:
                    feedback.append(reason)
                    continue
                seen.add(problem.point_id(prop.point))
                got.append(prop)
                if len(got) >= wanted:
                    break
            if len(got) >= wanted or (state.screening and len(got) >= share):
                break  # a screened niche with enough for its share is not asked again
        return got, feedback

    def _log_round(self, state: _GuidedRound, log: dict[str, Any]) -> None:
        """The round log's rejections and, for a screened round, what was kept and screened out."""
        log["rejected"] = len(state.feedback)
        log["rejections"] = state.feedback[:20]
        if not state.screening:
            return
        from_engine = sum(1 for p in state.proposals if p.attrs.get("model") == ENGINE)
        log["screening"] = {
            "mode": self.screen,
            "kept": len(state.proposals),
            "kept_from_engine": from_engine,
            "screened_out": len(state.screened_out),
            "factor": self.screen_factor,
        }
        log["screened_out"] = [{k: v for k, v in row.items() if k != "point_id"} for row in state.screened_out[:60]]

    def _count_empty(self, state: _GuidedRound, quota: int, log: dict[str, Any]) -> None:
        """Count rounds without a valid candidate from the reasoner; stop the run after :data:`MAX_EMPTY_ROUNDS`."""
        study = state.ctx.study
        # a round counts as empty when the reasoner gave no valid candidate, even if the engine's own filled it (screen on)
        before = study.user_attrs.get(EMPTY_ROUNDS)
        empty = int(before or 0) + 1 if state.from_reasoner == 0 and quota > 0 else 0
        if before is None or int(before) != empty:  # rewriting the same count (0 most rounds) was a transaction a round
            study.set_user_attr(EMPTY_ROUNDS, empty)
        if not empty:
            return
        reasons = "; ".join(state.feedback[-3:]) or "it returned no candidates"
        if empty >= MAX_EMPTY_ROUNDS:
            raise CoevoError(
                f"round {state.ctx.round}: the reasoner ({self.reasoner.label}) produced no valid candidate in {empty} rounds in a row "
                f"({reasons}); nothing was lost: rerun the same command to resume"
            )
        # one round without a valid candidate (e.g. niches nearly exhausted): the runner
        # evaluates one sampler-chosen point instead (or the engine's own candidates), and the log says so
        instead = "the engine's own candidates instead" if state.proposals else "one uniformly random point instead"
        log["fallback"] = f"no valid candidate from the reasoner ({reasons}); {instead}"

    def _engine_candidates(
        self,
        problem: Any,
        niche: Niche,
        share: int,
        elites: Sequence[Evaluation],
        paid: tuple[Evaluation, ...],
        seen: set[str],
        ctx: RoundContext,
        model: SurrogateModel | None,
    ) -> list[Proposal]:
        """The engine's own candidates for a screened niche: what ``pelnas-nokb`` would pay for here (tagged :data:`ENGINE`)."""
        from coevo.agent.reasoners.offline import OfflineReasoner

        engine_rng = random.Random(f"{ctx.seed}:{ctx.round}:{niche.id}:engine")
        request = ProposeRequest(
            problem=problem,
            niche=niche,
            quota=share,
            elites=tuple(elites),
            heuristics=(),
            evaluations=paid,
            seen=frozenset(seen),
            round=ctx.round,
            rng=engine_rng,
            model=model,
        )
        out = []
        for prop in OfflineReasoner().propose(request):
            if self._invalid(problem, niche, prop, seen) is None:
                seen.add(problem.point_id(prop.point))
                out.append(replace(prop, attrs={**prop.attrs, "model": ENGINE, "reasoner": ENGINE}))
        return out

    @staticmethod
    def _invalid(problem: Problem, niche: Niche, prop: Proposal, seen: set[str]) -> str | None:
        if prop.error:
            return prop.error
        try:
            pid = problem.point_id(prop.point)
            problem.from_params(problem.to_params(prop.point))
        except (UserInputError, ValueError, TypeError, KeyError, IndexError) as exc:
            return f"{prop.point!r} is not in the design space: {exc}"
        if not niche.contains(prop.point):
            return f"{problem.describe(prop.point)} is outside niche {niche.id} ({niche.description})"
        if pid in seen:
            return f"{problem.describe(prop.point)} was already evaluated or proposed"
        return None


def _predicted_front_niches(state: _GuidedRound, niches: Sequence[Niche]) -> dict[str, int]:
    """Per niche, its unseen free designs on the front the round's predictor gives (paid values where paid), or {} without one."""
    model, problem = state.model, state.problem
    if not isinstance(model, InformedPredictor):
        return {}
    free = free_pool(problem)
    pool = [p for p, pid in zip(free, point_ids(problem, free), strict=True) if pid not in state.seen]
    if not pool:
        return {}
    second = problem.front_objectives[1]
    y1 = np.concatenate([state.y1, model.score(pool)])
    y2 = np.concatenate([state.y2, problem.cheap_values(pool)[second]])
    on = pareto_mask(y1, y2)[len(state.y1) :]
    counts: dict[str, int] = {}
    for p in (p for p, k in zip(pool, on, strict=True) if k):
        where = niche_of(niches, p)
        counts[where] = counts.get(where, 0) + 1
    return counts


def _members(problem: Any, niche: Niche, taken: set[str], rng: random.Random, pool: Sequence[Any]) -> list[Any]:
    """Unseen members of ``niche``: up to 200 random ones, and every one of ``pool``."""
    members: dict[Any, None] = {
        p: None for p, pid in zip(pool, point_ids(problem, pool), strict=True) if pid not in taken and niche.contains(p)
    }
    found = 0
    for _ in range(20000):
        p = problem.random_point(rng)
        # the cheap test first (the tests are pure: their order changes nothing but the time; with a pool of
        # the whole space, as NB201's shipped table is, most draws are members already)
        if p not in members and niche.contains(p) and problem.point_id(p) not in taken:
            members[p] = None
            found += 1
            if found >= 200:
                break
    return list(members)


def screen(
    problem: Any, got: Sequence[Proposal], share: int, model: SurrogateModel | None, paid: Sequence[Evaluation]
) -> tuple[list[Proposal], list[dict[str, Any]]]:
    """Keep ``share`` of a reasoner's valid candidates, ranked by expected HV under ``model`` with the cheap objective known.

    The same greedy rule the offline reasoner and ``mobo`` rank by
    (:func:`search.acquisition.greedy_ehvi`). Without a model (too few paid evaluations, or
    low trust) the reasoner's own order decides. Returns the kept proposals (with the
    prediction made before paying, for the trust check) and one row per candidate screened
    out: design, point id, predicted first objective, expected HV gain, and the reason.
    """
    if len(got) <= share:
        return list(got), []
    if model is None:
        why = f"no surrogate this round (fewer than 8 paid evaluations, or low trust): the reasoner's first {share} kept"
        return list(got[:share]), [
            {"design": problem.describe(p.point), "point_id": problem.point_id(p.point), "reason": why} for p in got[share:]
        ]
    first = problem.front_objectives[0]
    order = greedy_ehvi(problem, model, paid, [p.point for p in got], len(got))
    kept, out = [], []
    for rank, (i, (predicted, gain)) in enumerate(order):
        prop = got[i]
        where = f"rank {rank + 1} of {len(got)} by expected HV gain ({gain:.3g}); predicted {first} {predicted:.4g}"
        if rank < share:
            kept.append(replace(prop, rationale=f"{prop.rationale}; screened: {where}", attrs={**prop.attrs, "predicted": predicted}))
        else:
            out.append(
                {
                    "design": problem.describe(prop.point),
                    "point_id": problem.point_id(prop.point),
                    "model": prop.attrs.get("model"),
                    "predicted": round(predicted, 4),
                    "gain": gain,
                    "reason": f"{where}; the niche pays for {share}",
                }
            )
    return kept, out


TRUST_FLOOR = 0.3
"""Spearman rho of the surrogate's pre-payment predictions on the last round below which the next round is not screened."""
TRUST_MIN_N = 5
"""Predictions needed before the trust check acts."""


def surrogate_trust(paid: Sequence[Evaluation], round_no: int, objective: str) -> dict[str, Any] | None:
    """How well the surrogate's predictions (made before paying) ranked the last round's paid values, and pooled over all rounds.

    Low trust (rho below :data:`TRUST_FLOOR` on at least :data:`TRUST_MIN_N` predictions)
    makes the round sample its knowledge-guided pool uniformly: it pays for candidates the
    model did not choose, which is what the model needs to recover. None before any prediction.
    """
    predicted = [e for e in paid if "predicted" in e.attrs]
    if not predicted:
        return None
    last = [e for e in predicted if int(e.attrs.get("round", -1)) == round_no - 1]

    def rho(evals: Sequence[Evaluation]) -> float | None:
        if len(evals) < 3:
            return None
        value = spearman([float(e.attrs["predicted"]) for e in evals], [e.values[objective] for e in evals])
        return None if np.isnan(value) else float(value)

    r, pooled = rho(last), rho(predicted)
    low = r is not None and len(last) >= TRUST_MIN_N and r < TRUST_FLOOR
    action = (
        f"rho {r:.2f} < {TRUST_FLOOR}: this round pays for unscreened candidates of the guided pool (surrogate ranking off)"
        if low and r is not None
        else ""
    )
    return {
        "of_round": round_no - 1,
        "predictor": "the search's predictor (search/informed.py)",
        "n": len(last),
        "rho": r,
        "pooled_rho": pooled,
        "low": low,
        "action": action,
    }


def make_pelnas(variant: str = "pelnas", *, reasoner: Reasoner | Mapping[str, Any] | None = None, **options: Any) -> CoevolutionProposer:
    """Build ``pelnas`` or one of its ablations (``pelnas-noniche``, ``pelnas-nokb``, ``pelnas-nosurrogate``).

    Args:
        variant: which of the four.
        reasoner: a reasoner, or its settings (:meth:`Reasoner.config`, as a study stores them,
            plus an ``api_key`` when the caller has one): the offline reasoner when None.
        options: the rest of :class:`CoevolutionProposer`'s options (:meth:`CoevolutionProposer.options`).
    """
    from coevo.agent.reasoners import reasoner_from_config
    from coevo.agent.reasoners.offline import OfflineReasoner

    if isinstance(reasoner, Mapping):
        reasoner = reasoner_from_config(reasoner)

    if variant == "pelnas-nokb":
        return CoevolutionProposer(reasoner or OfflineReasoner(), name=variant, use_knowledge=False, **options)
    if variant == "pelnas-nosurrogate":
        return CoevolutionProposer(reasoner or OfflineReasoner(), name=variant, use_surrogate=False, **options)
    if variant == "pelnas-noniche":
        return CoevolutionProposer(reasoner or OfflineReasoner(), name=variant, niches=False, **options)
    return CoevolutionProposer(reasoner or OfflineReasoner(), name="pelnas", **options)


def pelnas(*, reasoner: Reasoner | Mapping[str, Any] | None = None, **options: Any) -> CoevolutionProposer:
    """The co-evolution engine (entry point ``pelnas`` of group ``coevo.proposers``); see :func:`make_pelnas`."""
    return make_pelnas("pelnas", reasoner=reasoner, **options)


def pelnas_noniche(*, reasoner: Reasoner | Mapping[str, Any] | None = None, **options: Any) -> CoevolutionProposer:
    """The engine with one niche (ablation; entry point ``pelnas-noniche``)."""
    return make_pelnas("pelnas-noniche", reasoner=reasoner, **options)


def pelnas_nokb(*, reasoner: Reasoner | Mapping[str, Any] | None = None, **options: Any) -> CoevolutionProposer:
    """The engine without knowledge base: surrogate ranking of unguided variation (ablation; entry point ``pelnas-nokb``)."""
    return make_pelnas("pelnas-nokb", reasoner=reasoner, **options)


def pelnas_nosurrogate(*, reasoner: Reasoner | Mapping[str, Any] | None = None, **options: Any) -> CoevolutionProposer:
    """The engine without surrogate: knowledge-guided variation, sampled uniformly (ablation; entry point ``pelnas-nosurrogate``)."""
    return make_pelnas("pelnas-nosurrogate", reasoner=reasoner, **options)
