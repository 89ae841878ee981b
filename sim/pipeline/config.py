"""The pipeline family's configuration: every default and bound its simulator, tools and problem share, declared once.

:class:`PipelineConfig` holds the defaults of the ``pipeline.profile`` / ``plan`` /
``simulate`` / ``tune`` tools (``tools/pipeline.py``), of the ``pipeline`` problem's options
(``search/pipeline/problem.py``) and the keyword defaults of the simulator functions that repeat
them (:func:`~coevo.sim.pipeline.profile.profile`, :func:`~coevo.sim.pipeline.tune.tune`,
:func:`~coevo.sim.pipeline.simulate.simulate`).

The CP-SAT time limit has two values: 10 s a ``pipeline.simulate`` call (``ilp_time_limit_s``)
and 30 s when :func:`~coevo.sim.pipeline.ilp.synthesize` is called without one (every figure
script passes its own). ``synthesize``'s keyword defaults read ``synthesize_time_limit_s``,
``ilp_memory`` and ``ilp_split_backward``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class PipelineConfig:
    """Defaults and bounds of the pipeline family (each field's ``metadata``: ``help``, ``unit``, bounds)."""

    model: str = field(default="unet-sd", metadata={"help": "model preset or path/to/file.py:function returning a PipelineModel"})
    cluster: str = field(default="v100x16-ib10", metadata={"help": "cluster preset or a JSON file path"})
    resolution: int = field(
        default=64, metadata={"help": "latent height/width (64 for SD at 512 px)", "unit": "latent pixels", "ge": 1, "le": 1024}
    )
    microbatch: int = field(default=1, metadata={"help": "samples per microbatch", "unit": "samples", "ge": 1, "le": 4096})
    dtype_bytes: int = field(
        default=2, metadata={"help": "bytes per activation/parameter element in training (fp16/bf16)", "unit": "bytes"}
    )
    devices: int = field(default=8, metadata={"help": "pipeline stages (one device each)", "unit": "devices", "ge": 1, "le": 1024})
    balance: float = field(
        default=0.0,
        metadata={
            "help": (
                "stage-time slack the byte-aware partitioners (blockwise-bytes, skip-aware) may trade for fewer bytes (0: pure balance)"
            ),
            "unit": "share of the balanced stage time",
            "ge": 0.0,
            "le": 2.0,
        },
    )
    method: str = field(default="skip-aware", metadata={"help": "partitioner of pipeline.simulate"})
    plan_method: str = field(default="all", metadata={"help": "partitioners pipeline.plan compares"})
    schedule: str = field(default="wave", metadata={"help": "pipeline schedule of pipeline.simulate"})
    microbatches: int = field(default=16, metadata={"help": "microbatches per training step", "unit": "microbatches", "ge": 1, "le": 1024})
    recompute: bool = field(
        default=False, metadata={"help": "activation recomputation (stash stage inputs only; recompute before backward)"}
    )
    data_parallel: int = field(
        default=1, metadata={"help": "replicas of the pipeline (gradients ring-all-reduced)", "unit": "replicas", "ge": 1, "le": 1024}
    )
    ilp_time_limit_s: float = field(
        default=10.0, metadata={"help": "ilp: CP-SAT time limit of a pipeline.simulate call", "unit": "s", "gt": 0, "le": 600}
    )
    synthesize_time_limit_s: float = field(
        default=30.0, metadata={"help": "CP-SAT time limit of synthesize() called without one", "unit": "s"}
    )
    ilp_memory: str = field(default="1f1b", metadata={"help": "ilp: what caps each device's stashed activations"})
    ilp_split_backward: bool = field(default=False, metadata={"help": "ilp: schedule B and W halves of each backward separately"})
    global_batch: int = field(
        default=128, metadata={"help": "samples per training step over all replicas", "unit": "samples", "ge": 1, "le": 1_000_000}
    )
    tune_microbatches: tuple[int, ...] = field(default=(1, 2, 4, 8), metadata={"help": "microbatch sizes pipeline.tune tries"})
    top: int = field(default=10, metadata={"help": "how many of the fastest configurations to return", "ge": 1, "le": 200})


PIPELINE = PipelineConfig()
"""The defaults (an instance, so a simulator's keyword default reads ``PIPELINE.field``)."""

__all__ = ["PIPELINE", "PipelineConfig"]
