"""Counterfactual reruns: the same search seeds with and without a heuristic (or a seed KB).

A comparison is paired: for each seed, a base run and a variant run share everything but
the variant's option (heuristics withheld from the reasoner, or a knowledge base seeded
with ``kb_from``). The change of each metric is the mean of the per-seed differences with
a 95 % Student-t interval (n - 1 degrees of freedom); with one seed there is no interval.

Withholding is by claim key, so a rerun that mines the same claim (same key) does not hand
it to the reasoner; the result says in how many base reruns the claim appeared at all. LLM
heuristics are keyed by their text, so withholding one only works when the model states
the same claim in the same words.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from coevo.knowledge.retrieval import WITHHOLD_ALL
from coevo.knowledge.store import KnowledgeStore
from coevo.search.bench import run_jobs
from coevo.search.errors import UserInputError
from coevo.search.runner import SearchResult
from coevo.search.stats import t_interval, verdict
from coevo.search.storage import open_storage, resolve_storage_url
from coevo.search.study import load_search

METRICS = ("hv_ratio", "front_recall")


@dataclass(frozen=True)
class MetricChange:
    """One metric over the paired runs."""

    metric: str
    base: tuple[float, ...]
    variant: tuple[float, ...]

    @property
    def deltas(self) -> tuple[float, ...]:
        """Per-seed variant - base."""
        return tuple(v - b for b, v in zip(self.base, self.variant, strict=True))

    @property
    def mean_delta(self) -> float:
        """Mean per-seed difference."""
        return sum(self.deltas) / len(self.deltas)

    @property
    def ci95(self) -> float | None:
        """Half-width of the 95 % t interval of the mean difference (None for one seed)."""
        half = t_interval(self.deltas)[1]
        return None if math.isnan(half) else half

    def verdict(self, base_label: str, variant_label: str) -> str:
        """One line judging the change (:func:`search.stats.verdict`), in points of the metric x 100 (both metrics are
        shares in [0, 1]): whether withholding made a difference the seeds can see, or one inside their noise."""
        return verdict(
            f"{self.metric} {variant_label} vs {base_label}", [100 * d for d in self.deltas], unit="points (x100)", unit_of_pairing="seeds"
        )


@dataclass
class Comparison:
    """Paired runs of a base and a variant configuration."""

    title: str
    base_label: str
    variant_label: str
    seeds: tuple[int, ...]
    changes: list[MetricChange]
    studies: list[tuple[str, str]]
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {
            "title": self.title,
            "base": self.base_label,
            "variant": self.variant_label,
            "seeds": list(self.seeds),
            "metrics": {
                c.metric: {
                    "base": list(c.base),
                    "variant": list(c.variant),
                    "mean_delta": c.mean_delta,
                    "ci95": c.ci95,
                    "verdict": c.verdict(self.base_label, self.variant_label),
                }
                for c in self.changes
            },
            "studies": [list(s) for s in self.studies],
            "notes": self.notes,
        }

    def markdown(self) -> str:
        """A table: per metric, base and variant means and the paired change with its interval."""
        lines = [
            f"**{self.title}** ({len(self.seeds)} paired seeds: {', '.join(map(str, self.seeds))})",
            "",
            f"| metric | {self.base_label} | {self.variant_label} | change (variant - base) | per seed |",
            "|---|---|---|---|---|",
        ]
        for c in self.changes:
            ci = f" ± {c.ci95:.4f}" if c.ci95 is not None else ""
            lines.append(
                f"| {c.metric} | {sum(c.base) / len(c.base):.4f} | {sum(c.variant) / len(c.variant):.4f} | "
                f"{c.mean_delta:+.4f}{ci} | {', '.join(f'{d:+.4f}' for d in c.deltas)} |"
            )
        lines += ["", *[f"- verdict: {c.verdict(self.base_label, self.variant_label)}" for c in self.changes]]
        lines += [f"- {n}" for n in self.notes]
        return "\n".join(lines) + "\n"


def compare(
    *,
    title: str,
    problem: str,
    options: dict[str, Any],
    proposer: str,
    budget: int,
    seeds: Sequence[int],
    storage: str | None,
    variant: dict[str, Any],
    base: dict[str, Any] | None = None,
    labels: tuple[str, str] = ("base", "variant"),
    study_prefix: str,
    jobs: int = 1,
    reasoner: dict[str, Any] | None = None,
    on_result: Callable[[SearchResult], None] | None = None,
) -> Comparison:
    """Run ``seeds`` paired base/variant searches (resumable: studies are named by prefix, arm and seed)."""
    if not seeds:
        raise UserInputError("give at least one seed")
    if jobs < 1:
        raise UserInputError(f"--jobs must be at least 1, got {jobs}")
    url = resolve_storage_url(storage)
    open_storage(storage)  # the schema exists before parallel runs race to create it
    arms = (("base", base or {}), ("variant", variant))
    work = [(problem, options, proposer, budget, s, url, reasoner, opts, f"{study_prefix}.{arm}.s{s}") for s in seeds for arm, opts in arms]
    results = {r.study: r for r in run_jobs(work, jobs, on_result)}
    changes = []
    for metric in METRICS:
        b = tuple(_metric(results[f"{study_prefix}.base.s{s}"], metric) for s in seeds)
        v = tuple(_metric(results[f"{study_prefix}.variant.s{s}"], metric) for s in seeds)
        changes.append(MetricChange(metric, b, v))
    studies = [(f"{study_prefix}.base.s{s}", f"{study_prefix}.variant.s{s}") for s in seeds]
    return Comparison(title, labels[0], labels[1], tuple(seeds), changes, studies)


def _metric(result: SearchResult, metric: str) -> float:
    value = getattr(result, metric)
    if value is None:
        raise UserInputError(f"study {result.study} has no {metric} (no true front is known for its problem)")
    return float(value)


def ablate(
    storage: str | None,
    study: str,
    target: str,
    *,
    seeds: int = 3,
    jobs: int = 1,
    store: KnowledgeStore | None = None,
    reasoner: dict[str, Any] | None = None,
    on_result: Callable[[SearchResult], None] | None = None,
) -> Comparison:
    """Rerun study ``study``'s search on ``seeds`` seeds from its own, with heuristic ``target`` (or ``all``) withheld."""
    if seeds < 1:
        raise UserInputError(f"--seeds must be at least 1, got {seeds}")
    search = load_search(storage, study)
    if not search.proposer.startswith("pelnas") or search.proposer == "pelnas-nokb":
        raise UserInputError(f"study {study!r} ran proposer {search.proposer!r}, which keeps no knowledge base to ablate")
    store = store or KnowledgeStore.for_storage(storage)
    if target.lower() == "all":
        withhold, label, key = (WITHHOLD_ALL,), "without the knowledge base", None
    else:
        head = store.history(study, target)[-1]  # raises on an unknown id
        withhold, label, key = (head.key,), f"without {target}", head.key
    spec = search.problem.spec()
    options = {k: v for k, v in spec.items() if k != "problem" and isinstance(v, str)}
    run_seeds = tuple(range(search.seed, search.seed + seeds))
    slug = "all" if key is None else target
    result = compare(
        title=f"Ablation of {'the whole knowledge base' if key is None else target} in {study}",
        problem=str(spec["problem"]),
        options=options,
        proposer=search.proposer,
        budget=search.budget,
        seeds=run_seeds,
        storage=storage,
        variant={"withhold": list(withhold)},
        labels=("with it", label),
        study_prefix=f"{study}.ablate-{slug}",
        jobs=jobs,
        reasoner=reasoner,
        on_result=on_result,
    )
    if key is not None:
        found = sum(1 for base_study, _ in result.studies if any(v.key == key for v in store.latest(base_study).values()))
        result.notes.append(f"{target}'s claim ({key}) was learned in {found} of {len(result.studies)} base reruns")
        if found == 0:
            result.notes.append("the claim never reappeared, so withholding it changed nothing the reasoner saw")
    result.notes.append(
        f"reruns of {search.budget} evaluations each, proposer {search.proposer}; withheld heuristics are still learned, never shown"
    )
    return result
