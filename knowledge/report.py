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

from knowledge import report_plots as plots
from knowledge import validation
from knowledge.store import KnowledgeStore, Version, iter_ids
from search.metrics import pareto_mask
from search.niches import partition_for
from search.proposers import Evaluation
from search.round_log import read_round_logs
from search.runner import LATENCY_BANDS, StoredSearch, evaluations_from_study, load_search


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


Block = tuple[str, str] | TableBlock | Figure
"""``("h1"|"h2"|"p", text)``, a table or a figure."""


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
    out.mkdir(parents=True, exist_ok=True)
    search = load_search(storage, study_name)
    store = store or KnowledgeStore.for_storage(storage)
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


def _blocks(search: StoredSearch, store: KnowledgeStore, out: Path, storage: str | None) -> list[Block]:
    study, problem = search.study, search.problem
    acc_name, lat_name = problem.front_objectives
    units = {o.name: o.unit for o in problem.objectives}
    paid = [e for e in evaluations_from_study(problem, study) if e.query]
    ref = problem.reference() if problem.found_set == "all" else None
    rounds_of = np.array([int(e.attrs.get("round", 0)) for e in paid])
    acc = np.array([e.values[acc_name] for e in paid])
    lat = np.array([e.values[lat_name] for e in paid])
    rounds = sorted(set(rounds_of.tolist()))
    logs = read_round_logs(storage, study)
    reasoner = str(next((v.get("reasoner") for v in logs.values() if v.get("reasoner")), "none (not a co-evolution search)"))
    kb_name = study.study_name
    history = store.history(kb_name) if store.exists(kb_name) else []
    latest = store.latest(kb_name) if history else {}
    outcomes = validation.outcomes(problem, paid)
    records = validation.records(outcomes)
    hv = [ref.hv_ratio(acc[rounds_of <= r], lat[rounds_of <= r]) for r in rounds] if ref else []
    evals = [int((rounds_of <= r).sum()) for r in rounds]

    blocks: list[Block] = [("h1", f"Review of search {study.study_name}")]
    offline = reasoner.startswith("offline")
    spec = ", ".join(f"{k}={v}" for k, v in problem.spec().items() if isinstance(v, str))
    blocks.append(
        (
            "p",
            f"Problem: {spec}. Proposer: {search.proposer}, seed {search.seed}, budget {search.budget} evaluations; "
            f"{len(paid)} designs evaluated in {len(rounds)} rounds. Reasoner: {reasoner}"
            + (" - statistics, not a language model: no LLM was called." if offline else ".")
            + f" Knowledge base: {len(latest)} heuristics, {len(history)} versions (store {store.url}).",
        )
    )
    blocks.append(
        (
            "p",
            "How to read this: each design is scored on two objectives, "
            f"{acc_name} ({units[acc_name]}, higher is better) and {lat_name} ({units[lat_name]}, lower is better). "
            "A design is on the front when no other design is at least as good on both. The HV ratio is the area the found front "
            "dominates divided by the area of the true front (computed from the full benchmark table), 1.0 meaning the whole true "
            "front was found. The design space is split into complexity niches; each round the reasoner first updates the knowledge "
            "base (heuristics: claims about the design space with evidence), then proposes designs per niche guided by it.",
        )
    )
    if ref is not None and paid:
        final = hv[-1]
        blocks.append(("p", f"Final HV ratio {final:.4f}; front recall {ref.recall([e.point_id for e in paid]):.3f}."))
    # --- fronts and HV
    blocks.append(("h2", "Front and hypervolume per round"))
    if paid:
        blocks.append(
            Figure(
                plots.fronts_by_round(
                    ref,
                    rounds,
                    acc,
                    lat,
                    rounds_of,
                    out / "fronts_by_round.png",
                    acc_label=f"{acc_name} ({units[acc_name]})",
                    lat_label=f"{lat_name} ({units[lat_name]})",
                ),
                "Found front after selected rounds (colours) over the true front (black) and every evaluated design (grey).",
            )
        )
    if hv:
        blocks.append(Figure(plots.hv_by_round(rounds, hv, evals, out / "hv_by_round.png"), "HV ratio at the end of each round."))
        blocks.append(
            TableBlock(
                ["round", "evaluations", "HV ratio", "front size"],
                [
                    [str(r), str(n), f"{h:.4f}", str(int(pareto_mask(acc[rounds_of <= r], lat[rounds_of <= r]).sum()))]
                    for r, n, h in zip(rounds, evals, hv, strict=True)
                ],
            )
        )
    elif paid:
        blocks.append(("p", "No true front is known for this search (accuracy was estimated), so no HV ratio per round is shown."))
    # --- knowledge changes
    blocks += _changes_section(history, logs, rounds)
    blocks += _heuristics_section(latest, records, store, kb_name)
    blocks += _exploration_section(problem, paid, lat, ref, out)
    blocks += _usage_section(logs, rounds, offline, out)
    # kb activity figure after the changes table is built
    if history:
        counts = _activity(history, rounds)
        blocks.insert(
            next(k for k, b in enumerate(blocks) if b == ("h2", "Knowledge-base changes per round")) + 1,
            Figure(plots.kb_activity(rounds, counts, out / "kb_activity.png"), "Heuristic versions written per round, by kind of change."),
        )
    return blocks


def _kind(v: Version, previous: Version | None) -> str:
    if previous is None:
        return "created"
    if v.changed_by == "human":
        return "reviewed"
    if v.status != previous.status and v.status in ("validated", "refuted"):
        return v.status
    return "edited"


def _activity(history: Sequence[Version], rounds: Sequence[int]) -> dict[str, list[int]]:
    counts: dict[str, Counter[int]] = defaultdict(Counter)
    prev: dict[str, Version] = {}
    for v in history:
        counts[_kind(v, prev.get(v.hid))][v.round] += 1
        prev[v.hid] = v
    kinds = [k for k in ("created", "edited", "validated", "refuted", "reviewed") if k in counts]
    return {k: [counts[k][r] for r in rounds] for k in kinds}


def _changes_section(history: Sequence[Version], logs: dict[int, Any], rounds: Sequence[int]) -> list[Block]:
    blocks: list[Block] = [("h2", "Knowledge-base changes per round")]
    if not history:
        blocks.append(("p", "This search kept no knowledge base (a baseline or the no-knowledge ablation)."))
        return blocks
    blocks.append(
        (
            "p",
            "The knowledge base learned from round r's results is saved as round r (it guides round r + 1). Below: every heuristic "
            "created, and every status change (validated, refuted, a person's review), with the reason recorded at the time. "
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
    blocks: list[Block] = [("h2", "Each heuristic's record")]
    if not latest:
        return blocks
    blocks.append(
        (
            "p",
            "Proposals citing a heuristic are its test: a proposal wins when it extends its niche's front as it stood before its "
            "round. The base rate is the win rate of the proposals of the same niches and rounds that did not cite it. The validation "
            f"loop refutes a heuristic with at least {validation.MIN_CITED} citing proposals when P(win rate > base rate) <= "
            f"{validation.REFUTE_P} and validates it when >= {validation.VALIDATE_P}. Support/refute counts are the evidence rows "
            "(trials on either side of the claim).",
        )
    )
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


def _exploration_section(problem: Any, paid: Sequence[Evaluation], lat: np.ndarray, ref: Any, out: Path) -> list[Block]:
    blocks: list[Block] = [("h2", "Exploration across niches and latency bands")]
    if not paid:
        return blocks
    niches = partition_for(problem.name)
    lo, hi = (ref.lat_min, ref.lat_max) if ref else (float(lat.min()), float(lat.max()))
    edges = np.linspace(lo, hi, LATENCY_BANDS + 1)
    band = np.clip(np.searchsorted(edges, lat, side="right") - 1, 0, LATENCY_BANDS - 1)
    index = {n.id: k for k, n in enumerate(niches)}
    counts = np.zeros((len(niches), LATENCY_BANDS), dtype=int)
    for e, b in zip(paid, band, strict=True):
        counts[index[_niche(niches, e)], b] += 1
    labels = [f"{edges[k]:.3g}-{edges[k + 1]:.3g}" for k in range(LATENCY_BANDS)]
    blocks.append(
        (
            "p",
            f"Evaluated designs per complexity niche and per latency band (equal-width bands over the whole space's "
            f"{problem.front_objectives[1]} range). An empty row or column is a part of the space the search never looked at.",
        )
    )
    blocks.append(
        Figure(plots.exploration([n.id for n in niches], labels, counts, out / "exploration.png"), "Evaluations per niche and band.")
    )
    blocks.append(
        TableBlock(
            ["niche", "description", *labels, "total"],
            [[n.id, n.description, *[str(c) for c in counts[k]], str(counts[k].sum())] for k, n in enumerate(niches)],
        )
    )
    return blocks


def _niche(niches: Any, e: Evaluation) -> str:
    from search.niches import niche_of

    return str(niche_of(niches, e.point))


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


# ---------------------------------------------------------------- rendering


def render_markdown(blocks: Sequence[Block]) -> str:
    """Markdown with figures linked as files beside it."""
    lines: list[str] = []
    for b in blocks:
        if isinstance(b, Figure):
            lines += [f"![{b.caption}]({b.path.name})", "", f"*{b.caption}*", ""]
        elif isinstance(b, TableBlock):
            if not b.rows:
                continue
            lines.append("| " + " | ".join(_md_cell(h) for h in b.header) + " |")
            lines.append("|" + "---|" * len(b.header))
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in b.rows]
            lines.append("")
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
    for b in blocks:
        if isinstance(b, Figure):
            data = base64.b64encode((base / b.path.name).read_bytes()).decode("ascii")
            parts.append(
                f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(b.caption)}">'
                f"<figcaption>{html.escape(b.caption)}</figcaption></figure>"
            )
        elif isinstance(b, TableBlock):
            if not b.rows:
                continue
            head = "".join(f"<th>{html.escape(h)}</th>" for h in b.header)
            body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in b.rows)
            parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        else:
            kind, text = b
            tag = kind if kind in ("h1", "h2") else "p"
            parts.append(f"<{tag}>{html.escape(text)}</{tag}>")
    parts.append("</body></html>")
    return "\n".join(parts)
