"""The zoo's architectures: small CNNs for 8x8 digits and 28x28 MNIST, and a byte-level causal transformer LM.

Layers are plain ``nn.Conv2d`` / ``nn.Linear`` modules with stable attribute names, so the
quantization, pruning and accelerator tools can find them by type and name.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class DigitsCNN(nn.Module):
    """conv1-conv2-pool-conv3-pool-fc1-fc2 for ``[B, 1, 8, 8]`` images, 10 classes."""

    #: side of the feature map fc1 reads (8 -> 4 -> 2 here)
    side = 2

    def __init__(self, width: int = 16, hidden: int = 64, classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1)
        self.conv3 = nn.Conv2d(2 * width, 4 * width, 3, padding=1)
        self.fc1 = nn.Linear(4 * width * self.side * self.side, hidden)
        self.fc2 = nn.Linear(hidden, classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The convolutional part: what fc1 reads, before flattening."""
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return F.max_pool2d(F.relu(self.conv3(x)), 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.relu(self.fc1(self.features(x).flatten(1))))


class MnistCNN(DigitsCNN):
    """conv1-pool-conv2-pool-conv3-pool-fc1-fc2 for ``[B, 1, 28, 28]`` images (28 -> 14 -> 7 -> 3), 10 classes.

    The same layers (and parameter names) as :class:`DigitsCNN`, with a pool after conv1 too.
    """

    side = 3

    def features(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return F.max_pool2d(F.relu(self.conv3(x)), 2)


# ---- issue 20 (ReRAM crossbars): a small MLP whose every weight is a Linear layer
class DigitsMLP(nn.Module):
    """fc1-fc2-fc3 with ReLU for ``[B, 1, 8, 8]`` digits (flattened to 64 inputs), 10 classes."""

    def __init__(self, hidden: tuple[int, ...] | list[int] = (128, 64), classes: int = 10, inputs: int = 64) -> None:
        super().__init__()
        sizes = [inputs, *hidden, classes]
        self.n_layers = len(sizes) - 1
        for i in range(self.n_layers):
            setattr(self, f"fc{i + 1}", nn.Linear(sizes[i], sizes[i + 1]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.flatten(1)
        for i in range(self.n_layers):
            h = getattr(self, f"fc{i + 1}")(h)
            if i < self.n_layers - 1:
                h = F.relu(h)
        return h


# ---- end issue 20 block


class Attention(nn.Module):
    """Causal multi-head self-attention with separate q, k, v and output projections."""

    def __init__(self, d: int, n_heads: int) -> None:
        super().__init__()
        if d % n_heads:
            raise ValueError(f"width {d} is not divisible by {n_heads} heads")
        self.n_heads = n_heads
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.o = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = (proj(x).view(b, t, self.n_heads, d // self.n_heads).transpose(1, 2) for proj in (self.q, self.k, self.v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(y.transpose(1, 2).reshape(b, t, d))


class MLP(nn.Module):
    """fc1 (d -> 4d), GELU, fc2 (4d -> d)."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    """Pre-norm transformer block."""

    def __init__(self, d: int, n_heads: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attention(d, n_heads)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = MLP(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class ByteGPT(nn.Module):
    """A GPT-style causal LM over bytes (vocabulary 256): ``model(x [B, T] int64) -> logits [B, T, 256]``."""

    def __init__(self, d: int, n_layers: int, n_heads: int, block: int) -> None:
        super().__init__()
        self.block = block
        self.embed = nn.Embedding(256, d)
        self.pos = nn.Embedding(block, d)
        self.blocks = nn.ModuleList(Block(d, n_heads) for _ in range(n_layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, 256)
        self.apply(_init)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x.shape[1]
        if t > self.block:
            raise ValueError(f"sequence of {t} tokens is longer than the model's block of {self.block}")
        h = self.embed(x) + self.pos(torch.arange(t, device=x.device))
        for blk in self.blocks:
            h = blk(h)
        return self.head(self.norm(h))


def _init(m: nn.Module) -> None:
    # GPT-2's initialisation: small normal weights, zero biases; trains stably without warm-up tricks
    if isinstance(m, nn.Linear | nn.Embedding):
        nn.init.normal_(m.weight, std=0.02)
    if isinstance(m, nn.Linear) and m.bias is not None:
        nn.init.zeros_(m.bias)
