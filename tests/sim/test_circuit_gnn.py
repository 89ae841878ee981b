"""sim.gnn: netlist labels against hand-derived values, synthesised netlists that compute what their Verilog says,
the cache, Yosys's errors, and the kernels and model variants against dense references."""

from __future__ import annotations

import os
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from coevo.sim.errors import UserInputError
from coevo.sim.gnn import (
    CELL_TYPES,
    RELATIONS,
    Config,
    SynthesisError,
    YosysNotFoundError,
    ablations,
    batch,
    build,
    build_pyg,
    get_design,
    hand_netlist,
    labels,
    load_graph,
    load_netlist,
    prepare,
    pyg_available,
    synthesize_text,
    to_hetero,
    train_eval,
)
from coevo.sim.gnn.sparse import RelationCSR, aggregate, balanced_blocks, densify, even_blocks, sparse_row_mm, topk_relu
from coevo.sim.gnn.yosys import cache_dir

IN_CI = os.environ.get("CI") == "true"


@pytest.fixture(scope="module")
def yosys() -> None:
    """Yosys on PATH: skipped without it, except under CI, where its absence fails."""
    if shutil.which("yosys") is None:
        if IN_CI:
            pytest.fail("CI needs yosys (apt-get install yosys; .ci/run installs it)")
        pytest.skip("yosys is not installed (apt-get install yosys)")


# --- labels on a hand-built netlist ------------------------------------------------------------
# nets: 0 a, 1 b, 2 c (inputs), 7 clk (input); cells:
#   g0 AND(0, 1) -> 3; g1 NOT(2) -> 4; g2 OR(3, 4) -> 5; g3 XOR(5, 0) -> 6 (output)
#   g4 DFF(D=6, C=7) -> 8; g5 AND(8, 3) -> 9 (output)
TINY = [
    ("g0", "AND", {"A": 0, "B": 1}, {"Y": 3}),
    ("g1", "NOT", {"A": 2}, {"Y": 4}),
    ("g2", "OR", {"A": 3, "B": 4}, {"Y": 5}),
    ("g3", "XOR", {"A": 5, "B": 0}, {"Y": 6}),
    ("g4", "DFF", {"D": 6, "C": 7}, {"Q": 8}),
    ("g5", "AND", {"A": 8, "B": 3}, {"Y": 9}),
]


def tiny():  # type: ignore[no-untyped-def]
    return hand_netlist("tiny", TINY, 10, [0, 1, 2, 7], [6, 9])


def test_labels_of_a_hand_built_netlist_match_hand_derived_values() -> None:
    lab = labels(tiny())
    # depth: inputs-fed gates 1, the DFF a startpoint (1), g5 after the DFF or g0: 2
    assert lab["depth"].tolist() == [1, 1, 2, 3, 1, 2]
    # arrival with AND 1.3, NOT 1.0, OR 1.5, XOR 2.0, DFF clk-to-q 2.0:
    # g2 = 1.5 + max(1.3, 1.0); g3 = 2.0 + 2.8; g5 = 1.3 + max(2.0, 1.3)
    assert lab["arrival"] == pytest.approx([1.3, 1.0, 2.8, 4.8, 2.0, 3.3])
    # cones: g0 -> {g2, g3, g4 (the DFF, not gone through), g5}; g1 -> {g2, g3, g4}; g4 -> {g5}
    assert lab["fanout_cone"].tolist() == [4, 3, 2, 1, 1, 0]
    unit = labels(tiny(), delays=dict.fromkeys(CELL_TYPES, 1.0))
    assert unit["arrival"].tolist() == lab["depth"].tolist()  # unit delays: arrival is the depth


def test_hand_netlist_evaluates_its_logic() -> None:
    nl = tiny()
    for a in (0, 1):
        for b in (0, 1):
            for c in (0, 1):
                v = nl.evaluate({0: a, 1: b, 2: c, 7: 0}, state={8: 1})
                assert v[6] == (((a & b) | (1 - c)) ^ a) and v[9] == (a & b)


def test_bad_netlists_are_refused() -> None:
    with pytest.raises(UserInputError, match="two drivers"):
        hand_netlist("x", [("g0", "NOT", {"A": 0}, {"Y": 1}), ("g1", "NOT", {"A": 0}, {"Y": 1})], 2, [0], [1])
    loop = hand_netlist("x", [("g0", "AND", {"A": 0, "B": 2}, {"Y": 1}), ("g1", "NOT", {"A": 1}, {"Y": 2})], 3, [0], [1])
    with pytest.raises(UserInputError, match="combinational loop"):
        labels(loop)
    with pytest.raises(UserInputError, match="outside"):
        hand_netlist("x", [("g0", "NOT", {"A": 5}, {"Y": 1})], 2, [0], [1])


def test_hetero_graph_of_the_hand_netlist() -> None:
    g = to_hetero(tiny())
    assert g.num_nodes("cell") == 6 and g.num_nodes("net") == 10
    e = {r[1]: list(zip(*(x.tolist() for x in g.edges[r]), strict=True)) for r in RELATIONS}
    assert sorted(e["drives"]) == [(0, 3), (1, 4), (2, 5), (3, 6), (4, 8), (5, 9)]
    assert sorted(e["in_a"]) == [(0, 0), (2, 1), (3, 2), (5, 3), (8, 5)]
    assert sorted(e["in_b"]) == [(0, 3), (1, 0), (3, 5), (4, 2)]
    assert e["in_d"] == [(6, 4)] and e["in_ctl"] == [(7, 4)] and e["in_sel"] == []
    assert sorted(e["reads"]) == sorted((c, n) for n, c in e["in_a"] + e["in_b"] + e["in_d"] + e["in_ctl"])
    assert g.x["cell"][:, : len(CELL_TYPES)].sum(axis=1).tolist() == [1] * 6
    assert g.x["cell"][2, CELL_TYPES.index("OR")] == 1 and g.x["cell"][4, CELL_TYPES.index("DFF")] == 1
    assert g.x["net"][[0, 1, 2, 7], 0].tolist() == [1] * 4 and g.x["net"][[6, 9], 1].tolist() == [1, 1]
    a = g.adjacency(("net", "in_a", "cell")).toarray()
    assert a.sum(axis=1).tolist() == [1, 1, 1, 1, 0, 1]  # mean aggregation: rows sum to 1 (the DFF has no A pin)
    two = batch([g, g])
    assert (
        two.num_nodes("cell") == 12 and two.edges[("cell", "drives", "net")][1].max() == 19 and two.design_of.tolist() == [0] * 6 + [1] * 6
    )


# --- real designs through Yosys ----------------------------------------------------------------


def _word(nl, values: dict[int, int], port: str) -> int:  # type: ignore[no-untyped-def]
    return sum(values[n] << i for i, n in enumerate(nl.ports[port]))


def _drive(nl, **words: int) -> dict[int, int]:  # type: ignore[no-untyped-def]
    return {n: (w >> i) & 1 for p, w in words.items() for i, n in enumerate(nl.ports[p])}


@pytest.mark.usefixtures("yosys")
@pytest.mark.parametrize("design", ["adder8", "cla8"])
def test_synthesised_adders_add(design: str) -> None:
    nl = load_netlist(design)
    rng = np.random.default_rng(0)
    for a, b, cin in zip(rng.integers(0, 256, 40), rng.integers(0, 256, 40), rng.integers(0, 2, 40), strict=True):
        v = nl.evaluate(_drive(nl, a=int(a), b=int(b), cin=int(cin)))
        assert _word(nl, v, "sum") + (_word(nl, v, "cout") << 8) == a + b + cin


@pytest.mark.usefixtures("yosys")
def test_synthesised_multiplier_multiplies_and_alu_computes() -> None:
    mul = load_netlist("mul4")
    for a in range(16):
        for b in range(16):
            assert _word(mul, mul.evaluate(_drive(mul, a=a, b=b)), "p") == a * b
    alu = load_netlist("alu8")
    for a, b in [(200, 100), (3, 250), (0, 0), (128, 1)]:
        out = {op: _word(alu, alu.evaluate(_drive(alu, a=a, b=b, op=op)), "y") for op in range(8)}
        signed = (a - 256 * (a > 127)) < (b - 256 * (b > 127))
        assert out == {
            0: (a + b) % 256,
            1: (a - b) % 256,
            2: a & b,
            3: a | b,
            4: a ^ b,
            5: (a << (b & 7)) % 256,
            6: int(signed),
            7: a >> (b & 7),
        }


@pytest.mark.usefixtures("yosys")
def test_fifo_netlist_has_registers_and_labels() -> None:
    g = load_graph("fifo4x8")
    s = g.summary()
    assert s["cell_types"]["DFF"] >= 4 * 8 + 2 * 3  # the words and two 3-bit pointers
    assert s["edges"]["net->in_d->cell"] == s["cell_types"]["DFF"]
    assert g.y["depth"].min() == 1 and g.y["fanout_cone"].max() > 0


@pytest.mark.usefixtures("yosys")
def test_ripple_is_deeper_than_lookahead() -> None:
    # the carry chain: a ripple adder's depth grows with the width, Kogge-Stone's with its log
    ripple, cla = load_graph("adder32").y["depth"].max(), load_graph("cla32").y["depth"].max()
    assert ripple > cla and load_graph("adder16").y["depth"].max() < ripple


@pytest.mark.usefixtures("yosys")
def test_cache_is_reused_and_a_corrupt_entry_rebuilt() -> None:
    d = get_design("adder8")
    synthesize_text(d.verilog(), d.top, d.params, name="cache-test")
    (path,) = cache_dir().glob("cache-test-*.json")
    stamp = path.stat().st_mtime_ns
    synthesize_text(d.verilog(), d.top, d.params, name="cache-test")
    assert path.stat().st_mtime_ns == stamp  # read, not rewritten
    path.write_text('{"modules": {}}')  # valid JSON, wrong checksum
    module = synthesize_text(d.verilog(), d.top, d.params, name="cache-test")
    assert module["cells"] and path.stat().st_mtime_ns != stamp
    path.with_suffix(".sha256").write_text("garbage")
    assert synthesize_text(d.verilog(), d.top, d.params, name="cache-test")["cells"]


@pytest.mark.usefixtures("yosys")
def test_a_design_that_fails_synthesis_quotes_yosys(tmp_path: Path) -> None:
    with pytest.raises(SynthesisError, match=r"ERROR.*syntax error") as exc:
        synthesize_text("module broken(input a, output y);\n assign y = a &;\nendmodule\n", "broken")
    assert "broken" in str(exc.value)
    with pytest.raises(SynthesisError, match="ERROR"):
        synthesize_text("module m(input a, output y); assign y = a; endmodule", "not_there")


def test_top_must_be_an_identifier_not_yosys_script() -> None:
    with pytest.raises(UserInputError, match="not a Verilog identifier"):
        synthesize_text("module m(input a, output y); assign y = a; endmodule", "m; shell touch pwned")
    with pytest.raises(UserInputError, match="not a Verilog identifier"):
        synthesize_text("module m(input a, output y); assign y = a; endmodule", "m", {"W; tee -o x": 1})


def test_yosys_missing_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COEVO_YOSYS", "/nonexistent/yosys")
    with pytest.raises(YosysNotFoundError, match=r"apt-get install yosys"):
        load_netlist("adder8")


def test_unknown_design_lists_the_valid_ones() -> None:
    with pytest.raises(UserInputError, match=r"unknown design 'alu7'.*alu32.*fifo8x16"):
        load_netlist("alu7")


# --- kernels against dense references ------------------------------------------------------------


def test_topk_relu_matches_torch() -> None:
    gen = torch.Generator().manual_seed(0)  # inputs of their own: not the global stream other tests moved
    h = torch.randn(50, 16, requires_grad=True, generator=gen)
    idx, val = topk_relu(h, 4, even_blocks(50, 3), ThreadPoolExecutor(2))
    ref_v, ref_i = torch.topk(h, 4, dim=1)
    assert torch.equal(idx.sort(1).values, ref_i.sort(1).values)
    assert torch.allclose(val.sort(1).values, torch.relu(ref_v).sort(1).values)
    dense = densify(idx, val, 16)
    g = torch.randn(50, 16, generator=gen)
    (dh,) = torch.autograd.grad((dense * g).sum(), h)
    keep = torch.zeros_like(h, dtype=torch.bool).scatter(1, ref_i, True) & (h > 0)
    assert torch.allclose(dh, g * keep)
    assert torch.allclose(densify(*topk_relu(h, 16), 16), torch.relu(h))  # k = H is plain ReLU


@pytest.mark.parametrize("parts", [1, 3])
def test_sparse_row_mm_matches_dense_forward_and_backward(parts: int) -> None:
    gen = torch.Generator().manual_seed(1)
    h = torch.randn(40, 12, generator=gen)
    idx, val = topk_relu(h, 5)
    val = val.detach().requires_grad_()
    w = torch.randn(12, 7, requires_grad=True, generator=gen)
    pool = ThreadPoolExecutor(2) if parts > 1 else None
    out = sparse_row_mm(idx, val, w, even_blocks(40, parts), pool)
    ref = densify(idx, val, 12) @ w
    assert torch.allclose(out, ref, atol=1e-5)
    g = torch.randn(40, 7, generator=gen)
    got = torch.autograd.grad(out, (val, w), g)
    want = torch.autograd.grad(ref, (val, w), g)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(got, want, strict=True))


def test_aggregate_matches_scipy_forward_and_backward() -> None:
    rng = np.random.default_rng(1)
    a1 = sp.random(30, 20, density=0.1, random_state=1, dtype=np.float32, format="csr")
    a2 = sp.random(30, 25, density=0.2, random_state=2, dtype=np.float32, format="csr")
    z0 = torch.tensor(rng.normal(size=(20, 12)), dtype=torch.float32, requires_grad=True)
    z1 = torch.tensor(rng.normal(size=(25, 8)), dtype=torch.float32, requires_grad=True)
    r1, r2 = RelationCSR.from_scipy(a1), RelationCSR.from_scipy(a2)
    # relation 1 reads columns 4..8 of z0, relation 2 columns 2..6 of z1
    out = aggregate([(r1, 0, 4), (r2, 1, 2)], [z0, z1], 30, 4, balanced_blocks(r1.a[0] + r2.a[0], 3), ThreadPoolExecutor(2), 3)
    ref = torch.from_numpy(a1.toarray()) @ z0[:, 4:8] + torch.from_numpy(a2.toarray()) @ z1[:, 2:6]
    assert torch.allclose(out, ref, atol=1e-5)
    g = torch.randn(30, 4, generator=torch.Generator().manual_seed(2))
    got, want = torch.autograd.grad(out, (z0, z1), g), torch.autograd.grad(ref, (z0, z1), g)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(got, want, strict=True))
    assert got[0][:, :4].abs().sum() == 0 and got[1][:, 6:].abs().sum() == 0


def test_balanced_blocks_cover_rows_with_even_work() -> None:
    indptr = np.concatenate([[0], np.cumsum([10, 0, 0, 1, 1, 1, 1, 1, 1, 10, 1, 1])])
    blocks = balanced_blocks(indptr, 3)
    assert blocks[0][0] == 0 and blocks[-1][1] == 12 and all(b[1] == c[0] for b, c in pairwise(blocks))
    # row nonzeros 10 | 0 0 1 1 1 1 1 1 | 10 1 1: the best 3-way split has a block of 12
    assert blocks == [(0, 1), (1, 9), (9, 12)]
    assert balanced_blocks(np.array([0]), 4) == [] and even_blocks(5, 8) == [(i, i + 1) for i in range(5)]


# --- the model's variants compute the same function ----------------------------------------------


@pytest.fixture(scope="module")
def small():  # type: ignore[no-untyped-def]
    return prepare(batch([to_hetero(tiny())] * 3), "depth")


def _out_and_grads(model, data):  # type: ignore[no-untyped-def]
    model.zero_grad()
    out = model(data)
    (out * out).mean().backward()
    return out.detach(), [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in model.parameters()]


def test_ablations_with_top_k_agree_and_so_do_the_dense_ones(small) -> None:  # type: ignore[no-untyped-def]
    model = build(small, Config(hidden=16, layers=2, k=4, concurrency=2), seed=0)  # build seeds torch's weights
    variants = ablations(model.config)
    res = {}
    for name, cfg in variants.items():
        model.configure(cfg)
        res[name] = _out_and_grads(model, small)
    model.close()
    for group in (
        ("full", "no_sparse_product", "no_concurrency", "parallel_relations", "torch_aggregation"),
        ("no_dynamic_relu", "dense", "dense_numba_aggregation"),
    ):
        out0, g0 = res[group[0]]
        for name in group[1:]:
            out, g = res[name]
            assert torch.allclose(out, out0, atol=1e-5), name
            assert all(torch.allclose(a, b, atol=1e-4) for a, b in zip(g, g0, strict=True)), name
    assert not torch.allclose(res["full"][0], res["dense"][0])  # top-4 of 16 is a different function
    model.configure(Config(hidden=16, layers=2, k=16))  # k = H: dynamic ReLU is ReLU
    assert torch.allclose(model(small), res["dense"][0], atol=1e-5)


@pytest.mark.parametrize(
    "k, product, aggregation", [(4, "sparse", "numba"), (4, "dense", "numba"), (None, "dense", "numba"), (4, "sparse", "torch")]
)
def test_threads_over_relations_compute_what_one_thread_does(small, k, product, aggregation) -> None:  # type: ignore[no-untyped-def]
    model = build(small, Config(hidden=16, layers=2, k=k, product=product, aggregation=aggregation), seed=0)
    out0, g0 = _out_and_grads(model, small)
    for threads in (1, 3):
        model.configure(
            Config(hidden=16, layers=2, k=k, product=product, aggregation=aggregation, concurrency=threads, parallel="relations")
        )
        out, g = _out_and_grads(model, small)
        assert torch.allclose(out, out0, atol=1e-5)
        assert all(torch.allclose(a, b, atol=1e-4) for a, b in zip(g, g0, strict=True))
    model.close()


def test_relations_run_at_the_same_time(small, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    # A stand-in for the aggregation kernel counts the calls in flight and, in the threaded run, waits at a barrier of
    # two before computing: such a call returns only once another call is running on another thread at the same time.
    # Every call waits but the last of an odd count (it would have no partner): 6 of the 7 relations, in 3 pairs.
    # Relations run one after another would leave the first call alone at the barrier: it times out, the barrier
    # breaks (BrokenBarrierError) and the forward pass fails. No sleeps and no timings: the barrier is the proof.
    from coevo.sim.gnn import sparse

    real = sparse._K_GATHER
    barrier = threading.Barrier(2, timeout=10)
    lock = threading.Lock()
    counts = {"calls": 0, "in_flight": 0, "peak": 0}

    paired = len(small.rels) - len(small.rels) % 2

    def stand_in(wait: bool):  # type: ignore[no-untyped-def]
        def kernel(*args):  # type: ignore[no-untyped-def]
            with lock:
                arrival = counts["calls"]
                counts["calls"] += 1
                counts["in_flight"] += 1
                counts["peak"] = max(counts["peak"], counts["in_flight"])
            try:
                if wait and arrival < paired:
                    barrier.wait()
                real(*args)
            finally:
                with lock:
                    counts["in_flight"] -= 1

        return kernel

    monkeypatch.setattr(sparse, "_K_GATHER", stand_in(wait=True))
    model = build(small, Config(hidden=16, layers=1, k=4, concurrency=4, parallel="relations"), seed=0)
    with torch.no_grad():
        model(small)  # 7 relations on 4 threads and the caller's: each pair of calls met at the barrier
    assert counts["calls"] == len(small.rels) == 7 and counts["peak"] >= 2 and not barrier.broken
    counts.update(calls=0, peak=0)
    monkeypatch.setattr(sparse, "_K_GATHER", stand_in(wait=False))
    model.configure(Config(hidden=16, layers=1, k=4, concurrency=1, parallel="relations"))
    with torch.no_grad():
        model(small)
    assert counts["calls"] == len(small.rels) and counts["peak"] == 1  # one thread: one relation after another
    model.close()


def test_relations_that_would_race_are_refused(small) -> None:  # type: ignore[no-untyped-def]
    from coevo.sim.gnn.subgraphs import aggregate_relations

    rel = next(iter(small.rels.values()))
    z = torch.zeros(rel.n_src, 8)
    with pytest.raises(ValueError, match="overlapping columns"):
        aggregate_relations([(rel, 0, 0, 0), (rel, 0, 2, 0)], [z], [rel.n_dst], 4, None)
    with pytest.raises(ValueError, match="does not fit"):
        aggregate_relations([(rel, 0, 0, 0)], [torch.zeros(rel.n_src + 1, 8)], [rel.n_dst], 4, None)


def test_bad_configs_are_refused() -> None:
    with pytest.raises(UserInputError, match="dynamic_relu_k"):
        Config(hidden=8, k=9)
    with pytest.raises(UserInputError, match="product='dense'"):
        Config(k=None, product="sparse")
    with pytest.raises(UserInputError, match="concurrency"):
        Config(concurrency=0)
    with pytest.raises(UserInputError, match="parallel = 'edges': use one of blocks, relations"):
        Config(parallel="edges")  # type: ignore[arg-type]


@pytest.mark.usefixtures("yosys")
def test_training_beats_the_mean_predictor_on_held_out_designs() -> None:
    train = prepare(batch([load_graph(d) for d in ("adder8", "cla8", "mul4")]), "depth")
    test = prepare(load_graph("cla16"), "depth")
    fit = train_eval(train, test, Config(hidden=32, layers=3, k=8), seed=0, epochs=80, lr=1e-2)
    assert fit.test_mae < 0.8 * fit.baseline_test_mae and fit.train_mae < fit.test_mae * 2


@pytest.mark.skipif(not pyg_available(), reason="torch_geometric is not installed (pip install torch_geometric)")
def test_pyg_heteroconv_baseline_runs(small) -> None:  # type: ignore[no-untyped-def]
    run = build_pyg(small, hidden=16, layers=2)
    out = run()
    assert out.shape == small.y.shape
    out.sum().backward()
    inp = run.modules[0]  # type: ignore[attr-defined]
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in inp.parameters())
