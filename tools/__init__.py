"""THE registry of typed tools, shared by chat, the CLI and search.

Adding a tool: write a :class:`Tool` subclass in a module here and add one line to
:data:`REGISTRY`'s list; the conformance suite (:mod:`coevo.testing.tools`, run over the
registry by tests/tools/test_conformance.py) picks it up.
Declare what it touches (``writes``, ``loads_code``): a model's calls are checked against
that by :class:`CallPolicy` (:mod:`tools._policy`).
"""

from __future__ import annotations

from coevo.tools._base import Tool, ToolArgs, ToolArgumentError, ToolDeclinedError, ToolExecutionError, ToolResult
from coevo.tools._call import call_tool
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
from coevo.tools._registry import Registry, llm_name
from coevo.tools.attention import AttentionSparse
from coevo.tools.fpga import ScheduleLengthAware
from coevo.tools.freeze import FreezeTrain
from coevo.tools.gnn import GnnCircuit
from coevo.tools.he import HEGcn
from coevo.tools.kb import KBList, KBReview, KBShow
from coevo.tools.kernels import KernelSpmm
from coevo.tools.models import ModelsBuild, ModelsList
from coevo.tools.nb201 import NB201ParetoFront, NB201Query
from coevo.tools.noc import AccelSystolic, CompressEnergyAware, NocPlot, NocSimulate
from coevo.tools.pipeline import PipelinePlan, PipelineProfile, PipelineSimulate, PipelineTune
from coevo.tools.problems import ProblemCheap
from coevo.tools.prune import PruneActivation
from coevo.tools.quant import QuantClassBased
from coevo.tools.reram import ReramFaults
from coevo.tools.search_jobs import SearchStart, SearchStatus
from coevo.tools.search_run import SearchRun
from coevo.tools.stepping import SteppingBuild, SteppingRun
from coevo.tools.studies import StudiesList, StudyFront
from coevo.tools.zoqat import ZoQat

REGISTRY = Registry(
    [
        NB201Query(),
        NB201ParetoFront(),
        ProblemCheap(),
        SearchRun(),
        SearchStart(),
        SearchStatus(),
        StudiesList(),
        StudyFront(),
        KBList(),
        KBShow(),
        KBReview(),
        PipelineProfile(),
        PipelinePlan(),
        PipelineSimulate(),
        PipelineTune(),
        NocSimulate(),
        NocPlot(),
        AccelSystolic(),
        CompressEnergyAware(),
        ModelsList(),
        ModelsBuild(),
        PruneActivation(),
        QuantClassBased(),
        ZoQat(),
        KernelSpmm(),
        GnnCircuit(),
        HEGcn(),
        AttentionSparse(),
        ScheduleLengthAware(),
        ReramFaults(),
        SteppingBuild(),
        SteppingRun(),
        FreezeTrain(),
    ]
)
"""Every tool coevo offers."""

__all__ = [
    "ENV_WORKSPACE",
    "REGISTRY",
    "CallPolicy",
    "Confirm",
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
    "shown_url",
    "workspace",
]
