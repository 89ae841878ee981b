"""``sim.zoo.registry.train_lm``, the zoo's language-model training, against a loop written out here from its contract."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

from coevo.sim.zoo.data import byte_tensor
from coevo.sim.zoo.models import ByteGPT
from coevo.sim.zoo.registry import LMTraining, train_lm

HYPER = LMTraining(steps=25, batch=3, block=16, lr=3e-3, weight_decay=0.1)


def _text() -> torch.Tensor:
    return byte_tensor(b"def f(x):\n    return x + 1\n" * 40)


def _reference(model: torch.nn.Module, data: torch.Tensor, seed: int) -> None:
    """AdamW on a one-cycle schedule (10 % warm-up), clipping at 1, windows at uniform random offsets."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=HYPER.lr, weight_decay=HYPER.weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=HYPER.lr, total_steps=HYPER.steps, pct_start=0.1)
    model.train()
    for _ in range(HYPER.steps):
        starts = torch.randint(0, len(data) - HYPER.block - 1, (HYPER.batch,), generator=gen)
        idx = starts[:, None] + torch.arange(HYPER.block)[None, :]
        x, y = data[idx].long(), data[idx + 1].long()
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()


def test_train_lm_is_the_loop_its_contract_describes() -> None:
    torch.manual_seed(0)
    model = ByteGPT(16, 1, 1, HYPER.block)
    expected = copy.deepcopy(model)
    data = _text()
    train_lm(model, data, HYPER, torch.Generator().manual_seed(7))
    _reference(expected, data, 7)
    for (name, a), (_, b) in zip(model.state_dict().items(), expected.state_dict().items(), strict=True):
        assert torch.equal(a, b), name


def test_hooks_run_at_the_asked_steps_and_the_loss_every_ten_and_at_the_last() -> None:
    torch.manual_seed(0)
    model = ByteGPT(16, 1, 1, HYPER.block)
    hooked: list[int] = []
    losses: list[tuple[int, float]] = []
    train_lm(model, _text(), HYPER, torch.Generator().manual_seed(0), on_step=lambda step, m: hooked.append(step),
             at=(1, 13, 25), on_loss=lambda step, loss: losses.append((step, loss)))  # fmt: skip
    assert hooked == [1, 13, 25]
    assert [s for s, _ in losses] == [10, 20, 25] and all(0 < loss < 6 for _, loss in losses)  # ln 256 = 5.55 at the start
