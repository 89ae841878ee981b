"""``coevo kb`` end to end: list, show, review, exchange, report, ablate, and ``search --kb-from``."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import optuna
import pytest

from agent.cli import main
from knowledge.store import KnowledgeStore

STUDY = "nb201-cifar10-fpga-pelnas-s0"


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A 64-evaluation pelnas search on fpga (default study name), shared by this module's tests."""
    folder = tmp_path_factory.mktemp("kb")
    storage = f"sqlite:///{folder / 'study.sqlite3'}"
    assert main(["search", "--proposer", "pelnas", "--budget", "64", "--storage", storage, "--json"]) == 0
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
    assert "history" in text
    # people get the figures to 3 significant digits with their unit (pp: a difference of percentages)
    unit = "pp" if raw["unit"] == "%" else raw["unit"]
    effect = re.search(rf"effect ([+-]?\d+\.?\d*) {unit},", text)
    ci = re.search(rf"ci95 ± (\d+\.?\d*) {unit},", text)
    assert effect and ci, text
    assert float(effect[1]) == pytest.approx(raw["effect"], rel=5e-3) and len(effect[1].strip("+-").replace(".", "").lstrip("0")) == 3
    assert float(ci[1]) == pytest.approx(raw["ci95"], rel=5e-3)
    assert repr(raw["effect"]) not in text and repr(raw["ci95"]) not in text


def test_bad_ids_and_missing_store_are_one_line_errors(searched: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["kb", "show", "H999", "--storage", searched]) == 2
    assert "no heuristic 'H999'" in capsys.readouterr().err
    assert main(["kb", "list", "--storage", searched, "--study", "nope"]) == 2
    assert "no knowledge base named 'nope'" in capsys.readouterr().err
    assert main(["kb", "list", "--storage", f"sqlite:///{tmp_path / 'none.sqlite3'}"]) == 2
    assert "no knowledge store at" in capsys.readouterr().err


def test_rejected_heuristic_stays_out_of_prompts_when_the_search_resumes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    storage = f"sqlite:///{tmp_path / 's.sqlite3'}"
    args = ["search", "--proposer", "pelnas", "--device", "raspi4", "--storage", storage, "--json"]
    assert main([*args, "--budget", "64"]) == 0
    study = optuna.load_study(study_name="nb201-cifar10-raspi4-pelnas-s0", storage=storage)
    cited = [h for t in study.trials for h in t.user_attrs.get("heuristics", [])]
    target = max(set(cited), key=cited.count)  # the most cited heuristic
    assert main(["kb", "reject", target, "--why", "not on this board", "--device", "raspi4", "--storage", storage]) == 0
    rounds_before = int(study.user_attrs["coevo.round"])
    assert main([*args, "--budget", "124"]) == 0
    study = optuna.load_study(study_name="nb201-cifar10-raspi4-pelnas-s0", storage=storage)
    later = [t for t in study.trials if t.user_attrs.get("round", 0) >= rounds_before]
    assert later and not any(target in t.user_attrs.get("heuristics", []) for t in later)
    head = KnowledgeStore.for_storage(storage).history("nb201-cifar10-raspi4-pelnas-s0", target)
    assert head[-1].status == "rejected" and any("not on this board" in v.change for v in head)
    assert head[-1].version > next(v.version for v in head if v.status == "rejected")  # the search kept editing it


def test_reject_needs_a_reason(searched: str) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["kb", "reject", "H1", "--storage", searched])
    assert exc.value.code == 2


def test_export_import_and_a_malformed_file(searched: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "kb.jsonl"
    assert main(["kb", "export", "--storage", searched, "--out", str(path)]) == 0
    n = len(path.read_text().splitlines())
    assert n > 0
    assert main(["kb", "import", str(path), "--storage", searched, "--study", "copy"]) == 0
    assert f"imported {n} heuristics into copy" in capsys.readouterr().out
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


def test_ablate_whole_kb_and_one_heuristic(searched: str, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["kb", "ablate", "all", "--seeds", "2", "--storage", searched, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    hv = result["metrics"]["hv_ratio"]
    assert len(hv["base"]) == len(hv["variant"]) == 2 and hv["ci95"] is not None and result["seeds"] == [0, 1]
    assert abs(hv["mean_delta"] - (sum(hv["variant"]) - sum(hv["base"])) / 2) < 1e-12
    study = optuna.load_study(study_name=f"{STUDY}.ablate-all.variant.s0", storage=searched)
    guided = [t for t in study.trials if t.user_attrs.get("round", 0) > 0]
    assert guided and not any(t.user_attrs.get("heuristics") for t in guided)  # nothing was handed to the reasoner
    assert main(["kb", "ablate", "H1", "--seeds", "1", "--storage", searched]) == 0
    text = capsys.readouterr().out
    assert "without H1" in text and "was learned in" in text


def test_search_kb_from_study_and_file(searched: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["search", "--proposer", "pelnas", "--device", "raspi4", "--budget", "44", "--storage", searched, "--json"]
    assert main([*args, "--kb-from", STUDY]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["study"] == f"nb201-cifar10-raspi4-pelnas-kbfrom-{STUDY}-s0"
    store = KnowledgeStore.for_storage(searched)
    imported = [v for v in store.history(result["study"]) if v.origin]
    assert imported and all(v.origin.startswith(f"{STUDY}:") for v in imported)
    path = tmp_path / "fpga.jsonl"
    assert main(["kb", "export", "--storage", searched, "--out", str(path)]) == 0
    assert main([*args, "--kb-from", str(path), "--seed", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["study"] == "nb201-cifar10-raspi4-pelnas-kbfrom-fpga-s1"
    assert main([*args, "--kb-from", "no-such-thing", "--seed", "2"]) == 2
    assert "no such file, and no knowledge base" in capsys.readouterr().err
    assert main(["search", "--proposer", "tpe", "--budget", "5", "--storage", searched, "--kb-from", STUDY]) == 2
    assert "--kb-from needs a pelnas proposer" in capsys.readouterr().err
