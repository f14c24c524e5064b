"""Simulators as policy-server clients: ``rlinf eval --policy-server ws://HOST:PORT CONFIG``.

Why: this is exactly the path a real robot takes (observation over the wire, action chunk
back, executed open-loop), minus ROS. Each sub-env of the vector env is its own client
connection, like one robot each, so a multi-env eval also exercises the server's batching.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import numpy as np

from policy_server.client import AsyncPolicyClient
from policy_server.messages import ServerMetadata
from rlinf_contracts.env import EnvSpec, VectorEnv
from rlinf_contracts.env_registry import make_env

log = logging.getLogger(__name__)


class IncompatibleServerError(ValueError):
    """The server's policy cannot drive this env (action size or observation keys differ)."""


def check_compatible(meta: ServerMetadata | dict[str, Any], spec: EnvSpec, url: str) -> None:
    """Fail before the first step when the served policy and the env do not fit together."""
    if not isinstance(meta, ServerMetadata):
        log.warning("server %s sent no rlinf metadata; skipping the compatibility check", url)
        return
    if meta.action_dim != spec.action_dim:
        raise IncompatibleServerError(
            f"policy '{meta.policy_name}' at {url} outputs action_dim {meta.action_dim}, env "
            f"needs {spec.action_dim}"
        )
    env_obs = spec.observation_spec()
    for key, (_dtype, shape) in meta.observation_spec.items():
        if key not in env_obs:
            raise IncompatibleServerError(
                f"policy '{meta.policy_name}' at {url} needs observation key '{key}' which "
                f"this env does not produce (env keys: {', '.join(env_obs)}); pick an env "
                "obs_mode with that camera"
            )
        if tuple(env_obs[key][1]) != tuple(shape):
            raise IncompatibleServerError(
                f"observation key '{key}': policy at {url} expects shape {tuple(shape)}, env "
                f"gives {env_obs[key][1]}"
            )


def _request(obs: dict[str, Any], i: int) -> dict[str, Any]:
    instructions = obs.get("instruction") or []
    return {
        "state": obs["state"][i],
        "images": {cam: frames[i] for cam, frames in (obs.get("images") or {}).items()},
        "instruction": instructions[i] if i < len(instructions) else "",
    }


async def evaluate_env(
    env: VectorEnv, url: str, episodes: int, seed: int, api_key: str | None = None
) -> dict[str, Any]:
    """Run ``episodes`` episodes of ``env`` with actions from the server at ``url``."""
    n = env.num_envs
    # an evaluation gives up (about 30 s of back-off) rather than wait forever on a wrong URL
    clients = [await AsyncPolicyClient.connect(url, api_key=api_key, retries=10) for _ in range(n)]
    try:
        check_compatible(clients[0].metadata, env.spec, url)
        obs = env.reset(seed=seed)
        finished: list[dict[str, Any]] = []
        latencies: list[float] = []
        versions: set[int] = set()
        max_calls = (episodes // n + 2) * env.spec.max_episode_steps
        t0 = time.perf_counter()
        for _ in range(max_calls):
            t_req = time.perf_counter()
            responses = await asyncio.gather(
                *(c.infer(_request(obs, i)) for i, c in enumerate(clients))
            )
            latencies.append((time.perf_counter() - t_req) * 1000.0)
            versions.update(int(r.get("weight_version", -1)) for r in responses)
            actions = np.stack([np.asarray(r["actions"], dtype=np.float32) for r in responses])
            obs, _, terminated, truncated, info = env.step(actions)
            for i in np.flatnonzero(np.asarray(terminated) | np.asarray(truncated)):
                finished.append(
                    {
                        "success": bool(info["success"][i]),
                        "return": float(info["episode_return"][i]),
                        "length": int(info["episode_length"][i]),
                    }
                )
            if len(finished) >= episodes:
                break
        else:
            raise RuntimeError(
                f"only {len(finished)}/{episodes} episodes finished within {max_calls} env steps"
            )
    finally:
        for c in clients:
            await c.close()
    done = finished[:episodes]
    meta = clients[0].metadata
    return {
        "url": url,
        "policy_name": meta.policy_name
        if isinstance(meta, ServerMetadata)
        else meta.get("policy_name", "?"),
        "episodes": len(done),
        "success_rate": float(np.mean([e["success"] for e in done])),
        "mean_return": float(np.mean([e["return"] for e in done])),
        "mean_length": float(np.mean([e["length"] for e in done])),
        "requests": len(latencies) * n,
        "round_trip_ms_p50": float(np.percentile(latencies, 50)),
        "round_trip_ms_p99": float(np.percentile(latencies, 99)),
        "weight_versions": sorted(versions),
        "wall_s": time.perf_counter() - t0,
    }


def run_sim_eval(url: str, env_name: str, env_kwargs: dict, episodes: int, seed: int) -> dict:
    """Build ``env_name`` (``num_envs`` may be in ``env_kwargs``; default 1) and evaluate the
    server.

    Returns success rate, mean return / length, request count, round-trip latency and the
    weight versions that answered.
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    kwargs = dict(env_kwargs or {})
    num_envs = int(kwargs.pop("num_envs", 1))
    api_key = kwargs.pop("api_key", None)
    env = make_env(env_name, num_envs=num_envs, **kwargs)
    with env:
        result = asyncio.run(evaluate_env(env, url, episodes, seed, api_key=api_key))
    result["env"] = env_name
    log.info(
        "sim eval of %s on %s: success %.2f over %d episodes",
        url,
        env_name,
        result["success_rate"],
        result["episodes"],
    )
    return result
