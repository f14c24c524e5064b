"""A tiny VLA's PPO / GRPO update under ``actor.strategy: fsdp`` on two CPU ranks (gloo) equals
the update of one process.

Per family (the tiny OpenVLA adapter and its OFT variant with a GAE critic, the tiny π0 adapter
with GRPO groups) the trainer the runner builds (:class:`~learner.actor.trainer.Trainer`, the
tiny config's model) takes one update on a fixed rollout: in this process on all 8 rows, and on
two ranks that each take the half :func:`~learner.rollout.trajectory.split_rows` gives them, as
the runner splits a stream.
One epoch of one minibatch and no advantage whitening (a per-rank batch statistic under any data
parallelism), so both sides take the same step. The rollout's actions are the tiny policy's own
samples, with log-probs shifted so the PPO ratio is not 1 and the clip takes part. The policy's
lazy distribution runs the adapter after the sharded root's forward has returned, and π0 runs
its Gemma layers piece by piece; the gathered gradients and weights must not notice.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch.distributed.tensor import DTensor

pytest.importorskip("transformers")
pytest.importorskip("peft")

from learner.actor.fsdp import SHARDED_DIR, FSDPStrategy, method_units, shard_units
from learner.actor.trainer import Trainer
from learner.models import PolicySpec
from learner.rollout.trajectory import Trajectory, split_rows
from rlinf_cli.train import typed_config
from tests.learner.two_ranks import run_two_ranks

ROOT = Path(__file__).resolve().parents[3]
ROWS, STEPS = 8, 2  # 8 envs x 2 policy steps; 4 rows per rank
ONE_STEP = ["actor.epochs=1", "actor.minibatches=1", "actor.lr=1e-3", "algorithm.whiten_adv=false"]
FAMILIES: dict[str, tuple[str, list[str]]] = {
    "openvla": ("configs/sim_franka_language_openvla_tiny_ppo.yaml", ONE_STEP),
    "openvla_oft": (
        "configs/sim_franka_language_openvla_tiny_ppo.yaml",
        [*ONE_STEP, "adapter.name=openvla_oft", "model.chunk=2"],
    ),
    "pi0": ("configs/sim_franka_language_pi0_tiny_grpo.yaml", ONE_STEP),
}
INSTRUCTIONS = ["push the red cube", "lift the blue ball", "reach the green cylinder"]
RESUMED = ("openvla", "pi0")  # resumed from their shards: the PPO with its critic, and π0


def _trainer(family: str, rank: int = 0, world_size: int = 1) -> Trainer:
    config, overrides = FAMILIES[family]
    _, cfg = typed_config(str(ROOT / config), [*overrides, "actor.strategy=fsdp"])
    spec = PolicySpec(
        state_dim=6,
        action_dim=3,
        chunk=cfg.model.chunk,
        cameras={"front": (32, 32)},
        uses_instruction=True,
    )
    return Trainer(cfg, spec, rank, world_size)


def _rollout(trainer: Trainer, seed: int = 0) -> Trajectory:
    """``[ROWS, STEPS]`` steps the untrained policy sampled, with rewards, scores and old values."""
    rng = np.random.default_rng(seed)
    n = ROWS * STEPS
    obs = {
        "state": rng.normal(size=(n, 6)).astype(np.float32),
        "images": {"front": rng.integers(0, 255, (n, 32, 32, 3), dtype=np.uint8)},
        "instruction": [INSTRUCTIONS[i % len(INSTRUCTIONS)] for i in range(n)],
    }
    torch.manual_seed(seed)
    actions, logp, value = trainer.policy().act(obs, deterministic=False)
    rows = lambda a: np.asarray(a).reshape(ROWS, STEPS, *np.shape(a)[1:])  # noqa: E731
    dones = np.zeros((ROWS, STEPS), np.float32)
    dones[:, -1] = 1.0
    return Trajectory(
        obs={
            "state": rows(obs["state"]),
            "images": {"front": rows(obs["images"]["front"])},
            "instruction": rows(np.array(obs["instruction"], dtype=object)),
        },
        actions=rows(actions),
        logp=rows(logp + rng.normal(scale=0.2, size=n).astype(np.float32)),
        values=rows(value if value is not None else np.zeros(n, np.float32)),
        rewards=rng.normal(size=(ROWS, STEPS)).astype(np.float32),
        dones=dones,
        mask=np.ones((ROWS, STEPS), np.float32),
        bootstrap_value=np.zeros(ROWS, np.float32),
        scores=rng.normal(size=ROWS).astype(np.float32),
    )


def _grads(trainer: Trainer) -> dict[str, torch.Tensor]:
    """Every trainable parameter's gradient, whole (a gather when sharded: every rank calls);
    zeros where the loss does not reach (π0's last prefix query projection feeds no action)."""
    out = {}
    for name, p in trainer.policy().named_parameters():
        if not p.requires_grad:
            continue
        g = p.grad
        if g is None:
            out[name] = torch.zeros(p.shape)
        else:
            out[name] = (g.full_tensor() if isinstance(g, DTensor) else g).detach().clone()
    return out


def _update(trainer: Trainer, batch: Trajectory) -> dict[str, Any]:
    before = trainer.param_vector()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        metrics = trainer.update(batch)
    return {
        "metrics": metrics,
        "grads": _grads(trainer),
        "before": before,
        "after": trainer.param_vector(),
        "view_warnings": [str(w.message) for w in caught if "view tensor" in str(w.message)],
    }


def _resume(
    trainer: Trainer, family: str, rank: int, port: int, half: Trajectory, out: str
) -> dict[str, Any]:
    """Save the ranks' shards after the first update; a second trainer of these ranks loads them;
    both take the same next update, which must land in the same place (weights, Adam moments,
    iteration: the shards hold them all)."""
    path = trainer.save(str(Path(out) / family), 1, 2, {})
    twin = _trainer(family, rank, 2)
    twin.init_dist(f"127.0.0.1:{port}")  # the group is up: it joins it
    meta = twin.load(path)
    for each in (trainer, twin):
        torch.manual_seed(7)  # π0's flow loss draws noise and times: the same draws for both
        each.update(half)
    return {
        "went_on": trainer.param_vector(),
        "resumed": twin.param_vector(),
        "sharded": sorted(p.name for p in Path(path, SHARDED_DIR).iterdir()),
        "meta": {k: meta[k] for k in ("iteration", "weight_version")},
    }


def _rank(rank: int, port: int, batches: dict[str, Trajectory], out: str) -> dict[str, Any]:
    res_all: dict[str, Any] = {}
    for family, batch in batches.items():
        trainer = _trainer(family, rank, 2)
        trainer.init_dist(f"127.0.0.1:{port}")  # the second family's trainer joins the group
        half = split_rows(batch, 2, trainer.algo.env_group_size)[rank]
        res = _update(trainer, half)
        res["wrapped"] = FSDPStrategy.is_wrapped(trainer.policy())
        if family in RESUMED:
            res["resume"] = _resume(trainer, family, rank, port, half, out)
        res_all[family] = res
    trainer.sync.close()
    return res_all


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    ref, batches = {}, {}
    for family in FAMILIES:
        trainer = _trainer(family)
        batches[family] = _rollout(trainer)
        ref[family] = _update(trainer, batches[family])
    out = str(tmp_path_factory.mktemp("fsdp_vla"))
    return {"ref": ref, "ranks": run_two_ranks(_rank, batches, out, timeout_s=600)}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_loss_gradients_and_update_equal_one_process(runs, family):
    ref = runs["ref"][family]
    r0, r1 = (runs["ranks"][r][family] for r in (0, 1))
    assert r0["wrapped"] and r1["wrapped"]
    # each rank's loss is its half's mean; equal halves: their mean is the whole batch's
    for key in (
        ("policy_loss", "value_loss") if "value_loss" in ref["metrics"] else ("policy_loss",)
    ):
        mean = (r0["metrics"][key] + r1["metrics"][key]) / 2
        assert mean == pytest.approx(ref["metrics"][key], rel=1e-5, abs=1e-7), key
    assert r0["metrics"]["grad_norm"] == pytest.approx(ref["metrics"]["grad_norm"], rel=1e-5)
    assert r1["metrics"]["grad_norm"] == r0["metrics"]["grad_norm"]
    # the gathered gradients (after the clip both sides apply) and the weights after Adam's step
    assert r0["grads"].keys() == ref["grads"].keys()
    assert any(g.abs().sum() > 0 for g in ref["grads"].values())
    for name, g in ref["grads"].items():
        torch.testing.assert_close(r0["grads"][name], g, atol=1e-7, rtol=1e-4, msg=name)
    torch.testing.assert_close(r0["before"], ref["before"], atol=0, rtol=0)
    assert not torch.equal(ref["after"], ref["before"])
    torch.testing.assert_close(r0["after"], ref["after"], atol=1e-7, rtol=1e-5)
    torch.testing.assert_close(r1["after"], r0["after"], atol=0, rtol=0)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_sharded_policy_returns_no_view_tensor(runs, family):
    """FSDP2 warns when a wrapped module returns a view: an in-place op on it would skip the
    hook that gathers the weights for the backward."""
    assert runs["ranks"][0][family]["view_warnings"] == []


def test_pi0_gemma_layers_are_gathered_with_the_adapter():
    """π0 calls its Gemma layers' projections itself, so FSDP's hooks on a layer would never run:
    they are no unit of their own; the adapter is, around the calls that run the weights."""
    policy = _trainer("pi0").policy()
    units = {type(u).__name__ for u in shard_units(policy)}
    assert "GemmaDecoderLayer" not in units and "SiglipEncoderLayer" in units
    entries = [(type(m).__name__, methods) for m, methods in method_units(policy)]
    assert entries == [("Pi0Adapter", ("act", "log_prob", "flow_loss"))]


@pytest.mark.parametrize("family", RESUMED)
def test_ranks_resumed_from_their_shards_continue_like_uninterrupted_training(runs, family):
    """``rlinf train`` with ``train.resume`` of a sharded VLA run: every rank's model and Adam
    shards come back, so the next update from the checkpoint equals the next update of the ranks
    that never stopped."""
    for rank in (0, 1):
        res = runs["ranks"][rank][family]["resume"]
        assert res["meta"] == {"iteration": 1, "weight_version": 2}
        assert res["sharded"], "no shards written"
        assert not torch.equal(res["went_on"], runs["ranks"][rank][family]["after"])  # it moved
        torch.testing.assert_close(res["resumed"], res["went_on"], atol=1e-7, rtol=1e-5)
