"""Conformance suites that ship with coevo: what every tool, problem and proposer passes.

coevo's own tests run them over its registries; a plug-in in another repository runs them over
its own tool, problem or proposer the same way. Each suite is a module with ``CHECKS`` (named
checks to parametrise a test over) and one function that runs them all:

* :mod:`coevo.testing.tools`: ``CHECKS``, ``check_tool_conforms(tool)``;
* :mod:`coevo.testing.problems`: ``CHECKS``, ``ProblemUnderTest``, ``check_problem_conforms(problem)``;
* :mod:`coevo.testing.proposers`: ``CHECKS``, ``ProposerUnderTest``, ``check_proposer_conforms(proposer, problem)``.

A check is called with its subject and raises :class:`ConformanceError` (an ``AssertionError``)
naming what is wrong, or :class:`CheckSkipped` (a ``unittest.SkipTest``, which pytest reports as
a skip) where it does not apply. Nothing here imports pytest.
"""

from __future__ import annotations

from coevo.testing._suite import Check, CheckSkipped, ConformanceError, run_checks

__all__ = ["Check", "CheckSkipped", "ConformanceError", "run_checks"]
