"""``coevo search --kb-from`` a ``prune`` study into ``deploy-lm``, whose ``prune`` part is that problem (issue 32's example).

The source is a real 40-evaluation pelnas search of ``prune`` on the tiny LM in a temporary SQLite
file; the joint search is a short deploy-lm search with one small batch per design. What it imports
is checked against the source knowledge base and deploy-lm's own parts, not against printed output.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coevo.agent.cli import main
from coevo.knowledge.imported import imported_heuristics
from coevo.knowledge.store import KnowledgeStore
from coevo.search.deploy_lm.problem import DeployLmProblem
from coevo.search.transfer import prior_evidence

pytestmark = pytest.mark.slow  # 40 pruned tiny LMs for the source, 6 joint designs on the FPGA model

SOURCE = "prune-src"


@pytest.fixture(scope="module")
def storage(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A prune pelnas study of lm-pydoc-tiny (40 evaluations: enough for the offline reasoner to state heuristics)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('kbdeploylm') / 'study.sqlite3'}"
    prune = ["search", "--problem", "prune", "--model", "lm-pydoc-tiny", "--proposer", "pelnas", "--budget", "40"]
    assert main([*prune, "--storage", url, "--study", SOURCE, "--json"]) == 0
    return url


def test_a_prune_study_seeds_the_prune_part_and_the_report_says_where_each_heuristic_came_from(
    storage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    problem = DeployLmProblem()
    evidence = prior_evidence(problem, storage, SOURCE)
    assert evidence.heuristics_only and evidence.part == "prune" and evidence.evaluations == ()
    joint = ["search", "--problem", "deploy-lm", "--proposer", "pelnas", "--budget", "6", "--batch", "4", "--draws", "1"]
    assert main([*joint, "--storage", storage, "--kb-from", SOURCE, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    store = KnowledgeStore.for_storage(storage)
    source = store.latest(SOURCE)
    items = imported_heuristics(store, result["study"])
    assert len(items) == len(source) > 0
    sparsities = set(problem.part("prune").problem.distributions())
    for i in items:
        head = store.latest(result["study"])[i.hid]
        assert (i.source, i.problem, i.part) == (SOURCE, "prune", "prune")
        assert head.scope["problem"] == "deploy-lm" and head.scope["part"] == "prune"
        param = (source[i.origin.split(":")[1]].structured or {}).get("param")
        if param is not None:  # the claim names the joint parameter of the same name, one of the prune part's
            assert head.structured is not None and head.structured["param"] == param in sparsities
    out = tmp_path / "report"
    assert main(["kb", "report", "--storage", storage, "--study", result["study"], "--out", str(out)]) == 0
    section = (out / "report.md").read_text().split("## Imported heuristics\n", 1)[1].split("\n## ", 1)[0]
    assert sum(f"| {SOURCE}:" in line and "| prune -> part prune |" in line for line in section.splitlines()) == len(items)
