"""``coevo kb``: read, review, exchange, report on and ablate the knowledge bases of searches.

Every subcommand finds its knowledge base the way ``coevo search`` finds its study:
``--study NAME``, or the default name built from the same options (``--problem`` and its
options, e.g. NB201's ``--dataset`` and ``--device``; ``--proposer``, default ``pelnas`` here:
only co-evolution searches have a knowledge base; ``--seed``), in ``--storage`` (default
``sqlite:///runs/coevo.sqlite3``; the knowledge store is the ``.kb.sqlite3`` file beside it).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.markup import escape

from coevo.agent.cli._common import (
    add_kb_from_arguments,
    add_problem_argument,
    add_problem_arguments,
    add_reasoner_arguments,
    err,
    out,
    out_folder,
    problem_values,
    progress_bar,
    search_config,
)
from coevo.agent.tables import Column, print_design_table, print_markdown, print_table
from coevo.knowledge.heuristics import STATUS_MEANING, STATUSES, effect_unit, format_structured, quantity_label, sig, with_unit
from coevo.knowledge.history import condensed
from coevo.knowledge.imported import imported_heuristics, provenance_line
from coevo.knowledge.store import IMPORT_BY, EvidenceRow, KnowledgeStore, Version, default_kb_url, iter_ids
from coevo.search.config import DEFAULT_PROPOSER, ReasonerConfig, SearchConfig, default
from coevo.search.errors import UserInputError
from coevo.search.problem import Problem
from coevo.search.proposers import proposer_names
from coevo.search.storage import DEFAULT_STORAGE, sqlite_path
from coevo.search.strict_json import strict_dumps


def add_arguments(p: argparse.ArgumentParser, problem: type[Problem] | None) -> None:
    """The ``coevo kb`` subcommands and their options."""
    sub = p.add_subparsers(dest="kb_command", required=True, metavar="{list,show,accept,reject,export,import,report,ablate}")

    def common(q: argparse.ArgumentParser) -> argparse.ArgumentParser:
        q.add_argument("--storage", default=None, help=f"study storage URL (default: {DEFAULT_STORAGE})")
        q.add_argument("--study", default=None, help="study name (default: built from the options below, as coevo search does)")
        add_problem_argument(q)
        q.add_argument(
            "--proposer",
            default=DEFAULT_PROPOSER,
            help=f"the search's proposer, of {', '.join(proposer_names())} (default: {DEFAULT_PROPOSER})",
        )
        q.add_argument("--seed", type=int, default=default("seed"), help=f"seed (default: {default('seed')})")
        # what else shapes the default study name (the proposer's variant): a --kb-from source, the LLM's model, the screening
        add_kb_from_arguments(q)
        add_reasoner_arguments(q)
        add_problem_arguments(q, problem)
        return q

    ls = common(sub.add_parser("list", help="heuristics: id, text, scope, confidence, status, evidence counts"))
    ls.add_argument("--all", action="store_true", help="every knowledge base in the store (filtered by --problem and the options given)")
    ls.add_argument("--status", default=None, choices=STATUSES, help="only this status")
    ls.add_argument("--json", action="store_true", help="one JSON object per heuristic")
    show = common(sub.add_parser("show", help="one heuristic: full history and evidence trials with their objective values"))
    show.add_argument("id", help="heuristic id, e.g. H17")
    show.add_argument("--json", action="store_true")
    acc = common(sub.add_parser("accept", help="accept a heuristic after review (kept in prompts, never refuted automatically)"))
    acc.add_argument("id")
    acc.add_argument("--why", default="accepted after review", help="reason, kept in the history")
    rej = common(sub.add_parser("reject", help="reject a heuristic (never put in prompts again)"))
    rej.add_argument("id")
    rej.add_argument("--why", required=True, help="reason, kept in the history")
    ex = common(sub.add_parser("export", help="write the knowledge base as JSON lines, one heuristic a line (stdout by default)"))
    ex.add_argument("--out", type=Path, default=None, help="file to write instead of stdout")
    im = common(sub.add_parser("import", help="add heuristics from an export file (all lines or none)"))
    im.add_argument("file", type=Path)
    rep = common(sub.add_parser("report", help="review report: report.md, report.html and PNG plots"))
    rep.add_argument("--out", type=out_folder, default=Path("report"), help="output folder (default: ./report)")
    ab = common(sub.add_parser("ablate", help="rerun the search's seeds without one heuristic (or 'all') and measure the change"))
    ab.add_argument("id", help="heuristic id, or 'all' for the whole knowledge base")
    ab.add_argument("--seeds", type=int, default=3, help="paired reruns (default: 3)")
    ab.add_argument("--jobs", type=int, default=1, help="runs in parallel, as processes (default: 1)")
    ab.add_argument("--json", action="store_true")


def _study_name(args: argparse.Namespace, store: KnowledgeStore | None = None) -> str:
    """The knowledge base a subcommand works on, picked the same way for every subcommand.

    ``--study NAME``; else the default study name of the options, built as ``coevo search`` builds
    it from the same flags (:func:`knowledge.kb_from.search_study_name`: the proposer's variant
    too, so a ``--kb-from`` search or an LLM's is found); and when no option was given and the
    store holds exactly one knowledge base, that one (said on stderr).
    """
    if args.study:
        return str(args.study)
    from coevo.knowledge.kb_from import search_study_name

    config = search_config(args)
    name = search_study_name(config)
    unchosen = SearchConfig.create(storage=config.storage, reasoner=None if config.reasoner is None else ReasonerConfig())
    chose = config != unchosen  # some option was given: that study is asked for, not "the only knowledge base there is"
    if store is not None and not chose and not store.exists(name):
        bases = store.bases()
        if len(bases) == 1:
            err.print(f"knowledge base {bases[0].name} (the only one in {store.url}; --study picks another)")
            return bases[0].name
    return name


def _store(args: argparse.Namespace) -> KnowledgeStore:
    url = default_kb_url(args.storage)
    path = sqlite_path(url)
    if path is not None and not path.exists():
        if args.kb_command == "report":
            # a storage of baseline searches only: their reports say there is no knowledge base; create no file
            return KnowledgeStore("sqlite:///:memory:")
        if args.kb_command != "import":
            raise UserInputError(
                f"no knowledge store at {path}: run a pelnas search first (coevo search --proposer pelnas), or pass --storage"
            )
    return KnowledgeStore(url)


def run(args: argparse.Namespace) -> int:
    """Run one ``coevo kb`` subcommand."""
    store = _store(args)
    handler = {
        "list": _list,
        "show": _show,
        "accept": _review,
        "reject": _review,
        "export": _export,
        "import": _import,
        "report": _report,
        "ablate": _ablate,
    }[args.kb_command]
    return handler(args, store)


def _counts(store: KnowledgeStore, kb: str) -> dict[str, Counter[str]]:
    counts: dict[str, Counter[str]] = {}
    for e in store.evidence(kb):
        counts.setdefault(e.hid, Counter())[e.kind] += 1
    return counts


def _list(args: argparse.Namespace, store: KnowledgeStore) -> int:
    names = _list_names(args, store)
    rows: list[tuple[str, Version, Counter[str]]] = []
    for kb in names:
        counts = _counts(store, kb)
        latest = store.latest(kb)
        for hid in iter_ids(latest):
            v = latest[hid]
            if args.status is None or v.status == args.status:
                rows.append((kb, v, counts.get(hid, Counter())))
    if args.json:
        for kb, v, c in rows:
            print(strict_dumps(_list_record(kb, v, c)))
        return 0
    _print_list(names, rows)
    return 0


def _list_names(args: argparse.Namespace, store: KnowledgeStore) -> list[str]:
    """The knowledge bases ``kb list`` shows: every one of the problem and its options (``--all``), else the study's."""
    if args.all:
        return [
            b.name
            for b in store.bases()
            if b.spec.get("problem") == args.problem and all(b.spec.get(k) == v for k, v in problem_values(args).items())
        ]
    names = [_study_name(args, store)]
    if not store.exists(names[0]):
        store.spec(names[0])  # raises with the list of knowledge bases
    return names


def _list_record(kb: str, v: Version, c: Counter[str]) -> dict[str, Any]:
    """One heuristic as a ``kb list --json`` line."""
    return {
        "kb": kb,
        "id": v.hid,
        "text": v.text,
        "scope": v.scope,
        "confidence": v.confidence,
        "status": v.status,
        "author": v.author,
        "version": v.version,
        "origin": v.origin,
        "support": c["support"],
        "refute": c["refute"],
    }


def _print_list(names: Sequence[str], rows: Sequence[tuple[str, Version, Counter[str]]]) -> None:
    """The ``kb list`` table (with a kb column when it shows several knowledge bases), through the shared printer."""
    title = f"{len(rows)} heuristics in {names[0]}" if len(names) == 1 else f"{len(rows)} heuristics in {len(names)} knowledge bases"
    several = len(names) > 1
    imported = any(v.origin for _, v, _ in rows)  # the origin column only where some heuristic came from elsewhere
    # the claim and its scope are sentences (they wrap between words); ids, statuses and counts stay whole
    columns = [
        *([Column("kb")] if several else []),
        Column("id"),
        Column("text", text=True),
        Column("scope", text=True),
        Column("conf.", justify="right"),
        Column("status"),
        Column("sup/ref"),
        Column("author"),
        *([Column("from")] if imported else []),
    ]
    cells = []
    for kb, v, c in rows:
        options = [str(x) for k, x in v.scope.items() if k not in ("problem", "niche") and isinstance(x, str | int | float)]
        where = "/".join(options) + f" niche {v.scope.get('niche') or 'any'}"
        row = [v.hid, v.text, where, f"{v.confidence:.2f}", v.status, f"{c['support']}/{c['refute']}", v.author]
        cells.append([*([kb] if several else []), *row, *([v.origin or "-"] if imported else [])])
    print_table(out, title, columns, cells)


@dataclass(frozen=True)
class _StudyValues:
    """The evaluated trials of a study that evidence points at, for ``kb show``."""

    rows: dict[int, dict[str, Any]]
    """Trial number -> objective values and design."""
    units: dict[str, str]
    """Objective name -> unit."""
    first: str | None
    """The maximised front objective (the validation loop's margins are in its unit)."""


def _trial_values(args: argparse.Namespace, study_name: str) -> _StudyValues:
    """The values of the evidence's study, when it is in this storage (else empty)."""
    from coevo.search.study import evaluations_from_study, load_search

    try:
        stored = load_search(args.storage, study_name, create=False)
    except UserInputError:
        return _StudyValues({}, {}, None)  # evidence imported from a study elsewhere: shown without values
    problem = stored.problem
    rows = {
        e.trial_number: {"design": problem.describe(e.point), **e.values} for e in evaluations_from_study(problem, stored.study) if e.query
    }
    return _StudyValues(rows, {o.name: o.unit for o in problem.objectives}, problem.front_objectives[0])


def _show(args: argparse.Namespace, store: KnowledgeStore) -> int:
    kb = _study_name(args, store)
    history = store.history(kb, args.id)
    evidence = store.evidence(kb, args.id)
    studies = {e.study for e in evidence}
    values = {s: _trial_values(args, s) for s in studies}
    head = history[-1]
    origin = next((i for i in imported_heuristics(store, kb) if i.hid == head.hid), None) if head.origin else None
    if args.json:
        print(strict_dumps({**_show_record(kb, history, evidence, values), "provenance": origin and origin.as_dict()}))
        return 0
    out.print(f"[bold]{head.hid}[/] " + escape(f"({kb}) [{head.status}, confidence {head.confidence:.3f}, author {head.author}]"))
    out.print(head.text, markup=False)
    scope = ", ".join(f"{k} {'any' if v is None else v}" for k, v in head.scope.items())
    out.print(f"scope: {scope}", markup=False)
    if origin is not None:
        out.print(provenance_line(origin), markup=False)
    if head.structured:
        out.print(f"structured: {format_structured(head.structured)}", markup=False)
    entries = condensed(history)
    folded = f", re-measurements folded into {len(entries)} rows; --json lists each" if len(entries) < len(history) else ""
    # a status change (``proposed->validated``) and a confidence range are names and numbers: whole
    columns = [Column("v"), Column("round"), Column("status"), Column("conf."), Column("by", text=True), Column("change", text=True)]
    rows = [[e.versions, e.rounds, e.last.status, e.confidence, e.last.changed_by, e.change] for e in entries]
    print_table(out, f"history ({len(history)} versions{folded})", columns, rows)
    out.print(f"{head.status}: {STATUS_MEANING.get(head.status, '')}", markup=False)
    _print_evidence(kb, head, evidence, values)
    return 0


def _show_record(kb: str, history: Sequence[Version], evidence: Sequence[EvidenceRow], values: dict[str, _StudyValues]) -> dict[str, Any]:
    """A heuristic, its versions and its evidence (with the trials' values where known) as ``kb show --json`` prints it."""
    head = history[-1]
    return {
        "kb": kb,
        "id": head.hid,
        "key": head.key,
        "text": head.text,
        "scope": head.scope,
        "structured": head.structured,
        "status": head.status,
        "confidence": head.confidence,
        "author": head.author,
        "origin": head.origin,
        "history": [v.summary() for v in history],
        "evidence": [{**vars(e), "values": values[e.study].rows.get(e.trial)} for e in evidence],
    }


def _print_evidence(kb: str, head: Version, evidence: Sequence[EvidenceRow], values: dict[str, _StudyValues]) -> None:
    """The evidence table of ``kb show``: one row per trial with its effect and objective values, its design below."""
    units = {k: u for sv in values.values() for k, u in sv.units.items()}
    objective_names: list[str] = sorted({k for sv in values.values() for row in sv.rows.values() for k in row if k != "design"})
    claim_unit = effect_unit(str((head.structured or {}).get("unit", "")))
    rows, designs = [], []
    for e in sorted(evidence, key=lambda e: (e.study, e.trial, e.source)):
        sv = values[e.study]
        row = sv.rows.get(e.trial, {})
        trial = str(e.trial) if e.study == kb else f"{e.study}#{e.trial}"
        # reasoner rows: the trial's deviation in the claim's objective; record rows: its margin on the study's first objective
        unit = claim_unit if e.source == "reasoner" else effect_unit(sv.units.get(sv.first or "", ""))
        effect = "-" if e.effect is None else with_unit(("+" if e.effect > 0 else "") + sig(e.effect), unit)
        rows.append([trial, e.kind, e.source, effect, *[sig(row[n], 4) if n in row else "-" for n in objective_names]])
        designs.append(str(row.get("design", "-")))
    print_design_table(
        out,
        _evidence_title(evidence),
        ["trial", "kind", "source", "effect", *[quantity_label(n, units.get(n, "")) for n in objective_names]],
        rows,
        designs,
        design_header="design",
    )


def _evidence_title(evidence: Sequence[EvidenceRow]) -> str:
    """``evidence (34 support from 33 trials, 1 refute)``: a trial the reasoner cited and the round's record also
    counted is two rows, so the rows and the trials are both named when they differ."""
    parts = []
    for kind in ("support", "refute"):
        rows = [e for e in evidence if e.kind == kind]
        trials = len({(e.study, e.trial) for e in rows})
        parts.append(f"{len(rows)} {kind}" + (f" from {trials} trial{'' if trials == 1 else 's'}" if trials != len(rows) else ""))
    return f"evidence ({', '.join(parts)})"


def _review(args: argparse.Namespace, store: KnowledgeStore) -> int:
    kb = _study_name(args, store)
    status = "accepted" if args.kb_command == "accept" else "rejected"
    review = store.review(kb, args.id, status, why=args.why, by="human")
    v = review.head
    if not review.recorded:
        out.print(escape(f"{v.hid} is already {v.status} (version {v.version}); nothing recorded: {v.text}"))
        return 0
    out.print(escape(f"{v.hid} is now {v.status} (version {v.version}): {v.text}"))
    return 0


def _export(args: argparse.Namespace, store: KnowledgeStore) -> int:
    from coevo.knowledge.exchange import to_jsonl

    if args.out is not None and (args.out.is_dir() or not args.out.parent.is_dir()):
        where = f"{str(args.out)!r} is a folder" if args.out.is_dir() else f"folder {str(args.out.parent)!r} does not exist"
        raise UserInputError(f"cannot write the export: {where}; pass --out PATH/FILE.jsonl in an existing folder")
    text = to_jsonl(store.export(_study_name(args, store)))
    if args.out:
        args.out.write_text(text)
        err.print(f"wrote {text.count(chr(10))} heuristics to {args.out}")
    else:
        sys.stdout.write(text)
    return 0


def _import(args: argparse.Namespace, store: KnowledgeStore) -> int:
    from coevo.knowledge.exchange import read_file
    from coevo.search.problems import make_problem

    records = read_file(args.file)  # every line checked before anything is written
    kb = _study_name(args)  # the target as named: an import may create it
    spec = store.spec(kb) if store.exists(kb) else make_problem(args.problem, problem_values(args), storage=args.storage).spec()
    before = store.latest(kb) if store.exists(kb) else {}
    ids = store.import_records(kb, records, spec=spec, by=f"{IMPORT_BY}{args.file}")
    after = store.latest(kb)
    new = [i for i in ids if i not in before]
    changed = [i for i in ids if i in before and after[i].version != before[i].version]
    same = len(ids) - len(new) - len(changed)
    if ids and not new and not changed:  # the file was imported before: say so, not "imported N"
        out.print(
            escape(f"nothing new to import into {kb}: its {same} heuristics from this file are already there unchanged"), soft_wrap=True
        )
        return 0
    counts = f"{len(new)} new, {len(changed)} updated, {same} already there unchanged"
    out.print(escape(f"imported {len(ids)} heuristics into {kb} ({counts}): {', '.join(ids[:20])}{' ...' if len(ids) > 20 else ''}"))
    return 0


def _report(args: argparse.Namespace, store: KnowledgeStore) -> int:
    from coevo.knowledge.report import write_report

    report = write_report(args.storage, _study_name(args, store), args.out, store=store)
    out.print(f"wrote {', '.join(str(p) for p in report.files)} ({report.bytes / 1024:.0f} KiB in {report.seconds:.1f} s)")
    return 0


def _ablate(args: argparse.Namespace, store: KnowledgeStore) -> int:
    from coevo.knowledge.ablation import ablate

    runs = 2 * args.seeds  # each seed: the search with the heuristics and without
    with progress_bar() as bar, bar.listening():
        task = bar.add_task(f"ablation of {args.id}", total=runs, detail=f"0/{runs} searches")

        done = itertools.count(1)

        def finished(r: Any) -> None:
            n = next(done)
            bar.update(task, completed=n, detail=f"{n}/{runs} searches · last: {r.study}")

        result = ablate(args.storage, _study_name(args, store), args.id, seeds=args.seeds, jobs=args.jobs, store=store, on_result=finished)
    if args.json:
        print(strict_dumps(result.as_dict()))
        return 0
    print_markdown(out, result.markdown())
    return 0
