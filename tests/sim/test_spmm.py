"""sim.graph: CSR validation, generators, the degree-block and naive SpMM against scipy, and the GCN layer's autograd."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coevo.sim.errors import UserInputError
from coevo.sim.graph.bench import benchmark
from coevo.sim.graph.csr import from_scipy, load_npz, save_npz, validate_csr
from coevo.sim.graph.gcn import GCNLayer, SparseOperator, gcn_normalize, spmm
from coevo.sim.graph.generators import barabasi_albert, cache_dir, checksum, load_graph, rmat
from coevo.sim.graph.spmm import BlockParams, naive_balance, plan, spmm_blocked, spmm_naive

# ---------------------------------------------------------------- CSR validation


@pytest.mark.parametrize(
    ("indptr", "indices", "shape", "match"),
    [
        ([0, 2, 3], [1, 0, 2], (2, 3), "row 0 has unsorted column ids"),
        ([0, 2, 3], [1, 1, 2], (2, 3), "row 0 has repeated column ids"),
        ([0, 2, 3], [0, 5, 2], (2, 3), "column id 5 at entry 1 is out of range for 3 columns"),
        ([0, 2, 3], [0, -1, 2], (2, 3), "column id -1 at entry 1 is negative"),
        ([0, 2, 1, 3], [0, 1, 2], (3, 3), "indptr is not monotone: row 1 starts at 2 and ends at 1"),
        ([0, 2, -1], [], None, "nnz .* is negative"),
        ([0, 2, 4], [0, 1, 2], (2, 3), "inconsistent nnz: indptr.-1. = 4 but indices has 3"),
        ([1, 2, 3], [0, 1], (2, 3), r"indptr\[0\] is 1, must be 0"),
        ([0, 1, 2], [0, 1], (3, 3), "shape says 3 rows but indptr has 2"),
    ],
)
def test_invalid_csr_is_refused_saying_what_and_how(
    indptr: list[int], indices: list[int], shape: tuple[int, int] | None, match: str
) -> None:
    data = np.ones(len(indices))
    with pytest.raises(UserInputError, match=match):
        validate_csr(np.array(indptr), np.array(indices, dtype=np.int64), data, shape)


def test_unsorted_message_names_the_fix() -> None:
    with pytest.raises(UserInputError, match=r"sort_indices\(\)"):
        validate_csr([0, 2], [3, 1], [1.0, 1.0], (1, 4))


def test_rows_may_restart_column_ids_and_be_empty() -> None:
    a = validate_csr([0, 2, 2, 4], [1, 3, 0, 3], [1, 2, 3, 4], (3, 4))
    assert a.indices.dtype == np.int32 and a.indptr.dtype == np.int64 and a.data.dtype == np.float64
    assert a.degrees.tolist() == [2, 0, 2] and a.nnz == 4


def test_npz_round_trip_and_scipy_format(tmp_path: Path) -> None:
    m = sp.random(30, 20, density=0.2, format="csr", random_state=0)
    ours = tmp_path / "ours.npz"
    save_npz(ours, from_scipy(m))
    back = load_npz(ours)
    assert (back.to_scipy() != m).nnz == 0 and back.shape == (30, 20)
    theirs = tmp_path / "theirs.npz"
    sp.save_npz(theirs, m)
    assert (load_npz(theirs).to_scipy() != m).nnz == 0


def test_bad_npz_files_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="does not exist"):
        load_npz(tmp_path / "nope.npz")
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip")
    with pytest.raises(UserInputError, match=r"not a readable \.npz"):
        load_npz(junk)
    partial = tmp_path / "partial.npz"
    np.savez(partial, indptr=np.array([0, 1]), indices=np.array([0]))
    with pytest.raises(UserInputError, match=r"missing array.*data"):
        load_npz(partial)
    unsorted = tmp_path / "unsorted.npz"
    np.savez(unsorted, indptr=np.array([0, 2]), indices=np.array([1, 0]), data=np.ones(2), shape=np.array([1, 2]))
    with pytest.raises(UserInputError, match=r"unsorted\.npz: row 0 has unsorted"):
        load_npz(unsorted)


# ---------------------------------------------------------------- SpMM


def test_hand_computed_product() -> None:
    # A = [[1, 0, 2], [0, 0, 0], [0, 3, 0]], X = [[1, 10], [2, 20], [3, 30]]
    a = validate_csr([0, 2, 2, 3], [0, 2, 1], np.array([1.0, 2.0, 3.0]), (3, 3))
    x = np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0]])
    expected = [[7.0, 70.0], [0.0, 0.0], [6.0, 60.0]]
    assert spmm_naive(a, x).tolist() == expected
    for params in (BlockParams(), BlockParams(long_row=1, width=1, block_work=1), BlockParams(sort=False, schedule="static")):
        assert spmm_blocked(a, x, params=params).tolist() == expected


def _random_csr(rng: np.random.Generator, n_rows: int, n_cols: int, density: float, hub: int, empty_share: float) -> sp.csr_matrix:
    """A random CSR with a share of empty rows and one hub row of ``hub`` nonzeros."""
    m = sp.random(n_rows, n_cols, density=density, format="lil", random_state=rng)
    for r in np.flatnonzero(rng.random(n_rows) < empty_share):
        m.rows[r], m.data[r] = [], []
    row = int(rng.integers(n_rows))
    cols = np.sort(rng.choice(n_cols, size=min(hub, n_cols), replace=False))
    m.rows[row], m.data[row] = cols.tolist(), rng.standard_normal(len(cols)).tolist()
    out = sp.csr_matrix(m)
    out.sort_indices()
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**16),
    n_rows=st.integers(1, 60),
    n_cols=st.integers(1, 300),
    f=st.integers(1, 40),
    long_row=st.sampled_from([1, 3, 16, 10**6]),
    width=st.sampled_from([1, 3, 5, 16, 4096]),
    block_work=st.sampled_from([1, 50, 10**9]),
    sort=st.booleans(),
    schedule=st.sampled_from(["static", "dynamic"]),
    threads=st.sampled_from([1, None]),
)
def test_random_csr_with_empty_rows_and_a_hub_matches_scipy(
    seed: int, n_rows: int, n_cols: int, f: int, long_row: int, width: int, block_work: int, sort: bool, schedule: str,
    threads: int | None,
) -> None:  # fmt: skip
    rng = np.random.default_rng(seed)
    m = _random_csr(rng, n_rows, n_cols, density=0.05, hub=int(rng.integers(0, 300)), empty_share=0.3)
    a = from_scipy(m)
    x = rng.standard_normal((n_cols, f))
    expected = m @ x
    params = BlockParams(block_work=block_work, long_row=long_row, width=width, sort=sort, schedule=schedule, threads=threads)  # type: ignore[arg-type]
    np.testing.assert_allclose(spmm_blocked(a, x, params=params), expected, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(spmm_naive(a, x), expected, rtol=1e-10, atol=1e-10)
    x32 = x.astype(np.float32)
    y32 = spmm_blocked(a.astype(np.float32), x32, params=params)
    assert y32.dtype == np.float32
    np.testing.assert_allclose(y32, m.astype(np.float32) @ x32, rtol=1e-4, atol=1e-4)


def test_plan_covers_every_entry_once_and_splits_long_rows() -> None:
    m = _random_csr(np.random.default_rng(1), 200, 500, density=0.02, hub=400, empty_share=0.2)
    a = from_scipy(m)
    f, long_row, block_work = 8, 50, 2000
    p = plan(a, f, BlockParams(long_row=long_row, block_work=block_work))
    deg = a.degrees
    # each row's segments: ceil(d / L) pieces (one for an empty row), and they cover its entries exactly
    pieces = np.bincount(p.seg_row, minlength=a.shape[0])
    assert pieces.tolist() == np.maximum(1, -(-deg // long_row)).tolist()
    lengths = np.diff(p.seg_ptr)
    assert lengths.max() <= long_row and lengths.sum() == a.nnz
    assert np.bincount(p.seg_row, weights=lengths, minlength=a.shape[0]).tolist() == deg.tolist()
    assert set(p.split_rows.tolist()) == set(np.flatnonzero(deg > long_row).tolist())
    # degree order: segments of longer rows first
    assert (np.diff(deg[p.seg_row]) <= 0).all()
    # blocks: total work preserved, each within the target plus one segment
    assert p.block_work.sum() == ((lengths + 1) * f).sum()
    assert p.block_work.max() <= block_work + (long_row + 1) * f
    assert p.balance()["block_max_over_mean"] >= 1.0


def test_splitting_a_hub_row_balances_the_threads_where_rows_do_not() -> None:
    # row 0 holds 10,000 of 10,100 nonzeros: two threads splitting rows equally give one of them almost everything
    indptr = np.concatenate([[0, 10_000], 10_000 + np.arange(1, 101)])
    indices = np.concatenate([np.arange(10_000), np.zeros(100, dtype=np.int64)])
    a = validate_csr(indptr, indices, np.ones(10_100), (101, 10_000))
    naive = naive_balance(a, 1, 2)["thread_max_over_mean"]
    # work per thread: row 0 alone is 10,001 of 10,201 units -> max/mean = 10,001 / 5,100.5
    assert naive == pytest.approx((10_000 + 1 + 50 * 2) / (10_201 / 2), rel=1e-3)
    p = plan(a, 1, BlockParams(long_row=100, block_work=200, threads=2, schedule="static"))
    assert p.balance()["thread_max_over_mean"] < 1.05 and len(p.split_rows) == 1
    x = np.random.default_rng(0).standard_normal((10_000, 3))
    np.testing.assert_allclose(spmm_blocked(a, x, plan(a, 3, BlockParams(long_row=100))), a.to_scipy() @ x, rtol=1e-10)


def test_bad_arguments_are_user_errors() -> None:
    a = validate_csr([0, 1], [0], [1.0], (1, 2))
    with pytest.raises(UserInputError, match="feature_dim must be >= 1"):
        plan(a, 0)
    with pytest.raises(UserInputError, match="X has 3 rows but A has 2 columns"):
        spmm_naive(a, np.ones((3, 2)))
    with pytest.raises(UserInputError, match="feature_dim must be >= 1"):
        spmm_blocked(a, np.ones((2, 0)))
    with pytest.raises(UserInputError, match="width must be >= 1 feature column per work unit, got 0"):
        plan(a, 2, BlockParams(width=0))
    with pytest.raises(UserInputError, match="threads must be between 1 and"):
        plan(a, 2, BlockParams(threads=10_000))
    with pytest.raises(UserInputError, match="plan was built for 4 features"):
        spmm_blocked(a, np.ones((2, 2)), plan(a, 4))


def test_benchmark_times_every_method_against_scipy() -> None:
    t = benchmark(rmat(2000, seed=3), 8, repeats=2)
    s = t.summary()
    assert set(s["timings"]) == {"degree-block", "naive", "scipy", "torch"}
    assert all(v["max_rel_error"] < 1e-5 and v["median_ms"] > 0 for v in s["timings"].values())
    assert set(s["speedup_of_degree_block"]) == {"naive", "scipy", "torch"}
    assert t.flops == 2 * 2000 * 8
    with pytest.raises(UserInputError, match="unknown SpMM method"):
        benchmark(rmat(200, seed=0), 4, methods=["cusparse"])


# ---------------------------------------------------------------- generators


def test_rmat_has_exact_unique_edges_and_a_heavy_tail() -> None:
    a = rmat(20_000, seed=1)
    s = a.to_scipy()
    assert a.nnz == 20_000 and a.shape == (2048, 2048)  # 2**11 * 16 >= 20,000 > 2**10 * 16
    assert s.diagonal().sum() == 0  # no self loops
    assert s.max() == 1  # no repeated edge was summed
    deg = a.degrees
    assert deg.max() > 8 * deg.mean()  # power law: hubs far above the mean degree
    assert checksum(rmat(20_000, seed=1)) == checksum(a) != checksum(rmat(20_000, seed=2))


def test_rmat_with_uniform_quadrants_is_not_skewed() -> None:
    deg = rmat(20_000, abcd=(0.25, 0.25, 0.25, 0.25), seed=0).degrees  # Erdos-Renyi-like: Poisson degrees
    assert deg.max() < 3 * deg.mean()


def test_barabasi_albert_is_symmetric_with_exact_nnz() -> None:
    a = barabasi_albert(20_000, m=4, seed=0)
    s = a.to_scipy()
    assert a.nnz == 20_000 and (s != s.T).nnz == 0 and s.diagonal().sum() == 0 and s.max() == 1
    deg = a.degrees
    assert deg.min() >= 1 and deg.max() > 10 * np.median(deg)  # preferential attachment makes hubs


def test_generator_arguments_are_checked() -> None:
    with pytest.raises(UserInputError, match="sum to 1"):
        rmat(100, abcd=(0.5, 0.5, 0.5, 0.5))
    with pytest.raises(UserInputError, match="even number"):
        barabasi_albert(101)


def test_named_graphs_are_cached_with_a_checksum() -> None:
    a = load_graph("rmat-100k@3")
    files = sorted(cache_dir().glob("rmat-100k-s3-*"))
    assert [f.suffix for f in files] == [".json", ".npz"]
    assert json.loads(files[0].read_text())["sha256"] == checksum(a)
    assert checksum(load_graph("rmat-100k@3")) == checksum(a)
    save_npz(files[1], rmat(1000, seed=9))  # a damaged entry: its checksum no longer matches
    with pytest.warns(UserWarning, match=r"^rebuilt: .* did not load \(damaged: its arrays do not match the checksum"):
        assert checksum(load_graph("rmat-100k@3")) == checksum(a)
    with pytest.raises(UserInputError, match=r"unknown graph 'rmat-5m'.*rmat-1m"):
        load_graph("rmat-5m")
    karate = load_graph("karate")
    assert karate.shape == (34, 34) and karate.nnz == 156


# ---------------------------------------------------------------- GCN layer


def _directed(seed: int) -> sp.csr_matrix:
    m = sp.random(12, 12, density=0.3, format="csr", random_state=seed)
    m.sort_indices()
    return m


def test_spmm_function_passes_gradcheck_with_a_directed_matrix() -> None:
    m = _directed(0)  # not symmetric: a backward using A instead of A^T would fail
    op = SparseOperator(from_scipy(m), BlockParams(threads=1))  # gradcheck calls it ~100 times: no thread wake-ups
    x = torch.randn(12, 3, dtype=torch.float64, requires_grad=True, generator=torch.Generator().manual_seed(0))
    assert torch.autograd.gradcheck(lambda t: spmm(op, t), (x,))
    dense = torch.from_numpy(m.toarray())
    (spmm(op, x) ** 2).sum().backward()
    assert x.grad is not None
    expected = 2 * dense.T @ (dense @ x.detach())
    torch.testing.assert_close(x.grad, expected)


@pytest.mark.parametrize(("fin", "fout"), [(5, 3), (3, 6)])
def test_gcn_layer_matches_dense_and_gradchecks(fin: int, fout: int) -> None:
    torch.manual_seed(0)
    a = from_scipy(_directed(1))
    layer = GCNLayer(a, fin, fout, params=BlockParams(threads=1, long_row=3)).double()  # long_row 3: split rows too
    norm = torch.from_numpy(gcn_normalize(a).to_scipy().toarray())
    # hand check of the normalization: D^-1/2 (A + I) D^-1/2 with D the row sums of A + I
    ai = a.to_scipy().toarray() + np.eye(12)
    d = ai.sum(axis=1)
    np.testing.assert_allclose(norm.numpy(), ai / np.sqrt(np.outer(d, d)))
    h = torch.randn(12, fin, dtype=torch.float64, requires_grad=True)
    expected = norm @ h @ layer.linear.weight.T + layer.linear.bias
    torch.testing.assert_close(layer(h), expected)
    assert torch.autograd.gradcheck(lambda t: layer(t), (h,))
    layer(h).sum().backward()
    w = layer.linear.weight
    assert w.grad is not None
    dense_w = w.detach().clone().requires_grad_(True)
    (norm @ h.detach() @ dense_w.T).sum().backward()
    torch.testing.assert_close(w.grad, dense_w.grad)


@pytest.mark.parametrize("width", [1, 4, 8, 16, 36, 37, 64])
def test_combined_columns_match_scipy_on_ragged_widths(width: int) -> None:
    # F = 37 is no multiple of any width here: the last column group of every block is short
    rng = np.random.default_rng(width)
    m = _random_csr(rng, 120, 90, density=0.08, hub=90, empty_share=0.2)
    a = from_scipy(m)
    x = rng.standard_normal((90, 37))
    for sort, threads in ((True, 1), (False, None)):
        params = BlockParams(width=width, long_row=16, block_work=300, sort=sort, threads=threads)
        p = plan(a, 37, params)
        assert p.column_groups == -(-37 // min(width, 37))
        assert p.balance()["units"] == len(p.block_work) * p.column_groups
        assert p.thread_work.sum() <= p.block_work.sum()  # units share their block's work, rounded down per group
        np.testing.assert_allclose(spmm_blocked(a, x, p), m @ x, rtol=1e-10, atol=1e-10)
