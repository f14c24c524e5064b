"""The budget holds including the final eval, and progress moves from the first second.

Exact values of the reservation arithmetic (``learner.runners.budget``), the bar's total / ETA
rule (``learner.runners.progress``) and the eval's round cut (``learner.eval.embodied``), all on
fake clocks."""

from __future__ import annotations

import logging
import types

import numpy as np
import pytest

import learner.eval.embodied as embodied
from learner.runners.budget import SAFETY, Budget, setup_reserve_s
from learner.runners.progress import BudgetBar, clock_text, eta_s


class Clock:
    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_setup_reserve_is_a_share_of_a_small_budget_and_capped_for_a_large_one() -> None:
    assert setup_reserve_s(25.0) == pytest.approx(1.25)  # 5 %, not 15 s of a 25 s budget
    assert setup_reserve_s(420.0) == 15.0
    assert setup_reserve_s(420.0, measured_s=2.5) == 17.5  # the last save is repeated at the end


def test_eval_reserve_scales_the_measured_step_to_the_eval_rounds() -> None:
    b = Budget(420.0, t0=0.0)
    # 8 train envs take 0.08 s a step; 50 episodes on 25 eval envs = 2 rounds of 100 steps
    got = b.reserve_eval(0.08, 8, 25, 50, 1, 100)
    assert got == pytest.approx(SAFETY * 2 * 100 * 0.08 * 25 / 8) == b.eval_reserve_s
    b.eval_reserve_s += setup_reserve_s(420.0, 0.5)
    assert b.training_over(now=420.0 - b.eval_reserve_s - 0.01) is False
    assert b.training_over(now=420.0 - b.eval_reserve_s) is True


def test_units_that_fit_bound_the_total_so_the_eta_is_inside_the_budget() -> None:
    b = Budget(420.0, t0=0.0, eval_reserve_s=60.0)
    # 10 transitions/s at t=120: 240 s of training left -> 2400 more
    assert b.units_that_fit(done=1200, rate_per_s=10.0, now=120.0, planned=100_000) == 3600
    assert b.units_that_fit(done=1200, rate_per_s=10.0, now=120.0, planned=2000) == 2000
    assert b.units_that_fit(done=1200, rate_per_s=0.0, now=120.0, planned=2000) == 2000
    assert b.units_that_fit(done=1200, rate_per_s=10.0, now=400.0, planned=100_000) == 1200
    assert Budget(None, 0.0).units_that_fit(5, 10.0, 1.0, 100) == 100
    # the embodied runner's rule is the same rule in iterations
    assert b.iterations_that_fit(done=4, mean_iteration_s=30.0, now=120.0, planned=200) == 12


def test_the_bar_counts_transitions_from_the_first_second_with_an_eta_inside_the_budget() -> None:
    clock = Clock()
    budget = Budget(420.0, t0=0.0, eval_reserve_s=60.0)
    bar = BudgetBar(40_000, budget, unit="transitions", enabled=False, clock=clock)
    clock.t = 4.0
    bar.advance(0)  # the robot has not started streaming: no rate, no ETA yet
    assert (bar.total, bar.eta) == (40_000, None)
    clock.t = 10.0
    bar.advance(10)  # the first transitions: the count moves, the rate starts here
    clock.t = 20.0
    bar.advance(110)  # 10 transitions/s
    # before: a bar of 200 metrics rows at 0/200 and an ETA of 13.5 h; now the budget binds
    assert bar.total == 110 + int((420.0 - 60.0 - 20.0) * 10.0) == 3510
    assert bar.eta == pytest.approx(340.0)
    assert bar.eta <= budget.left(20.0)
    clock.t = 20.1
    bar.advance(111)  # within REFRESH_S: not redrawn, nothing recomputed
    assert bar.total == 3510


def test_the_bar_total_is_the_plan_when_it_ends_before_the_budget() -> None:
    clock = Clock()
    bar = BudgetBar(2000, Budget(420.0, t0=0.0), enabled=False, clock=clock)
    bar.advance(8)
    clock.t = 1.0
    bar.advance(108)  # 100 env steps/s: the plan ends in 19 s, long before the budget
    assert bar.total == 2000 and bar.eta == pytest.approx(18.92)


def test_clock_text_and_eta() -> None:
    assert [clock_text(s) for s in (0.4, 59.6, 3600.0, None)] == ["0:00", "1:00", "1:00:00", "?"]
    assert eta_s(10, 5, 1.0) == 0.0 and eta_s(0, 5, 0.0) is None


def test_the_eval_starts_a_round_only_when_it_fits_and_says_once_why_it_was_cut(
    monkeypatch, caplog
) -> None:
    clock = Clock(100.0)
    monkeypatch.setattr(embodied, "time", types.SimpleNamespace(perf_counter=clock))

    class Env:
        spec = types.SimpleNamespace(control_hz=10.0)

        def close(self) -> None:
            pass

    def fake_round(policy, env, seed, rec, deterministic=True):  # a round of 25 takes 40 s
        clock.t += 40.0
        ones = np.ones(25)
        return {"success": ones, "return": ones, "length": ones}

    monkeypatch.setattr(embodied, "build_env", lambda name, n, **kw: Env())
    monkeypatch.setattr(embodied, "_run_round", fake_round)
    cfg = types.SimpleNamespace(
        eval=types.SimpleNamespace(
            ood_splits=["id", "ood"],
            env=None,
            num_envs=25,
            seed_offset=0,
            video_episodes=0,
            deterministic=True,
        ),
        env=types.SimpleNamespace(name="toy", factory_kwargs=lambda **kw: {}),
    )
    with caplog.at_level(logging.INFO, logger="learner.eval.embodied"):
        # 70 s left: id's 1st round ends at 140, a 2nd would end at 180 > 170 -> cut; ood's
        # first round always runs
        out = embodied.evaluate_config(None, cfg, 50, 0, deadline=170.0)  # type: ignore[arg-type]  # no policy: the eval is stubbed
    assert out["id"]["episodes"] == 25 and out["ood"]["episodes"] == 25
    cuts = [r.getMessage() for r in caplog.records if "cut" in r.getMessage()]
    assert cuts == [
        "eval cut by the time budget: id 25 of 50 episodes, ood 25 of 50 episodes "
        "(a round took 40 s, 0 s were left)"
    ]


def test_without_a_deadline_every_round_runs(monkeypatch) -> None:
    assert embodied.round_fits(0.0, None, 1e9)
    assert embodied.round_fits(10.0, 50.0, 40.0) and not embodied.round_fits(10.0, 50.0, 40.1)
