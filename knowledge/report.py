"""Review reports of a search and its knowledge base: ``report.md``, ``report.html`` and PNGs.

The report is built once as a list of blocks (headings, paragraphs, tables, figures) and
rendered twice: Markdown that links the PNG files, and one self-contained HTML page with
the same PNGs embedded (it can be mailed or archived alone). It is meant for a hardware
engineer who was not there: every section says what it shows and how to read it.
"""

from __future__ import annotations

import base64
import html
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from coevo.knowledge import report_plots as plots
from coevo.knowledge import validation
from coevo.knowledge.heuristics import STATUS_MEANING, STATUSES, quantity_label, sig
from coevo.knowledge.imported import VERDICTS, Imported, imported_heuristics
from coevo.knowledge.store import KnowledgeStore, Version, iter_ids
from coevo.search.metrics import model_yield, pareto_mask
from coevo.search.problem import Problem
from coevo.search.progress import reasoner_label, reasoner_rounds
from coevo.search.proposers import Evaluation
from coevo.search.round_log import SKIPPED_UPDATE, read_round_logs
from coevo.search.runner import BANDS, band_edges, band_of
from coevo.search.study import StoredSearch, evaluations_from_study, load_search
from coevo.sim.paths import new_out_folder


@dataclass(frozen=True)
class Figure:
    """A PNG in the report folder."""

    path: Path
    caption: str


@dataclass(frozen=True)
class TableBlock:
    """A table: header and rows of text cells."""

    header: Sequence[str]
    rows: Sequence[Sequence[str]]


@dataclass(frozen=True)
class ListBlock:
    """A bulleted list of short lines."""

    items: Sequence[str]


Block = tuple[str, str] | TableBlock | ListBlock | Figure
"""``("h1"|"h2"|"p", text)``, a table, a list or a figure."""

MAX_FRONT_ROWS = 40
"""Front designs listed in the table (the front of a long search on a big space can be larger)."""
STRONGEST = 5
"""Heuristics in the summary near the top."""
FOLD_ROWS = MAX_FRONT_ROWS
"""Tables longer than this are folded (``<details>``, shown on a click), so the page's sections stay in reach; the front
table near the top is never folded (it has at most :data:`MAX_FRONT_ROWS` rows)."""


@dataclass
class Report:
    """What :func:`write_report` wrote."""

    files: list[Path] = field(default_factory=list)
    bytes: int = 0
    seconds: float = 0.0


def write_report(storage: str | None, study_name: str, out: Path, *, store: KnowledgeStore | None = None) -> Report:
    """Write the review report of study ``study_name`` into folder ``out`` (created).

    Raises:
        UserInputError: no such study, or not a coevo study.
        StorageError: storage or knowledge store unreachable.
    """
    started = time.perf_counter()
    search = load_search(storage, study_name, create=False)  # before anything is created: a wrong name leaves no folder
    store = store or KnowledgeStore.for_storage(storage)
    with new_out_folder(out, "report"):  # a report that fails leaves no folder it made
        blocks = _blocks(search, store, out, storage)
        md = out / "report.md"
        md.write_text(render_markdown(blocks))
        page = out / "report.html"
        page.write_text(render_html(blocks, title=f"coevo review: {study_name}", base=out))
    report = Report(files=[md, page, *[b.path for b in blocks if isinstance(b, Figure)]])
    report.bytes = sum(p.stat().st_size for p in report.files)
    report.seconds = time.perf_counter() - started
    return report


# ---------------------------------------------------------------- content


@dataclass(frozen=True)
class _Facts:
    """What the report's sections are written from, gathered once from the study, its round logs and its knowledge base."""

    search: StoredSearch
    problem: Any
    paid: list[Evaluation]
    ref: Any
    """The exact front's reference (HV, recall), or None when the problem has none."""
    rounds_of: np.ndarray
    """The round of each paid evaluation."""
    y1: np.ndarray
    y2: np.ndarray
    rounds: list[int]
    logs: dict[int, dict[str, Any]]
    reasoner: str
    """Who reasoned: one label, or each label with its rounds when the study was resumed with another reasoner."""
    reasoners: tuple[str, ...]
    """The distinct reasoner labels of the round logs, in order of first use."""
    history: list[Version]
    latest: dict[str, Version]
    hv: list[float]
    """HV ratio at the end of each round (empty without an exact front)."""
    evals: list[int]
    """Paid evaluations at the end of each round."""

    @property
    def offline(self) -> bool:
        """Whether every round's reasoner was the offline one (no LLM)."""
        return bool(self.reasoners) and all(r.startswith("offline") for r in self.reasoners)

    @property
    def skipped_updates(self) -> list[tuple[int, str]]:
        """(round, why) of each knowledge-base update the reasoner failed to make (e.g. no valid LLM reply)."""
        return [
            (r, str(change).removeprefix(SKIPPED_UPDATE).strip())
            for r, log in sorted(self.logs.items())
            for change in log.get("changes", [])
            if str(change).startswith(SKIPPED_UPDATE)
        ]


def _facts(search: StoredSearch, store: KnowledgeStore, storage: str | None) -> _Facts:
    study, problem = search.study, search.problem
    first, second = problem.front_objectives
    paid = [e for e in evaluations_from_study(problem, study) if e.query]
    ref = problem.reference() if problem.found_set == "all" else None
    rounds_of = np.array([int(e.attrs.get("round", 0)) for e in paid])
    y1 = np.array([e.values[first] for e in paid])
    y2 = np.array([e.values[second] for e in paid])
    rounds = sorted(set(rounds_of.tolist()))
    logs = read_round_logs(storage, study)
    reasoners, reasoner = _reasoners(logs)
    history = store.history(study.study_name) if store.exists(study.study_name) else []
    return _Facts(
        search=search,
        problem=problem,
        paid=paid,
        ref=ref,
        rounds_of=rounds_of,
        y1=y1,
        y2=y2,
        rounds=rounds,
        logs=logs,
        reasoner=reasoner,
        reasoners=reasoners,
        history=history,
        latest=store.latest(study.study_name) if history else {},
        hv=[ref.hv_ratio(y1[rounds_of <= r], y2[rounds_of <= r]) for r in rounds] if ref else [],
        evals=[int((rounds_of <= r).sum()) for r in rounds],
    )


def _reasoners(logs: dict[int, dict[str, Any]]) -> tuple[tuple[str, ...], str]:
    """The distinct reasoners of the round logs (first use first) and the label the report writes for them.

    A study resumed with another reasoner (offline, then an LLM) names each with its rounds: a single label would call
    LLM rounds offline, or the reverse (:func:`search.progress.reasoner_label`, as ``coevo runs`` shows it).
    """
    rounds_of = reasoner_rounds(logs)
    label = reasoner_label(logs)
    if label is None:
        return (), "none (not a co-evolution search)"
    if len(rounds_of) > 1:
        label += " (the study was resumed with another reasoner)"
    return tuple(rounds_of), label


def _why_no_kb(facts: _Facts) -> str:
    """Why a search has no heuristics: the ablation, a baseline, failed updates, or too little evidence yet."""
    search = facts.search
    if "nokb" in search.proposer:
        return f"its proposer ({search.proposer}) is the no-knowledge ablation, which keeps none"
    if not facts.reasoners:
        return f"its proposer ({search.proposer}) is a baseline, which keeps none"
    skipped = facts.skipped_updates
    if skipped:
        last_round, why = skipped[-1]
        return (
            f"{len(skipped)} knowledge-base update{'s' if len(skipped) != 1 else ''} of its reasoner ({facts.reasoner}) failed "
            f"(round {last_round}: {why})"
        )
    return f"its reasoner ({facts.reasoner}) has not written any heuristic yet (too few evaluations to learn from)"


def _blocks(search: StoredSearch, store: KnowledgeStore, out: Path, storage: str | None) -> list[Block]:
    facts = _facts(search, store, storage)
    problem, paid, logs, rounds = facts.problem, facts.paid, facts.logs, facts.rounds
    records = validation.records(validation.outcomes(problem, paid))
    blocks = _intro_section(facts, store)
    blocks += _front_section(problem, paid, facts.ref)
    if facts.history:
        blocks += _strongest_section(facts.latest, problem)
    blocks += [("h2", "How a design is written"), ("p", problem.explain_encoding())]
    blocks += _reading_section(facts)
    blocks += _hv_section(facts, out)
    blocks += _changes_section(facts, logs, rounds)
    blocks += _imported_section(imported_heuristics(store, search.study.study_name))
    blocks += _heuristics_section(facts.latest, records, store, search.study.study_name)
    blocks += _exploration_section(problem, paid, facts.y2, facts.ref, out)
    blocks += _trust_section(logs, rounds)
    blocks += _usage_section(logs, rounds, facts.offline, out)
    blocks += _tools_section(logs, rounds)
    blocks += _screening_section(logs, rounds)
    blocks += _yield_section(logs, rounds, model_yield(problem, paid))
    # kb activity figure after the changes table is built
    if facts.history:
        counts = _activity(facts.history, rounds)
        blocks.insert(
            next(k for k, b in enumerate(blocks) if b == ("h2", "Knowledge-base changes per round")) + 1,
            Figure(plots.kb_activity(rounds, counts, out / "kb_activity.png"), "Heuristic versions written per round, by kind of change."),
        )
    return blocks


def _intro_section(facts: _Facts, store: KnowledgeStore) -> list[Block]:
    """The title, why there is no knowledge base (when there is none), and the one-paragraph summary."""
    search, problem, paid, reasoner = facts.search, facts.problem, facts.paid, facts.reasoner
    blocks: list[Block] = [("h1", f"Review of search {search.study.study_name}")]
    if not facts.history:
        blocks.append(
            (
                "p",
                f"This search has no knowledge base: {_why_no_kb(facts)}. There are no heuristics to review; the report shows "
                "the designs it found, how the front grew and where the evaluations went.",
            )
        )
    spec = ", ".join(f"{k}={v}" for k, v in problem.spec().items() if isinstance(v, str))
    n_rounds = len(facts.rounds)
    summary = (
        f"Problem: {spec}. Proposer: {search.proposer}, seed {search.seed}, budget {search.budget} evaluations; "
        f"{len(paid)} designs evaluated in {n_rounds} round{'s' if n_rounds != 1 else ''}. "
        f"Reasoner{'s' if len(facts.reasoners) > 1 else ''}: {reasoner}"
        + (" - statistics, not a language model: no LLM was called." if facts.offline else ".")
    )
    if facts.history:
        summary += f" Knowledge base: {len(facts.latest)} heuristics, {len(facts.history)} versions (store {store.url})."
    if facts.ref is not None and paid:
        summary += f" Final HV ratio {facts.hv[-1]:.4f}; front recall {facts.ref.recall([e.point_id for e in paid]):.3f}."
    blocks.append(("p", summary))
    return blocks


def _reading_section(facts: _Facts) -> list[Block]:
    """How to read the report: the objectives, the front, the HV ratio (with an exact front) and niches (with heuristics)."""
    first, second = facts.problem.front_objectives
    units = {o.name: o.unit for o in facts.problem.objectives}
    return [
        ("h2", "How to read this report"),
        (
            "p",
            "Each design is scored on two objectives, "
            f"{first} ({units[first]}, higher is better) and {second} ({units[second]}, lower is better). "
            "A design is on the front when no other design is at least as good on both."
            + (
                " The HV ratio is the area the found front dominates divided by the area of the true front (computed from "
                "the whole space): 1.0 means the found designs cover all of that area, which can leave out a true-front "
                "design that adds no area (one at the floor, or at the worst second objective); front recall counts the true-front "
                "designs found."
                if facts.ref is not None
                else ""
            )
            + (
                " The design space is split into niches; each round the reasoner first updates the knowledge base "
                "(heuristics: claims about the design space with evidence), then proposes designs per niche guided by it."
                if facts.history
                else ""
            ),
        ),
    ]


def _hv_section(facts: _Facts, out: Path) -> list[Block]:
    """The found front after selected rounds (a figure), and the HV ratio per round (a figure and a table)."""
    ref, paid, rounds, rounds_of, y1, y2, hv = facts.ref, facts.paid, facts.rounds, facts.rounds_of, facts.y1, facts.y2, facts.hv
    first, second = facts.problem.front_objectives
    units = {o.name: o.unit for o in facts.problem.objectives}
    blocks: list[Block] = [("h2", "Front and hypervolume per round")]
    if paid:
        log = plots.use_log_scale(plots.front_x_values(ref, y1, y2))
        blocks.append(
            Figure(
                plots.fronts_by_round(
                    ref,
                    rounds,
                    y1,
                    y2,
                    rounds_of,
                    out / "fronts_by_round.png",
                    y_label=quantity_label(first, units[first]),
                    x_label=quantity_label(second, units[second]),
                    log_x=log,
                ),
                "Found front after selected rounds (colours)"
                + (" over the true front (black)" if ref is not None else "")
                + " and every evaluated design (grey)"
                + (f"; {second} on a log scale (its values span more than a factor of 10)." if log else "."),
            )
        )
    if len(hv) > 1:
        blocks.append(Figure(plots.hv_by_round(rounds, hv, facts.evals, out / "hv_by_round.png"), "HV ratio at the end of each round."))
    if hv:
        blocks.append(
            TableBlock(
                ["round", "evaluations", "HV ratio", "front size"],
                [
                    [str(r), str(n), f"{h:.4f}", str(int(pareto_mask(y1[rounds_of <= r], y2[rounds_of <= r]).sum()))]
                    for r, n, h in zip(rounds, facts.evals, hv, strict=True)
                ],
            )
        )
    elif paid:
        blocks.append(
            (
                "p",
                "No exact front is known for this search (the problem has none, or an objective was estimated): no HV ratio per round.",
            )
        )
    return blocks


def _front_section(problem: Any, paid: Sequence[Evaluation], ref: Any) -> list[Block]:
    blocks: list[Block] = [("h2", "Designs found: the front")]
    if not paid:
        return [*blocks, ("p", "No design was evaluated yet.")]
    first, second = problem.front_objectives
    y1 = np.array([e.values[first] for e in paid])
    y2 = np.array([e.values[second] for e in paid])
    front = sorted((e for e, on in zip(paid, pareto_mask(y1, y2), strict=True) if on), key=lambda e: e.values[second])
    text = (
        f"The {len(front)} evaluated designs no other evaluated design beats on both {first} and {second}, lowest {second} first"
        + (f" (the first {MAX_FRONT_ROWS} are listed)" if len(front) > MAX_FRONT_ROWS else "")
        + ". The trial is the Optuna trial number in the study"
    )
    if ref is not None:
        floor = f"{sig(ref.floor, 3)} {problem.objectives[0].unit}".strip()
        text += (
            f"; 'on true front' says whether the design is on the exact front of the whole space, inside the useful region "
            f"({first} >= {floor}; 'below floor' marks designs under it)"
        )
    blocks.append(("p", text + "."))
    header = [problem.design_label, *[quantity_label(o.name, o.unit) for o in problem.objectives], "trial"]
    rows = []
    for e in front[:MAX_FRONT_ROWS]:
        row = [problem.describe(e.point), *[sig(e.values[o.name], 4) for o in problem.objectives], str(e.trial_number)]
        if ref is not None:
            row.append("yes" if e.point_id in ref.ids else "below floor" if e.values[first] < ref.floor else "no")
        rows.append(row)
    blocks.append(TableBlock([*header, "on true front"] if ref is not None else header, rows))
    return blocks


def _strength(v: Version) -> tuple[int, float, float]:
    s = v.structured or {}
    measured = abs(float(s["effect"])) / float(s["ci95"]) if s.get("ci95") else 0.0
    return (v.status == "accepted", v.confidence, measured)


def _cheap_objectives(problem: Problem) -> set[str]:
    """The objectives a search gets for free (a table lookup or a model), whose claims are worth little to it."""
    return {o.name for o in problem.objectives if o.cost == "cheap"}


def _strongest_section(latest: dict[str, Version], problem: Problem) -> list[Block]:
    """The strongest trusted claims about the objectives a search pays for, and those about free objectives apart.

    A claim about a cheap objective (NB201's latency is a table lookup) tells the search nothing it could not look
    up for every candidate, so ranking it beside claims about accuracy, which each cost a training run to learn,
    would fill the summary with the least useful claims.
    """
    blocks: list[Block] = [("h2", "Strongest heuristics")]
    heads = list(latest.values())
    cheap = _cheap_objectives(problem)
    trusted = sorted((v for v in heads if v.status in ("validated", "accepted")), key=_strength, reverse=True)
    paid = [v for v in trusted if (v.structured or {}).get("objective") not in cheap]
    free = [v for v in trusted if (v.structured or {}).get("objective") in cheap]
    counts = Counter(v.status for v in heads)
    tally = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    if trusted:
        blocks.append(
            (
                "p",
                f"The {min(STRONGEST, len(paid))} strongest of the {len(paid)} validated or accepted heuristics about objectives the "
                f"search pays for (accepted first, then by confidence); all {len(heads)}: {tally}. Each heuristic's record and "
                "what each status means are further down.",
            )
        )
        if paid:
            blocks.append(ListBlock([_line(v) for v in paid[:STRONGEST]]))
        if free:
            names = ", ".join(sorted(cheap))
            blocks.append(
                (
                    "p",
                    f"Shown apart: {len(free)} validated claims about free objectives ({names}: known for every design without "
                    f"paying, so a claim about them saves the search nothing); the strongest {min(STRONGEST, len(free))}:",
                )
            )
            blocks.append(ListBlock([_line(v) for v in free[:STRONGEST]]))
        return blocks
    proposed = sorted((v for v in heads if v.status == "proposed"), key=_strength, reverse=True)
    blocks.append(
        (
            "p",
            f"No heuristic is validated or accepted yet ({tally}): nothing the knowledge base holds has passed its tests, "
            "so treat every claim as a hypothesis." + (" The strongest proposed ones, not yet validated:" if proposed else ""),
        )
    )
    if proposed:
        blocks.append(ListBlock([_line(v) for v in proposed[:STRONGEST]]))
    return blocks


def _line(v: Version) -> str:
    return f"{v.hid} ({v.status}, confidence {v.confidence:.2f}): {v.text}"


def _kind(v: Version, previous: Version | None) -> str:
    if previous is None:
        return "created"
    if v.changed_by == "human":
        return "reviewed"
    if v.status != previous.status and v.status in ("validated", "unhelpful", "refuted"):
        return v.status
    return "edited"


def _activity(history: Sequence[Version], rounds: Sequence[int]) -> dict[str, list[int]]:
    counts: dict[str, Counter[int]] = defaultdict(Counter)
    prev: dict[str, Version] = {}
    for v in history:
        counts[_kind(v, prev.get(v.hid))][v.round] += 1
        prev[v.hid] = v
    kinds = [k for k in ("created", "edited", "validated", "unhelpful", "refuted", "reviewed") if k in counts]
    return {k: [counts[k][r] for r in rounds] for k in kinds}


def _changes_section(facts: _Facts, logs: dict[int, Any], rounds: Sequence[int]) -> list[Block]:
    history = facts.history
    blocks: list[Block] = [("h2", "Knowledge-base changes per round")]
    if not history:
        blocks.append(("p", f"No heuristic was written: {_why_no_kb(facts)}."))
        return blocks
    if facts.skipped_updates:
        blocks.append(
            (
                "p",
                "Updates that failed (the knowledge base stayed as it was for the next round): "
                + "; ".join(f"round {r}: {why}" for r, why in facts.skipped_updates)
                + ".",
            )
        )
    blocks.append(
        (
            "p",
            "The knowledge base learned from round r's results is saved as round r (it guides round r + 1). Below: every heuristic "
            "created, and every status change (validated, unhelpful, refuted, a person's review), with the reason recorded at the time. "
            "Edits that only re-measured a claim are counted in the figure, not listed.",
        )
    )
    rows = []
    prev: dict[str, Version] = {}
    for v in history:
        kind = _kind(v, prev.get(v.hid))
        prev[v.hid] = v
        if kind != "edited":
            rows.append([str(v.round), v.hid, kind, v.text, v.change, v.changed_by])
    blocks.append(TableBlock(["round", "id", "change", "heuristic", "why", "by"], rows))
    rejected = sum(int(logs[r].get("rejected", 0)) for r in rounds if r in logs)
    if rejected:
        blocks.append(("p", f"{rejected} proposed designs were rejected by validation (outside the space or niche, or already seen)."))
    return blocks


def _heuristics_section(latest: dict[str, Version], records: dict[str, validation.Record], store: KnowledgeStore, kb: str) -> list[Block]:
    if not latest:
        return []  # the first paragraph already says there is no knowledge base
    blocks: list[Block] = [("h2", "Each heuristic's record")]
    blocks.append(
        (
            "p",
            "Proposals citing a heuristic are its test: a proposal wins when it extends its niche's front as it stood before its "
            "round. The base rate is the win rate of the proposals of the same niches and rounds that did not cite it. The validation "
            f"loop marks a heuristic with at least {validation.MIN_CITED} citing proposals unhelpful when P(win rate > base rate) <= "
            f"{validation.REFUTE_P} and validates it when >= {validation.VALIDATE_P}. Support/refute counts are the evidence rows "
            "(trials on either side of the claim). What each status means:",
        )
    )
    shown = {v.status for v in latest.values()}
    blocks.append(ListBlock([f"{status}: {STATUS_MEANING[status]}" for status in STATUSES if status in shown]))
    evidence = Counter((e.hid, e.kind) for e in store.evidence(kb))
    rows = []
    for hid in iter_ids(latest):
        v = latest[hid]
        rec = records.get(hid)
        rate = f"{rec.wins}/{rec.n} ({rec.win_rate:.0%})" if rec and rec.n else "-"
        base = f"{rec.base_rate:.0%}" if rec and rec.n else "-"
        p = f"{rec.p_better:.2f}" if rec and rec.p_better is not None else "-"
        rows.append(
            [
                hid,
                v.text,
                v.scope.get("niche") or "any",
                v.status,
                f"{v.confidence:.2f}",
                f"{evidence[(hid, 'support')]}/{evidence[(hid, 'refute')]}",
                rate,
                base,
                p,
                str(v.version),
            ]
        )
    blocks.append(
        TableBlock(["id", "heuristic", "niche", "status", "conf.", "sup/ref", "citing wins", "base rate", "P(better)", "versions"], rows)
    )
    return blocks


def _imported_section(items: Sequence[Imported]) -> list[Block]:
    """Heuristics brought from another study (``--kb-from``, ``kb import``): where from, as what, and whether they held here."""
    if not items:
        return []
    tally = Counter(i.verdict for i in items)
    counts = ", ".join(f"{tally[v]} {v}" for v in VERDICTS if tally[v])
    sources = ", ".join(sorted({i.source or i.origin.rsplit(":", 1)[0] for i in items}))
    blocks: list[Block] = [
        ("h2", "Imported heuristics"),
        (
            "p",
            f"{len(items)} heuristics came from {sources} ({counts}). 'From' is the heuristic they were copied from "
            "(knowledge base:id, and the study or file the import named when it differs); 'learned on' is the problem they "
            "were learned on, and the part of this search's design they were mapped onto when that problem is one of its parts "
            "(the claim's parameter is the joint one of the same name). 'There' is the status and confidence they had "
            "there; an import keeps them, except that a validated claim arrives proposed and must be validated again here. "
            "'Now' is the status after this study's own evidence (the support/refute rows of its trials; evidence the import "
            "brought along points at the source study's trials and is not counted). 'Held' reads the two together: held "
            "(validated or accepted here), did not hold (refuted, unhelpful or rejected here), open (evidence here, no "
            "decision yet), not tested here (no evidence here and the imported status unchanged), not measurable here (the same, "
            "for a claim about an objective this problem does not have), set aside (retired here). A claim refuted here by "
            "re-measurement carries that measurement in its words (its evaluation counts), not as evidence rows.",
        ),
    ]
    rows = [
        [
            i.hid,
            i.text,
            i.origin + (f" (via {i.source})" if i.source and not i.origin.startswith(f"{i.source}:") else ""),
            i.mapping,
            f"{i.status_there} {i.confidence_imported:.2f}",
            f"{i.status_now} {i.confidence_now:.2f}",
            f"{i.support}/{i.refute}",
            i.verdict,
        ]
        for i in items
    ]
    blocks.append(TableBlock(["id", "heuristic", "from", "learned on", "there", "now", "sup/ref here", "held"], rows))
    return blocks


def _exploration_section(problem: Any, paid: Sequence[Evaluation], y2: np.ndarray, ref: Any, out: Path) -> list[Block]:
    blocks: list[Block] = [("h2", "Exploration across niches and bands of the second objective")]
    if not paid:
        return blocks
    niches = problem.niches()
    edges = band_edges(ref, y2)
    band = band_of(edges, y2)
    index = {n.id: k for k, n in enumerate(niches)}
    counts = np.zeros((len(niches), BANDS), dtype=int)
    for e, b in zip(paid, band, strict=True):
        counts[index[_niche(niches, e)], b] += 1
    labels = [f"{edges[k]:.3g}-{edges[k + 1]:.3g}" for k in range(BANDS)]
    blocks.append(
        (
            "p",
            f"Evaluated designs per niche and per band of {problem.front_objectives[1]} (equal-width bands over the whole space's "
            f"{problem.front_objectives[1]} range, widened to any evaluated design outside it). An empty row or column is a "
            "part of the space the search never looked at.",
        )
    )
    second = problem.front_objectives[1]
    unit = next((o.unit for o in problem.objectives if o.name == second), "")
    band_name = quantity_label(second, unit, what="band")
    blocks.append(
        Figure(
            plots.exploration([n.id for n in niches], labels, counts, out / "exploration.png", band_label=band_name),
            f"Evaluations per niche and {band_name}.",
        )
    )
    blocks.append(
        TableBlock(
            ["niche", "description", *labels, "total"],
            [[n.id, n.description, *[str(c) for c in counts[k]], str(counts[k].sum())] for k, n in enumerate(niches)],
        )
    )
    return blocks


def _niche(niches: Any, e: Evaluation) -> str:
    from coevo.search.niches import niche_of

    return str(niche_of(niches, e.point))


def _trust_section(logs: dict[int, Any], rounds: Sequence[int]) -> list[Block]:
    """Predictor trust per round: how well the predictions made before paying ranked what was paid."""
    rows = []
    for r in rounds:
        t = logs.get(r, {}).get("trust")
        if not t:
            continue
        rho = "-" if t.get("rho") is None else f"{t['rho']:.2f}"
        pooled = "-" if t.get("pooled_rho") is None else f"{t['pooled_rho']:.2f}"
        rows.append(
            [str(r), str(t.get("of_round", r - 1)), str(t.get("predictor", "")), str(t.get("n", 0)), rho, pooled, t.get("action", "")]
        )
    if not rows:
        return []
    return [
        ("h2", "Predictor trust per round"),
        (
            "p",
            "Before each round's designs were paid for, the engine's surrogate (trained on the designs paid so far) predicted "
            "them. Each row is Spearman's rank correlation between those predictions and the values then paid, for the round "
            "named and pooled over every model-predicted round so far. When the round's correlation falls below 0.3 (5 or "
            "more predictions), the next round says so in 'action' and pays for candidates the surrogate did not rank.",
        ),
        TableBlock(["round", "of round", "predictor", "designs", "rho", "rho, paid so far", "action"], rows),
    ]


def _usage_section(logs: dict[int, Any], rounds: Sequence[int], offline: bool, out: Path) -> list[Block]:
    blocks: list[Block] = [("h2", "LLM calls, tokens and cost per round")]
    if offline or not logs:
        blocks.append(("p", "The offline reasoner made every decision: no LLM calls, 0 tokens, no cost."))
        return blocks
    rows, prompt, completion = [], [], []
    total_cost = 0.0
    for r in rounds:
        u = logs.get(r, {}).get("usage_round", {})
        p, c = int(u.get("prompt_tokens", 0)), int(u.get("completion_tokens", 0))
        cost = u.get("cost_usd")
        total_cost += float(cost or 0.0)
        prompt.append(p)
        completion.append(c)
        rows.append([str(r), str(u.get("calls", 0)), str(u.get("cached_calls", 0)), str(p), str(c), "-" if cost is None else f"{cost:.4f}"])
    rows.append(
        [
            "total",
            str(sum(int(x[1]) for x in rows)),
            str(sum(int(x[2]) for x in rows)),
            str(sum(prompt)),
            str(sum(completion)),
            f"{total_cost:.4f}",
        ]
    )
    blocks.append(
        (
            "p",
            "Token counts are what the endpoint reported (0 where it reported none); cost uses the price given with "
            "--llm-price (shown as - when none was given). Cached calls replayed a stored reply and cost nothing.",
        )
    )
    blocks.append(Figure(plots.llm_usage(rounds, prompt, completion, out / "llm_usage.png"), "Prompt and completion tokens per round."))
    blocks.append(TableBlock(["round", "calls", "cached", "prompt tokens", "completion tokens", "cost (USD)"], rows))
    return blocks


def _tools_section(logs: dict[int, Any], rounds: Sequence[int]) -> list[Block]:
    """The LLM reasoner's tool calls per round: counts by tool and outcome, cached answers, tokens, notes."""
    rows = []
    calls: list[list[str]] = []
    for r in rounds:
        log = logs.get(r, {})
        t = log.get("tools")
        notes = "; ".join(str(n) for n in log.get("notes", []))
        if not t and not notes:
            continue
        t = t or {}
        by_tool = ", ".join(f"{k} {v}" for k, v in sorted(t.get("by_tool", {}).items())) or "-"
        by_status = ", ".join(f"{k} {v}" for k, v in sorted(t.get("by_status", {}).items())) or "-"
        rows.append([str(r), str(t.get("calls", 0)), str(t.get("cached", 0)), by_tool, by_status, str(t.get("tokens", 0)), notes])
        for c in t.get("log", [])[:10]:
            args = c.get("args")
            shown = ", ".join(f"{k}={_short(v)}" for k, v in args.items()) if isinstance(args, dict) else _short(args)
            calls.append(
                [str(r), str(c.get("niche", "")), str(c.get("tool", "")), shown, str(c.get("status", "")), "yes" if c.get("cached") else ""]
            )
    if not rows:
        return []
    blocks: list[Block] = [
        ("h2", "Tool calls of the LLM reasoner per round"),
        (
            "p",
            "While proposing, the LLM may call the round's cheap read-only tools: the free objectives of designs, the front "
            "found so far (without metrics against the true front) and a heuristic's evidence. Expensive objectives are never "
            "callable; such calls are refused. Calls are bounded per round, and a call asked again in the same round is "
            "answered from the round's cache. Tokens are those of the requests that offered tools.",
        ),
        TableBlock(["round", "calls", "cached", "by tool", "by outcome", "tokens", "notes"], rows),
    ]
    if calls:
        blocks.append(TableBlock(["round", "niche", "tool", "arguments", "outcome", "cached"], calls[:200]))
    return blocks


def _short(value: Any, limit: int = 60) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _screening_section(logs: dict[int, Any], rounds: Sequence[int]) -> list[Block]:
    """Candidates of the LLM that the surrogate screened out, with the reason."""
    rows, out = [], []
    for r in rounds:
        s = logs.get(r, {}).get("screening")
        if not s:
            continue
        rows.append([str(r), str(s.get("kept", 0)), str(s.get("screened_out", 0)), str(s.get("factor", ""))])
        for row in logs[r].get("screened_out", [])[:8]:
            out.append(
                [str(r), str(row.get("niche", "")), str(row.get("design", "")), str(row.get("model") or ""), str(row.get("reason", ""))]
            )
    if not rows:
        return []
    return [
        ("h2", "Screening of the LLM's candidates"),
        (
            "p",
            "The LLM was asked for 'factor' times each niche's quota; the surrogate ranked the valid candidates by expected "
            "hypervolume gain with the cheap objective known (the rule the offline reasoner ranks by), and only the quota was "
            "paid for. The second table lists screened-out candidates (up to 8 per round) with the surrogate's reason.",
        ),
        TableBlock(["round", "paid for", "screened out", "factor"], rows),
        TableBlock(["round", "niche", "design", "model", "reason"], out),
    ]


def _yield_section(logs: dict[int, Any], rounds: Sequence[int], final: dict[str, dict[str, Any]]) -> list[Block]:
    """Per-model yield: the share of a model's paid proposals on the front of all paid evaluations, round by round and at the end."""
    per_round: list[tuple[Any, Any]] = [(r, logs.get(r, {}).get("yield")) for r in rounds]
    per_round = [(r, y) for r, y in per_round if y]
    if final:
        per_round.append(("end", final))
    if not per_round:
        return []
    models = sorted({m for _, y in per_round for m in y})
    rows = [
        [str(r)] + [f"{y[m]['on_front']}/{y[m]['paid']} ({y[m]['yield']:.2f})" if m in y else "-" for m in models] for r, y in per_round
    ]
    return [
        ("h2", "Yield of each model"),
        (
            "p",
            "For each LLM model: of its proposals paid for before the round (the last row: all of them, at the end), how many "
            "lie on the front of all paid evaluations then (on the front / paid, and the share).",
        ),
        TableBlock(["round", *models], rows),
    ]


# ---------------------------------------------------------------- rendering


def anchor(text: str) -> str:
    """The anchor GitHub gives a heading (lower case, punctuation dropped, spaces to hyphens); the HTML page uses the same.

    Example:
        >>> anchor("Front and hypervolume per round")
        'front-and-hypervolume-per-round'
        >>> anchor("LLM calls, tokens and cost per round")
        'llm-calls-tokens-and-cost-per-round'
    """
    kept = "".join(c for c in text.lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


def _contents(blocks: Sequence[Block]) -> list[str]:
    """The section headings (``h2``) in order: the table of contents."""
    return [b[1] for b in blocks if isinstance(b, tuple) and b[0] == "h2"]


def _first_section(blocks: Sequence[Block]) -> int:
    """Index of the first ``h2``: the table of contents goes before it, after the title and the summary paragraph."""
    return next((k for k, b in enumerate(blocks) if isinstance(b, tuple) and b[0] == "h2"), len(blocks))


def _folded_summary(table: TableBlock) -> str:
    return f"{len(table.rows)} rows (click to show)"


def render_markdown(blocks: Sequence[Block]) -> str:
    """Markdown with figures linked as files beside it, a table of contents after the title and long tables folded."""
    lines: list[str] = []
    toc_at = _first_section(blocks)
    for k, b in enumerate(blocks):
        if k == toc_at:
            lines += ["**Contents:** " + " · ".join(f"[{h}](#{anchor(h)})" for h in _contents(blocks)), ""]
        if isinstance(b, Figure):
            lines += [f"![{b.caption}]({b.path.name})", "", f"*{b.caption}*", ""]
        elif isinstance(b, ListBlock):
            lines += [*[f"- {_md_cell(item)}" for item in b.items], ""]
        elif isinstance(b, TableBlock):
            if not b.rows:
                continue
            folded = len(b.rows) > FOLD_ROWS
            if folded:  # GitHub and most viewers render <details> in Markdown; a blank line must follow the summary
                lines += [f"<details><summary>{_folded_summary(b)}</summary>", ""]
            lines.append("| " + " | ".join(_md_cell(h) for h in b.header) + " |")
            lines.append("|" + "---|" * len(b.header))
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in b.rows]
            lines += ["", "</details>", ""] if folded else [""]
        else:
            kind, text = b
            prefix = {"h1": "# ", "h2": "## "}.get(kind, "")
            lines += [prefix + text, ""]
    return "\n".join(lines)


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;
  color:#222;line-height:1.45}
h1{font-size:1.6em;border-bottom:2px solid #ddd;padding-bottom:.3em}h2{font-size:1.25em;margin-top:1.8em;border-bottom:1px solid #eee}
table{border-collapse:collapse;margin:1em 0;font-size:.85em;width:100%}
th,td{border:1px solid #ddd;padding:.3em .5em;text-align:left;vertical-align:top}
th{background:#f4f4f4;position:sticky;top:0}tr:nth-child(even) td{background:#fafafa}
nav.toc{background:#f7f7f7;border:1px solid #e4e4e4;padding:.4em 1em;font-size:.9em}nav.toc ul{margin:.3em 0;columns:2}
details{margin:1em 0}summary{cursor:pointer;color:#0645ad}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}figcaption{font-size:.85em;color:#555}
"""


def render_html(blocks: Sequence[Block], *, title: str, base: Path) -> str:
    """One self-contained page: figures embedded as data URIs, no external resources."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{CSS}</style></head><body>",
    ]
    toc_at = _first_section(blocks)
    for k, b in enumerate(blocks):
        if k == toc_at:
            items = "".join(f'<li><a href="#{anchor(h)}">{html.escape(h)}</a></li>' for h in _contents(blocks))
            parts.append(f'<nav class="toc"><strong>Contents</strong><ul>{items}</ul></nav>')
        if isinstance(b, Figure):
            data = base64.b64encode((base / b.path.name).read_bytes()).decode("ascii")
            parts.append(
                f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(b.caption)}">'
                f"<figcaption>{html.escape(b.caption)}</figcaption></figure>"
            )
        elif isinstance(b, ListBlock):
            parts.append("<ul>" + "".join(f"<li>{html.escape(item)}</li>" for item in b.items) + "</ul>")
        elif isinstance(b, TableBlock):
            if not b.rows:
                continue
            head = "".join(f"<th>{html.escape(h)}</th>" for h in b.header)
            body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in b.rows)
            table = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            if len(b.rows) > FOLD_ROWS:
                table = f"<details><summary>{html.escape(_folded_summary(b))}</summary>{table}</details>"
            parts.append(table)
        else:
            kind, text = b
            tag = kind if kind in ("h1", "h2") else "p"
            anchored = f' id="{anchor(text)}"' if kind == "h2" else ""
            parts.append(f"<{tag}{anchored}>{html.escape(text)}</{tag}>")
    parts.append("</body></html>")
    return "\n".join(parts)
