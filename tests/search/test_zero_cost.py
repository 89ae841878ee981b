from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import optuna
import pytest
import torch
from scipy import stats

# patch module objects, not dotted strings (a plug-in may be imported under another name)
from coevo.search.nb201 import NB201Problem, parse_arch, proxies
from coevo.search.nb201.model import NB201Network
from coevo.search.nb201.zero_cost_problem import ZeroCostNB201
from coevo.search.runner import run_search
from coevo.search.work_progress import listening
from coevo.search.zero_cost import PROXIES, ProxyCache, ProxyConfig, compute, natural_patches
from coevo.search.zero_cost_bench import run_proxies

TINY = ProxyConfig(batch=4, channels=4, cells_per_stage=1)
BEST = parse_arch("|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|")
EMPTY = (0, 0, 0, 0, 0, 0)


def test_network_matches_the_nb201_skeleton() -> None:
    net = NB201Network(BEST)
    assert net(torch.zeros(2, 3, 32, 32)).shape == (2, 10)
    convs = [m for m in net.modules() if isinstance(m, torch.nn.Conv2d)]
    # stem + 15 cells x 5 convs + 2 reductions x (2 + shortcut 1x1)
    assert len(convs) == 1 + 15 * 5 + 2 * 3
    # a cell of only 'none' carries no parameters of its own
    empty = NB201Network(EMPTY)
    assert sum(p.numel() for p in empty.parameters()) < sum(p.numel() for p in net.parameters()) / 10


def test_proxies_are_deterministic_and_complete() -> None:
    a = compute(BEST, TINY)
    b = compute(BEST, TINY)
    assert a == b and set(a) == set(PROXIES)
    assert all(math.isfinite(v) for v in a.values())
    params = sum(p.numel() for p in NB201Network(BEST, channels=4, cells_per_stage=1).parameters())
    assert a["params"] == params
    # flops: more convolutions, more multiply-accumulates
    assert compute(EMPTY, TINY)["flops"] < a["flops"]
    assert compute(EMPTY, TINY)["jacob_cov"] <= a["jacob_cov"]
    empty = compute(EMPTY, TINY)
    # a cell that passes nothing on: no gradient reaches a cell weight, the Zen features do not move
    assert empty["snip"] < a["snip"] and empty["fisher"] < a["fisher"] and empty["zen"] < a["zen"]
    # l2_norm is the norm of the initial weights, computed here independently of the proxy code
    torch.manual_seed(TINY.seed)
    net = NB201Network(BEST, channels=4, cells_per_stage=1)
    norms = [m.weight.detach().norm() for m in net.modules() if isinstance(m, torch.nn.Conv2d | torch.nn.Linear)]
    assert a["l2_norm"] == pytest.approx(float(sum(norms)))


def test_the_natural_batch_is_fixed_real_image_patches() -> None:
    x = natural_patches(32, seed=0)
    assert x.shape == (32, 3, 32, 32) and torch.equal(x, natural_patches(32, seed=0))
    assert not torch.equal(x, natural_patches(32, seed=1))
    # CIFAR normalisation: channel means near 0 and deviations near 1 over the batch (photos, not noise)
    assert x.mean(dim=(0, 2, 3)).abs().max() < 1.5 and 0.3 < x.std(dim=(0, 2, 3)).mean() < 2.0
    # natural images are smooth: neighbouring pixels correlate strongly, unlike the Gaussian batch
    corr = torch.corrcoef(torch.stack([x[..., :, :-1].flatten(), x[..., :, 1:].flatten()]))[0, 1]
    noise = torch.randn(32, 3, 32, 32, generator=torch.Generator().manual_seed(0))  # |corr| ~ 1 / sqrt(95,232) = 0.003
    corr_noise = torch.corrcoef(torch.stack([noise[..., :, :-1].flatten(), noise[..., :, 1:].flatten()]))[0, 1]
    assert corr > 0.8 and abs(float(corr_noise)) < 0.05
    assert ProxyConfig().batch_source == "natural" and ProxyConfig().key() != ProxyConfig(batch_source="gaussian").key()


def test_cache_computes_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    cache = ProxyCache(url, TINY)
    first = cache.scores([BEST, EMPTY])
    assert cache.computed == 2
    again = ProxyCache(url, TINY)
    assert again.scores([EMPTY, BEST]) == first[::-1] and again.computed == 0
    other = ProxyCache(url, ProxyConfig(batch=2, channels=4, cells_per_stage=1))
    other.scores([BEST])
    assert other.computed == 1  # another configuration is another key


@pytest.mark.slow  # a 30-evaluation search scoring real networks: about 35 s on 2 cores (the bench test below is the fast one)
def test_zero_cost_search_never_reads_true_accuracy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    storage = f"sqlite:///{tmp_path / 'z.db'}"
    monkeypatch.setattr(proxies, "REFERENCE_CELLS", 8)
    problem = ZeroCostNB201(dataset="cifar10", device="eyeriss", storage=storage, config=TINY)
    peeks = []
    original = NB201Problem.evaluate

    def spy(self: NB201Problem, point: object) -> dict[str, float]:
        peeks.append(point)
        return original(self, point)

    monkeypatch.setattr(NB201Problem, "evaluate", spy)
    during: list[int] = []
    reports: list[tuple[str, float]] = []
    with listening(lambda what, fraction: reports.append((what, fraction))):
        result = run_search(problem, "pelnas", budget=30, seed=0, storage=storage, on_progress=lambda p: during.append(len(peeks)))
    assert max(during) == 0  # no true accuracy while searching
    # the one-off reference scoring announced itself with an estimate, then said how far it was, cell by cell, to the end
    reference = [(what, f) for what, f in reports if what.startswith("scoring 8 reference cells")]
    assert [f for _, f in reference] == [k / 8 for k in range(9)]
    assert re.search(r": 8 cells to score \(about [\d.]+ s at [\d.]+ s a cell", reference[0][0])
    states = {t.state.name for t in optuna.load_study(study_name=result.study, storage=storage).get_trials(deepcopy=False)}
    assert states == {"COMPLETE"}  # no proposal left WAITING when the budget is spent
    assert result.problem["mode"] == "zero-cost" and result.found_set == "front"
    assert result.expensive_queries == 0 and result.evaluations == 30
    assert 0 < len(result.front) <= 30 and result.hv_ratio is not None and 0 < result.hv_ratio <= 1
    # the reported front is scored with true accuracies
    truth = NB201Problem(dataset="cifar10", device="eyeriss")
    for row in result.front:
        assert row["accuracy"] == pytest.approx(truth.evaluate(parse_arch(row["arch"]))["accuracy"])


def test_proxies_command(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'p.db'}"
    report = run_proxies(cells=12, dataset="cifar10", storage=storage, out=tmp_path / "o", config=TINY)
    assert set(report.rho) == {*PROXIES, "prior"} and report.computed == 12
    # every rho is Spearman's of the scores and accuracies the command wrote out, for the 12 distinct cells it sampled
    with (tmp_path / "o" / "proxies.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len({r["arch"] for r in rows}) == 12
    acc = [float(r["cifar10_acc"]) for r in rows]
    for proxy in PROXIES:
        expected = stats.spearmanr([float(r[proxy]) for r in rows], acc).statistic
        assert report.rho[proxy] == pytest.approx(expected, nan_ok=True)
    assert not math.isnan(report.rho["params"]) and not math.isnan(report.rho["prior"])  # they vary across 12 cells
    table = (tmp_path / "o" / "proxies.md").read_text()
    assert all(f"| {p} | {report.rho[p]:.3f} |" in table for p in (*PROXIES, "prior"))
    again = run_proxies(cells=12, dataset="cifar10", storage=storage, out=tmp_path / "o2", config=TINY)
    assert again.computed == 0 and again.rho == pytest.approx(report.rho, nan_ok=True)  # the same cells, from the cache


def test_proxies_in_processes_report_how_many_cells_are_done(tmp_path: Path) -> None:
    from coevo.search.work_progress import listening

    heard: list[tuple[str, float]] = []
    with listening(lambda text, fraction: heard.append((text, fraction))):
        report = run_proxies(cells=12, dataset="cifar10", storage=f"sqlite:///{tmp_path / 'p.db'}", out=tmp_path / "o", jobs=2, config=TINY)
    assert report.computed == 12
    counts = [text for text, _ in heard if "cells scored" in text]
    assert counts and counts[-1].endswith("12 of 12 cells scored") and heard[-1][1] == 1.0  # it said only 'proxies on N cells'
    assert [f for _, f in heard] == sorted(f for _, f in heard)


def test_zero_cost_bench_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from coevo.search.bench import BenchSpec, run_bench

    monkeypatch.setattr(proxies, "REFERENCE_CELLS", 8)
    monkeypatch.setattr(proxies, "ProxyConfig", lambda: TINY)
    spec = BenchSpec("nb201", {"dataset": "cifar10", "mode": "zero-cost"}, ("eyeriss",), ("pelnas", "random"), (0,), budget=26)
    report = run_bench(spec, tmp_path / "out")
    assert [r.problem["mode"] for r in report.results] == ["zero-cost", "zero-cost"]
    assert all(r.expensive_queries == 0 and r.evaluations == 26 and r.hv_ratio is not None and 0 < r.hv_ratio <= 1 for r in report.results)
    assert (tmp_path / "out" / "front_eyeriss.png").read_bytes()[:4] == b"\x89PNG"
    results = (tmp_path / "out" / "results.md").read_text()
    assert "pelnas" in results and "random" in results and "eyeriss" in results


def test_an_estimate_before_any_cell_was_timed_uses_the_documented_cost_per_cell(tmp_path: Path) -> None:
    cache = ProxyCache(f"sqlite:///{tmp_path / 'e.db'}", TINY)
    assert cache.estimate(200) == "about 220 s at 1.1 s a cell on one core"  # docs/engine.md: about 1.1 s of one core per cell
    assert cache.estimate(3) == "about 3.3 s at 1.1 s a cell on one core"
