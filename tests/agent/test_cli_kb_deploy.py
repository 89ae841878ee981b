"""``coevo search --kb-from`` from a part that is not predicted: a ``quant`` study seeds ``deploy-cnn``'s ``bits`` part.

The source is a real 20-evaluation pelnas search of ``quant`` (cnn-digits, no fine-tuning) in a
temporary SQLite file; a ``prune`` study (one evaluation of the tiny LM) is the problem that is no
part of deploy-cnn. What the joint search imports is checked against the source knowledge base
and deploy-cnn's own parameters, not against the loader's output.
"""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest

from coevo.agent.cli import main
from coevo.knowledge.imported import imported_heuristics
from coevo.knowledge.store import KnowledgeStore
from coevo.search.deploy_cnn.problem import DeployCnnProblem
from coevo.search.errors import UserInputError
from coevo.search.transfer import heuristic_compatibility, prior_evidence

pytestmark = pytest.mark.slow  # the source study evaluates 20 quantized CNNs, the joint searches a few more

SOURCE = "quant-src"
JOINT = ["search", "--problem", "deploy-cnn", "--proposer", "pelnas", "--json"]


@pytest.fixture(scope="module")
def storage(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A quant pelnas study (cnn-digits, round-to-nearest, 20 evaluations) and a prune study of the tiny LM (1 evaluation)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('kbdeploy') / 'study.sqlite3'}"
    quant = ["search", "--problem", "quant", "--finetune-epochs", "0", "--proposer", "pelnas", "--budget", "20"]
    assert main([*quant, "--storage", url, "--study", SOURCE, "--json"]) == 0
    prune = ["search", "--problem", "prune", "--model", "lm-pydoc-tiny", "--calib-tokens", "64", "--eval-batches", "2"]
    assert main([*prune, "--proposer", "random", "--budget", "1", "--storage", url, "--study", "prune", "--json"]) == 0
    return url


def test_a_quant_study_seeds_the_bits_part_with_its_heuristics(storage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    problem = DeployCnnProblem()
    evidence = prior_evidence(problem, storage, SOURCE)
    assert evidence.heuristics_only and evidence.part == "bits" and evidence.evaluations == ()
    assert main([*JOINT, "--budget", "16", "--storage", storage, "--kb-from", SOURCE]) == 0  # no --kb-from-use: heuristics
    result = json.loads(capsys.readouterr().out)
    assert result["information"]["transferred"] == []  # no quant accuracy labels a joint design
    store = KnowledgeStore.for_storage(storage)
    source = store.latest(SOURCE)
    bits = set(problem.part("bits").problem.distributions())
    objectives = {o.name for o in problem.objectives}
    items = imported_heuristics(store, result["study"])
    assert len(items) == len(source) > 0
    for i in items:
        there = source[i.origin.split(":")[1]]
        head = store.latest(result["study"])[i.hid]
        assert (i.source, i.problem, i.part) == (SOURCE, "quant", "bits") and i.status_there == there.status
        assert head.scope["problem"] == "deploy-cnn" and head.scope["from"] == "quant" and head.scope["part"] == "bits"
        # a claim about quant's own objectives (avg_bits, model_kbit) cannot be tested in deploy-cnn, and the report says so
        own = [e for e in store.evidence(result["study"], i.hid) if e.study == result["study"]]
        if (head.structured or {}).get("objective") not in objectives and not own:
            assert i.verdict == "not measurable here" and head.status == i.status_imported
        param = (there.structured or {}).get("param")
        if param is not None:  # the claim names the joint parameter of the same name, one of the bits part's
            assert head.structured is not None and head.structured["param"] == param in bits and head.structured["part"] == "bits"
    out = tmp_path / "report"
    assert main(["kb", "report", "--storage", storage, "--study", result["study"], "--out", str(out)]) == 0
    section = (out / "report.md").read_text().split("## Imported heuristics\n", 1)[1].split("\n## ", 1)[0]
    assert sum(f"| {SOURCE}:" in line and "| quant -> part bits |" in line for line in section.splitlines()) == len(items)


def test_what_does_not_map_is_refused_in_one_line(storage: str, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    before = set(optuna.get_all_study_names(storage))
    for use in ("evaluations", "both"):  # a quant study's accuracies label no joint design
        assert main([*JOINT, "--budget", "4", "--storage", storage, "--kb-from", SOURCE, "--kb-from-use", use]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "heuristics only" in err and f"--kb-from-use {use} cannot be met" in err
    # the prune problem prunes a language model: deploy-cnn's sparsity part is the CNN's own, so nothing maps
    assert main([*JOINT, "--budget", "4", "--storage", storage, "--kb-from", "prune"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "a study of problem prune, which is no part of deploy-cnn" in err
    assert "quant (its part 'bits')" in err
    assert set(optuna.get_all_study_names(storage)) == before  # nothing made


def test_heuristics_map_when_the_parameters_match_whatever_the_other_options(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = DeployCnnProblem()
    tuned = {"problem": "quant", "model": "cnn-digits", "finetune_epochs": 2}  # fine-tuned there, round-to-nearest here
    fit = heuristic_compatibility(problem, "bits", tuned, source="q")
    assert fit.differs["finetune_epochs"] == (2, 0) and "accuracy" not in fit.shared
    part = problem.part("bits").problem
    fewer = {k: v for k, v in part.distributions().items() if k != "fc2_rest"}
    monkeypatch.setattr(part, "distributions", lambda: fewer)  # a bits part without one of quant's parameters
    with pytest.raises(UserInputError, match=r"its parameters differ \(fc2_rest\)") as raised:
        heuristic_compatibility(problem, "bits", tuned, source="q")
    assert "\n" not in str(raised.value)
