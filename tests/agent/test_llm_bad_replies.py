"""An LLM that answers with text that is not the JSON asked for, and a study resumed with another reasoner: what the
terminal and the knowledge-base report say about them (found by a new user's walk-through)."""

from __future__ import annotations

import logging
import re
from collections import Counter
from pathlib import Path

import pytest

from coevo.agent.cli import main
from tests.fakes import nb201_model
from tests.fakes.openai_server import FakeOpenAI

LLM = ("--reasoner", "llm", "--llm-model", "fake-7b", "--tools", "off")


def _report(storage: str, study: str, out: Path) -> str:
    assert main(["kb", "report", "--storage", storage, "--study", study, "--out", str(out)]) == 0
    return (out / "report.md").read_text()


def test_replies_that_are_never_valid_json_are_asked_for_once_per_niche_and_round_and_the_report_says_updates_failed(
    storage: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with FakeOpenAI(default={"content": "Sure! Here are some great designs for you."}) as fake, caplog.at_level(logging.WARNING):
        main(["search", *LLM, "--llm-base-url", fake.url, "--budget", "30", "--storage", storage, "--study", "prose"])
    skipped = Counter(r.getMessage() for r in caplog.records if "skipped in round" in r.getMessage())
    assert skipped and set(skipped.values()) == {1}  # each niche's failure once a round, not once per engine retry
    first_prompts = Counter(next(m["content"] for m in r["messages"] if m["role"] == "user") for r in fake.requests)
    assert max(first_prompts.values()) <= 3  # a prompt's attempts (the first and two corrections), never replayed
    updates = [r.getMessage() for r in caplog.records if "knowledge-base update" in r.getMessage()]
    assert updates and all("skipped" in u and "Invalid JSON" in u for u in updates)

    report = _report(storage, "prose", tmp_path / "report")
    assert "too few evaluations" not in report and "a baseline or the no-knowledge ablation" not in report
    # every update is counted, the one of the round that stopped the search (no valid candidate 3 rounds in a row) too
    assert re.search(rf"\b{len(updates)} knowledge-base updates? of its reasoner \(llm:fake-7b\) failed \(round \d: no valid reply", report)


def test_a_study_resumed_with_another_reasoner_names_both_with_their_rounds(storage: str, tmp_path: Path) -> None:
    assert main(["search", "--reasoner", "offline", "--budget", "20", "--storage", storage, "--study", "mixed"]) == 0
    with FakeOpenAI(default=nb201_model.reply) as fake:
        assert main(["search", *LLM, "--llm-base-url", fake.url, "--budget", "40", "--storage", storage, "--study", "mixed"]) == 0
    report = _report(storage, "mixed", tmp_path / "report")
    summary = next(line for line in report.splitlines() if line.startswith("Problem: "))
    assert "Reasoners: offline (no LLM) in rounds 0-" in summary and "; llm:fake-7b in rounds " in summary
    assert "resumed with another reasoner" in summary and "no LLM was called" not in report


def test_an_endpoint_whose_ping_is_not_json_is_one_line_not_a_traceback(storage: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The start-up check sends one token when /models does not list the model; a body that is not JSON there crashed."""
    with FakeOpenAI(default={"raw": "<html>not an API</html>"}, models=None) as fake:
        rc = main(["search", *LLM, "--llm-base-url", fake.url, "--budget", "4", "--storage", storage, "--study", "html"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert f"the LLM endpoint {fake.url}" in err and "not an OpenAI chat completion" in err
