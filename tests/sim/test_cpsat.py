"""The shared CP-SAT solve block (sim/cpsat.py): status mapping and the errors a caller can act on."""

from __future__ import annotations

import pytest
from ortools.sat.python import cp_model

from coevo.sim.cpsat import solve
from coevo.sim.errors import UserInputError


def _two_jobs_on_one_machine() -> tuple[cp_model.CpModel, cp_model.IntVar]:
    # jobs of 3 and 4 units that cannot overlap: the optimal makespan is 3 + 4 = 7
    model = cp_model.CpModel()
    starts = [model.new_int_var(0, 20, f"s{i}") for i in range(2)]
    intervals = [model.new_fixed_size_interval_var(s, d, f"i{i}") for i, (s, d) in enumerate(zip(starts, (3, 4), strict=True))]
    model.add_no_overlap(intervals)
    makespan = model.new_int_var(0, 20, "makespan")
    model.add_max_equality(makespan, [starts[0] + 3, starts[1] + 4])
    model.minimize(makespan)
    return model, makespan


def test_a_solved_model_is_optimal_with_its_bound() -> None:
    model, makespan = _two_jobs_on_one_machine()
    solved = solve(model, time_limit_s=10.0, workers=1, seed=0, remedy="unused")
    assert solved.status == "optimal"
    assert solved.solver.value(makespan) == 7 and solved.bound == pytest.approx(7.0)
    assert solved.solve_s >= 0.0


def test_a_proof_of_infeasibility_gives_the_callers_message_or_the_timeout_one() -> None:
    model, makespan = _two_jobs_on_one_machine()
    model.add(makespan <= 6)  # 3 + 4 units on one machine cannot end before 7
    with pytest.raises(UserInputError, match=r"^no schedule fits$"):
        solve(model, time_limit_s=10.0, workers=1, seed=0, remedy="try again", infeasible="no schedule fits")
    with pytest.raises(UserInputError, match=r"^CP-SAT found no schedule within 2.5 s; try again$"):
        solve(model, time_limit_s=2.5, workers=1, seed=0, remedy="try again")
