"""sim.prune: exact sparsity, N:M groups, Wanda vs magnitude, sequential propagation, the cosine score, bad input."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from coevo.sim.errors import UserInputError
from coevo.sim.prune import calibration_inputs, prunable_layers, prune, score_matrix
from coevo.sim.prune.core import _Stats


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.heads = 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = self.ln1(x)
        q, k, v = (f(h).view(b, t, self.heads, d // self.heads).transpose(1, 2) for f in (self.q, self.k, self.v))
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.o(a)
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))


class TinyLM(nn.Module):
    """The zoo's ByteGPT layout (embed, pos, blocks, norm, head), small."""

    def __init__(self, d: int = 16, n_blocks: int = 2, block: int = 32) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed, self.pos = nn.Embedding(256, d), nn.Embedding(block, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(n_blocks))
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, 256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x) + self.pos(torch.arange(x.shape[1]))
        for b in self.blocks:
            h = b(h)
        return self.head(self.norm(h))


def tokens(n: int = 4, t: int = 32, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 256, (n, t), generator=g)
    return [(x[:2], x[:2]), (x[2:], x[2:])]


@pytest.mark.parametrize("score", ["magnitude", "wanda", "var", "cos", "cos+var", "sparsegpt"])
def test_unstructured_prunes_exactly_the_target_in_every_row(score: str) -> None:
    model = TinyLM()
    res = prune(model, tokens(), 0.5, score=score, calib_tokens=96)
    assert set(res.masks) == {f"blocks.{b}.{n}" for b in range(2) for n in ("q", "k", "v", "o", "fc1", "fc2")}  # not head
    for name, mask in res.masks.items():
        assert (mask.sum(1) == mask.shape[1] // 2).all(), name  # per output row
        assert res.layer_sparsity[name] == 0.5
        w = dict(res.model.named_modules())[name].weight
        assert torch.equal(w == 0, ~mask)  # the pruned weights are zero, the kept ones are not
    assert res.sparsity == 0.5 and res.calib_tokens == (0 if score == "magnitude" else 96)


def test_per_layer_group_and_per_layer_sparsity() -> None:
    model = TinyLM()
    res = prune(model, tokens(), 0.25, score="wanda", group="layer")
    for mask in res.masks.values():
        assert (~mask).sum().item() == round(0.25 * mask.numel())
    res = prune(model, tokens(), {"blocks.0.fc1": 0.75, "blocks.1.q": 0.5}, score="var")
    assert res.layer_sparsity == {"blocks.0.fc1": 0.75, "blocks.1.q": 0.5}


@pytest.mark.parametrize(("pattern", "n", "m", "score"), [("2:4", 2, 4, "cos+var"), ("4:8", 4, 8, "wanda"), ("2:4", 2, 4, "sparsegpt")])
def test_nm_keeps_exactly_n_of_every_m_consecutive_inputs(pattern: str, n: int, m: int, score: str) -> None:
    res = prune(TinyLM(), tokens(), None, pattern=pattern, score=score)
    for mask in res.masks.values():
        groups = mask.reshape(mask.shape[0], -1, m)
        assert (groups.sum(2) == n).all()
        w = dict(res.model.named_modules())
    for name, mask in res.masks.items():
        nonzero = (w[name].weight != 0).reshape(mask.shape[0], -1, m).sum(2)
        assert (nonzero <= n).all()
    assert res.sparsity == 0.5 and res.pattern == pattern


def test_wanda_with_equal_input_norms_is_magnitude() -> None:
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(8, 6))
    eye = [torch.eye(8) * 3.0]  # every input channel has norm 3 over the 8 samples
    wanda = prune(model, eye, 0.5, score="wanda", calib_tokens=8)
    magnitude = prune(model, None, 0.5, score="magnitude")
    assert torch.equal(wanda.masks["0"], magnitude.masks["0"])
    # and the masks keep the largest |W| of each row
    w = model[0].weight.abs()
    kept_min = torch.where(wanda.masks["0"], w, torch.inf).min(1).values
    pruned_max = torch.where(~wanda.masks["0"], w, -torch.inf).max(1).values
    assert (kept_min > pruned_max).all()


class TwoLayers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(3)
        self.layers = nn.ModuleList([nn.Linear(8, 16), nn.Linear(16, 8)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers[1](torch.relu(self.layers[0](x)))


def _wanda_mask(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Keep the 50 % largest |W_ij| * ||x_j|| of each row, computed directly."""
    s = w.abs() * x.norm(dim=0)
    keep = torch.zeros_like(w, dtype=torch.bool)
    for i in range(w.shape[0]):
        keep[i, s[i].argsort(descending=True)[: w.shape[1] // 2]] = True
    return keep


def test_second_layer_sees_the_outputs_of_the_pruned_first() -> None:
    model = TwoLayers()
    x = torch.randn(64, 8, generator=torch.Generator().manual_seed(4)) * torch.linspace(0.1, 3, 8)
    w0, b0 = model.layers[0].weight.detach(), model.layers[0].bias.detach()
    m0 = _wanda_mask(w0, x)
    dense_h = torch.relu(x @ w0.T + b0)
    pruned_h = torch.relu(x @ (w0 * m0).T + b0)
    w1 = model.layers[1].weight.detach()
    expect_seq, expect_dense = _wanda_mask(w1, pruned_h), _wanda_mask(w1, dense_h)
    assert not torch.equal(expect_seq, expect_dense)  # the data tells the two apart
    seq = prune(model, [x], 0.5, score="wanda", calib_tokens=64)
    one_pass = prune(model, [x], 0.5, score="wanda", calib_tokens=64, sequential=False)
    assert torch.equal(seq.masks["layers.0"], m0) and torch.equal(one_pass.masks["layers.0"], m0)
    assert torch.equal(seq.masks["layers.1"], expect_seq)
    assert torch.equal(one_pass.masks["layers.1"], expect_dense)


def test_cos_score_is_the_mean_squared_output_angle() -> None:
    torch.manual_seed(5)
    layer = nn.Linear(6, 5)
    x = torch.randn(40, 6)
    stats = _Stats()
    stats.add(layer, x, "cos")
    got = score_matrix(layer.weight, stats, "cos")
    w, xd = layer.weight.detach().double(), x.double()
    y = xd @ w.T + layer.bias.detach().double()
    exact = torch.zeros(5, 6, dtype=torch.float64)
    small = torch.zeros(5, 6, dtype=torch.float64)
    for i in range(5):
        for j in range(6):
            d = torch.zeros_like(y)
            d[:, i] = -w[i, j] * xd[:, j]
            yhat = y / y.norm(dim=1, keepdim=True)
            perp = d - (d * yhat).sum(1, keepdim=True) * yhat
            small[i, j] = ((perp.norm(dim=1) / y.norm(dim=1)) ** 2).mean().sqrt()
            cos = torch.nn.functional.cosine_similarity(y, y + d, dim=1).clamp(-1, 1)
            exact[i, j] = (torch.arccos(cos) ** 2).mean().sqrt()
    assert torch.allclose(got, small, rtol=1e-9, atol=1e-12)  # the documented formula
    rank = lambda t: t.flatten().argsort().argsort().double()  # noqa: E731
    rho = torch.corrcoef(torch.stack([rank(got), rank(exact)]))[0, 1]
    assert rho > 0.9  # and it ranks weights as the true angle does


def test_the_callers_model_is_unchanged_unless_inplace() -> None:
    model = TinyLM()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    res = prune(model, tokens(), 0.5, score="cos+var")
    assert res.model is not model
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    res = prune(model, tokens(), 0.5, score="wanda", inplace=True)
    assert res.model is model and (model.blocks[0].fc1.weight == 0).float().mean().item() == 0.5


def test_calibration_length_counts_tokens() -> None:
    data = [(torch.zeros(4, 128, dtype=torch.long),)] * 3
    chunks, n = calibration_inputs(data, 32)
    assert n == 32 and [c.shape for c in chunks] == [torch.Size([1, 32])]
    chunks, n = calibration_inputs(data, 300)
    assert n == 300 and [tuple(c.shape) for c in chunks] == [(2, 128), (1, 44)]
    chunks, n = calibration_inputs([torch.zeros(5, 3)] * 4, 12)
    assert n == 12 and sum(c.shape[0] for c in chunks) == 12


def test_default_layers_skip_embedding_and_head() -> None:
    assert "head" not in prunable_layers(TinyLM())
    assert prunable_layers(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))) == ["0"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sparsity": 0.0}, r"sparsity 0.0 must be in \(0, 1\)"),
        ({"sparsity": 1.0}, r"must be in \(0, 1\)"),
        ({"sparsity": -0.2}, r"must be in \(0, 1\)"),
        ({"score": "taylor"}, "unknown score 'taylor'"),
        ({"pattern": "4:2"}, "0 < N < M"),
        ({"pattern": "2:4", "sparsity": 0.7}, "does not match"),
        ({"pattern": "2:5", "sparsity": None}, "does not divide"),
        ({"calib_tokens": 0}, "at least 1"),
        ({"layers": ["embed"]}, "not nn.Linear"),
        ({"sparsity": {"head": 0.5}}, "not pruned"),
    ],
)
def test_bad_input_is_one_clear_error(kwargs: dict[str, object], message: str) -> None:
    args = {"sparsity": 0.5, **kwargs}
    model = TinyLM()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(UserInputError, match=message):
        prune(model, tokens(), **args)  # type: ignore[arg-type]
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_a_model_without_linear_layers_is_refused() -> None:
    with pytest.raises(UserInputError, match=r"no nn\.Linear layers"):
        prune(nn.Sequential(nn.Conv2d(1, 2, 3)), [torch.zeros(1, 1, 4, 4)], 0.5)


def test_pruning_keeps_the_lm_close_at_low_sparsity() -> None:
    model = TinyLM()
    x = tokens()[0][0]
    dense = model(x)
    light = prune(model, tokens(), 0.1, score="cos+var").model(x)
    heavy = prune(model, tokens(), 0.9, score="cos+var").model(x)
    assert math.isfinite(light.sum().item())
    assert (light - dense).norm() < (heavy - dense).norm()


@pytest.mark.parametrize("pattern", ["unstructured", "2:4"])
def test_sparsegpt_reconstructs_the_layer_output_better_than_masking(pattern: str) -> None:
    torch.manual_seed(6)
    model = nn.Sequential(nn.Linear(32, 16))
    x = torch.randn(256, 32) @ torch.randn(32, 32)  # correlated inputs: what reconstruction exploits
    dense = model(x)
    errors = {}
    for score in ("magnitude", "wanda", "sparsegpt"):
        res = prune(model, [x], 0.5 if pattern == "unstructured" else None, pattern=pattern, score=score, calib_tokens=256)
        assert res.sparsity == 0.5
        errors[score] = (res.model(x) - dense).norm().item()
    assert errors["sparsegpt"] < errors["wanda"] and errors["sparsegpt"] < errors["magnitude"]
