"""The pipeline step simulator against closed-form schedules, byte conservation, and cluster specs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import networkx as nx
import pytest

from coevo.search.errors import UserInputError
from coevo.sim.pipeline.cluster import Cluster, get_cluster
from coevo.sim.pipeline.partition import blockwise, skip_aware
from coevo.sim.pipeline.profile import BlockProfile, ModelProfile, profile
from coevo.sim.pipeline.simulate import simulate, virtual_stages

FAST = Cluster("ideal", devices=16, per_node=16, device_tflops=1e-9, memory_gb=80, intra_gbs=1e12, inter_gbs=1e12, latency_us=0.0)
"""1 FLOP/ns... i.e. 1e3 FLOP per microsecond: a block of 1e3 FLOPs takes 1 s; links are free."""


def _chain(stages: int, flops: int = 1000) -> ModelProfile:
    # each block saves 100 bytes for its backward (the stash per in-flight microbatch)
    blocks = tuple(BlockProfile(f"b{i}", "other", flops, 0, 100, (1,), None, saved_bytes=100) for i in range(stages))
    return ModelProfile("chain", 1, 1, 2, blocks, nx.DiGraph())


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize(("stages", "micro"), [(1, 4), (2, 4), (4, 8)])
def test_balanced_pipeline_matches_the_textbook_makespan(schedule: str, stages: int, micro: int) -> None:
    p = _chain(stages)
    plan = blockwise(p, stages, flops_per_s=1e3)
    r = simulate(p, plan, FAST, schedule=schedule, microbatches=micro)
    # forward 1 s, backward 2 s per stage and microbatch: (M + S - 1) * 3 s, bubble (S - 1) / (M + S - 1)
    assert r.makespan_s == pytest.approx((micro + stages - 1) * 3.0)
    assert r.bubble_ratio == pytest.approx((stages - 1) / (micro + stages - 1))


def test_1f1b_stashes_fewer_activations_than_gpipe() -> None:
    p = _chain(4)
    plan = blockwise(p, 4, flops_per_s=1e3)
    g = simulate(p, plan, FAST, schedule="gpipe", microbatches=8)
    o = simulate(p, plan, FAST, schedule="1f1b", microbatches=8)
    assert o.peak_memory_bytes[0] == 4 * 100 < g.peak_memory_bytes[0] == 8 * 100  # in flight: S - s vs all M


def test_bytes_on_links_are_the_plans_bytes_twice_per_microbatch() -> None:
    p = profile("unet-small", resolution=16)
    slow = Cluster("slow", devices=8, per_node=1, device_tflops=10, memory_gb=32, intra_gbs=1.0, inter_gbs=1.0)
    for plan, schedule in ((blockwise(p, 4, flops_per_s=1e13), "1f1b"), (skip_aware(p, 3, flops_per_s=1e13), "wave")):
        r = simulate(p, plan, slow, schedule=schedule, microbatches=5)
        assert sum(r.link_bytes.values()) == 2 * 5 * plan.total_bytes  # activations forward, gradients back
        assert sum(v.send_bytes for v in virtual_stages(p, plan, 1e13)) == plan.total_bytes
    assert virtual_stages(p, skip_aware(p, 3, flops_per_s=1e13), 1e13)[0].device == 0
    assert len(virtual_stages(p, skip_aware(p, 3, flops_per_s=1e13), 1e13)) == 5  # V-shape: 0 1 2 1 0


def test_slow_links_cost_time() -> None:
    p = profile("unet-small", resolution=16, microbatch=4)
    plan = blockwise(p, 4, flops_per_s=1e13)
    fast_links = get_cluster("v100x16-ib300")
    fast = simulate(p, plan, fast_links, schedule="1f1b", microbatches=8)
    slow_links = dataclasses.replace(fast_links, per_node=1, intra_gbs=0.5, inter_gbs=0.5)  # the same devices
    slow = simulate(p, plan, slow_links, schedule="1f1b", microbatches=8)
    assert slow.makespan_s > fast.makespan_s and slow.samples_per_s < fast.samples_per_s


def test_per_op_cost_makes_small_microbatches_slower_per_sample() -> None:
    ideal = get_cluster("v100x8-pcie")
    assert ideal.kernel_us > 0
    no_launch = dataclasses.replace(ideal, kernel_us=0.0)
    rates = {}
    for cluster in (ideal, no_launch):
        for mb, micro in ((1, 16), (8, 2)):  # 16 samples per step either way, one stage
            p = profile("unet-small", resolution=16, microbatch=mb)
            plan = blockwise(p, 1, **cluster.rates)
            rates[cluster.kernel_us, mb] = simulate(p, plan, cluster, schedule="1f1b", microbatches=micro).samples_per_s
            forward_s = virtual_stages(p, plan, **cluster.rates)[0].forward_s
            assert forward_s == pytest.approx(p.total("flops") / cluster.flops_per_s + p.total("kernels") * cluster.kernel_s)
    assert rates[0.0, 1] == pytest.approx(rates[0.0, 8], rel=0.02)  # compute linear in the batch: no difference
    assert rates[ideal.kernel_us, 1] < 0.5 * rates[ideal.kernel_us, 8]  # launches dominate a tiny model at microbatch 1


def test_cluster_files_and_errors(tmp_path: Path) -> None:
    good = tmp_path / "mine.json"
    good.write_text(json.dumps({"devices": 4, "per_node": 2, "device_tflops": 20, "memory_gb": 24, "intra_gbs": 50, "inter_gbs": 5}))
    c = get_cluster(str(good))
    assert c.name == "mine" and c.bandwidth(0, 1) == 50e9 and c.bandwidth(1, 2) == 5e9 and c.transfer_s(0, 0, 1e9) == 0.0
    assert c.kernel_us == 0.0  # optional: a device always at its FLOP rate
    good.write_text(json.dumps({**json.loads(good.read_text()), "kernel_us": 8}))
    assert get_cluster(str(good)).kernel_s == pytest.approx(8e-6)
    good.write_text(json.dumps({**json.loads(good.read_text()), "kernel_us": -1}))
    with pytest.raises(UserInputError, match="kernel_us must be a number >= 0"):
        get_cluster(str(good))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"devices": 4, "per_node": 2, "device_tflops": -1, "memory_gb": 24, "intra_gbs": 50, "inter_gbs": 5}))
    with pytest.raises(UserInputError, match="device_tflops must be a positive number"):
        get_cluster(str(bad))
    bad.write_text('{"devices": 4}')
    with pytest.raises(UserInputError, match="missing"):
        get_cluster(str(bad))
    bad.write_text("{oops")
    with pytest.raises(UserInputError, match="not readable JSON"):
        get_cluster(str(bad))
    with pytest.raises(UserInputError, match="unknown cluster 'nope'"):
        get_cluster("nope")
    with pytest.raises(UserInputError, match=r"cluster file '.*gone\.json' does not exist"):
        get_cluster(str(bad.parent / "gone.json"))
    p = _chain(2)
    with pytest.raises(UserInputError, match="unknown schedule"):
        simulate(p, blockwise(p, 2, flops_per_s=1e3), FAST, schedule="pipedream", microbatches=2)
    with pytest.raises(UserInputError, match="cluster tiny has 1"):
        simulate(p, blockwise(p, 2, flops_per_s=1e3), Cluster("tiny", 1, 1, 1.0, 1.0, 1.0, 1.0), schedule="1f1b", microbatches=2)


def test_cp_sat_schedule_is_replayed_exactly_and_beats_1f1b() -> None:
    from coevo.sim.pipeline.ilp import synthesize

    p = profile("unet-small", resolution=16, microbatch=4)
    cluster = Cluster("pcie", 8, 8, 5.0, 32.0, 20.0, 20.0)  # one node: every directed link its own, transfers shorter than ops
    plan = blockwise(p, 4, flops_per_s=5e12)
    synthesized = synthesize(p, plan, cluster, microbatches=6, time_limit_s=10)
    replay = simulate(p, plan, cluster, schedule="ilp", microbatches=6, order=synthesized.starts)
    one = simulate(p, plan, cluster, schedule="1f1b", microbatches=6)
    assert replay.makespan_s == pytest.approx(synthesized.makespan_s, rel=5e-3)  # no contention to differ on; the solver rounds ops to us
    assert replay.bubble_ratio <= one.bubble_ratio + 1e-9
    assert synthesized.status in ("optimal", "feasible")


def test_cp_sat_rejects_memory_that_cannot_fit() -> None:
    from coevo.sim.pipeline.ilp import synthesize

    p = profile("unet-small", resolution=16, microbatch=4)
    plan = blockwise(p, 2, flops_per_s=5e12)
    with pytest.raises(UserInputError, match="cannot hold its parameters"):
        synthesize(p, plan, Cluster("tiny-mem", 8, 1, 5.0, 0.001, 2.0, 2.0), microbatches=4, time_limit_s=5)


def test_hybrid_tuner_ranks_feasible_configurations_and_explains_rejections() -> None:
    from coevo.sim.pipeline.tune import tune

    cluster = Cluster("four", devices=4, per_node=2, device_tflops=1.0, memory_gb=32.0, intra_gbs=10.0, inter_gbs=1.0)
    feasible, rejected = tune("unet-tiny", cluster, global_batch=8, resolution=8)
    assert feasible and all(c.pp * c.dp == 4 for c in feasible)
    assert [c.samples_per_s for c in feasible] == sorted((c.samples_per_s for c in feasible), reverse=True)
    assert {c.method for c in feasible} == {"blockwise", "blockwise-direct", "blockwise-bytes", "skip-aware"} and all(
        c.allreduce_s == 0 for c in feasible if c.dp == 1
    )
    undivided = [r for r in rejected if "not a multiple" in r.reason]
    assert (4, 4) in {(r.dp, r.microbatch) for r in undivided}  # dp 4 x microbatch 4 does not divide 8
    assert all(r.candidate is None and set(r.as_dict()) == {"pp", "dp", "microbatch", "reason"} for r in undivided)
    assert all(c.peak_memory_gb <= c.memory_gb for c in feasible)  # the simulated peak never exceeds the bound that is checked
    tight = Cluster("tight", devices=4, per_node=2, device_tflops=1.0, memory_gb=1e-6, intra_gbs=10.0, inter_gbs=1.0)
    with pytest.raises(UserInputError, match="no configuration of unet-tiny fits tight"):
        tune("unet-tiny", tight, global_batch=8, resolution=8)


def test_tuner_and_pipeline_problem_apply_one_memory_rule(tmp_path: Path) -> None:
    from coevo.search.pipeline.problem import Config, PipelineProblem
    from coevo.sim.pipeline.tune import tune

    fields = {"devices": 4, "per_node": 2, "device_tflops": 1.0, "intra_gbs": 10.0, "inter_gbs": 1.0}
    loose, _ = tune("unet-tiny", Cluster("m", memory_gb=100.0, **fields), global_batch=8, resolution=8)
    bounds = sorted(c.memory_gb for c in loose)
    limit = (bounds[0] + bounds[-1]) / 2  # a device that holds some configurations and not others
    path = tmp_path / "mid.json"
    path.write_text(json.dumps({"memory_gb": limit, **fields}))
    feasible, rejected = tune("unet-tiny", get_cluster(str(path)), global_batch=8, resolution=8)
    problem = PipelineProblem(model="unet-tiny", cluster=str(path), global_batch=8, resolution=8)
    over = [r.candidate for r in rejected if r.candidate is not None]
    assert feasible and over and all(c.memory_gb > limit for c in over)
    for c in feasible:
        config = Config(c.pp, c.microbatch, c.method, c.schedule, 0.0, "off")
        assert problem.infeasible(config) is None and problem.evaluate(config)["memory_gb"] == pytest.approx(c.memory_gb)
    for c in over:
        assert "needs" in str(problem.infeasible(Config(c.pp, c.microbatch, c.method, c.schedule, 0.0, "off")))


def test_each_stage_all_reduces_as_soon_as_its_last_backward_ends() -> None:
    from coevo.sim.pipeline.tune import hybrid_step_s

    # two 1-s stages (1 and 3 GB of parameters); 1 GB/s rings of 2 replicas: all-reduce 1 s and 3 s
    blocks = tuple(BlockProfile(f"b{i}", "other", 1000, gb * 10**9, 100, (1,), None) for i, gb in enumerate((1, 3)))
    p = ModelProfile("chain", 1, 1, 2, blocks, nx.DiGraph())
    cluster = Cluster("dp", devices=4, per_node=4, device_tflops=1e-9, memory_gb=1e3, intra_gbs=1.0, inter_gbs=1.0, latency_us=0.0)
    plan = blockwise(p, 2, flops_per_s=cluster.flops_per_s)
    step = simulate(p, plan, cluster, schedule="1f1b", microbatches=4)
    assert step.makespan_s == pytest.approx(15.0) and step.device_done_s == pytest.approx((15.0, 13.0))  # the last stage ends 2 s early
    assert hybrid_step_s(cluster, plan, step, 1) == pytest.approx(15.0)
    # stage 1's 3-s all-reduce starts at 13 s, behind stage 0's last backward: 16 s, not 15 + 3
    assert hybrid_step_s(cluster, plan, step, 2) == pytest.approx(16.0)
