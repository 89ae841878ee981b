"""``coevo kb`` end to end: list, show, review, exchange, report, ablate, and ``search --kb-from``."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import optuna
import pytest

from coevo.agent.cli import main
from coevo.agent.cli.kb import _evidence_title
from coevo.knowledge.store import EvidenceRow, KnowledgeStore
from coevo.search.nb201 import NB201Problem

STUDY = "nb201-cifar10-fpga-pelnas-s0"


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A 44-evaluation pelnas search on fpga (default study name), shared by this module's tests.

    Small on purpose: ``kb ablate`` reruns it six times (test time); 44 evaluations already
    give several rounds and validated heuristics with evidence.
    """
    folder = tmp_path_factory.mktemp("kb")
    storage = f"sqlite:///{folder / 'study.sqlite3'}"
    assert main(["search", "--proposer", "pelnas", "--budget", "44", "--storage", storage, "--json"]) == 0
    return storage


def _json_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_list_and_show(searched: str, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["kb", "list", "--storage", searched, "--json"]) == 0  # study found from the default options
    rows = _json_lines(capsys.readouterr().out)
    assert rows and {"id", "text", "scope", "confidence", "status", "support", "refute"} <= set(rows[0])
    assert main(["kb", "list", "--storage", searched]) == 0
    assert re.search(r"heuristics in nb201-cifar10-fpga-pelnas-s0", capsys.readouterr().out)
    assert main(["kb", "list", "--storage", searched, "--all", "--device", "raspi4", "--json"]) == 0
    assert not [r for r in _json_lines(capsys.readouterr().out) if r["kb"] == STUDY]  # scope filter
    assert main(["kb", "show", "H1", "--storage", searched, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["history"][0]["version"] == 1 and shown["evidence"]
    with_values = [e for e in shown["evidence"] if e["values"]]
    assert with_values and {"accuracy", "latency_ms", "design"} <= set(with_values[0]["values"])
    raw = KnowledgeStore.for_storage(searched).latest(STUDY)["H1"].structured
    assert raw and shown["structured"] == raw  # --json: the stored values, unrounded
    assert main(["kb", "show", "H1", "--storage", searched]) == 0
    text = " ".join(capsys.readouterr().out.split())
    # runs of versions that only re-measured the claim (same status and writer as the one before) are one row each
    versions = shown["history"]
    ks = [(v["status"], v["by"]) for v in versions]
    # a row starts at the first version, at each change, and at the first of each run of unchanged ones
    rows = sum(1 for k in range(len(ks)) if k == 0 or ks[k] != ks[k - 1] or k == 1 or ks[k - 1] != ks[k - 2])
    assert f"history ({len(versions)} versions" in text
    if rows < len(versions):
        assert f"folded into {rows} rows" in text and "re-measured" in text
    assert f"{shown['status']}: " in text  # what the status means
    # people get the figures to 3 significant digits with their unit (pp: a difference of percentages)
    unit = "pp" if raw["unit"] == "%" else raw["unit"]
    effect = re.search(rf"effect ([+-]?\d+\.?\d*) {unit},", text)
    ci = re.search(rf"ci95 ± (\d+\.?\d*) {unit},", text)
    assert effect and ci, text
    assert float(effect[1]) == pytest.approx(raw["effect"], rel=5e-3) and len(effect[1].strip("+-").replace(".", "").lstrip("0")) == 3
    assert float(ci[1]) == pytest.approx(raw["ci95"], rel=5e-3)
    assert repr(raw["effect"]) not in text and repr(raw["ci95"]) not in text
    support = [e for e in shown["evidence"] if e["kind"] == "support"]
    assert f"{len(support)} support" in text


def test_the_evidence_title_counts_rows_and_names_trials_when_a_trial_is_two_rows() -> None:
    def row(trial: int, kind: str, source: str) -> EvidenceRow:
        return EvidenceRow("H1", "s", trial, kind, source, None, 1)

    twice = [row(24, "support", "reasoner"), row(24, "support", "record"), row(25, "support", "record"), row(3, "refute", "record")]
    assert _evidence_title(twice) == "evidence (3 support from 2 trials, 1 refute)"
    assert _evidence_title([row(1, "support", "record")]) == "evidence (1 support, 0 refute)"
    assert _evidence_title([row(1, "support", "reasoner"), row(1, "support", "record")]) == "evidence (2 support from 1 trial, 0 refute)"


def test_bad_ids_and_missing_store_are_one_line_errors(searched: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["kb", "show", "H999", "--storage", searched]) == 2
    assert "no heuristic 'H999'" in capsys.readouterr().err
    assert main(["kb", "list", "--storage", searched, "--study", "nope"]) == 2
    assert "no knowledge base named 'nope'" in capsys.readouterr().err
    assert main(["kb", "list", "--storage", f"sqlite:///{tmp_path / 'none.sqlite3'}"]) == 2
    assert "no knowledge store at" in capsys.readouterr().err


@pytest.mark.slow  # 11 s on an idle 2-core machine: out of the fast loop (make test-fast), still in CI
def test_rejected_heuristic_stays_out_of_prompts_when_the_search_resumes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    storage = f"sqlite:///{tmp_path / 's.sqlite3'}"
    args = ["search", "--proposer", "pelnas", "--device", "raspi4", "--storage", storage, "--json"]
    assert main([*args, "--budget", "44"]) == 0
    study = optuna.load_study(study_name="nb201-cifar10-raspi4-pelnas-s0", storage=storage)
    cited = {h for t in study.trials for h in t.user_attrs.get("heuristics", [])}
    heads = KnowledgeStore.for_storage(storage).latest("nb201-cifar10-raspi4-pelnas-s0")
    # a cited claim about the whole space, the most confident: every round re-mines it, so the search keeps editing it
    target = max((h for h in cited if heads[h].scope.get("niche") is None), key=lambda h: heads[h].confidence)
    assert main(["kb", "reject", target, "--why", "not on this board", "--device", "raspi4", "--storage", storage]) == 0
    versions = len(KnowledgeStore.for_storage(storage).history("nb201-cifar10-raspi4-pelnas-s0", target))
    capsys.readouterr()
    assert main(["kb", "reject", target, "--why", "again", "--device", "raspi4", "--storage", storage]) == 0
    assert f"{target} is already rejected" in capsys.readouterr().out  # the same decision twice adds no version
    assert len(KnowledgeStore.for_storage(storage).history("nb201-cifar10-raspi4-pelnas-s0", target)) == versions
    rounds_before = int(study.user_attrs["coevo.round"])
    assert main([*args, "--budget", "84"]) == 0
    study = optuna.load_study(study_name="nb201-cifar10-raspi4-pelnas-s0", storage=storage)
    later = [t for t in study.trials if t.user_attrs.get("round", 0) >= rounds_before]
    assert later and not any(target in t.user_attrs.get("heuristics", []) for t in later)
    head = KnowledgeStore.for_storage(storage).history("nb201-cifar10-raspi4-pelnas-s0", target)
    assert head[-1].status == "rejected" and any("not on this board" in v.change for v in head)
    assert head[-1].version > next(v.version for v in head if v.status == "rejected")  # the search kept editing it


def test_reject_needs_a_reason(searched: str) -> None:
    assert main(["kb", "reject", "H1", "--storage", searched]) == 2


def test_export_import_and_a_malformed_file(searched: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "kb.jsonl"
    assert main(["kb", "export", "--storage", searched, "--out", str(path)]) == 0
    n = len(path.read_text().splitlines())
    assert n > 0
    assert main(["kb", "import", str(path), "--storage", searched, "--study", "copy"]) == 0
    assert f"imported {n} heuristics into copy ({n} new, 0 updated, 0 already there unchanged)" in capsys.readouterr().out
    store = KnowledgeStore.for_storage(searched)
    evidence = len(store.evidence("copy", current=False))
    assert main(["kb", "import", str(path), "--storage", searched, "--study", "copy"]) == 0  # the same file again
    assert f"nothing new to import into copy: its {n} heuristics from this file are already there unchanged" in capsys.readouterr().out
    assert len(store.evidence("copy", current=False)) == evidence  # its evidence is not counted twice
    bad = tmp_path / "bad.jsonl"
    bad.write_text(path.read_text().splitlines()[0] + "\n{oops\n")
    assert main(["kb", "import", str(bad), "--storage", searched, "--study", "copy2"]) == 2
    assert "line 2: not JSON" in capsys.readouterr().err
    assert not KnowledgeStore.for_storage(searched).exists("copy2")
    assert main(["kb", "export", "--storage", searched]) == 0
    assert len(_json_lines(capsys.readouterr().out)) == n


def test_report_is_complete_and_self_contained(searched: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report"
    assert main(["kb", "report", "--storage", searched, "--out", str(out)]) == 0
    assert "KiB in" in capsys.readouterr().out
    md = (out / "report.md").read_text()
    for section in ("Front and hypervolume per round", "Knowledge-base changes per round", "Each heuristic's record", "Exploration", "LLM"):
        assert section in md
    assert "offline (no LLM)" in md and "no LLM calls" in md
    for png in ("fronts_by_round.png", "hv_by_round.png", "kb_activity.png", "exploration.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"]({png})" in md
    page = (out / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 4 and "http://" not in page and "https://" not in page


def _section(md: str, heading: str) -> str:
    """The Markdown between ``## heading`` and the next heading."""
    return md.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_report_opens_with_the_front_the_strongest_heuristics_and_the_encoding(searched: str, tmp_path: Path) -> None:
    out = tmp_path / "report"
    assert main(["kb", "report", "--storage", searched, "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    headings = [line[3:] for line in md.splitlines() if line.startswith("## ")]
    assert headings[:3] == ["Designs found: the front", "Strongest heuristics", "How a design is written"]
    # the front, computed here from the study's trials: non-dominated on (accuracy up, latency down)
    problem = NB201Problem(dataset="cifar10", device="fpga")
    trials = [
        t for t in optuna.load_study(study_name=STUDY, storage=searched).trials if t.state.name == "COMPLETE" and t.user_attrs["query"]
    ]
    points = [(t.number, t.values[0], t.values[1], problem.from_params(t.params)) for t in trials]
    front = [p for p in points if not any(q[1] >= p[1] and q[2] <= p[2] and (q[1] > p[1] or q[2] < p[2]) for q in points)]
    table = [line for line in _section(md, "Designs found: the front").splitlines() if line.startswith("|")]
    assert table[0] == "| arch | accuracy (%) | latency (ms) | trial | on true front |"
    rows = [[c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in table[2:]]
    assert sorted(int(r[3]) for r in rows) == sorted(p[0] for p in front)
    true_ids = problem.reference().ids
    for number, acc, lat, cell in front:
        row = next(r for r in rows if int(r[3]) == number)
        assert row[0] == problem.describe(cell) and abs(float(row[1]) - acc) < 0.01 and abs(float(row[2]) - lat) < 0.001
        assert row[4] == ("yes" if problem.point_id(cell) in true_ids else "below floor" if acc < 80 else "no")
    assert [float(r[2]) for r in rows] == sorted(float(r[2]) for r in rows)  # fastest first
    # five lines of the strongest validated or accepted heuristics, or a plain statement that none is
    latest = KnowledgeStore.for_storage(searched).latest(STUDY)
    trusted = {hid for hid, v in latest.items() if v.status in ("validated", "accepted")}
    strongest = _section(md, "Strongest heuristics")
    listed = re.findall(r"^- (H\d+) \((\w+), confidence", strongest, flags=re.M)
    if trusted:
        # claims about accuracy (paid for) first; those about latency (a free table lookup) apart, after them
        about_latency = {h for h in trusted if (latest[h].structured or {}).get("objective") == "latency_ms"}
        paid, free = trusted - about_latency, about_latency
        head, _, apart = strongest.partition("Shown apart")
        first = re.findall(r"^- (H\d+) \(", head, flags=re.M)
        second = re.findall(r"^- (H\d+) \(", apart, flags=re.M)
        assert len(first) == min(5, len(paid)) and set(first) <= paid
        assert len(second) == min(5, len(free)) and set(second) <= free
        if first:
            best = max(latest[h].confidence for h in paid)
            assert latest[first[0]].confidence == best or any(latest[h].status == "accepted" for h in paid)
    else:
        assert "No heuristic is validated or accepted yet" in strongest and all(status == "proposed" for _, status in listed)
    assert problem.explain_encoding() in _section(md, "How a design is written")
    # a table of contents before the first section links every section; what each status shown means is written out
    contents = md.split("\n## ", 1)[0]
    for heading in headings:
        assert f"[{heading}](#" in contents
    record = _section(md, "Each heuristic's record")
    for status in {v.status for v in latest.values()}:
        assert re.search(rf"^- {status}: \w", record, flags=re.M), status
    # long tables are folded, the front never is
    assert "<details>" not in _section(md, "Designs found: the front")
    # axes say each unit once; fpga latencies span less than a factor of 10: a linear axis
    assert "latency_ms (ms)" not in md.split("## Front and hypervolume per round")[1].split("## Knowledge-base")[0]
    assert "log scale" not in md


def test_report_uses_a_log_axis_when_the_minimised_objective_spans_decades(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 's.sqlite3'}"
    # raspi4: the true front alone runs from about 2.5 ms to about 70 ms
    assert main(["search", "--proposer", "pelnas", "--device", "raspi4", "--budget", "30", "--storage", storage, "--json"]) == 0
    assert main(["kb", "report", "--device", "raspi4", "--storage", storage, "--out", str(tmp_path / "rep")]) == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "latency_ms on a log scale (its values span more than a factor of 10)" in md


def test_report_of_a_study_without_knowledge_says_so_first(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 's.sqlite3'}"
    assert main(["search", "--proposer", "random", "--budget", "30", "--storage", storage, "--json"]) == 0
    # the store file exists (kb commands need one); this study has no knowledge base in it
    KnowledgeStore.for_storage(storage).schema_version()
    assert main(["kb", "report", "--proposer", "random", "--storage", storage, "--out", str(tmp_path / "rep")]) == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    first = next(p for p in md.split("\n\n")[1:] if p.strip())
    assert first.startswith("This search has no knowledge base: its proposer (random) is a baseline")
    assert "## Strongest heuristics" not in md and "## Each heuristic's record" not in md
    assert "## Designs found: the front" in md


def test_a_failed_report_leaves_no_folder_and_says_why_in_one_line(
    searched: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    capsys.readouterr()
    target = tmp_path / "newdir"
    assert main(["kb", "report", "--storage", searched, "--study", "nosuch", "--out", str(target)]) == 2
    assert not target.exists() and "no study 'nosuch'" in capsys.readouterr().err
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    for out in (a_file / "rep", a_file):
        assert main(["kb", "report", "--storage", searched, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "is a file, not a folder" in err and "Traceback" not in err
    assert a_file.read_text() == "not a folder"
    # a failure while writing removes what it created (here two new levels), and nothing that was there before
    from coevo.knowledge import report_plots

    def broken(*args: object, **kwargs: object) -> Path:
        raise RuntimeError("plotting failed")

    monkeypatch.setattr(report_plots, "hv_by_round", broken)
    with pytest.raises(RuntimeError, match="plotting failed"):
        main(["kb", "report", "--storage", searched, "--out", str(tmp_path / "deep" / "rep")])
    assert not (tmp_path / "deep").exists() and a_file.exists()
    existing = tmp_path / "kept"
    existing.mkdir()
    with pytest.raises(RuntimeError, match="plotting failed"):
        main(["kb", "report", "--storage", searched, "--out", str(existing)])
    assert existing.is_dir()


def test_a_report_folder_that_cannot_be_written_or_is_empty_is_one_line(
    searched: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # an existing folder this process cannot write (a read-only mount, /sys; root ignores modes, so the
    # write is what is tried) was a PermissionError traceback after the report was built
    import coevo.sim.paths as paths

    def refused(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(paths.tempfile, "TemporaryFile", refused)
    capsys.readouterr()
    assert main(["kb", "report", "--storage", searched, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"cannot write the report into {tmp_path}: Permission denied" in " ".join(err.split()) and "Traceback" not in err
    monkeypatch.undo()
    assert main(["kb", "report", "--storage", searched, "--out", ""]) == 2  # not the current folder
    assert "needs a folder" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian chromium is not installed (apt-get install chromium)")
def test_report_renders_in_headless_chromium(searched: str, tmp_path: Path) -> None:
    out = tmp_path / "report"
    assert main(["kb", "report", "--storage", searched, "--out", str(out)]) == 0
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    page = (out / "report.html").as_uri()
    dom = subprocess.run(["chromium", *flags, "--dump-dom", page], capture_output=True, text=True, timeout=120).stdout
    assert "<h1>Review of search nb201-cifar10-fpga-pelnas-s0</h1>" in dom and dom.count("<img") == 4 and dom.count("<table") >= 3
    shot = tmp_path / "shot.png"
    subprocess.run(["chromium", *flags, "--window-size=1200,1600", f"--screenshot={shot}", page], capture_output=True, timeout=120)
    assert shot.stat().st_size > 20_000  # a rendered page with figures, not a blank one


@pytest.mark.slow  # 29 s on an idle 2-core machine: out of the fast loop (make test-fast), still in CI
def test_ablate_whole_kb_and_one_heuristic(searched: str, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["kb", "ablate", "all", "--seeds", "2", "--storage", searched, "--json"]) == 0
    printed = capsys.readouterr()
    result = json.loads(printed.out)
    # stderr is not a terminal here: the four searches are counted in plain progress lines, through to the end
    assert "ablation of all · 0/4 searches" in printed.err and "ablation of all · 4/4 searches" in printed.err
    hv = result["metrics"]["hv_ratio"]
    assert len(hv["base"]) == len(hv["variant"]) == 2 and hv["ci95"] is not None and result["seeds"] == [0, 1]
    assert abs(hv["mean_delta"] - (sum(hv["variant"]) - sum(hv["base"])) / 2) < 1e-12
    study = optuna.load_study(study_name=f"{STUDY}.ablate-all.variant.s0", storage=searched)
    guided = [t for t in study.trials if t.user_attrs.get("round", 0) > 0]
    assert guided and not any(t.user_attrs.get("heuristics") for t in guided)  # nothing was handed to the reasoner
    assert main(["kb", "ablate", "H1", "--seeds", "1", "--storage", searched]) == 0
    text = capsys.readouterr().out
    assert "without H1" in text and "was learned in" in text and "verdict: hv_ratio without H1 vs with it" in " ".join(text.split())
    assert hv["verdict"].startswith("hv_ratio without the knowledge base vs with it: ")


@pytest.mark.slow  # 13 s on an idle 2-core machine: out of the fast loop (make test-fast), still in CI
def test_search_kb_from_study_and_file(searched: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["search", "--proposer", "pelnas", "--device", "raspi4", "--budget", "44", "--storage", searched, "--json"]
    assert main([*args, "--kb-from", STUDY]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["study"] == f"nb201-cifar10-raspi4-pelnas-kbfrom-{STUDY}-s0"
    # a study seeds the predictor with its paid evaluations by default, and imports no heuristic
    store = KnowledgeStore.for_storage(searched)
    assert result["information"]["transferred"] and not [v for v in store.history(result["study"]) if v.origin]
    path = tmp_path / "fpga.jsonl"
    assert main(["kb", "export", "--storage", searched, "--out", str(path)]) == 0
    capsys.readouterr()
    # an export file paid for nothing: its heuristics are what it seeds
    assert main([*args, "--kb-from", str(path), "--seed", "1"]) == 0
    from_file = json.loads(capsys.readouterr().out)
    assert from_file["study"] == "nb201-cifar10-raspi4-pelnas-kbfrom-fpga-heuristics-s1"
    assert from_file["information"]["transferred"] == [] and [v for v in store.history(from_file["study"]) if v.origin]
    assert main([*args, "--kb-from", "no-such-thing", "--seed", "2"]) == 2
    assert "no such file, and no knowledge base" in capsys.readouterr().err
    assert main(["search", "--proposer", "tpe", "--budget", "5", "--storage", searched, "--kb-from", STUDY]) == 2
    assert "--kb-from needs a pelnas proposer" in capsys.readouterr().err


def test_kb_from_use_seeds_heuristics_or_both(searched: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["search", "--proposer", "pelnas", "--device", "raspi4", "--budget", "20", "--storage", searched, "--json"]
    store = KnowledgeStore.for_storage(searched)
    assert main([*args, "--kb-from", STUDY, "--kb-from-use", "both"]) == 0
    both = json.loads(capsys.readouterr().out)
    assert both["study"] == f"nb201-cifar10-raspi4-pelnas-kbfrom-{STUDY}-both-s0"
    imported = [v for v in store.history(both["study"]) if v.origin]
    assert both["information"]["transferred"] and imported and all(v.origin.startswith(f"{STUDY}:") for v in imported)
    assert main([*args, "--kb-from", STUDY, "--kb-from-use", "heuristics"]) == 0
    heuristics = json.loads(capsys.readouterr().out)
    assert heuristics["study"] == f"nb201-cifar10-raspi4-pelnas-kbfrom-{STUDY}-heuristics-s0"
    assert heuristics["information"]["transferred"] == [] and [v for v in store.history(heuristics["study"]) if v.origin]
    # bad input: one line, exit 2, no study made
    path = tmp_path / "fpga.jsonl"
    assert main(["kb", "export", "--storage", searched, "--out", str(path)]) == 0
    capsys.readouterr()
    assert main([*args, "--kb-from", str(path), "--kb-from-use", "evaluations", "--seed", "3"]) == 2
    assert "needs an earlier study" in capsys.readouterr().err
    assert main([*args, "--kb-from-use", "evaluations", "--seed", "4"]) == 2
    assert "give --kb-from STUDY_OR_FILE too" in capsys.readouterr().err
    names = optuna.get_all_study_names(searched)
    assert not [n for n in names if n.endswith(("-s3", "-s4")) and "raspi4" in n]


def test_kb_finds_the_knowledge_base_of_a_kb_from_search_by_its_flags(
    searched: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kb named a study without the proposer's variant (-kbfrom-<source>-heuristics here) and had no --kb-from: it missed it."""
    path = tmp_path / "fpga.jsonl"
    assert main(["kb", "export", "--storage", searched, "--out", str(path)]) == 0
    flags = ["--proposer", "pelnas", "--device", "raspi4", "--seed", "3", "--storage", searched, "--kb-from", str(path)]
    assert main(["search", *flags, "--budget", "20", "--json"]) == 0
    study = json.loads(capsys.readouterr().out)["study"]
    assert study == "nb201-cifar10-raspi4-pelnas-kbfrom-fpga-heuristics-s3"  # the source paid for nothing: heuristics, in the name
    assert main(["kb", "list", *flags, "--json"]) == 0
    listed = _json_lines(capsys.readouterr().out)
    assert listed and {h["kb"] for h in listed} == {study}
