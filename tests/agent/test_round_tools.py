"""Issue 16: the LLM reasoner calls the round's cheap tools, its candidates are screened, simulated reasoners, several models."""

from __future__ import annotations

import json
import random
from typing import Any

import numpy as np
import optuna
import pytest

from coevo.agent.coevolution import ENGINE, CoevolutionProposer, make_pelnas, screen
from coevo.agent.reasoners import make_reasoner
from coevo.agent.reasoners._base import ProposeRequest
from coevo.agent.reasoners.ensemble import LLMEnsemble, parse_models
from coevo.agent.reasoners.llm import LLMReasoner
from coevo.agent.reasoners.round_tools import RoundToolbox, ToolBudget
from coevo.agent.reasoners.simulated import Quality, SimulatedEndpoint
from coevo.knowledge.report import write_report
from coevo.search.errors import UserInputError
from coevo.search.metrics import model_yield
from coevo.search.nb201 import NB201Problem
from coevo.search.niches import single_niche
from coevo.search.proposers import Evaluation, Proposal
from coevo.search.round_log import RoundLogs
from coevo.search.runner import run_search
from coevo.search.surrogate import TreeSurrogate
from coevo.tools import REGISTRY
from coevo.tools.adapters import bound_args, to_langchain
from tests.fakes import nb201_model
from tests.fakes.openai_server import FakeOpenAI

ARCH = "|nor_conv_3x3~0|+|nor_conv_1x1~0|skip_connect~1|+|skip_connect~0|nor_conv_3x3~1|avg_pool_3x3~2|"
GOOD = json.dumps({"candidates": [{"design": ARCH, "rationale": "r"}]})


def _request(problem: NB201Problem, storage: str, quota: int = 2, round_no: int = 1) -> ProposeRequest:
    return ProposeRequest(
        problem=problem,
        niche=single_niche()[0],
        quota=quota,
        elites=(),
        heuristics=(),
        evaluations=(),
        seen=frozenset(),
        round=round_no,
        rng=random.Random(0),
        study="s",
        storage=storage,
    )


def _reasoner(url: str, **kw: Any) -> LLMReasoner:
    return LLMReasoner(model="fake-7b", base_url=url, backoff_s=0.01, timeout_s=5.0, **kw)


def _tool_messages(request: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == "tool"]


# ---------------------------------------------------------------- the adapter and the tool


def test_bound_tools_hide_fixed_arguments_and_fields() -> None:
    tool = REGISTRY.get("study.front")
    assert set(bound_args(tool, {"study": "x", "storage": None}).model_fields) == set()
    lc = to_langchain(REGISTRY.get("problem.cheap_objectives"), fixed={"problem": "nb201", "options": {"device": "raspi4"}})
    assert set(lc.args) == {"designs"}
    with pytest.raises(TypeError, match="no argument"):
        bound_args(tool, {"nope": 1})


def test_cheap_objectives_tool_gives_latency_only_and_reports_bad_designs() -> None:
    lc = to_langchain(REGISTRY.get("problem.cheap_objectives"), fixed={"problem": "nb201", "options": {"device": "raspi4"}})
    msg = lc.invoke({"name": lc.name, "args": {"designs": [ARCH, "|conv9x9~0|"]}, "id": "c1", "type": "tool_call"})
    value = json.loads(str(msg.content))["value"]
    good, bad = value["designs"]
    problem = NB201Problem(dataset="cifar10", device="raspi4")
    assert good["latency_ms"] == pytest.approx(problem.evaluate(problem.parse_design(ARCH))["latency_ms"], rel=1e-5)
    assert "accuracy" not in json.dumps(good) and "error" in bad


# ---------------------------------------------------------------- tool calls in a round


def test_a_round_calls_the_cheap_tool_then_proposes(storage: str) -> None:
    script = [
        {"tool_calls": [{"name": "problem_cheap_objectives", "arguments": {"designs": [ARCH]}}]},
        {"content": GOOD},
    ]
    with FakeOpenAI(script) as fake:
        r = _reasoner(fake.url)
        out = r.propose(_request(NB201Problem(dataset="cifar10", device="fpga"), storage))
    assert [p.point for p in out] == [NB201Problem().parse_design(ARCH)]
    assert fake.requests[0]["tools"] and {t["function"]["name"] for t in fake.requests[0]["tools"]} == {
        "problem_cheap_objectives",
        "study_front",
        "kb_show",
    }
    (observation,) = _tool_messages(fake.requests[1])
    assert '"latency_ms"' in observation and "accuracy" not in observation.split("messages")[0]
    trace = r.take_trace()["tools"]
    assert trace["calls"] == 1 and trace["by_status"] == {"ok": 1} and trace["tokens"] == 240  # the fake's 120 tokens per request
    assert r.usage.tool_calls == 1


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (
            {"name": "nb201_query", "arguments": {"arch": ARCH}},
            "refused: nb201.query is not available inside a search round (it reads accuracy",
        ),
        ({"name": "search_run", "arguments": {}}, "refused: search.run is not available"),
        ({"name": "frobnicate", "arguments": {}}, "error: there is no tool named 'frobnicate'"),
        ({"name": "problem_cheap_objectives", "arguments": {"designs": "not a list"}}, "error:"),
        (
            {"name": "problem_cheap_objectives", "arguments": "{not json"},
            "error: the arguments of problem_cheap_objectives are not a valid JSON",
        ),
    ],
)
def test_bad_tool_calls_come_back_as_observations_and_the_round_goes_on(storage: str, call: dict[str, Any], expected: str) -> None:
    with FakeOpenAI([{"tool_calls": [call]}, {"content": GOOD}]) as fake:
        out = _reasoner(fake.url).propose(_request(NB201Problem(), storage))
    assert len(out) == 1
    (observation,) = _tool_messages(fake.requests[1])
    assert observation.startswith(expected[:20]) and expected in observation


def test_a_model_calling_in_a_loop_is_cached_then_bounded(storage: str) -> None:
    loop = {"tool_calls": [{"name": "problem_cheap_objectives", "arguments": {"designs": [ARCH]}}]}
    with FakeOpenAI([loop] * 5 + [{"content": GOOD}]) as fake:
        r = _reasoner(fake.url, tool_budget=ToolBudget(max_calls=3))
        out = r.propose(_request(NB201Problem(), storage))
    assert len(out) == 1
    trace = r.take_trace()["tools"]
    assert trace["calls"] == 3 and trace["cached"] == 2  # asked three times, executed once
    assert "tools" not in fake.requests[3] and "tools" in fake.requests[2]  # past the bound the model must answer
    assert "refused: this round's 3 tool calls are used" in _tool_messages(fake.requests[4])[-1]


def test_an_endpoint_without_tool_calling_falls_back_to_the_plain_prompt(storage: str) -> None:
    def no_tools(request: dict[str, Any]) -> dict[str, Any]:
        return {"status": 400, "message": "tools are not supported"} if request.get("tools") else {"content": GOOD}

    with FakeOpenAI(default=no_tools) as fake:
        r = _reasoner(fake.url)
        first = r.propose(_request(NB201Problem(), storage))
        second = r.propose(_request(NB201Problem(), storage, round_no=2))
    assert len(first) == len(second) == 1 and r.tool_support is False
    assert sum(1 for q in fake.requests if q.get("tools")) == 1  # asked once, then plain for the rest of the run
    assert "plain prompt" in r.take_trace()["notes"][0]


def test_a_round_hides_metrics_against_the_true_front(storage: str) -> None:
    run_search(NB201Problem(), "random", budget=10, storage=storage, study_name="s")
    box = RoundToolbox(NB201Problem(), "s", storage)
    msg = box.call({"name": "study_front", "args": {}, "id": "c"}, "all")
    value = json.loads(str(msg.content))["value"]
    assert value["front"] and not {"hv_ratio", "igd", "front_recall"} & set(value)


def test_no_accuracy_is_read_outside_paid_evaluations(storage: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The budget stays honest: during a round (reasoner, its tools, screening) nothing reads an expensive objective."""
    in_round = {"now": False}
    leaks: list[str] = []
    evaluate, reference = NB201Problem.evaluate, NB201Problem.reference
    propose = CoevolutionProposer.propose

    def guarded_evaluate(self: NB201Problem, point: Any) -> dict[str, float]:
        if in_round["now"]:
            leaks.append(f"evaluate {self.describe(point)}")
        return evaluate(self, point)

    def guarded_reference(self: NB201Problem) -> Any:
        if in_round["now"]:
            leaks.append("reference")
        return reference(self)

    def round_(self: CoevolutionProposer, ctx: Any) -> list[Proposal]:
        in_round["now"] = True
        try:
            return propose(self, ctx)
        finally:
            in_round["now"] = False

    monkeypatch.setattr(NB201Problem, "evaluate", guarded_evaluate)
    monkeypatch.setattr(NB201Problem, "reference", guarded_reference)
    monkeypatch.setattr(CoevolutionProposer, "propose", round_)
    reasoner = make_reasoner("llm", base_url="simulated", model="sim-mutate", storage=storage)
    result = run_search(NB201Problem(), make_pelnas("pelnas", reasoner=reasoner), budget=64, storage=storage, study_name="honest")
    logs = RoundLogs(storage).read("honest")
    assert result.evaluations == 64 and sum(v.get("tools", {}).get("calls", 0) for v in logs.values()) > 0
    assert leaks == []


# ---------------------------------------------------------------- screening


def _paid(problem: NB201Problem, n: int, seed: int = 0) -> list[Evaluation]:
    rng = random.Random(seed)
    pts = list({problem.random_point(rng) for _ in range(n)})
    return [Evaluation(k, p, problem.point_id(p), problem.evaluate(p), True) for k, p in enumerate(pts)]


def test_screening_keeps_the_quota_by_expected_hv_and_says_why() -> None:
    problem = NB201Problem()
    paid = _paid(problem, 40)
    model = TreeSurrogate(
        problem.features([e.point for e in paid]), np.array([e.values["accuracy"] for e in paid]), bounds=(0, 100), seed=0
    )
    cands = [Proposal(e.point, rationale="llm", attrs={"model": "m"}) for e in _paid(problem, 12, seed=1)]
    kept, out = screen(problem, cands, 4, model, paid)
    assert len(kept) == 4 and len(out) == 8
    assert all("screened: rank" in p.rationale and "predicted" in p.attrs for p in kept)
    assert all("the niche pays for 4" in row["reason"] and row["model"] == "m" for row in out)
    gains = [row["gain"] for row in out]
    assert gains == sorted(gains, reverse=True)  # screened out in rank order
    kept_no_model, out_no_model = screen(problem, cands, 4, None, paid)
    assert kept_no_model == cands[:4] and "no surrogate" in out_no_model[0]["reason"]


@pytest.mark.slow  # 21 s on an idle 2-core machine: out of the fast loop (make test-fast), still in CI
def test_screen_on_llm_and_off_in_a_search(storage: str) -> None:
    def run(mode: str) -> tuple[Any, dict[int, dict[str, Any]]]:
        with FakeOpenAI(default=nb201_model.reply) as fake:
            r = _reasoner(fake.url, tools=False)
            proposer = make_pelnas("pelnas", reasoner=r, screen=mode)
            result = run_search(NB201Problem(), proposer, budget=64, storage=storage)
        return result, RoundLogs(storage).read(result.study)

    on, logs_on = run("on")
    llm, logs_llm = run("llm")
    off, logs_off = run("off")
    assert on.study.endswith("pelnas-fake-7b-notools-s0") and off.study.endswith("pelnas-fake-7b-notools-noscreen-s0")
    assert llm.study.endswith("pelnas-fake-7b-notools-screenllm-s0")
    for logs in (logs_on, logs_llm):
        screened = [v for v in logs.values() if "screening" in v]
        assert screened and all(v["screening"]["kept"] == v["proposed"] for v in screened)
    assert not any("screening" in v for v in logs_off.values())
    assert all(v["screening"]["kept_from_engine"] == 0 for v in logs_llm.values() if "screening" in v)
    # screen on ranks the engine's own candidates with the LLM's: they are tagged, and counted in the yield
    on_trials = optuna.load_study(study_name=on.study, storage=storage).trials
    from_engine = [t for t in on_trials if t.user_attrs.get("model") == ENGINE]
    assert sum(v["screening"]["kept_from_engine"] for v in logs_on.values() if "screening" in v) == len(from_engine) > 0
    # the prediction made before paying is stored with every screened proposal (round 1: the first with a fitted model)
    assert any("predicted" in t.user_attrs for t in on_trials if t.user_attrs.get("round", 0) >= 1)
    with pytest.raises(UserInputError, match="unknown screening"):
        make_pelnas("pelnas", screen="maybe")


# ---------------------------------------------------------------- simulated reasoners and several models


def test_simulated_quality_names() -> None:
    assert Quality.parse("sim-oracle-0.25") == Quality("oracle", 0.25, True)
    assert Quality.parse("sim-mutate-notools") == Quality("mutate", 0.0, False)
    with pytest.raises(UserInputError, match="sim-random, sim-mutate or sim-oracle"):
        Quality.parse("gpt-4o")
    with pytest.raises(UserInputError, match="unknown simulated reasoner"):
        make_reasoner("llm", base_url="simulated", model="sim-great")


def test_a_better_simulated_reasoner_proposes_better_designs(storage: str) -> None:
    """Quality is real: over the same elites, the oracle's picks are more accurate than uniform random ones."""
    problem = NB201Problem()
    paid = _paid(problem, 30)
    elites = tuple(sorted(paid, key=lambda e: -e.values["accuracy"])[:5])
    means = {}
    with SimulatedEndpoint() as endpoint:
        for model in ("sim-random", "sim-oracle-0"):
            r = LLMReasoner(model=model, base_url=endpoint.url, tools=False)
            got = []
            for k in range(4):
                request = ProposeRequest(
                    problem=problem,
                    niche=single_niche()[0],
                    quota=6,
                    elites=elites,
                    heuristics=(),
                    evaluations=tuple(paid),
                    seen=frozenset(),
                    round=k + 1,
                    rng=random.Random(k),
                    study=f"{model}{k}",
                    storage=storage,
                )
                got += [problem.evaluate(p.point)["accuracy"] for p in r.propose(request)]
            means[model] = float(np.mean(got))
            assert (
                r.label.startswith("llm:")
                and make_reasoner("llm", base_url="simulated", model=model).label == f"simulated:{model} (no LLM)"
            )
    assert means["sim-oracle-0"] > means["sim-random"] + 2.0


def test_parse_models() -> None:
    assert parse_models("a:3,b") == [("a", 3.0), ("b", 1.0)]
    assert parse_models("llama3:8b") == [("llama3:8b", 1.0)]
    for bad in ("a:0", "a,a", " , "):
        with pytest.raises(UserInputError):
            parse_models(bad)


def test_two_models_share_a_search_and_each_has_a_yield(storage: str, tmp_path: Any) -> None:
    reasoner = make_reasoner("llm", base_url="simulated", model="sim-mutate:1,sim-random:1", storage=storage)
    assert isinstance(reasoner, LLMEnsemble) and reasoner.label == "simulated:sim-mutate+sim-random (no LLM)"
    result = run_search(NB201Problem(), make_pelnas("pelnas", reasoner=reasoner), budget=84, storage=storage, study_name="two")
    logs = RoundLogs(storage).read("two")
    last = logs[max(logs)]
    # screen on (the default) ranks the engine's own candidates with the models': it has a yield too
    assert set(last["yield"]) <= {"sim-mutate", "sim-random", ENGINE} and ENGINE in last["yield"]
    # both models are drawn in the run (a small last round may ask one niche, so one model, only)
    assert set().union(*(log.get("models_drawn", {}) for log in logs.values())) == {"sim-mutate", "sim-random"}
    paid = [t for t in optuna.load_study(study_name="two", storage=storage).trials if t.state.name == "COMPLETE"]
    by_model = {m: sum(1 for t in paid if t.user_attrs.get("model") == m and t.user_attrs["round"] < max(logs)) for m in last["yield"]}
    assert {m: y["paid"] for m, y in last["yield"].items()} == by_model  # the yield counts the study's own trials
    assert result.evaluations == 84
    write_report(storage, "two", tmp_path / "rep")
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "## Yield of each model" in text and "## Tool calls of the LLM reasoner per round" in text and "## Screening" in text


def test_model_yield_counts_front_members() -> None:
    problem = NB201Problem()
    paid = _paid(problem, 20)
    tagged = [Evaluation(e.trial_number, e.point, e.point_id, e.values, True, {"model": "ab"[e.trial_number % 2]}) for e in paid]
    y = model_yield(problem, tagged)
    assert y["a"]["paid"] + y["b"]["paid"] == len(paid)
    from coevo.search.metrics import pareto_mask

    front = pareto_mask(np.array([e.values["accuracy"] for e in paid]), np.array([e.values["latency_ms"] for e in paid]))
    assert y["a"]["on_front"] + y["b"]["on_front"] == int(front.sum())


# ---------------------------------------------------------------- the command line and the harness


@pytest.mark.slow  # 10 s on an idle 2-core machine: out of the fast loop (make test-fast), still in CI
def test_search_and_bench_flags_reach_the_engine(capsys: pytest.CaptureFixture[str], storage: str, tmp_path: Any) -> None:
    from coevo.agent.cli import main

    args = ["--reasoner", "llm", "--llm-base-url", "simulated", "--llm-model", "sim-mutate", "--storage", storage]
    assert main(["search", "--proposer", "pelnas", "--budget", "44", "--tools", "off", "--screen", "off", "--json", *args]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["reasoner"] == "simulated:sim-mutate (no LLM)" and data["study"].endswith("pelnas-sim-mutate-notools-noscreen-s0")
    assert "simulated:sim-mutate (no LLM)" in captured.err
    logs = RoundLogs(storage).read(data["study"])
    assert not any("tools" in v or "screening" in v for v in logs.values())
    out = tmp_path / "bench"
    assert main(["bench", "--proposers", "pelnas", "--budget", "44", "--seeds", "1", "--out", str(out), *args]) == 0
    bench_logs = RoundLogs(storage).read("nb201-cifar10-fpga-pelnas-sim-mutate-s0")
    assert any(v.get("tools", {}).get("calls") for v in bench_logs.values()) and any("screening" in v for v in bench_logs.values())


@pytest.mark.slow
def test_reasoner_bench_script_writes_its_tables(tmp_path: Any) -> None:
    import subprocess
    import sys

    out = tmp_path / "rb"
    cmd = [sys.executable, "-m", "coevo.figures", "reasoner", "--devices", "fpga", "--seeds", "2", "--budget", "12"]
    cmd += ["--jobs", "1", "--baselines", "pelnas-nokb", "--arms", "screen+tools,plain", "--ensemble", "sim-mutate:1,sim-random:1"]
    cmd += ["--out", str(out)]
    done = subprocess.run([*cmd[:4], "--help"], capture_output=True, text=True, check=True)
    assert "simulated reasoners" in done.stdout
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    runs = (out / "runs.csv").read_text().splitlines()
    assert len(runs) == 1 + 2 * (1 + 3 * 2 + 1)  # header, then 2 seeds x (nokb, 3 reasoners x 2 arms, the ensemble)
    hv_table = (out / "results.md").read_text().split("\n\n")[1].splitlines()
    nokb = next(line for line in hv_table if line.startswith("| pelnas-nokb | offline |"))
    assert nokb.endswith("|  |")  # no difference against itself
    screened = next(line for line in hv_table if line.startswith("| sim-random | screen llm + tools |"))
    assert "±" in screened.split("|")[-2]  # a paired interval against nokb
    text = (out / "results.md").read_text()
    assert f"| sim-mutate:1,sim-random:1 | {ENGINE} |" in text  # the two-model arm's yield table (screen on: the engine's row too)
