"""sim.attention: the sparse operators against dense and masked references, causality, op counts by hand, the zoo LM, bad input."""

from __future__ import annotations

import math

import pytest
import torch

from coevo.sim.attention import (
    attention_flops,
    dense_attention,
    evaluate_sparse,
    finetune_sparse,
    local_global_attention,
    local_global_indices,
    local_global_pairs,
    masked_attention,
    quantize_rows,
    sparsify,
    topk_pairs,
    topk_quantized_attention,
)
from coevo.sim.attention.evaluate import _evaluate_cached
from coevo.sim.attention.model import SparseConfig
from coevo.sim.errors import UserInputError
from coevo.sim.zoo import load


def qkv(n: int, d: int = 16, heads: int = 2, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    q, k, v = torch.randn(3, 1, heads, n, d, generator=gen).unbind(0)
    return q, k, v


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention written out query by query: softmax over keys 0..i."""
    out = torch.empty_like(q)
    for i in range(q.shape[-2]):
        s = (k[..., : i + 1, :] @ q[..., i, :, None]).squeeze(-1) / math.sqrt(q.shape[-1])
        out[..., i, :] = (torch.softmax(s, -1)[..., None, :] @ v[..., : i + 1, :]).squeeze(-2)
    return out


# ---------------------------------------------------------------- operators


def test_dense_matches_the_query_by_query_definition_and_torch() -> None:
    q, k, v = qkv(37)
    ref = naive_attention(q, k, v)
    assert torch.allclose(dense_attention(q, k, v), ref, atol=1e-6)
    assert torch.allclose(torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True), ref, atol=1e-5)


@pytest.mark.parametrize("chunk", [5, 16, 512])
@pytest.mark.parametrize("bits", [1, 4, 16])
def test_top_k_at_least_the_length_is_dense(chunk: int, bits: int) -> None:
    q, k, v = qkv(40)
    ref = naive_attention(q, k, v)
    for top_k in (40, 41, 1000):
        out, sel = topk_quantized_attention(q, k, v, top_k, bits, chunk=chunk)
        assert torch.allclose(out, ref, atol=1e-6)
        assert sel.valid.sum(-1)[0, 0].tolist() == list(range(1, 41))  # query i keeps all its i + 1 keys


def test_quantize_rows_by_hand() -> None:
    x = torch.tensor([[0.4, -1.0, 0.1]])
    codes, scale = quantize_rows(x, 3)  # levels 3, scale 1/3: x / scale = 1.2, -3, 0.3
    assert codes.tolist() == [[1.0, -3.0, 0.0]] and scale.item() == pytest.approx(1 / 3)
    codes, scale = quantize_rows(x, 1)  # sign, scale mean |x| = 0.5
    assert codes.tolist() == [[1.0, -1.0, 1.0]] and scale.item() == pytest.approx(0.5)
    codes, scale = quantize_rows(torch.zeros(1, 3), 4)  # an all-zero row stays zero, no division by zero
    assert codes.abs().sum() == 0 and scale.item() == 1.0


def test_selection_is_the_top_k_of_hand_computed_prescores_and_output_is_masked_attention() -> None:
    n, top_k, bits = 30, 6, 4
    q, k, v = qkv(n, seed=3)
    out, sel = topk_quantized_attention(q, k, v, top_k, bits, chunk=7)
    levels = 2 ** (bits - 1) - 1
    for h in range(2):
        qs = q[0, h].abs().amax(-1, keepdim=True) / levels
        ks = k[0, h].abs().amax(-1, keepdim=True) / levels
        pre = (torch.round(q[0, h] / qs) @ torch.round(k[0, h] / ks).T) * ks.T  # the query's scale cannot change its ranking
        for i in range(n):
            kept = sel.index[0, h, i][sel.valid[0, h, i]]
            assert len(set(kept.tolist())) == min(top_k, i + 1)
            dropped = torch.ones(i + 1, dtype=torch.bool).index_fill_(0, kept, False)
            if dropped.any():  # every kept key pre-scores at least as high as every dropped one (ties may go either way)
                assert pre[i, kept].min() >= pre[i, : i + 1][dropped].max(), (h, i)
    allowed = torch.zeros(1, 2, n, n).scatter_add_(-1, sel.index, sel.valid.float()) > 0
    assert torch.allclose(out, masked_attention(q, k, v, allowed), atol=1e-6)


def test_sixteen_bit_prescores_find_the_exact_top_k() -> None:
    n, top_k = 200, 16
    q, k, v = qkv(n, d=32, seed=1)
    _, sel = topk_quantized_attention(q, k, v, top_k, 16)
    exact = (q @ k.transpose(-1, -2)).masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -math.inf)
    true = exact.topk(top_k, -1).indices
    hits = sum(len(set(sel.index[0, h, i].tolist()) & set(true[0, h, i].tolist())) for h in range(2) for i in range(top_k, n))
    assert hits / (2 * (n - top_k) * top_k) > 0.995
    _, sel2 = topk_quantized_attention(q, k, v, top_k, 2)  # 2 bits: ternary codes lose the ranking, so recall must be lower
    hits2 = sum(len(set(sel2.index[0, h, i].tolist()) & set(true[0, h, i].tolist())) for h in range(2) for i in range(top_k, n))
    assert hits2 < hits


def test_int8_gemm_prescores_select_the_same_keys() -> None:
    q, k, v = qkv(50, seed=4)
    a, sa = topk_quantized_attention(q, k, v, 8, 4, chunk=13)
    b, sb = topk_quantized_attention(q, k, v, 8, 4, chunk=13, int8_gemm=True)
    assert torch.equal(sa.index.sort(-1).values, sb.index.sort(-1).values) and torch.allclose(a, b, atol=1e-6)


@pytest.mark.parametrize(("window", "n_global"), [(1, 0), (4, 2), (8, 0), (3, 10), (50, 3)])
def test_local_global_is_masked_attention_over_its_definition(window: int, n_global: int) -> None:
    n = 33
    q, k, v = qkv(n, seed=2)
    allowed = torch.tensor([[j <= i and (i - j < window or j < n_global) for j in range(n)] for i in range(n)])
    out, sel = local_global_attention(q, k, v, window, n_global)
    assert torch.allclose(out, masked_attention(q, k, v, allowed), atol=1e-6)
    assert sel.valid.sum().item() == allowed.sum().item()  # no key counted twice
    if window >= n:
        assert torch.allclose(out, naive_attention(q, k, v), atol=1e-6)


@pytest.mark.parametrize("method", ["topk", "local-global"])
def test_future_keys_never_change_a_query(method: str) -> None:
    n, cut = 40, 23
    q, k, v = qkv(n, seed=5)
    k2, v2 = k.clone(), v.clone()
    k2[..., cut + 1 :, :] = 100 * torch.randn_like(k2[..., cut + 1 :, :])  # huge future keys would win every top-k if visible
    v2[..., cut + 1 :, :] = 1e3
    run = (
        (lambda a, b, c: topk_quantized_attention(a, b, c, 5, 4, chunk=9))
        if method == "topk"
        else (lambda a, b, c: local_global_attention(a, b, c, 6, 2))
    )
    out, sel = run(q, k, v)
    out2, _ = run(q, k2, v2)
    assert torch.equal(out[..., : cut + 1, :], out2[..., : cut + 1, :])
    pos = torch.arange(n)[:, None]
    assert bool((sel.index[..., :, :] <= pos).logical_or(~sel.valid).all())


# ---------------------------------------------------------------- operation counts


def test_flops_by_hand() -> None:
    # n = 4, d_model = 8 (2 heads of 4): query i sees i + 1 keys -> 1 + 2 + 3 + 4 = 10 pairs, 2 * 8 MACs each
    dense = attention_flops("dense", 4, 8, 2, top_k=2, key_bits=4, window=2, n_global=1)
    assert dense["mac_dense"] == dense["mac_sparse"] == 160 and dense["lowbit_ops"] == 0
    # top-2 keeps 1 + 2 + 2 + 2 = 7 pairs; pre-scoring reads all 10 pairs with d_head = 4 low-bit MACs per head
    top = attention_flops("topk-quantized-keys", 4, 8, 2, top_k=2, key_bits=4, window=2, n_global=1)
    assert top["mac_sparse"] == 112 and top["lowbit_ops"] == 80 and top["lowbit_bitops"] == 80 * 16 and top["quantize_ops"] == 64
    # window 2 + global token 0: queries see {0}, {0,1}, {1,2}+{0}, {2,3}+{0} -> 1 + 2 + 3 + 3 = 9 pairs
    lg = attention_flops("local-global", 4, 8, 2, top_k=2, key_bits=4, window=2, n_global=1)
    assert lg["mac_sparse"] == 144 and lg["lowbit_ops"] == 0 and lg["pairs_sparse"] == 18
    # the model's size: n = 128, d = 256, top-32 keeps 32*33/2 + 96*32 = 3,600 pairs of 8,256
    big = attention_flops("topk-quantized-keys", 128, 256, 4, top_k=32, key_bits=4, window=32, n_global=4)
    assert big["mac_dense"] == 512 * 8256 and big["mac_sparse"] == 512 * 3600 and big["lowbit_ops"] == 256 * 8256


@pytest.mark.parametrize("n", [1, 2, 7, 31, 64])
def test_pair_formulas_count_what_the_operators_keep(n: int) -> None:
    q, k, v = qkv(n, seed=n)
    for top_k in (1, 3, 8, 100):
        _, sel = topk_quantized_attention(q, k, v, top_k, 4)
        assert sel.valid[0, 0].sum().item() == topk_pairs(n, top_k) == sum(min(top_k, i + 1) for i in range(n))
    for window, n_global in ((1, 0), (3, 2), (5, 9), (70, 4)):
        assert local_global_indices(n, window, n_global).valid.sum().item() == local_global_pairs(n, window, n_global)


def test_sparse_cost_grows_linearly_and_dense_quadratically() -> None:
    f = [attention_flops("local-global", n, 256, 4, 32, 4, 32, 4) for n in (1024, 2048)]
    assert f[1]["mac_dense"] / f[0]["mac_dense"] == pytest.approx(4, rel=1e-3)
    assert f[1]["mac_sparse"] / f[0]["mac_sparse"] == pytest.approx(2, rel=0.02)
    t = [attention_flops("topk-quantized-keys", n, 256, 4, 32, 4, 32, 4) for n in (1024, 2048)]
    assert t[1]["mac_sparse"] / t[0]["mac_sparse"] == pytest.approx(2, rel=0.02)
    assert t[1]["lowbit_ops"] / t[0]["lowbit_ops"] == pytest.approx(4, rel=1e-3)  # the pre-scoring stays quadratic


# ---------------------------------------------------------------- on the zoo LM


def test_sparsify_keeps_the_original_and_dense_config_reproduces_it() -> None:
    zm = load("lm-pydoc-tiny")
    x = zm.splits["val"].x[:2]
    before = zm.model(x)
    same = sparsify(zm.model, SparseConfig("dense"))(x)
    full = sparsify(zm.model, SparseConfig("topk-quantized-keys", top_k=128, key_bits=3))(x)
    assert torch.allclose(same, before, atol=1e-5) and torch.allclose(full, before, atol=1e-4)
    assert type(zm.model.blocks[0].attn).__name__ == "Attention"  # type: ignore[index,union-attr]  # untouched


def test_model_stays_causal_with_sparse_attention() -> None:
    zm = load("lm-pydoc-tiny")
    x = zm.splits["val"].x[:1].clone()
    y = x.clone()
    y[0, 60:] = (y[0, 60:] + 17) % 256  # change every token from 60 on
    for cfg in (SparseConfig("topk-quantized-keys", top_k=8, key_bits=2), SparseConfig("local-global", window=8, n_global=2)):
        model = sparsify(zm.model, cfg)
        with torch.no_grad():
            assert torch.allclose(model(x)[0, :60], model(y)[0, :60], atol=1e-6)


def test_evaluate_sparse_on_the_tiny_lm() -> None:
    full = evaluate_sparse("lm-pydoc-tiny", "topk-quantized-keys", top_k=128, key_bits=4, max_batches=1)
    assert full["perplexity"] == pytest.approx(full["dense_perplexity"], rel=1e-5) and full["recall"] == 1.0
    assert full["keys_per_query"] == pytest.approx(64.5)  # (1 + ... + 128) / 128
    exact_bits = evaluate_sparse("lm-pydoc-tiny", "topk-quantized-keys", top_k=16, key_bits=16, max_batches=1)
    assert exact_bits["recall"] > 0.99
    low = evaluate_sparse("lm-pydoc-tiny", "topk-quantized-keys", top_k=16, key_bits=2, max_batches=1)
    assert low["recall"] < exact_bits["recall"] and low["perplexity"] > exact_bits["perplexity"] - 1e-9
    lg = evaluate_sparse("lm-pydoc-tiny", "local-global", window=16, n_global=4, max_batches=1)
    assert math.isnan(lg["recall"]) and 0 < lg["attention_mass"] < 1
    assert lg["dense_perplexity"] == full["dense_perplexity"] and lg["tokens"] == 64 * 128


def test_evaluate_sparse_is_deterministic_and_cached() -> None:
    args = {"model": "lm-pydoc-tiny", "method": "topk-quantized-keys", "top_k": 8, "key_bits": 3, "max_batches": 1}
    first = evaluate_sparse(**args)  # type: ignore[arg-type]
    hits = _evaluate_cached.cache_info().hits
    first["perplexity"] = -1.0  # a caller changing its copy changes nothing cached
    again = evaluate_sparse(**args)  # type: ignore[arg-type]
    assert _evaluate_cached.cache_info().hits == hits + 1 and again["perplexity"] > 1
    fresh = _evaluate_cached.__wrapped__("lm-pydoc-tiny", SparseConfig("topk-quantized-keys", 8, 3), "val", 1)
    assert dict(fresh) == again


def test_finetune_trains_copies_and_gives_the_dense_model_the_same_steps() -> None:
    zm = load("lm-pydoc-tiny")
    before = {n: p.clone() for n, p in zm.model.state_dict().items()}
    cfg = SparseConfig("local-global", window=4, n_global=0)
    r = finetune_sparse(zm, cfg, steps=3, batch=4, lr=1e-3, max_batches=1)
    assert all(torch.equal(p, before[n]) for n, p in zm.model.state_dict().items())  # the zoo model is not changed
    assert r["dense_before"] == pytest.approx(zm.evaluate(zm.model, "val", 1))
    assert r["sparse_before"] == pytest.approx(
        evaluate_sparse("lm-pydoc-tiny", "local-global", window=4, n_global=0, max_batches=1)["perplexity"]
    )
    assert r["sparse_after"] != r["sparse_before"] and r["dense_after"] != r["dense_before"]  # both copies trained
    with pytest.raises(UserInputError, match="steps=0"):
        finetune_sparse(zm, cfg, steps=0)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"top_k": 0}, "top_k=0: give a positive"),
        ({"top_k": -3}, "top_k=-3"),
        ({"key_bits": 0}, "key_bits=0: give an integer between 1 and 16"),
        ({"key_bits": 17}, "key_bits=17"),
        ({"window": 0}, "window=0"),
        ({"n_global": -1}, "n_global=-1"),
        ({"method": "flash"}, "unknown attention method 'flash'; use one of dense, topk-quantized-keys, local-global"),
        ({"split": "dev"}, "split 'dev'"),
        ({"max_batches": 0}, "max_batches=0"),
        ({"model": "cnn-digits"}, "classify model"),
        ({"model": "gpt2"}, "no model 'gpt2'"),
    ],
)
def test_evaluate_sparse_bad_input(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(UserInputError, match=match):
        evaluate_sparse(**kwargs)  # type: ignore[arg-type]


def test_operator_and_flops_bad_input() -> None:
    q, k, v = qkv(8)
    with pytest.raises(UserInputError, match="top_k"):
        topk_quantized_attention(q, k, v, 0, 4)
    with pytest.raises(UserInputError, match="key_bits"):
        topk_quantized_attention(q, k, v, 4, 20)
    with pytest.raises(UserInputError, match="int8_gemm needs key_bits <= 8"):
        topk_quantized_attention(q, k, v, 4, 12, int8_gemm=True)
    with pytest.raises(UserInputError, match="not divisible"):
        attention_flops("dense", 128, 100, 3, 32, 4, 32, 4)
    with pytest.raises(UserInputError, match="length=0"):
        attention_flops("dense", 0, 64, 2, 32, 4, 32, 4)
    with pytest.raises(UserInputError, match="unknown attention method"):
        attention_flops("sparse", 128, 64, 2, 32, 4, 32, 4)
