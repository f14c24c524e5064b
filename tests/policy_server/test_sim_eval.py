"""Simulators as policy-server clients: observations streamed, returned chunks executed."""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import TOKEN, LinearPolicy, running_server, version_weights

from learner.models import build_policy
from learner.models.policy import PolicySpec
from policy_server.push import push_weights
from policy_server.sim_eval import IncompatibleServerError, run_sim_eval
from rlinf_contracts.env import EnvSpec, VectorEnv, check_actions
from rlinf_contracts.env_registry import make_env, register_env


class ThresholdEnv(VectorEnv):
    """Episodes of 2 chunk-steps; success when the last executed action's first entry is > 0.5."""

    def __init__(self, num_envs: int = 1, **_: object) -> None:
        self.spec = EnvSpec(num_envs=num_envs, state_dim=4, action_dim=2, max_episode_steps=2)
        self.t = np.zeros(num_envs, int)
        self.executed = 0

    def _obs(self) -> dict:
        b = self.num_envs
        return {"state": np.full((b, 4), 0.25, np.float32), "images": {}, "instruction": ["go"] * b}

    def reset(self, seed: int | None = None) -> dict:
        self.t[:] = 0
        return self._obs()

    def step(self, actions: np.ndarray):
        acts = check_actions(actions, self.spec)
        self.executed += acts.shape[0] * acts.shape[1]
        self.t += 1
        done = self.t >= 2
        success = done & (acts[:, -1, 0] > 0.5)
        info = {
            "success": success,
            "episode_return": success.astype(np.float32),
            "episode_length": self.t.copy(),
        }
        self.t[done] = 0
        reward = np.zeros((self.num_envs, acts.shape[1]), np.float32)
        return self._obs(), reward, done, np.zeros_like(done), info


register_env("ps_test_threshold")(lambda task, num_envs, **kw: ThresholdEnv(num_envs, **kw))


def test_sim_eval_executes_server_actions_and_reports_success():
    policy = LinearPolicy()
    with running_server(policy, weights_token=TOKEN) as srv:
        # version 0: actions = 0.01 * sum(state) = 0.01 -> fails; version 1: 0.02 + 1 -> succeeds
        before = run_sim_eval(srv.url, "ps_test_threshold/x", {"num_envs": 3}, episodes=6, seed=0)
        assert (
            before["success_rate"] == 0.0
            and before["episodes"] == 6
            and before["weight_versions"] == [0]
        )
        push_weights(srv.url, version_weights(policy, 1), version=1, token=TOKEN)
        after = run_sim_eval(srv.url, "ps_test_threshold/x", {"num_envs": 3}, episodes=6, seed=0)
        assert after["success_rate"] == 1.0 and after["weight_versions"] == [1]
        assert after["requests"] == 6 * 2  # 6 episodes x 2 chunk-steps, one request per env-step
        assert after["mean_length"] == 2.0


def test_sim_eval_refuses_an_incompatible_policy():
    with running_server(LinearPolicy(action_dim=3)) as srv:
        with pytest.raises(IncompatibleServerError, match="action_dim 3, env needs 2"):
            run_sim_eval(srv.url, "ps_test_threshold/x", {}, episodes=1, seed=0)


@pytest.mark.sim
def test_sim_eval_drives_the_mujoco_franka_env():
    pytest.importorskip("mujoco")
    kwargs = {"num_envs": 2, "max_episode_steps": 8}
    with make_env("mujoco_franka/reach", num_envs=1, max_episode_steps=8) as env:
        spec = PolicySpec(state_dim=env.spec.state_dim, action_dim=env.spec.action_dim, chunk=4)
    policy = build_policy("mlp", spec, hidden=[32, 32])
    with running_server(policy) as srv:
        result = run_sim_eval(srv.url, "mujoco_franka/reach", kwargs, episodes=2, seed=123)
    assert result["episodes"] == 2 and 0.0 <= result["success_rate"] <= 1.0
    assert result["mean_length"] <= 8 and result["requests"] >= 4
