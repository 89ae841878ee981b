"""A short fine-tune of a zoo LM with its sparse attention in place, beside the same fine-tune of the dense model.

The sparse operators are differentiable in the kept scores and values (the selection itself is
not: which keys are kept is a hard choice, like a ReLU's active set), so the model can adapt its
weights to the keys it will see. For a fair comparison the dense model gets the very same steps
(same seed, same batches, same learning rate): a gain that the dense model also gets from more
training is not the sparse operator's recovery.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from coevo.sim.attention.model import SparseConfig, sparsify
from coevo.sim.errors import UserInputError
from coevo.sim.zoo import ZooModel
from coevo.sim.zoo.data import byte_tensor, random_windows
from coevo.sim.zoo.registry import splits_of


def _finetune(model: nn.Module, text: bytes, block: int, steps: int, batch: int, lr: float, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    tokens = byte_tensor(text)
    for _ in range(steps):
        data = random_windows(tokens, block, batch, gen)
        out = model(data.x)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), data.y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    model.eval()


def finetune_sparse(
    zm: ZooModel,
    config: SparseConfig,
    train_text: bytes | None = None,
    steps: int = 100,
    batch: int = 16,
    lr: float = 3e-4,
    seed: int = 0,
    split: str = "val",
    max_batches: int | None = None,
    progress: Callable[[str, float], None] | None = None,
) -> dict[str, float]:
    """Val (or test) perplexity of the sparse and the dense model, each before and after ``steps`` identical fine-tuning steps.

    Args:
        zm: a zoo language model (not changed: both fine-tunes work on copies).
        config: the sparse operator.
        train_text: the training text the batches are cut from; None: the zoo recipe's training split.
        steps, batch, lr, seed: the fine-tune, the same for the sparse and the dense copy.
        split, max_batches: where perplexity is measured (batches of 64 sequences; None = the whole split).

    Returns:
        ``sparse_before``, ``sparse_after``, ``dense_before``, ``dense_after`` (perplexities).
    """
    if steps < 1 or batch < 1 or lr <= 0:
        raise UserInputError(f"fine-tune steps={steps}, batch={batch}, lr={lr}: give positive values")
    if zm.task != "lm":
        raise UserInputError(f"model {zm.name!r} is a {zm.task} model; the sparse fine-tune needs a language model")
    if train_text is None:
        if "data" not in zm.recipe:
            raise UserInputError(f"model {zm.name!r} is not from the zoo: pass its training text as train_text")
        train_text = splits_of(zm.recipe)[1]
        assert train_text is not None  # a language model's recipe has training text
    block = int(zm.splits["train"].x.shape[1])
    sparse = sparsify(zm.model, config)
    dense = copy.deepcopy(zm.model)
    out = {"sparse_before": zm.evaluate(sparse, split, max_batches), "dense_before": zm.evaluate(dense, split, max_batches)}
    if progress is not None:
        progress(f"fine-tuning the {config.method} model", 0.0)
    _finetune(sparse, train_text, block, steps, batch, lr, seed)
    if progress is not None:
        progress("fine-tuning the dense model (the same steps)", 0.5)
    _finetune(dense, train_text, block, steps, batch, lr, seed)
    out["sparse_after"] = zm.evaluate(sparse, split, max_batches)
    out["dense_after"] = zm.evaluate(dense, split, max_batches)
    return out
