"""THE registry of typed tools, shared by chat, the CLI and search.

Adding a tool: write a :class:`Tool` subclass in a module here and add one line
(name: ``module:Class``) to :data:`REGISTRY`'s table; the conformance suite (:mod:`coevo.testing.tools`, run over the
registry by tests/tools/test_conformance.py) picks it up.
Declare what it touches (``writes``, ``loads_code``): a model's calls are checked against
that by :class:`CallPolicy` (:mod:`tools._policy`).
"""

from __future__ import annotations

from coevo.tools._base import Tool, ToolArgs, ToolArgumentError, ToolDeclinedError, ToolExecutionError, ToolResult
from coevo.tools._call import call_tool, parse_arguments
from coevo.tools._policy import (
    ENV_WORKSPACE,
    CallPolicy,
    Confirm,
    OutsideWorkspaceError,
    StorageNotAllowedError,
    asks_first,
    shown_url,
    workspace,
)
from coevo.tools._registry import LazyRegistry, Registry, llm_name

REGISTRY = LazyRegistry(
    {
        "nb201.query": "coevo.tools.nb201:NB201Query",
        "nb201.pareto_front": "coevo.tools.nb201:NB201ParetoFront",
        "problem.describe": "coevo.tools.problems:ProblemDescribe",
        "problem.cheap_objectives": "coevo.tools.problems:ProblemCheap",
        "design.explain": "coevo.tools.designs:DesignExplain",
        "search.run": "coevo.tools.search_run:SearchRun",
        "search.start": "coevo.tools.search_jobs:SearchStart",
        "search.status": "coevo.tools.search_jobs:SearchStatus",
        "studies.list": "coevo.tools.studies:StudiesList",
        "study.front": "coevo.tools.studies:StudyFront",
        "kb.list": "coevo.tools.kb:KBList",
        "kb.show": "coevo.tools.kb:KBShow",
        "kb.review": "coevo.tools.kb:KBReview",
        "pipeline.profile": "coevo.tools.pipeline:PipelineProfile",
        "pipeline.plan": "coevo.tools.pipeline:PipelinePlan",
        "pipeline.simulate": "coevo.tools.pipeline:PipelineSimulate",
        "pipeline.tune": "coevo.tools.pipeline:PipelineTune",
        "noc.simulate": "coevo.tools.noc:NocSimulate",
        "noc.plot": "coevo.tools.noc:NocPlot",
        "accel.systolic": "coevo.tools.noc:AccelSystolic",
        "compress.energy_aware": "coevo.tools.noc:CompressEnergyAware",
        "models.list": "coevo.tools.models:ModelsList",
        "models.build": "coevo.tools.models:ModelsBuild",
        "prune.activation": "coevo.tools.prune:PruneActivation",
        "quant.class_based": "coevo.tools.quant:QuantClassBased",
        "quant.zo_qat": "coevo.tools.zoqat:ZoQat",
        "kernel.spmm": "coevo.tools.kernels:KernelSpmm",
        "gnn.circuit": "coevo.tools.gnn:GnnCircuit",
        "he.gcn": "coevo.tools.he:HEGcn",
        "attention.sparse": "coevo.tools.attention:AttentionSparse",
        "schedule.length_aware": "coevo.tools.fpga:ScheduleLengthAware",
        "reram.faults": "coevo.tools.reram:ReramFaults",
        "stepping.build": "coevo.tools.stepping:SteppingBuild",
        "stepping.run": "coevo.tools.stepping:SteppingRun",
        "freeze.train": "coevo.tools.freeze:FreezeTrain",
    }
)
"""Every tool coevo offers (each module is imported on first use: start-up time; see :class:`LazyRegistry`)."""

__all__ = [
    "ENV_WORKSPACE",
    "REGISTRY",
    "CallPolicy",
    "Confirm",
    "LazyRegistry",
    "OutsideWorkspaceError",
    "Registry",
    "StorageNotAllowedError",
    "Tool",
    "ToolArgs",
    "ToolArgumentError",
    "ToolDeclinedError",
    "ToolExecutionError",
    "ToolResult",
    "asks_first",
    "call_tool",
    "llm_name",
    "parse_arguments",
    "shown_url",
    "workspace",
]
