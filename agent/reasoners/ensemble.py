"""Several LLMs behind one reasoner (``--llm-model a:3,b:1``), as LLM ensembles in evolutionary coding systems.

Each niche's request of a round goes to one model, drawn with the given weights from the
round's seeded generator (so a seed replays the same draws); knowledge updates go to the
first model. The models share the round's toolbox (one bound on the round's tool calls).
Every proposal carries its model's name, so the engine reports each model's yield: the
share of its paid proposals that lie on the found front (round log and knowledge report).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from coevo.agent.reasoners._base import KnowledgeContext, ProposeRequest, Reasoner, Usage
from coevo.agent.reasoners.llm import LLMReasoner
from coevo.knowledge import KnowledgeBase
from coevo.search.errors import UserInputError
from coevo.search.proposers import Evaluation, Proposal


def parse_models(text: str) -> list[tuple[str, float]]:
    """``a:3,b:1`` (or ``a,b``, weights 1) as ``[(name, weight), ...]``.

    >>> parse_models("gpt-4o-mini:3, qwen2.5")
    [('gpt-4o-mini', 3.0), ('qwen2.5', 1.0)]

    Raises:
        UserInputError: an empty name, a weight that is not a positive number, or a name twice.
    """
    out: list[tuple[str, float]] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, _, weight = part.rpartition(":") if ":" in part else (part, "", "1")
        try:
            w = float(weight)
        except ValueError:
            name, w = part, 1.0  # a model name with a colon (e.g. ``llama3:8b``) and no weight
        if not name or not w > 0:
            raise UserInputError(f"--llm-model: {part!r} must be NAME or NAME:WEIGHT with a positive weight, e.g. a:3,b:1")
        if name in dict(out):
            raise UserInputError(f"--llm-model names {name!r} twice")
        out.append((name, w))
    if not out:
        raise UserInputError("--llm-model is empty")
    return out


class LLMEnsemble(Reasoner):
    """Several :class:`LLMReasoner` members with weights (see the module doc)."""

    def __init__(self, members: Sequence[tuple[LLMReasoner, float]]) -> None:
        super().__init__()
        if len(members) < 2:
            raise ValueError("an ensemble needs at least two models")
        self.members = list(members)
        names = "+".join(m.model for m, _ in self.members)
        simulated = any(m.label.startswith("simulated") for m, _ in self.members)
        self.label = f"simulated:{names} (no LLM)" if simulated else f"llm:{names}"
        self.drawn: dict[str, int] = {}

    @property
    def base_url(self) -> str:
        """The endpoint (the members share it)."""
        return self.members[0][0].base_url

    def check_endpoint(self) -> str:
        """Ask the endpoint for every model (:meth:`LLMReasoner.check_endpoint`); the lines joined."""
        return "; ".join(m.check_endpoint() for m, _ in self.members)

    def config(self) -> dict[str, Any]:
        head = self.members[0][0].config()
        return {**head, "model": ",".join(f"{m.model}:{w:g}" for m, w in self.members)}

    def _sum_usage(self) -> None:
        total = Usage(cost_usd=None)
        for m, _ in self.members:
            for k, v in vars(m.usage).items():
                if v is None:
                    continue
                setattr(total, k, (getattr(total, k) or 0) + v)
        self.usage = total

    def update_knowledge(self, kb: KnowledgeBase, evidence: Sequence[Evaluation], ctx: KnowledgeContext) -> list[str]:
        try:
            return self.members[0][0].update_knowledge(kb, evidence, ctx)
        finally:
            self._sum_usage()

    def propose(self, request: ProposeRequest) -> list[Proposal]:
        member = request.rng.choices([m for m, _ in self.members], weights=[w for _, w in self.members], k=1)[0]
        box = member.toolbox(request)
        for m, _ in self.members:  # one toolbox per round for all models: one bound
            m.share_toolbox(box, request)
        self.drawn[member.model] = self.drawn.get(member.model, 0) + 1
        try:
            return member.propose(request)
        finally:
            self._sum_usage()
            for m, _ in self.members:
                trace = m.take_trace()
                for key, value in trace.items():
                    if key == "notes":
                        self.trace.setdefault("notes", []).extend(value)
                    else:
                        self.trace[key] = value
            self.trace["models_drawn"] = dict(self.drawn)

    def take_trace(self) -> dict[str, Any]:
        trace = super().take_trace()
        self.drawn = {}
        return trace
