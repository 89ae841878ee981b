"""Reality check of the activation-memory model: a real forward and backward on this CPU.

Two measurements, independent of the meta-device profile they check
(:mod:`sim.pipeline.profile`):

* :func:`real_saved_bytes`: per block, the tensors autograd saves during a real float32
  forward on CPU (``saved_tensors_hooks``), deduplicated by data pointer of their storage,
  with the parameters' storages left out. Attention here runs PyTorch's own CPU kernel,
  not the meta pass's substitute.
* :func:`measure_step`: the process's resident memory (``/proc/self/status``) around a
  single-device training step of ``microbatches`` microbatches (all forwards, then all
  backwards, as GPipe on one stage): ``held_bytes`` is what the forwards leave resident
  (the stash), ``peak_bytes`` the high-water mark over the backwards (``VmHWM``, reset
  through ``/proc/self/clear_refs``), both over the resident size before the first
  forward. With ``recompute`` every block runs under ``torch.utils.checkpoint``
  (non-reentrant), so only block inputs are kept. It runs in a fresh process with glibc's
  mmap threshold fixed at 64 KiB, so that every tensor above it is its own mapping and
  freeing it returns the pages (resident size then follows the live tensors; smaller ones
  come from the heap and count once it has grown). Linux only.

The predictions they are compared with: :meth:`ModelProfile.activation_bytes` per block and
:func:`sim.pipeline.simulate.memory_bound` of a one-device plan.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch.utils.checkpoint import checkpoint

from coevo.sim.errors import UserInputError
from coevo.sim.pipeline.blocks import Block
from coevo.sim.pipeline.partition import partition
from coevo.sim.pipeline.profile import build_model, profile
from coevo.sim.pipeline.simulate import stash_bytes, transient_bytes, virtual_stages

MMAP_THRESHOLD = 65536
"""glibc ``M_MMAP_THRESHOLD`` of the measuring process (bytes)."""


@dataclass(frozen=True)
class StepMemory:
    """Resident memory of one measured single-device step, over the resident size before it (bytes)."""

    model: str
    resolution: int
    microbatch: int
    microbatches: int
    recompute: bool
    held_bytes: int
    """After all forwards: the stashed activations (and the small outputs kept for the backward calls)."""
    peak_bytes: int
    """The high-water mark from the end of the forwards through the backwards."""


def predicted_step(model: str, *, resolution: int, microbatch: int, microbatches: int = 2, recompute: bool = False) -> tuple[int, int]:
    """What :func:`measure_step` should see by the planner's model: (held, peak) in float32 bytes.

    The one-device plan's stash per microbatch (:func:`sim.pipeline.simulate.stash_bytes`) times
    ``microbatches``, less the model inputs (allocated before the measurement starts) when
    they are saved, plus the final outputs the loss keeps (``square`` saves its input); the
    peak adds the recompute transient (:func:`sim.pipeline.simulate.transient_bytes`).
    """
    p = profile(model, resolution=resolution, microbatch=microbatch, dtype_bytes=4)
    plan = partition(p, "blockwise", 1, flops_per_s=1.0)
    stages = virtual_stages(p, plan, 1.0)
    stash = stash_bytes(p, stages, 0, recompute)
    inputs_saved = recompute or any(-1 in b.saved_outputs for b in p.blocks)
    last = len(p.blocks) - 1
    last_saved = (last in b.saved_outputs for b in p.blocks)  # a block saving its own output
    per_microbatch = stash - (p.input_bytes if inputs_saved else 0) + (0 if any(last_saved) and not recompute else p.blocks[last].out_bytes)
    held = microbatches * per_microbatch
    return held, held + transient_bytes(stages, 0, recompute)


def _storage_ptr(t: torch.Tensor) -> int:
    return int(t.untyped_storage().data_ptr())


def real_saved_bytes(model: str, *, resolution: int, microbatch: int) -> list[tuple[int, frozenset[int]]]:
    """Per block: bytes of the tensors autograd saves that are not block outputs, and the block outputs it saves (-1: input).

    A real float32 forward on CPU (module doc); bytes are storage bytes, each storage once per block.
    """
    torch.manual_seed(0)
    built = build_model(model)
    x = torch.randn(built.input_shape(microbatch, resolution))
    output_of = {_storage_ptr(x): -1}
    outputs: list[torch.Tensor] = []
    result = []
    for i, block in enumerate(built.blocks):
        saved: list[torch.Tensor] = []

        def pack(t: torch.Tensor, saved: list[torch.Tensor] = saved) -> torch.Tensor:
            saved.append(t)
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            x = block(x, outputs[block.skip_from] if block.skip_from is not None else None)
        outputs.append(x)
        output_of.setdefault(_storage_ptr(x), i)
        params = {_storage_ptr(p) for p in block.parameters()}
        own: dict[int, int] = {}
        kept: set[int] = set()
        for t in saved:
            ptr = _storage_ptr(t)
            if ptr in params:
                continue
            if ptr in output_of:
                kept.add(output_of[ptr])
            else:
                own[ptr] = t.untyped_storage().nbytes()
        result.append((sum(own.values()), frozenset(kept)))
    return result


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")  # not Linux: measure_step refuses before this


def _run_blocks(blocks: list[Block], x: torch.Tensor, recompute: bool) -> torch.Tensor:
    outputs: list[torch.Tensor] = []
    for block in blocks:
        skip = outputs[block.skip_from] if block.skip_from is not None else None
        if recompute:
            y = checkpoint(block, x, skip, use_reentrant=False)
            assert isinstance(y, torch.Tensor)
            x = y
        else:
            x = block(x, skip)
        outputs.append(x)
    return x


def _measure_here(model: str, resolution: int, microbatch: int, microbatches: int, recompute: bool) -> StepMemory:
    """The measurement itself, in this process (call :func:`measure_step`, which gives it a fresh process)."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    built = build_model(model)
    blocks = list(built.blocks)
    xs = [torch.randn(built.input_shape(microbatch, resolution)) for _ in range(microbatches)]
    for _ in range(2):  # allocate parameter gradients and warm the allocator and kernels up
        _run_blocks(blocks, xs[0], recompute).square().mean().backward()
    gc.collect()
    before = _status("VmRSS")
    losses = [_run_blocks(blocks, x, recompute).square().mean() for x in xs]
    held = _status("VmRSS") - before
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current resident size
    for loss in losses:
        loss.backward()
    peak = _status("VmHWM") - before
    return StepMemory(model, resolution, microbatch, microbatches, recompute, held, peak)


def measure_step(model: str, *, resolution: int, microbatch: int, microbatches: int = 2, recompute: bool = False) -> StepMemory:
    """Measure one single-device step's activation memory in a fresh process (module doc).

    Raises:
        UserInputError: not on Linux (the measurement reads ``/proc/self``).
    """
    if not Path("/proc/self/clear_refs").exists():
        raise UserInputError("measuring resident memory needs Linux (/proc/self/clear_refs)")
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD), "OMP_NUM_THREADS": "1"}
    # the folder that holds the coevo package (the checkout, or site-packages): coevo/sim/pipeline/memcheck.py
    root = str(Path(__file__).parents[3])
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")])
    args = [model, str(resolution), str(microbatch), str(microbatches), str(int(recompute))]
    done = subprocess.run(
        [sys.executable, "-m", "coevo.sim.pipeline.memcheck", *args], env=env, capture_output=True, text=True, check=False, timeout=600
    )
    if done.returncode != 0:
        raise RuntimeError(f"memory measurement failed:\n{done.stderr}")  # a bug or a broken environment, not user input
    return StepMemory(**json.loads(done.stdout.strip().splitlines()[-1]))


if __name__ == "__main__":
    name, res, mb, count, rc = sys.argv[1:6]
    print(json.dumps(asdict(_measure_here(name, int(res), int(mb), int(count), rc == "1"))))
