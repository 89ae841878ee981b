"""SteppingNet: MAC formulas by hand, incremental MACs counted by PyTorch's own counter, nesting, baselines, cache, bad input."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from coevo.sim.errors import UserInputError
from coevo.sim.stepping import (
    Arch,
    Built,
    SlimmableCNN,
    SteppingCNN,
    StepRunner,
    build,
    check_fractions,
    dense_macs,
    joint_loss,
    plan,
    step_up_macs,
    stepping_macs,
    zoo_setup,
)
from coevo.sim.stepping._plan import StepPlan

TINY = Arch("DigitsCNN", 8, (2, 4, 4, 3), (False, True, True))
STEPS = [0.25, 0.5, 0.75, 1.0]


@pytest.fixture(scope="module")
def built() -> Built:
    return build("cnn-digits", STEPS, epochs=1, seed=0, assign="index")  # runner, budget and cache tests: any assignment does


def _tiny_plan() -> StepPlan:
    # two steps, units per layer: conv1 1|1, conv2 2|2, conv3 2|2, fc1 1|2
    cum = ((1, 2), (2, 4), (2, 4), (1, 3))
    return StepPlan(TINY, (0.5, 1.0), dense_macs(TINY, TINY.widths), cum, ((1, 2, 2, 1), (2, 4, 4, 3)))


def test_dense_and_stepping_macs_match_hand_counts() -> None:
    # 8x8 input; conv1 8x8 out, conv2 8x8 (then pool to 4), conv3 4x4 (then pool to 2): pair costs 576, 576, 144, 4
    assert TINY.pair_costs == (576, 576, 144, 4)
    assert dense_macs(TINY, (2, 4, 4, 3)) == 2 * 576 + 4 * 2 * 576 + 4 * 4 * 144 + 3 * 4 * 4 + 10 * 3 == 8142
    cum = _tiny_plan().cum
    step0 = 1 * 1 * 576 + 2 * 1 * 576 + 2 * 2 * 144 + 1 * 2 * 4 + 10 * 1
    added = 1 * 1 * 576 + 2 * 2 * 576 + 2 * 4 * 144 + 2 * 4 * 4 + 10 * 2
    assert stepping_macs(TINY, cum, 0) == step0 == 2322
    assert step_up_macs(TINY, cum, 1) == added == 4084
    assert stepping_macs(TINY, cum, 1) == step0 + added


def test_full_stepping_macs_equal_the_masks_nonzeros() -> None:
    p = plan(zoo_setup("cnn-digits")[1], STEPS)
    net = SteppingCNN(p)
    sides = p.arch.conv_sides
    expected = sum(int(net.mask(i).sum()) * 9 * sides[i] ** 2 for i in range(3))
    expected += int(net.mask(3).sum()) + p.arch.classes * p.cum[3][-1]
    assert stepping_macs(p.arch, p.cum, p.steps - 1) == expected


def test_plan_puts_every_step_at_most_at_its_fraction_and_close_to_it() -> None:
    for model in ("cnn-digits", "cnn-mnist5k"):
        p = plan(zoo_setup(model)[1], STEPS)
        assert p.full_macs == dense_macs(p.arch, p.arch.widths)
        assert p.dense[-1] == p.arch.widths  # the widest dense net is the zoo model itself
        for s, f in enumerate(STEPS):
            for macs in (p.macs(s), p.dense_macs(s)):
                assert 0.95 * f * p.full_macs <= macs <= f * p.full_macs
        for layer in range(4):
            assert all(g >= 1 for g in p.groups(layer))


def test_stepping_up_executes_exactly_the_added_macs_by_pytorchs_counter() -> None:
    torch.manual_seed(0)
    p = plan(zoo_setup("cnn-digits")[1], STEPS)
    net = SteppingCNN(p).eval()
    x = torch.randn(5, 1, 8, 8)
    runner = StepRunner(net)
    for s in range(p.steps):
        with FlopCounterMode(display=False) as counter:
            out = runner.start(x) if s == 0 else runner.step_up()
        added = p.macs(s) - (p.macs(s - 1) if s else 0)
        assert counter.get_total_flops() == 2 * added * len(x)
        assert out.added_macs == added and out.macs == p.macs(s) and out.step == s
        with FlopCounterMode(display=False) as counter:
            StepRunner(net).subnet(x, s)
        assert counter.get_total_flops() == 2 * p.macs(s) * len(x)


def test_runner_and_scratch_agree_with_the_masked_forward_pass() -> None:
    torch.manual_seed(1)
    p = plan(zoo_setup("cnn-digits")[1], STEPS)
    net = SteppingCNN(p)
    net.train()
    net(torch.randn(32, 1, 8, 8))  # move BatchNorm's running statistics away from 0/1
    net.eval()
    x = torch.randn(7, 1, 8, 8)
    ref = net(x)
    runner = StepRunner(net)
    outs = [runner.start(x)] + [runner.step_up() for _ in range(p.steps - 1)]
    for s, out in enumerate(outs):
        assert torch.allclose(out.logits, ref[s], atol=1e-5)
        assert torch.allclose(runner.subnet(x, s), ref[s], atol=1e-5)


def test_smaller_subnets_never_read_the_larger_subnets_units() -> None:
    torch.manual_seed(2)
    p = plan(zoo_setup("cnn-digits")[1], STEPS)
    net = SteppingCNN(p).eval()
    x = torch.randn(4, 1, 8, 8)
    before = net(x).detach()
    with torch.no_grad():  # scramble every weight of the last group's units
        for i in range(3):
            lo = p.cum[i][-2]
            net.conv(i).weight[lo:] = torch.randn_like(net.conv(i).weight[lo:])
            net.conv(i).bias[lo:] += 5.0
        net.fc1.weight[p.cum[3][-2] :] = 3.0
        net.head.weight[:, p.cum[3][-2] :] = 7.0
    after = net(x).detach()
    assert torch.equal(before[:-1], after[:-1])
    assert not torch.allclose(before[-1], after[-1])


def test_slimmable_switch_uses_only_its_first_channels() -> None:
    p = plan(zoo_setup("cnn-digits")[1], STEPS)
    torch.manual_seed(4)  # the net's initial weights and the input (after the zoo, which may train or load from cache)
    net = SlimmableCNN(p.arch, p.dense).eval()
    x = torch.randn(3, 1, 8, 8)
    small = net(x, 0).detach()
    with torch.no_grad():
        net.fc1.weight[p.dense[0][3] :] = 9.0
        net.head.weight[:, p.dense[0][3] :] = 9.0
    assert torch.equal(net(x, 0), small)
    assert net(x, 0).shape == (3, 10) and net(x, -1).shape == (3, 10)


def test_joint_loss_is_the_sum_of_the_steps_cross_entropies() -> None:
    torch.manual_seed(3)
    logits = [torch.randn(6, 10) for _ in range(3)]
    y = torch.randint(0, 10, (6,))
    assert torch.allclose(joint_loss(logits, y, False), sum(F.cross_entropy(lg, y) for lg in logits))
    # distillation leaves the largest step's loss alone and adds a non-negative KL to the others
    assert joint_loss(logits, y, True) >= 0.5 * sum(F.cross_entropy(lg, y) for lg in logits[:-1]) + F.cross_entropy(logits[-1], y)


def test_budget_picks_the_largest_step_that_fits(built: Built) -> None:
    b = built
    runner = StepRunner(b.net)
    p = b.plan
    x = b.splits["test"].x[:3]
    for budget, step in ((1.0, 3), (0.97, 2), (0.75, 2), (0.7, 1), (0.5, 1), (0.48, 0), (0.25, 0)):
        expect = max(s for s in range(p.steps) if p.macs(s) <= budget * p.full_macs)
        assert runner.run(x, budget).step == expect == step


def test_bad_fractions_and_budgets_are_refused_with_what_to_do(built: Built) -> None:
    with pytest.raises(UserInputError, match="strictly increasing"):
        check_fractions([0.5, 0.25, 1.0])
    with pytest.raises(UserInputError, match="strictly increasing"):
        check_fractions([0.5, 0.5])
    with pytest.raises(UserInputError, match=r"\(0, 1\]"):
        check_fractions([0.5, 1.2])
    with pytest.raises(UserInputError, match=r"\(0, 1\]"):
        check_fractions([0.0, 1.0])
    with pytest.raises(UserInputError, match="empty"):
        check_fractions([])
    with pytest.raises(UserInputError, match="too small"):
        plan(TINY, [1e-5, 1.0])
    runner = StepRunner(built.net)
    smallest = built.plan.macs(0)
    with pytest.raises(UserInputError, match=f"step 0 needs {smallest} MACs"):
        runner.budget_step(0.5 * smallest / built.plan.full_macs)
    with pytest.raises(UserInputError, match="start"):
        StepRunner(built.net).step_up()
    runner.run(built.splits["test"].x[:2], 1.0)
    with pytest.raises(UserInputError, match="largest step"):
        runner.step_up()
    with pytest.raises(UserInputError, match="cnn-mnist5k"):
        build("cnn-mnist", STEPS, epochs=1)
    with pytest.raises(UserInputError, match="lm model"):
        build("lm-pydoc-tiny", STEPS, epochs=1)


def test_built_net_is_cached_checked_and_rebuilt_when_corrupt(built: Built) -> None:
    b = built
    assert b.note in ("trained", "loaded")
    assert all(0 <= a <= 100 for a in b.test_accuracy)
    # the runner's on-the-fly predictions give the accuracy the build reported for each step
    runner, test = StepRunner(b.net), b.splits["test"]
    for s in range(b.plan.steps):
        right = int((runner.run(test.x, STEPS[s]).labels == test.y).sum())
        assert 100.0 * right / len(test) == b.test_accuracy[s]
    again = build("cnn-digits", STEPS, epochs=1, seed=0, assign="index")
    assert again.note == "loaded" and again.test_accuracy == pytest.approx(b.test_accuracy)
    path = again.path
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # one flipped byte: torch may still load it, the checksum does not match
    path.write_bytes(bytes(raw))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rebuilt = build("cnn-digits", STEPS, epochs=1, seed=0, assign="index")
    assert rebuilt.note.startswith("rebuilt") and "SHA-256" in rebuilt.note and caught
    # same seed, same recipe; the cached net may have been trained by another test under another torch thread
    # count (float sums in another order), so a test image or two may flip: within 1 point per step
    assert rebuilt.test_accuracy == pytest.approx(b.test_accuracy, abs=1.0)
    assert build("cnn-digits", STEPS, epochs=1, seed=0, assign="index").note == "loaded"


def test_baselines_train_at_the_same_macs_and_learn() -> None:
    for kind in ("slimmable", "independent"):
        b = build("cnn-digits", [0.5, 1.0], kind=kind, epochs=1, seed=0)
        assert b.macs == [b.plan.dense_macs(0), b.plan.full_macs]
        assert all(a > 20.0 for a in b.test_accuracy)  # 10 classes: chance is 10 %


def test_latency_pairs_each_repeats_on_the_fly_time_with_its_scratch_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # a clock that advances 1 per read: per step the loop reads it 4 times (before the step-up, after it, after the
    # scratch subnet, after the dense net), so each section lasts 1 and step s's cumulative time is s + 1 step-ups
    from types import SimpleNamespace

    import coevo.sim.stepping._runner as runner_module
    from coevo.sim.stepping import measure_latency

    ticks = iter(range(10**6))
    monkeypatch.setattr(runner_module, "time", SimpleNamespace(perf_counter=lambda: float(next(ticks))))
    torch.manual_seed(0)
    net = SteppingCNN(plan(zoo_setup("cnn-digits")[1], STEPS)).eval()
    lat = measure_latency(net, torch.randn(4, 1, 8, 8), repeats=3, warmup=0)
    assert [step.to_scratch for step in lat] == [(float(s + 1),) * 3 for s in range(len(STEPS))]
    assert [step.cumulative_ms for step in lat] == [1e3 * (s + 1) for s in range(len(STEPS))]
