"""Reusable conformance suite for the vector-env contract (``rlinf_contracts.env``).

Any bridge (MuJoCo Franka, robosuite, ManiSkill, a ROS robot env...) passes it by providing a
factory ``make(num_envs: int, max_episode_steps: int) -> VectorEnv``:

    from tests.sim_bridges.conformance import CHECKS, run_all
    run_all(lambda n, t: make_env("mujoco_franka/reach", num_envs=n, max_episode_steps=t))

or parametrise pytest over ``CHECKS`` (see ``test_conformance.py``). Each check builds its own
envs, so a failure names exactly one property.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from rlinf_contracts.env import ActionShapeError, VectorEnv

EnvMaker = Callable[[int, int], VectorEnv]
NUM_ENVS = 3
EPISODE = 6


def random_actions(
    env: VectorEnv, rng: np.random.Generator, chunk: int | None = None
) -> np.ndarray:
    shape = (
        (env.num_envs, env.spec.action_dim)
        if chunk is None
        else (env.num_envs, chunk, env.spec.action_dim)
    )
    return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)


def assert_obs(env: VectorEnv, obs: dict) -> None:
    b, spec = env.num_envs, env.spec
    assert set(obs) >= {"state", "images", "instruction"}, f"obs keys {sorted(obs)}"
    st = obs["state"]
    assert isinstance(st, np.ndarray) and st.dtype == np.float32, (
        f"state dtype {getattr(st, 'dtype', type(st))}"
    )
    assert st.shape == (b, spec.state_dim), f"state shape {st.shape} != {(b, spec.state_dim)}"
    assert np.all(np.isfinite(st)), "state has NaN/inf"
    assert set(obs["images"]) == set(spec.cameras), (
        f"cameras {sorted(obs['images'])} != spec {sorted(spec.cameras)}"
    )
    for cam, (h, w) in spec.cameras.items():
        img = obs["images"][cam]
        assert img.dtype == np.uint8 and img.shape == (b, h, w, 3), (
            f"{cam}: {img.dtype} {img.shape}"
        )
        assert img.max() > img.min(), f"camera {cam} rendered a constant image"
    instr = obs["instruction"]
    assert isinstance(instr, list) and len(instr) == b and all(isinstance(s, str) for s in instr)


def check_spec_and_reset(make: EnvMaker) -> None:
    with make(NUM_ENVS, EPISODE) as env:
        assert env.num_envs == NUM_ENVS and env.spec.num_envs == NUM_ENVS
        assert env.spec.state_dim > 0 and env.spec.action_dim > 0
        assert env.spec.max_episode_steps == EPISODE
        assert_obs(env, env.reset(seed=0))


def check_single_step(make: EnvMaker) -> None:
    with make(NUM_ENVS, EPISODE) as env:
        env.reset(seed=1)
        obs, rew, term, trunc, info = env.step(random_actions(env, np.random.default_rng(0)))
        assert_obs(env, obs)
        assert rew.shape == (NUM_ENVS,) and rew.dtype.kind == "f" and np.all(np.isfinite(rew))
        for name, arr in (("terminated", term), ("truncated", trunc), ("success", info["success"])):
            assert arr.shape == (NUM_ENVS,) and arr.dtype == bool, (
                f"{name}: {arr.dtype} {arr.shape}"
            )


def check_chunk_step(make: EnvMaker) -> None:
    with make(NUM_ENVS, EPISODE) as env:
        env.reset(seed=2)
        chunk = 3
        obs, rew, term, trunc, info = env.step(random_actions(env, np.random.default_rng(0), chunk))
        assert_obs(env, obs)
        assert rew.shape == (NUM_ENVS, chunk), f"chunk reward shape {rew.shape}"
        assert term.shape == trunc.shape == (NUM_ENVS,)
        valid = info["valid_steps"]
        assert valid.shape == (NUM_ENVS, chunk) and valid.dtype == bool
        assert np.all(rew[~valid] == 0.0), "reward after the episode ended inside a chunk must be 0"


def check_chunk_equals_steps(make: EnvMaker) -> None:
    """A chunk of k actions equals k single steps with the same actions (open-loop semantics)."""
    acts = random_actions_for(make, chunk=3)
    with make(NUM_ENVS, 50) as a, make(NUM_ENVS, 50) as b:
        a.reset(seed=3)
        b.reset(seed=3)
        obs_a, rew_a, _, _, info = a.step(acts)
        rews = []
        for k in range(acts.shape[1]):
            obs_b, r, *_ = b.step(acts[:, k])
            rews.append(r)
        valid = info["valid_steps"]
        np.testing.assert_allclose(
            rew_a[valid], np.stack(rews, axis=1)[valid], rtol=1e-5, atol=1e-6
        )
        full = valid.all(axis=1)  # envs whose episode did not end inside the chunk
        np.testing.assert_allclose(obs_a["state"][full], obs_b["state"][full], rtol=1e-5, atol=1e-6)


def random_actions_for(make: EnvMaker, chunk: int) -> np.ndarray:
    with make(NUM_ENVS, 50) as env:
        return random_actions(env, np.random.default_rng(7), chunk)


def _rollout(make: EnvMaker, seed: int, steps: int = 4) -> list[np.ndarray]:
    out = []
    with make(NUM_ENVS, EPISODE) as env:
        out.append(env.reset(seed=seed)["state"].copy())
        rng = np.random.default_rng(123)
        for _ in range(steps):
            obs, rew, *_ = env.step(random_actions(env, rng))
            out += [obs["state"].copy(), np.asarray(rew, dtype=np.float64)]
            out += [obs["images"][c].copy() for c in sorted(obs["images"])]
    return out


def check_determinism(make: EnvMaker) -> None:
    """Same seed + same actions -> identical trajectories; another seed -> a different start."""
    first, second = _rollout(make, seed=11), _rollout(make, seed=11)
    for x, y in zip(first, second):
        np.testing.assert_array_equal(x, y)
    other = _rollout(make, seed=12, steps=0)
    assert not np.array_equal(first[0], other[0]), "different seeds gave the same initial state"
    assert not np.array_equal(first[0][0], first[0][1]), "sub-envs got identical initial states"


def check_per_row_seeds(make: EnvMaker) -> None:
    """``reset(seed=[s0, s1, ...])`` starts row i where an int seed starts the row seeded ``s_i``
    (a learner re-running chosen start states needs it). Optional: a family that cannot seed rows
    one by one raises ``TypeError``."""
    order = [2, 0, 1]
    with make(NUM_ENVS, EPISODE) as env:
        ref = env.reset(seed=40)["state"].copy()  # rows seeded 40, 41, 42
        try:
            again = env.reset(seed=[40 + i for i in order])["state"]
        except TypeError:
            return
        np.testing.assert_array_equal(again, ref[order])


def check_auto_reset(make: EnvMaker) -> None:
    """Episodes end at max_episode_steps; the final obs is kept and the env restarts."""
    with make(NUM_ENVS, EPISODE) as env:
        env.reset(seed=4)
        rng = np.random.default_rng(1)
        done_seen = np.zeros(NUM_ENVS, dtype=bool)
        for t in range(EPISODE):
            obs, rew, term, trunc, info = env.step(
                np.zeros((NUM_ENVS, env.spec.action_dim), np.float32)
                if t % 2
                else random_actions(env, rng)
            )
            done = term | trunc
            assert not np.any(term & trunc), "an episode cannot be both terminated and truncated"
            if done.any():
                final = info["final_observation"]
                assert final["state"].shape == obs["state"].shape
                for cam in env.spec.cameras:
                    assert final["images"][cam].shape == obs["images"][cam].shape
                idx = np.flatnonzero(done)
                assert np.all(info["episode_length"][idx] >= 1)
                assert np.all(info["episode_length"][idx] <= EPISODE)
                assert info["success"].dtype == bool
                assert not np.allclose(final["state"][idx], obs["state"][idx]), (
                    "after auto-reset the obs must be the new episode's first obs"
                )
                done_seen |= done
        assert done_seen.all(), f"not every env finished within max_episode_steps={EPISODE}"
        # stepping goes on after the auto-reset without a manual reset
        obs, *_ = env.step(random_actions(env, rng))
        assert_obs(env, obs)


def check_truncation_inside_chunk(make: EnvMaker) -> None:
    """A chunk longer than the remaining episode stops at the boundary: mask and zero rewards."""
    with make(NUM_ENVS, EPISODE) as env:
        env.reset(seed=5)
        zeros = np.zeros((NUM_ENVS, EPISODE + 2, env.spec.action_dim), np.float32)
        _, rew, term, trunc, info = env.step(zeros)
        assert np.all(term | trunc), "every episode must end inside a chunk longer than it"
        valid = info["valid_steps"]
        assert np.all(valid.sum(axis=1) <= EPISODE)
        assert np.all(~valid[:, EPISODE:]), "sub-steps after the episode end must be masked out"
        assert np.all(rew[:, EPISODE:] == 0.0)
        np.testing.assert_array_equal(info["episode_length"], valid.sum(axis=1))
        assert "final_observation" in info


def check_bad_actions(make: EnvMaker) -> None:
    """Wrong batch, wrong action dim, wrong rank, NaN and non-numeric -> ActionShapeError."""
    with make(NUM_ENVS, EPISODE) as env:
        env.reset(seed=6)
        a = env.spec.action_dim
        bad = [
            np.zeros((NUM_ENVS + 1, a)),
            np.zeros((NUM_ENVS, a + 1)),
            np.zeros((NUM_ENVS,)),
            np.zeros((NUM_ENVS, 2, 2, a)),
            np.full((NUM_ENVS, a), np.nan),
            np.array([["x"] * a] * NUM_ENVS),
        ]
        for arr in bad:
            try:
                env.step(arr)
            except ActionShapeError as exc:
                msg = str(exc)
                assert msg and ("shape" in msg or "NaN" in msg or "dtype" in msg), msg
            else:
                raise AssertionError(
                    f"actions of shape {arr.shape} / dtype {arr.dtype} were accepted"
                )
        env.step(np.zeros((NUM_ENVS, a), np.float32))  # still usable after refusals


CHECKS: dict[str, Callable[[EnvMaker], None]] = {
    "spec_and_reset": check_spec_and_reset,
    "single_step": check_single_step,
    "chunk_step": check_chunk_step,
    "chunk_equals_steps": check_chunk_equals_steps,
    "determinism": check_determinism,
    "per_row_seeds": check_per_row_seeds,
    "auto_reset": check_auto_reset,
    "truncation_inside_chunk": check_truncation_inside_chunk,
    "bad_actions": check_bad_actions,
}


def run_all(make: EnvMaker) -> None:
    """Run every check (raises AssertionError naming the first property that fails)."""
    for name, check in CHECKS.items():
        try:
            check(make)
        except AssertionError as exc:
            raise AssertionError(f"conformance check '{name}' failed: {exc}") from exc
