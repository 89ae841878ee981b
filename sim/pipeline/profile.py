"""Model registry and block-by-block profiles from PyTorch's meta device.

A model is named by a preset (``unet-sd``, ``uvit-h``, ...: :data:`MODELS`) or by a user
file, ``path/to/file.py:function``, whose function takes no arguments and returns a
:class:`sim.pipeline.blocks.PipelineModel` (blocks built with ``sim.pipeline.blocks.Block``;
the function is called under ``torch.device("meta")``, so it allocates no weights).

:func:`profile` builds the model on the meta device (shapes only, so a multi-billion
parameter model fits anywhere) and runs one forward pass block by block under
``FlopCounterMode``: per block it records FLOPs, the compute ops it dispatches (kernel
launches, whose fixed cost dominates small microbatches), parameter bytes, the bytes of its
output activation, and which earlier output it consumes as a skip; the result carries a networkx
DAG (sequential and skip edges, with bytes).

Activation memory is what autograd really saves for the backward pass, recorded with
``torch.autograd.graph.saved_tensors_hooks`` during the same meta forward: every tensor an
op saves, deduplicated by storage (a tensor saved by two ops, or views of one tensor, count
once; a view holds its whole storage), with parameters and views of parameters left out
(they are weights, counted once per device, not per microbatch). A saved tensor that is the
output of a block (or the model input) is recorded by index (``saved_outputs``), so that a
block saving its input and the block before it saving its output count that tensor once
(:meth:`ModelProfile.activation_bytes`); all other saved bytes are the block's own
(``saved_bytes``). Floating-point tensors are counted at ``dtype_bytes`` per element
(the training precision; the meta pass runs in float32), others at their own size.

Attention: on the meta device ``F.scaled_dot_product_attention`` would take PyTorch's math
path (matmul, softmax, matmul), which saves the N x N attention matrix. Training runs a
fused kernel instead (memory-efficient or flash attention on GPUs, the flash kernel on
CPUs), which saves only q, k, v, the output and a log-sum-exp per row. The meta pass
therefore routes ``F.scaled_dot_product_attention`` to the fused memory-efficient kernel
(:func:`_fused_attention`); its FLOPs are counted the same, as one compute op.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import networkx as nx
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from coevo.sim.errors import UserInputError
from coevo.sim.pipeline import unet as unet_mod
from coevo.sim.pipeline import uvit as uvit_mod
from coevo.sim.pipeline.blocks import ROLES, Block, PipelineModel
from coevo.sim.pipeline.config import PIPELINE

MODELS: dict[str, Callable[[], PipelineModel]] = {
    **{name: functools.partial(unet_mod.unet, cfg) for name, cfg in unet_mod.PRESETS.items()},
    **{name: functools.partial(uvit_mod.uvit, cfg) for name, cfg in uvit_mod.PRESETS.items()},
}
"""Preset name -> builder (builds on the current default device)."""


@dataclass(frozen=True)
class BlockProfile:
    """Measured shape of one block for one microbatch (forward pass)."""

    name: str
    role: str
    flops: int
    param_bytes: int
    out_bytes: int
    out_shape: tuple[int, ...]
    skip_from: int | None
    kernels: int = 0
    """Compute ops (non-view ATen ops) of the forward pass: each is at least one kernel launch."""
    saved_bytes: int = 0
    """Bytes autograd saves for this block's backward that are not block outputs nor parameters (module doc)."""
    saved_outputs: tuple[int, ...] = ()
    """Block outputs (indices; -1: the model input) that autograd saves for this block's backward."""


@dataclass(frozen=True)
class ModelProfile:
    """A model's blocks, in forward order, for one microbatch."""

    model: str
    microbatch: int
    resolution: int
    dtype_bytes: int
    blocks: tuple[BlockProfile, ...]
    graph: nx.DiGraph = field(compare=False)
    input_bytes: int = 0
    """Bytes of the first block's input per microbatch."""

    @property
    def skip_edges(self) -> list[tuple[int, int]]:
        """(producer, consumer) block indices of the long skips."""
        return [(b.skip_from, i) for i, b in enumerate(self.blocks) if b.skip_from is not None]

    def output_bytes(self, index: int) -> int:
        """Bytes of block ``index``'s output per microbatch (-1: the model input)."""
        return self.input_bytes if index < 0 else self.blocks[index].out_bytes

    def activation_bytes(self, blocks: Iterable[int]) -> int:
        """Bytes autograd saves per microbatch for the backward of ``blocks`` run together on one device.

        Each block's own saved bytes, plus every block output any of them saves, counted once."""
        chosen = set(blocks)
        outputs = {j for i in chosen for j in self.blocks[i].saved_outputs}
        return sum(self.blocks[i].saved_bytes for i in chosen) + sum(self.output_bytes(j) for j in outputs)

    def total(self, what: str) -> int:
        """Sum of ``flops``, ``kernels``, ``param_bytes`` or ``out_bytes`` over the blocks."""
        return sum(int(getattr(b, what)) for b in self.blocks)


def _load_user_model(spec: str) -> PipelineModel:
    path_text, _, func_name = spec.rpartition(":")
    path = Path(path_text)
    if not path_text or not func_name:
        raise UserInputError(
            f"unknown model {spec!r}: presets are {', '.join(MODELS)}, or give path/to/file.py:function "
            f"(a function returning a sim.pipeline.blocks.PipelineModel)"
        )
    if not path.is_file():
        what = "is a folder" if path.is_dir() else "does not exist"
        raise UserInputError(f"model {spec!r}: {path_text} {what}; give path/to/file.py:function (or a preset: {', '.join(MODELS)})")
    module_spec = importlib.util.spec_from_file_location(f"coevo_user_model_{path.stem}", path)
    if module_spec is None or module_spec.loader is None:
        raise UserInputError(f"model file {path} cannot be imported as Python")
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:  # the user's code: any error is reported as theirs
        raise UserInputError(f"model file {path} failed to import: {type(exc).__name__}: {exc}") from None
    func = getattr(module, func_name, None)
    if not callable(func):
        names = [n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n))]
        raise UserInputError(f"model file {path} has no function {func_name!r} (callables: {', '.join(names) or 'none'})")
    try:
        model = func()
    except Exception as exc:
        raise UserInputError(f"{spec}: the function raised {type(exc).__name__}: {exc}") from None
    if not isinstance(model, PipelineModel):
        raise UserInputError(f"{spec} returned {type(model).__name__}; it must return sim.pipeline.blocks.PipelineModel")
    model.name = spec
    return model


def _validate(model: PipelineModel) -> None:
    if not model.blocks:
        raise UserInputError(f"model {model.name} has no blocks")
    for i, block in enumerate(model.blocks):
        if not isinstance(block, Block):
            raise UserInputError(f"model {model.name}: block {i} is a {type(block).__name__}, not a sim.pipeline.blocks.Block")
        if block.role not in ROLES:
            raise UserInputError(f"model {model.name}: block {block.name} has role {block.role!r}; roles: {', '.join(ROLES)}")
        if block.skip_from is not None and not 0 <= block.skip_from < i - 1:
            raise UserInputError(
                f"model {model.name}: block {block.name} (index {i}) takes a skip from index {block.skip_from}; "
                f"a skip must come from an earlier, non-adjacent block (0..{i - 2})"
            )


def build_model(name: str) -> PipelineModel:
    """A preset or user model, built on the current default device (use ``torch.device("meta")`` for shapes only).

    Raises:
        UserInputError: unknown preset, unreadable user file, or blocks breaking the contract.
    """
    if name in MODELS:
        model = MODELS[name]()
    elif ":" in name:
        model = _load_user_model(name)
    else:
        raise UserInputError(f"unknown model {name!r}; presets: {', '.join(MODELS)}, or path/to/file.py:function")
    _validate(model)
    return model


class _KernelCounter(TorchDispatchMode):
    """Counts the ATen ops that compute (views only reinterpret memory and launch nothing)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if not func.is_view:
            self.ops += 1
        return func(*args, **(kwargs or {}))


_MATH_ATTENTION = F.scaled_dot_product_attention


def _fused_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    """``F.scaled_dot_product_attention`` as a fused kernel on the meta device (module doc); elsewhere unchanged."""
    if query.device.type != "meta" or enable_gqa:
        return _MATH_ATTENTION(query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)
    out = torch.ops.aten._scaled_dot_product_efficient_attention(query, key, value, attn_mask, True, dropout_p, is_causal, scale=scale)
    return out[0]


def fused_attention() -> contextlib.AbstractContextManager[Any]:
    """Context in which ``torch.nn.functional.scaled_dot_product_attention`` runs fused on the meta device."""
    return mock.patch.object(F, "scaled_dot_product_attention", _fused_attention)


class _SavedTensors:
    """Collects the tensors autograd saves (``saved_tensors_hooks``), keeping them alive so storages stay distinct."""

    def __init__(self) -> None:
        self.saved: list[torch.Tensor] = []

    def pack(self, t: torch.Tensor) -> torch.Tensor:
        self.saved.append(t)
        return t

    @staticmethod
    def unpack(t: torch.Tensor) -> torch.Tensor:
        return t


def _storage(t: torch.Tensor) -> int:
    """Identity of ``t``'s storage (works on the meta device, where data pointers are all 0)."""
    return int(t.untyped_storage()._cdata)


def saved_activation_bytes(
    saved: Iterable[torch.Tensor], params: Iterable[torch.Tensor], outputs: dict[int, int], dtype_bytes: int
) -> tuple[int, tuple[int, ...]]:
    """Split saved tensors into own bytes and saved block outputs (see the module doc).

    Args:
        saved: the tensors autograd saved.
        params: the block's parameters (left out, with their views).
        outputs: storage identity -> block index (-1: model input) of the block outputs so far.
        dtype_bytes: bytes per floating-point element in training.
    """
    skip = {_storage(p) for p in params}
    own: dict[int, int] = {}
    indices: set[int] = set()
    for t in saved:
        key = _storage(t)
        if key in skip:
            continue
        if key in outputs:
            indices.add(outputs[key])
            continue
        storage = t.untyped_storage()
        element = t.element_size()
        own[key] = storage.nbytes() // element * (dtype_bytes if t.is_floating_point() else element)
    return sum(own.values()), tuple(sorted(indices))


def profile(
    model: str, *, resolution: int = PIPELINE.resolution, microbatch: int = PIPELINE.microbatch, dtype_bytes: int = PIPELINE.dtype_bytes
) -> ModelProfile:
    """Profile a model on the meta device (see module doc).

    Args:
        model: preset name or ``file.py:function``.
        resolution: latent height and width (64 for SD at 512 px).
        microbatch: samples per microbatch.
        dtype_bytes: bytes per activation/parameter element in training (2 for fp16/bf16).

    Raises:
        UserInputError: unknown model, or a resolution the model cannot take.
    """
    if microbatch < 1:
        raise UserInputError(f"microbatch must be at least 1, got {microbatch}")
    with torch.device("meta"):
        built = build_model(model)
        multiple = built.resolution_multiple
        if resolution < multiple or resolution % multiple:
            raise UserInputError(f"resolution {resolution} must be a multiple of {multiple} for model {model}")
        x = torch.empty(built.input_shape(microbatch, resolution))
    input_bytes = x.numel() * dtype_bytes
    outputs: list[torch.Tensor] = []
    output_of = {_storage(x): -1}
    profiles = []
    graph = nx.DiGraph()
    for i, block in enumerate(built.blocks):
        skip = outputs[block.skip_from] if block.skip_from is not None else None
        hooks = _SavedTensors()
        try:
            with (
                FlopCounterMode(display=False) as counter,
                _KernelCounter() as kernels,
                fused_attention(),
                torch.autograd.graph.saved_tensors_hooks(hooks.pack, hooks.unpack),
            ):
                x = block(x, skip)
        except RuntimeError as exc:  # shape mismatches in a user model
            raise UserInputError(f"model {model}: block {block.name} (index {i}) failed on the meta device: {exc}") from None
        outputs.append(x)
        output_of.setdefault(_storage(x), i)
        saved, saved_outputs = saved_activation_bytes(hooks.saved, block.parameters(), output_of, dtype_bytes)
        params = sum(p.numel() for p in block.parameters()) * dtype_bytes
        out_bytes = x.numel() * dtype_bytes
        profiles.append(
            BlockProfile(
                block.name,
                block.role,
                int(counter.get_total_flops()),
                params,
                out_bytes,
                tuple(x.shape),
                block.skip_from,
                kernels.ops,
                saved,
                saved_outputs,
            )
        )
        graph.add_node(
            i, name=block.name, role=block.role, flops=profiles[-1].flops, param_bytes=params, out_bytes=out_bytes, kernels=kernels.ops
        )
        if i > 0:
            graph.add_edge(i - 1, i, kind="sequential", bytes=profiles[i - 1].out_bytes)
        if block.skip_from is not None:
            graph.add_edge(block.skip_from, i, kind="skip", bytes=profiles[block.skip_from].out_bytes)
    return ModelProfile(model, microbatch, resolution, dtype_bytes, tuple(profiles), graph, input_bytes)


def summary(p: ModelProfile) -> dict[str, Any]:
    """JSON-friendly totals of a profile."""
    return {
        "model": p.model,
        "blocks": len(p.blocks),
        "skips": len(p.skip_edges),
        "gflops_forward": round(p.total("flops") / 1e9, 3),
        "params_millions": round(p.total("param_bytes") / p.dtype_bytes / 1e6, 2),
        "activation_mb": round(p.total("out_bytes") / 1e6, 3),
        "kernels_forward": p.total("kernels"),
        "microbatch": p.microbatch,
        "resolution": p.resolution,
    }
