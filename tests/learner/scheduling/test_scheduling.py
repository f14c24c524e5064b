"""Scheduler: cost curves, the cost model's formulas on exact numbers, candidates, `placement:
auto` (resolved at config build time, key named in errors), what-if laws, reallocation slots,
and `rlinf schedule` on a seeded profile cache (no profiling, no Ray)."""

from __future__ import annotations

import pytest

from learner.scheduling import whatif
from learner.scheduling.auto import DEFAULT_COMM
from learner.scheduling.candidates import embodied_candidates, reasoning_candidates
from learner.scheduling.comm import CommProfile
from learner.scheduling.cost import predict_embodied
from learner.scheduling.curves import Curve, store_cached, workload_key
from learner.scheduling.profile import EmbodiedProfile, embodied_workload
from learner.scheduling.realloc import lent_slots
from rlinf_contracts.config import ConfigError, from_dict


def _profile(num_envs: int = 32) -> EmbodiedProfile:
    lin = lambda per, fixed: Curve({b: fixed + per * b for b in (num_envs, num_envs // 2, num_envs // 4)})  # noqa: E731
    return EmbodiedProfile(num_envs, 10, env_step=lin(1e-4, 1e-3), infer=lin(1e-5, 5e-4), train=lin(1e-3, 0.01),
                           publish_s=0.001, weight_bytes=1024, obs_bytes_per_env=100, row_step_bytes=100,
                           build_s={"env": 1.0, "model": 0.5}, ref_s=0.0)


def _comm() -> CommProfile:
    return CommProfile({"same": Curve({1: 0.002}), "cross": Curve({1: 0.001})}, {"same": 0.0005, "cross": 0.0005},
                       Curve({1: 0.001}), ray_init_s=5.0, spawn_s=3.0, call_s=0.002)


def test_curve_is_affine_through_points():
    c = Curve({10: 0.02, 20: 0.03})
    assert c(30) == pytest.approx(0.04) and c.fixed == pytest.approx(0.01) and c.per_item == pytest.approx(0.001)


def test_fused_one_process_formula():
    prof, cand = _profile(), embodied_candidates(2, 32)[0]  # fused x1 d1
    p = predict_embodied(prof, _comm(), cand, num_slots=2, cores=2, updates=4)
    rollout = 10 * (prof.env_step(32) + prof.infer(32)) + prof.infer(32)
    assert p.iteration_s == pytest.approx(rollout + prof.train(32) + prof.publish_s)
    assert p.startup_s == pytest.approx(1.5)  # in-process: no Ray start, no spawn


def test_channels_step_is_max_of_busy_and_round_trip():
    prof = _profile()
    cand = next(c for c in embodied_candidates(2, 32) if c.label == "hybrid d1")
    p = predict_embodied(prof, _comm(), cand, num_slots=2, cores=2, updates=4)
    e, i, o = prof.env_step(32), prof.infer(32), 0.0005
    h = _comm().hop(False, 32 * prof.obs_bytes_per_env)  # env and rollout on different cores
    assert p.breakdown["step"] == pytest.approx(max(e + o, i + o, e + i + 2 * h))
    assert p.startup_s == pytest.approx(5.0 + 3.0 + 1.5)


def test_candidates_parse_on_every_slot_count():
    from learner.placement import parse_placement

    for n in (1, 2, 3, 4, 8):
        for c in embodied_candidates(n, 32):
            parse_placement(c.placement, n, ["env", "rollout", "actor"])
        for c in reasoning_candidates(n):
            parse_placement(c.placement, n, ["rollout", "reward", "actor"])


@pytest.fixture
def seeded_cache(tmp_path, monkeypatch):
    from learner.runners.config import EmbodiedConfig
    from learner.scheduling.comm import COMM_VERSION

    monkeypatch.setenv("RLINF_PROFILE_DIR", str(tmp_path))
    raw = {"env": {"name": "toy/point_reach", "num_envs": 32}, "cluster": {"num_cpus": 2, "num_gpus": 0}}
    cfg = from_dict(EmbodiedConfig, raw)
    store_cached(workload_key("embodied", embodied_workload(cfg)), _profile().to_dict())
    store_cached(workload_key("comm", {"v": COMM_VERSION}), DEFAULT_COMM)
    return raw


def test_placement_auto_resolves_when_the_config_is_built(seeded_cache):
    from learner.runners.config import EmbodiedConfig

    cfg = from_dict(EmbodiedConfig, {**seeded_cache, "placement": "auto"})
    assert isinstance(cfg.placement, dict)
    assert {n for k in cfg.placement for n in k.split(",")} == {"env", "rollout", "actor"}
    assert cfg.rollout.pipeline_stages in (1, 2)


def test_placement_auto_errors_name_the_key(seeded_cache):
    from learner.runners.config import EmbodiedConfig

    with pytest.raises(ConfigError, match="placement"):
        from_dict(EmbodiedConfig, {**seeded_cache, "placement": "fastest"})
    with pytest.raises(ConfigError, match="placement.*cluster.address"):
        from_dict(EmbodiedConfig, {**seeded_cache, "placement": "auto", "cluster": {"address": "auto"}})


def test_rlinf_schedule_prints_a_ranking(seeded_cache, tmp_path, capsys):
    import yaml

    from rlinf_cli.main import main

    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**seeded_cache, "placement": "auto"}))
    assert main(["schedule", str(path), "--slots", "2"]) == 0
    out = capsys.readouterr().out
    assert "fused x1 d1" in out and "hybrid d1" in out and out.count("\n") >= 9


def test_whatif_laws():
    w = whatif.GpuWorkload("t", env_s=0.0, infer_s=80.0, train_s=40.0, weight_bytes=0.0, state_bytes=0.0)
    assert whatif.collocated(w, 8) == pytest.approx(10 + 5 + 10 * whatif.LAT_S)  # all-reduce 6 lat, broadcast 4
    assert whatif.tail(1, 0.5) == 1.0 and whatif.tail(64, 0.5) > whatif.tail(8, 0.5)
    rows = whatif.table()
    assert {r["gpus"] for r in rows} == {8, 16, 32, 64, 128, 256, 512, 1024}


def test_lent_slots_are_dealt_round_robin():
    assert lent_slots([[0]], [[1]], 0, 1) == (0, 1)
    assert lent_slots([[0], [1]], [[2], [3]], 0, 2) == (0, 2)


def test_reallocating_actor_widens_only_for_the_update():
    import os

    import torch

    from learner.scheduling.realloc import ReallocatingActorWorker

    if not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two cores")
    saved, threads = os.sched_getaffinity(0), torch.get_num_threads()
    own = min(saved)
    other = max(saved)
    w = object.__new__(ReallocatingActorWorker)
    w.lend = (other,)
    os.sched_setaffinity(0, {own})
    try:
        with w._widened():
            inside = os.sched_getaffinity(0)
        assert inside == {own, other % (os.cpu_count() or 1)} and os.sched_getaffinity(0) == {own}
    finally:
        os.sched_setaffinity(0, saved)
        torch.set_num_threads(threads)
