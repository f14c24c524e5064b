"""``placement: auto``: validation only checks the word; the planning step after it resolves it.

Why: ranking placements may profile the workload for 10-40 s, a side effect that has no place
in ``validate`` (and that tied the config modules to the scheduler in an import cycle). The
resolver is replaced by one that raises (validation) or records its calls (planning), so these
tests never profile.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from learner.scheduling import auto
from learner.scheduling.candidates import Candidate
from learner.scheduling.cost import Prediction
from rlinf_contracts.config import ConfigError, from_dict

ROOT = Path(__file__).resolve().parents[3]
RAW = {"env": {"name": "toy/point_reach", "num_envs": 8}, "cluster": {"num_cpus": 2, "num_gpus": 0}}


def _configs() -> dict[str, tuple[type, dict]]:
    from learner.offpolicy.config import OffPolicyConfig
    from learner.runners.config import EmbodiedConfig
    from learner.runners.reasoning_config import ReasoningConfig

    return {
        "embodied": (EmbodiedConfig, RAW),
        "offpolicy": (OffPolicyConfig, {**RAW, "runner": "offpolicy"}),
        "reasoning": (
            ReasoningConfig,
            {"runner": "reasoning", "cluster": RAW["cluster"], "sft": {"steps": 2}},
        ),
    }


@pytest.mark.parametrize("runner", ["embodied", "offpolicy", "reasoning"])
def test_validate_checks_auto_and_does_not_resolve_it(runner, monkeypatch):
    def no_resolving(cfg):
        raise AssertionError("validate() resolved placement: auto")

    monkeypatch.setattr(auto, "resolve", no_resolving)
    monkeypatch.setattr("learner.scheduling.plan.rank", no_resolving)
    cls, raw = _configs()[runner]
    cfg = from_dict(cls, {**raw, "placement": "auto"})
    assert cfg.placement == "auto"
    with pytest.raises(ConfigError, match="placement.*'auto'"):
        from_dict(cls, {**raw, "placement": "fastest"})


def test_building_an_auto_config_imports_no_scheduler_module():
    """In a fresh interpreter: the three configs are built with ``placement: auto`` and not one
    ``learner.scheduling`` module (profiler, cost model, resolver) has been imported."""
    import inspect

    code = (
        f"import sys\nRAW = {RAW!r}\n{inspect.getsource(_configs)}\n"
        "from rlinf_contracts.config import from_dict\n"
        "for cls, raw in _configs().values():\n"
        "    assert from_dict(cls, {**raw, 'placement': 'auto'}).placement == 'auto'\n"
        "print(sorted(m for m in sys.modules if m.startswith('learner.scheduling')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "[]"


class _Resolver:
    """Stands in for :func:`learner.scheduling.auto.resolve`: sets ``placement`` and records."""

    def __init__(self, placement: dict[str, str]) -> None:
        self.placement, self.calls = placement, 0

    def __call__(self, cfg):
        self.calls += 1
        cfg.placement = dict(self.placement)
        return Prediction(Candidate("split d1", self.placement), iteration_s=0.5, startup_s=1.0)


def test_plan_resolves_auto_on_a_copy_and_logs_the_profiling(monkeypatch, caplog):
    from learner.runners.config import EmbodiedConfig

    chosen = {"env,rollout": "0", "actor": "1"}
    resolver = _Resolver(chosen)
    monkeypatch.setattr(auto, "resolve", resolver)
    cfg = from_dict(EmbodiedConfig, {**RAW, "placement": "auto"})
    with caplog.at_level(logging.INFO, logger=auto.__name__):
        planned = auto.plan(cfg)
    assert resolver.calls == 1 and planned.placement == chosen and cfg.placement == "auto"
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "profiling the workload" in lines[0]
    assert "split d1" in lines[1] and "profiled and ranked in" in lines[1]


def test_plan_leaves_a_written_placement_alone(monkeypatch):
    from learner.runners.config import EmbodiedConfig

    resolver = _Resolver({"env,rollout,actor": "0"})
    monkeypatch.setattr(auto, "resolve", resolver)
    cfg = from_dict(EmbodiedConfig, {**RAW, "placement": {"env,rollout": "0", "actor": "1"}})
    assert auto.plan(cfg) is cfg and resolver.calls == 0


def test_plan_validates_what_it_chose(monkeypatch):
    """The chosen placement goes through ``validate`` like a written one."""
    from learner.runners.config import EmbodiedConfig

    monkeypatch.setattr(auto, "resolve", _Resolver({"env,rollout": "0"}))  # no actor
    with pytest.raises(ConfigError, match="env, rollout and actor"):
        auto.plan(from_dict(EmbodiedConfig, {**RAW, "placement": "auto"}))


def test_plan_refuses_auto_when_the_slots_are_unknown(monkeypatch):
    from learner.runners.config import EmbodiedConfig

    monkeypatch.setattr(auto, "resolve", _Resolver({"env,rollout,actor": "0"}))
    raw = {**RAW, "placement": "auto", "cluster": {"address": "auto"}}
    with pytest.raises(ConfigError, match="placement.*cluster.address"):
        auto.plan(from_dict(EmbodiedConfig, raw))


def test_rlinf_train_plans_before_its_checks(monkeypatch, tmp_path):
    import yaml

    from rlinf_cli.train import build

    chosen = {"env,rollout": "0", "actor": "1"}
    monkeypatch.setattr(auto, "resolve", _Resolver(chosen))
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(RAW))
    _, cfg = build(str(path), ["placement=auto"])
    assert cfg.placement == chosen


def test_a_runner_refuses_an_unplanned_auto_placement():
    from learner.placement import PlacementError, parse_placement

    with pytest.raises(PlacementError, match="planning step"):
        parse_placement("auto", 2)  # type: ignore[arg-type]  # the bare word a runner must refuse
