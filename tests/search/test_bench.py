from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import pytest

from coevo.search.bench import BenchSpec, _mean_std, run_bench
from coevo.search.errors import UserInputError


@pytest.mark.parametrize("jobs", [1, 2, 4])  # 2 and 4 processes share one SQLite file
def test_bench_writes_table_csv_and_plots(tmp_path: Path, jobs: int) -> None:
    spec = BenchSpec("nb201", {"dataset": "cifar10"}, ("fpga", "eyeriss"), ("random", "tpe"), (0, 1), budget=12, jobs=jobs)
    report = run_bench(spec, tmp_path / "out")
    rows = list(csv.DictReader((tmp_path / "out" / "runs.csv").open()))
    assert len(rows) == 8 and {r["proposer"] for r in rows} == {"random", "tpe"}
    assert all(int(r["evaluations"]) == 12 for r in rows)
    md = (tmp_path / "out" / "results.md").read_text()
    results, paired = md.split("## Paired differences against random")
    assert results.count("| fpga |") == 2 and "±" in results
    assert paired.count("| fpga |") == 1  # tpe - random on fpga's two seeds
    for name in ("hv_fpga.png", "front_fpga.png", "hv_eyeriss.png", "front_eyeriss.png"):
        data = (tmp_path / "out" / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    hist = json.loads((tmp_path / "out" / "histories.json").read_text())
    assert len(hist) == 8 and all(len(h["hv_history"]) == 12 for h in hist)
    assert [r.seed for r in report.results] == [0, 1] * 4


def test_bench_rerun_resumes(tmp_path: Path) -> None:
    spec = BenchSpec("nb201", {"dataset": "cifar10"}, ("fpga",), ("random",), (0,), budget=10)
    first = run_bench(spec, tmp_path)
    second = run_bench(spec, tmp_path)
    assert first.results[0].trials == second.results[0].trials
    assert first.results[0].hv_ratio == second.results[0].hv_ratio
    # the table keeps the run's own time (it showed the rerun's fraction of a second, and runs.csv has both)
    assert second.results[0].search_wall_s == first.results[0].search_wall_s == first.results[0].wall_s
    row = next(csv.DictReader((tmp_path / "runs.csv").open()))
    assert float(row["search_wall_s"]) == first.results[0].wall_s
    assert f"| {first.results[0].wall_s:.1f} |" in (tmp_path / "results.md").read_text()


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"groups": ("fpga", "tpu")}, "unknown device 'tpu'"),
        ({"proposers": ("random", "bogus")}, "unknown proposer"),
        ({"budget": 0}, "budget"),
        ({"seeds": ()}, "seeds"),
    ],
)
def test_bench_validates_everything_before_running(tmp_path: Path, change: dict[str, object], match: str) -> None:
    base = {
        "problem": "nb201",
        "options": {"dataset": "cifar10"},
        "groups": ("fpga",),
        "proposers": ("random",),
        "seeds": (0,),
        "budget": 5,
    }
    spec = BenchSpec(**{**base, **change})  # type: ignore[arg-type]
    with pytest.raises(UserInputError, match=match):
        run_bench(spec, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_parallel_run_of_a_torch_problem_gets_its_share_of_the_cores(tmp_path: Path) -> None:
    # query-mode problems that train or profile with torch (compress, pipeline) oversubscribed the
    # cores when runs went in parallel: each run's torch must use only its share
    import torch

    from coevo.search.bench import _one_run

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        options = {"model": "unet-tiny", "cluster": "v100x8-pcie", "global_batch": 16, "resolution": 8}
        result = _one_run("pipeline", options, "random", 3, 0, f"sqlite:///{tmp_path / 'b.sqlite3'}", None, threads=1)
        assert result.evaluations == 3 and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_paired_table_pairs_seeds_against_the_first_proposer() -> None:
    from coevo.search.bench import paired_table
    from coevo.search.runner import SearchResult

    spec = BenchSpec("nb201", {"dataset": "cifar10"}, ("fpga", "raspi4"), ("pelnas", "tpe"), (0, 1, 2), budget=10)

    def run(device: str, proposer: str, seed: int, hv: float) -> SearchResult:
        return SearchResult(
            f"{device}-{proposer}-{seed}",
            "",
            {"problem": "nb201", "device": device},
            proposer,
            seed,
            10,
            10,
            10,
            10,
            0.0,
            hv,
            None,
            None,
            [],
        )

    results = [run(d, "pelnas", s, 0.9) for d in ("fpga", "raspi4") for s in (0, 1, 2)]
    # tpe is worse by 0.01, 0.02, 0.03 on fpga (the interval excludes 0) and by -0.01, 0, +0.01 on raspi4 (it does not)
    results += [run("fpga", "tpe", s, 0.9 - 0.01 * (s + 1)) for s in (0, 1, 2)]
    results += [run("raspi4", "tpe", s, 0.9 + 0.01 * (s - 1)) for s in (0, 1, 2)]
    md = paired_table(results, spec)
    row = next(line for line in md.splitlines() if line.startswith("| tpe |"))
    fpga, raspi4, pooled = [c.strip() for c in row.split("|")[2:5]]
    # fpga: mean -0.02, sd 0.01, t(0.975, 2) = 4.3027: half-width 0.0248
    assert fpga == "-0.0200 ± 0.0248" and raspi4.startswith("+0.0000 ±") and not raspi4.endswith("*")
    assert pooled.startswith("-0.0100 ±")
    assert paired_table(results, BenchSpec("nb201", {}, ("fpga",), ("pelnas",), (0, 1), budget=10)) == ""


def test_one_seed_is_shown_without_a_spread_it_does_not_have() -> None:
    assert _mean_std([0.5]) == "0.5000 (1 seed)"
    assert _mean_std([0.5, 0.7]) == "0.6000 ± 0.1414"  # sample standard deviation over seeds
    assert _mean_std([]) == "n/a"
    assert _mean_std([None, None]) == "n/a"
    # seeds without the value are counted: a mean over fewer seeds than ran says so
    assert _mean_std([0.5, None, None]) == "0.5000 (1 of 3 seeds)"
    assert _mean_std([0.5, 0.7, None]) == "0.6000 ± 0.1414 (2 of 3 seeds)"


def test_another_benchmark_into_the_same_folder_is_refused_before_it_runs_and_more_seeds_are_not(tmp_path: Path) -> None:
    """A bench rewrote runs.csv and results.md from its own runs: a second one with other proposers into the same
    --out dropped the first one's rows from the files (found by a new user's walk-through)."""
    first = BenchSpec("nb201", {"dataset": "cifar10"}, ("fpga",), ("random", "tpe"), (0,), budget=6)
    run_bench(first, tmp_path)
    rows = (tmp_path / "runs.csv").read_text()
    other = BenchSpec("nb201", {"dataset": "cifar10"}, ("fpga",), ("random",), (0,), budget=6)
    with pytest.raises(UserInputError, match=r"holds the results of another benchmark \(nb201 on fpga, proposers random,tpe"):
        run_bench(other, tmp_path)
    assert (tmp_path / "runs.csv").read_text() == rows
    more = BenchSpec("nb201", {"dataset": "cifar10"}, ("fpga",), ("random", "tpe"), (0, 1), budget=6)
    assert len(run_bench(more, tmp_path).results) == 4  # adds seeds: every earlier run is still in the files
    with pytest.raises(UserInputError, match="another benchmark"):
        run_bench(dataclasses.replace(more, options={"dataset": "cifar100"}), tmp_path)


def test_the_folder_record_holds_no_secret_and_a_resume_with_the_same_runs_spelled_otherwise_is_not_refused(tmp_path: Path) -> None:
    spec = BenchSpec("nb201", {}, ("fpga",), ("random",), (0,), budget=4, reasoner={"kind": "offline", "base_url": "http://u:pw@h/v1"})
    run_bench(spec, tmp_path)
    same = dataclasses.replace(spec, options={"dataset": "cifar10"}, reasoner={"kind": "offline"})  # the default dataset; no endpoint
    assert len(run_bench(same, tmp_path).results) == 1
    llm = {"kind": "llm", "model": "m", "base_url": "https://user:sk-abc@api.example:8443/v1?api-key=sk-xyz", "api_key": "sk-key"}
    record = tmp_path / "other"
    from coevo.search.bench import _record_out_folder

    record.mkdir()
    text = _record_out_folder(dataclasses.replace(spec, storage="postgresql://bob:S3cretPW@db/coevo", reasoner=llm), record).read_text()
    assert not any(secret in text for secret in ("S3cretPW", "sk-abc", "sk-xyz", "sk-key", "user:"))
    assert "https://api.example:8443/v1" in text
