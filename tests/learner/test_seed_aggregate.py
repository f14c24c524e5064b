"""Across-seed aggregate: IQM and the stratified percentile bootstrap against hand-computed
numbers, and the report (``seeds.json`` / ``seeds.md`` / ``seeds.png``) built from run dirs."""

import json

import numpy as np
import pytest

from learner.eval.aggregate import bootstrap_ci, estimate, iqm, iqm_band, percentile_interval
from learner.eval.seed_report import (
    SeedFailure,
    SeedRun,
    aggregate,
    common_grid,
    final_figures,
    seeds_table,
    write_report,
)


@pytest.mark.parametrize(
    "scores, expected",
    [
        ([0.25], 0.25),  # n < 4: nothing is cut
        ([0.0, 1.0], 0.5),
        ([0.0, 0.0, 1.0], 1 / 3),
        ([0.0, 1.0, 2.0, 10.0], 1.5),  # int(0.25 * 4) = 1 cut each end: (1 + 2) / 2
        ([0.0, 0.2, 0.4, 0.9, 1.0], 0.5),  # (0.2 + 0.4 + 0.9) / 3
        ([100.0, 7, 6, 5, 4, 3, 2, 1], 4.5),  # unsorted; 2 cut each end: (3 + 4 + 5 + 6) / 4
        ([[0.0, 1.0], [0.0, 1.0], [0.0, 1.0]], 0.5),  # a (runs, tasks) matrix: all scores pooled
    ],
)
def test_iqm_hand_computed(scores, expected):
    assert iqm(scores) == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize("n", range(1, 14))
def test_iqm_is_rliables_definition(n):
    """rliable's ``aggregate_iqm`` is ``scipy.stats.trim_mean(scores, 0.25, axis=None)``."""
    stats = pytest.importorskip("scipy.stats")
    scores = np.random.default_rng(n).random(n)
    assert iqm(scores) == pytest.approx(stats.trim_mean(scores, 0.25, axis=None), abs=1e-12)


def test_percentile_interval_hand_computed():
    assert percentile_interval([0.0, 1.0, 2.0, 3.0, 4.0], size=0.5) == (1.0, 3.0)
    # linear interpolation between the two values: 5th and 95th percentile of [0, 10]
    low, high = percentile_interval([0.0, 10.0], size=0.9)
    assert (low, high) == (pytest.approx(0.5), pytest.approx(9.5))


@pytest.mark.parametrize(
    "scores, size, expected",
    [
        # every resample is the same
        ([0.75, 0.75, 0.75], 0.95, (0.75, 0.75)),
        # resampled means 0, 1/2, 1 with probability 1/4, 1/2, 1/4: 2.5th %ile 0, 97.5th 1 ...
        ([0.0, 1.0], 0.95, (0.0, 1.0)),
        # ... and the 30th and 70th both fall in the 1/2 block
        ([0.0, 1.0], 0.4, (0.5, 0.5)),
        # k/3, k ~ Binomial(3, 1/3): P(0) = 8/27 > 2.5 %, P(<= 2/3) = 26/27 < 97.5 %
        ([0.0, 0.0, 1.0], 0.95, (0.0, 1.0)),
        # stratified: each task keeps its own runs, so every draw pools three 0s and three 1s and
        # the IQM is always 1/2 (an unstratified draw over all six scores would vary)
        ([[0.0, 1.0], [0.0, 1.0], [0.0, 1.0]], 0.95, (0.5, 0.5)),
    ],
)
def test_bootstrap_ci_hand_computed(scores, size, expected):
    assert bootstrap_ci(scores, size=size) == expected


def test_bootstrap_ci_is_reproducible_and_brackets_the_iqm():
    scores = [0.1, 0.5, 0.55, 0.6, 0.95]
    low, high = bootstrap_ci(scores)
    assert bootstrap_ci(scores) == (low, high)  # seeded draws: the same report twice
    assert low < iqm(scores) < high


@pytest.mark.parametrize(
    "call",
    [
        lambda: iqm([]),
        lambda: bootstrap_ci([]),
        lambda: bootstrap_ci([1.0], reps=0),
        lambda: percentile_interval([1.0], size=1.0),
    ],
)
def test_bad_inputs_raise(call):
    with pytest.raises(ValueError):
        call()


def test_iqm_band_point_by_point():
    curves = np.array([[0.0, 0.0, 0.0], [0.0, 1.0, 1.0], [1.0, 1.0, 1.0]])
    mid, low, high = iqm_band(curves)
    assert mid.tolist() == pytest.approx([1 / 3, 2 / 3, 2 / 3])
    assert low.tolist() == [0.0, 0.0, 0.0] and high.tolist() == [1.0, 1.0, 1.0]


def test_common_grid_is_where_every_curve_has_data():
    a, b = np.array([0.0, 10.0]), np.array([5.0, 20.0])
    assert common_grid([(a, a), (b, b)], 6).tolist() == [5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
    assert common_grid([(a, a), (np.array([11.0, 12.0]), a)], 6).size == 0


def test_final_figures_held_out_first_then_training_success():
    final = {
        "success_rate": 0.5,
        "eval": {"id": {"success_rate": 1.0, "episodes": 10}, "ood": {"success_rate": 0.25}},
    }
    assert list(final_figures(final)) == [
        "eval/id/success_rate",
        "eval/ood/success_rate",
        "success_rate",
    ]
    assert final_figures({"iterations": 3}) == {}


def _run(seed: int, train: float, held_out: float | None, tmp_path) -> SeedRun:
    final = {"success_rate": train, "elapsed_s": 1.0}
    if held_out is not None:
        final["eval"] = {"id": {"success_rate": held_out, "episodes": 4}}
    history = [
        {"iteration": i, "time/wall_s": 2.0 * i + seed, "env_steps": 100 * i, "success_rate": x}
        for i, x in enumerate([0.0, train / 2, train])
    ]
    return SeedRun(seed, tmp_path / f"seed_{seed}", final, history)


def test_aggregate_values_interval_and_seeds(tmp_path):
    runs = [_run(0, 0.5, 1.0, tmp_path), _run(3, 1.0, 0.5, tmp_path), _run(7, 0.75, None, tmp_path)]
    report = aggregate(runs, [SeedFailure(9, 1, "x/seed_9/train.log")], config="c.yaml")
    assert report["finished"] == [0, 3, 7] and report["seeds"] == [0, 3, 7, 9]
    assert report["failed"] == [{"seed": 9, "exit_code": 1, "log": "x/seed_9/train.log"}]
    held_out, train = report["metrics"]["eval/id/success_rate"], report["metrics"]["success_rate"]
    assert held_out["seeds"] == [0, 3] and held_out["values"] == [1.0, 0.5]  # seed 7 has no eval
    assert held_out["iqm"] == 0.75 and held_out["ci"] == [0.5, 1.0]
    assert train["values"] == [0.5, 1.0, 0.75] and train["iqm"] == 0.75
    assert train["ci"][0] <= 0.75 <= train["ci"][1]


def test_seeds_table_marks_a_seed_without_the_metric(tmp_path):
    runs = [_run(0, 0.5, 1.0, tmp_path), _run(1, 1.0, None, tmp_path)]
    lines = seeds_table(aggregate(runs, reps=1000))
    assert lines[0] == "| metric | IQM [95% CI] | n | seed 0 | seed 1 |"
    assert lines[2] == "| eval/id/success_rate | 1.00 [1.00, 1.00] | 1 | 1.00 | - |"
    assert lines[3].startswith("| success_rate | 0.75 [0.50, 1.00] | 2 | 0.50 | 1.00 |")


def test_write_report_files(tmp_path):
    runs = [_run(s, 0.25 * (s + 1), 0.5, tmp_path) for s in range(3)]
    report = write_report(tmp_path, runs, [SeedFailure(5, 137, "l")], config="c.yaml", reps=500)
    assert json.loads((tmp_path / "seeds.json").read_text())["metrics"] == report["metrics"]
    md = (tmp_path / "seeds.md").read_text()
    assert "3 of 4 seeds finished" in md and "- seed 5: exit 137, log `l`" in md
    assert (tmp_path / "seeds.png").stat().st_size > 1000
    assert report["files"]["png"] == str(tmp_path / "seeds.png")


def test_estimate_text():
    assert estimate([0.25, 0.25]).text() == "0.25 [0.25, 0.25]"


def _bench_results():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_results.py"
    spec = importlib.util.spec_from_file_location("bench_results", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_benchmark_quotes_the_seeds_table(tmp_path):
    runs = [_run(s, 0.25 * (s + 1), 0.5, tmp_path) for s in range(3)]
    write_report(tmp_path, runs, config="c.yaml", reps=500)
    lines = _bench_results().seeds_lines(tmp_path / "seeds.json", "reach PPO")
    assert lines[0] == "reach PPO: IQM over 3 seeds (0, 1, 2); 95% stratified bootstrap interval."
    md = (tmp_path / "seeds.md").read_text()
    assert "\n".join(lines[2:]) in md  # the same table as seeds.md
    write_report(tmp_path, runs[:2], [SeedFailure(2, 1, "l")], reps=500)
    few = _bench_results().seeds_lines(tmp_path / "seeds.json")[0]
    assert "fewer than 3" in few and "failed: seed 2 (exit 1)" in few
