"""Training and evaluation of the nets, with the zoo's optimiser settings (AdamW, one-cycle LR, clip 1.0, batch 64).

Joint training: the loss is the sum over steps of each step's cross-entropy. With
``distill``, every step but the largest also learns from the largest step's (detached)
softmax at temperature 2: ``0.5 * CE + 0.5 * T^2 * KL`` (the largest step keeps plain CE).
Stepping and slimmable nets get the same rule; independent nets have no larger net to learn
from, so they train on CE alone whatever ``distill`` says.

With ``assign="importance"`` a stepping net starts with every unit in group 0 and its units move up
to larger groups by importance (:mod:`sim.stepping._assign`) ``rounds`` times, evenly spread over
the first 60 % of the optimiser steps, measured on a fixed batch of ``importance_images`` training
images (drawn with the seed); the last round reaches the plan's group sizes and the last 40 % of
the steps train at them. ``assign="index"`` keeps the fixed index partition from the start
(group ``g`` = units ``cum[g-1]..cum[g]`` of the initialisation).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from coevo.sim.stepping._assign import Reassignment, group_ends, reassign
from coevo.sim.stepping._nets import IndependentCNNs, SteppingCNN, step_logits

Progress = Callable[[str, float], None]
TEMPERATURE = 2.0
ASSIGNS = ("index", "importance")


@dataclass(frozen=True)
class TrainConfig:
    """Training settings shared by every net of a comparison."""

    epochs: int
    seed: int = 0
    distill: bool = False
    batch: int = 64
    lr: float = 3e-3
    weight_decay: float = 1e-4
    assign: str = "index"
    rounds: int = 4
    importance_images: int = 256

    def reassign_at(self, total_steps: int) -> list[int]:
        """The optimiser steps after which units are reassigned (none unless ``assign`` is ``importance``)."""
        if self.assign != "importance" or total_steps < 2:
            return []
        return sorted({max(1, round(0.6 * total_steps * k / self.rounds)) for k in range(1, self.rounds + 1)})


def joint_loss(logits: list[torch.Tensor], y: torch.Tensor, distill: bool) -> torch.Tensor:
    """Sum over steps of each step's loss (module doc)."""
    teacher = F.softmax(logits[-1].detach() / TEMPERATURE, dim=-1)
    total = logits[0].new_zeros(())
    for i, out in enumerate(logits):
        ce = F.cross_entropy(out, y)
        if distill and i < len(logits) - 1:
            kl = F.kl_div(F.log_softmax(out / TEMPERATURE, dim=-1), teacher, reduction="batchmean")
            total = total + 0.5 * ce + 0.5 * TEMPERATURE**2 * kl
        else:
            total = total + ce
    return total


def train(
    net: nn.Module, x: torch.Tensor, y: torch.Tensor, cfg: TrainConfig, progress: Progress | None = None, what: str = ""
) -> list[Reassignment]:
    """Train ``net`` in place on ``(x, y)`` (independent nets: each alone, with the same seed and batch order).

    Returns the reassignments made (a stepping net trained with ``assign="importance"``; empty otherwise).
    """
    if cfg.assign not in ASSIGNS:
        raise ValueError(f"assign {cfg.assign!r}: use one of {', '.join(ASSIGNS)}")
    if isinstance(net, IndependentCNNs):
        for s, sub in enumerate(net.nets):
            part = None if progress is None else _scaled(progress, s, len(net.nets))
            _train_one(sub, x, y, TrainConfig(cfg.epochs, cfg.seed, False, cfg.batch, cfg.lr, cfg.weight_decay), part, f"{what} net {s}")
        return []
    return _train_one(net, x, y, cfg, progress, what)


def _scaled(progress: Progress, i: int, n: int) -> Progress:
    def say(text: str, frac: float) -> None:
        progress(text, (i + frac) / n)

    return say


def _train_one(
    net: nn.Module, x: torch.Tensor, y: torch.Tensor, cfg: TrainConfig, progress: Progress | None, what: str
) -> list[Reassignment]:
    gen = torch.Generator().manual_seed(cfg.seed)
    opt = torch.optim.AdamW(net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    per_epoch = math.ceil(len(y) / cfg.batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.lr, total_steps=max(1, cfg.epochs * per_epoch))
    at = set(cfg.reassign_at(cfg.epochs * per_epoch)) if isinstance(net, SteppingCNN) else set()
    probe = torch.randperm(len(y), generator=torch.Generator().manual_seed(cfg.seed + 1))[: cfg.importance_images]
    done: list[Reassignment] = []
    taken = 0
    if at:
        assert isinstance(net, SteppingCNN)
        net.set_groups(group_ends(net.plan.cum, 0, len(at)))  # every unit in group 0
    net.train()
    for epoch in range(cfg.epochs):
        order = torch.randperm(len(y), generator=gen)
        for i in range(0, len(y), cfg.batch):
            idx = order[i : i + cfg.batch]
            if len(idx) < 2:  # BatchNorm needs two images
                continue
            loss = joint_loss(step_logits(net, x[idx]), y[idx], cfg.distill)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            sched.step()
            taken += 1
            if taken in at:
                assert isinstance(net, SteppingCNN)
                done.append(reassign(net, x[probe], y[probe], group_ends(net.plan.cum, len(done) + 1, len(at)), opt))
                net.train()
        if progress is not None:
            progress(f"training {what}: epoch {epoch + 1} of {cfg.epochs}", (epoch + 1) / cfg.epochs)
    net.eval()
    return done


@torch.no_grad()
def accuracies(net: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int = 256) -> list[float]:
    """Accuracy in % of every step of ``net`` on ``(x, y)``."""
    was = net.training
    net.eval()
    right: list[int] = []
    for i in range(0, len(y), batch):
        outs = step_logits(net, x[i : i + batch])
        hits = [int((o.argmax(-1) == y[i : i + batch]).sum()) for o in outs]
        right = hits if not right else [a + b for a, b in zip(right, hits, strict=True)]
    net.train(was)
    return [100.0 * r / len(y) for r in right]
