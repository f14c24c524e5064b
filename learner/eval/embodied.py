"""Held-out evaluation of embodied policies: success rate per OOD split, optional mp4.

Why rounds of "every sub-env runs exactly one episode": counting the first K episodes to
finish would over-count short episodes, and successful episodes usually end early, which
inflates the success rate. Each round resets all sub-envs from fresh held-out seeds
(``eval.seed_offset + seed * 100_000 + round * num_envs + i``) and waits for all of them.

A ``deadline`` (``time.perf_counter()`` value, from ``train.time_budget_s``) starts a round only
when it fits before the deadline at the longest round measured so far (:func:`round_fits`); the
first round of each split always runs and the result's ``episodes`` is what ran. A cut eval says
so once, with the numbers (:class:`EvalCut`).
``progress`` shows a bar over episodes. ``rlinf eval`` writes its video and results into its own
output folder, never into the checkpoint.
"""

from __future__ import annotations

import copy
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from learner.checkpoint import load_policy
from learner.models import Policy
from learner.rollout.envs import build_env
from rlinf_contracts.config import ConfigError, from_dict

log = logging.getLogger(__name__)
if not os.environ.get("DISPLAY"):
    # headless: MuJoCo's default GLFW backend cannot render; osmesa always can (slowly). Only a
    # default -- MUJOCO_GL=egl set by the caller (GPU boxes) wins. Must precede `import mujoco`.
    os.environ.setdefault("MUJOCO_GL", "osmesa")
    os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
IN_DISTRIBUTION = ("id", "train")
VIDEO_ROUNDS = 3  # the video shows the first rounds, ``eval.video_episodes`` envs side by side


EPISODE_PEAKS = {"peak_contact_force": "peak_contact_force_n"}
"""Per-episode peaks an env may report in ``info`` when an episode ends (contact tasks: the
largest contact force on the fixture, N), summarised per split as median and max: success alone
hides a policy that gets there by ramming."""


def _run_round(
    policy: Policy, env: Any, seed: int, recorder: _Recorder | None, deterministic: bool = True
) -> dict[str, np.ndarray]:
    n = env.num_envs
    obs = env.reset(seed)
    if not deterministic:  # sampled actions, reproducible per round
        torch.manual_seed(seed)
    alive = np.ones(n, bool)
    out = {"success": np.zeros(n, bool), "return": np.zeros(n), "length": np.zeros(n)}
    out.update({key: np.full(n, np.nan) for key in EPISODE_PEAKS})
    if recorder:
        recorder.add(env, alive)
    for _ in range(4 * env.spec.max_episode_steps + 10):
        actions, _, _ = policy.act(obs, deterministic=deterministic)
        obs, _, term, trunc, info = env.step(actions)
        ended = alive & (np.asarray(term) | np.asarray(trunc))
        out["success"][ended] = np.asarray(info["success"])[ended]
        out["return"][ended] = np.asarray(info.get("episode_return", np.zeros(n)))[ended]
        out["length"][ended] = np.asarray(info.get("episode_length", np.zeros(n)))[ended]
        for key in EPISODE_PEAKS.keys() & info.keys():
            out[key][ended] = np.asarray(info[key], np.float64)[ended]
        alive &= ~ended
        if recorder:
            recorder.add(env, alive)
        if not alive.any():
            return out
    raise RuntimeError(
        f"eval: {int(alive.sum())} episode(s) did not end within "
        f"{4 * env.spec.max_episode_steps + 10} steps; does the env truncate?"
    )


class _Recorder:
    """Frames of the first ``k`` sub-envs side by side; a row freezes once its episode ended."""

    def __init__(self, k: int) -> None:
        self.k, self.frames, self.last = k, [], None
        self.ok = True

    def add(self, env: Any, alive: np.ndarray) -> None:
        if not self.ok:
            return
        try:
            frames = env.render_frames()
        except Exception as e:  # no GL context etc.: keep the evaluation, drop the video
            log.warning(
                "eval: rendering failed (%s: %s); set MUJOCO_GL=osmesa or egl for videos",
                type(e).__name__,
                e,
            )
            frames = None
        if frames is None:
            self.ok = False
            return
        rows = np.asarray(frames[: self.k])
        if self.last is not None:
            rows = np.where(alive[: self.k, None, None, None], rows, self.last)
        self.last = rows
        self.frames.append(np.concatenate(list(rows), axis=1))

    def end_round(self) -> None:
        """Hold the last frame half a second-ish, then start the next round fresh."""
        if self.frames:
            self.frames += [self.frames[-1]] * 5
        self.last = None

    def write(self, path: str | Path, fps: float) -> str | None:
        if not self.ok or not self.frames:
            log.warning("eval: the env cannot render frames; no video written to %s", path)
            return None
        import imageio.v2 as imageio

        Path(path).parent.mkdir(parents=True, exist_ok=True)
        imageio.mimwrite(str(path), self.frames, fps=max(1, int(round(fps))), macro_block_size=1)
        return str(path)


def round_fits(now: float, deadline: float | None, round_s: float) -> bool:
    """Whether a round of ``round_s`` started at ``now`` ends by ``deadline`` (None: no bound).

    >>> round_fits(10.0, 20.0, 9.5), round_fits(10.0, 20.0, 10.5), round_fits(10.0, None, 99.0)
    (True, False, True)
    """
    return deadline is None or now + round_s <= deadline


@dataclass
class EvalCut:
    """Splits the deadline cut short, for one message over all splits.

    >>> c = EvalCut()
    >>> c.add("id", 25, 50, round_s=48.0, left_s=20.0)
    >>> c.message()
    'eval cut by the time budget: id 25 of 50 episodes (a round took 48 s, 20 s were left)'
    """

    splits: dict[str, tuple[int, int]] = field(default_factory=dict)
    round_s: float = 0.0
    left_s: float = 0.0

    def add(self, split: str, done: int, planned: int, round_s: float, left_s: float) -> None:
        self.splits[split] = (done, planned)
        self.round_s, self.left_s = max(self.round_s, round_s), left_s

    def message(self) -> str:
        parts = ", ".join(f"{s} {d} of {n} episodes" for s, (d, n) in self.splits.items())
        return (
            f"eval cut by the time budget: {parts} (a round took {self.round_s:.0f} s, "
            f"{max(0.0, self.left_s):.0f} s were left)"
        )


def _bar(total: int, desc: str, enabled: bool) -> Any:
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="ep", dynamic_ncols=True, leave=False)


def evaluate_policy(
    policy: Policy,
    env_name: str,
    env_kwargs: dict[str, Any],
    episodes: int,
    seed: int,
    num_envs: int = 25,
    video_path: str | None = None,
    video_episodes: int = 2,
    deadline: float | None = None,
    progress: bool = False,
    desc: str = "eval",
    cut: EvalCut | None = None,
    deterministic: bool = True,
) -> dict[str, Any]:
    """Episodes on held-out seeds ``seed + ...`` (the policy's mode, or with ``deterministic``
    false its sampled actions); see the module docstring. A deadline's cut is added to ``cut``
    (for the caller's one message) or logged here."""
    n = max(1, min(num_envs, episodes))
    env = build_env(env_name, n, **env_kwargs)
    recorder = _Recorder(min(video_episodes, n)) if video_path else None
    results: list[dict[str, np.ndarray]] = []
    rounds = (episodes + n - 1) // n
    bar = _bar(episodes, desc, progress)
    longest = 0.0
    try:
        for rnd in range(rounds):
            now = time.perf_counter()
            if rnd and not round_fits(now, deadline, longest):
                assert deadline is not None
                own = cut is None
                cut = cut if cut is not None else EvalCut()
                cut.add(
                    desc.removeprefix("eval ").strip(), rnd * n, episodes, longest, deadline - now
                )
                if own:
                    log.warning("%s", cut.message())
                break
            rec = recorder if rnd < VIDEO_ROUNDS else None
            results.append(_run_round(policy, env, seed + rnd * n, rec, deterministic))
            longest = max(longest, time.perf_counter() - now)
            if rec is not None:
                rec.end_round()
            if bar is not None:
                bar.update(min(n, episodes - rnd * n))
    finally:
        env.close()
        if bar is not None:
            bar.close()
    done = min(episodes, len(results) * n)
    take = lambda key: np.concatenate([r[key] for r in results])[:done]  # noqa: E731
    out: dict[str, Any] = {
        "success_rate": float(take("success").mean()),
        "episodes": done,
        "episode_return": float(take("return").mean()),
        "episode_length": float(take("length").mean()),
    }
    for key, name in EPISODE_PEAKS.items():
        if not all(key in r for r in results):
            continue
        peaks = take(key)
        if np.isfinite(peaks).any():  # the env reports it: its median and worst episode
            out[f"{name}_median"] = float(np.nanmedian(peaks))
            out[f"{name}_max"] = float(np.nanmax(peaks))
    if recorder is not None and video_path:
        out["video"] = recorder.write(video_path, env.spec.control_hz)
    return out


def split_kwargs(cfg: Any, split: str) -> dict[str, Any]:
    """Env kwargs of an eval split: the training env plus ``ood=<split>`` unless in-distribution."""
    return cfg.env.factory_kwargs(**({} if split in IN_DISTRIBUTION else {"ood": split}))


def _apply_overrides(config: dict[str, Any], overrides: dict[str, Any] | None) -> dict[str, Any]:
    """``{"env.num_envs": 4}`` or nested ``{"env": {"num_envs": 4}}`` onto a config dict."""
    out = copy.deepcopy(config)
    for key, value in (overrides or {}).items():
        node = out
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        if isinstance(value, dict) and isinstance(node.get(leaf), dict):
            node[leaf] = _apply_overrides(node[leaf], value)
        else:
            node[leaf] = value
    return out


def _names(overrides: dict[str, Any] | None, section: str, key: str) -> bool:
    """Whether ``overrides`` set ``section.key``, dotted or nested."""
    o = overrides or {}
    return f"{section}.{key}" in o or isinstance(o.get(section), dict) and key in o[section]


def checkpoint_config(meta: dict[str, Any], overrides: dict[str, Any] | None = None) -> Any:
    """The typed config of the run that wrote a checkpoint, built by that run's runner.

    Why the registry: every embodied runner (``embodied`` PPO/GRPO, ``offpolicy`` SAC/RLPD/CrossQ,
    ``offline`` BC/IQL/DAgger) has its own config class, and only that class accepts the stored
    config (an off-policy config has ``replay``, an offline one ``data``). They share the ``env``
    and ``eval`` sections, which are all evaluation reads. Checkpoints from before ``runner`` was
    recorded are ``embodied``.
    """
    from learner.runners.registry import get_runner

    config = meta.get("config") or {}
    name = meta.get("runner") or config.get("runner") or "embodied"
    spec = get_runner(name)  # an unknown name raises UnknownNameError listing the runners
    merged = _apply_overrides(config, overrides)
    if (
        _names(overrides, "env", "name")
        and not _names(overrides, "eval", "env")
        and (merged.get("eval") or {}).get("env")
    ):
        # the run trained on one env and evaluated on another (``eval.env``); a user who now says
        # ``env.name=...`` means the env to evaluate in, not the stored eval env
        log.info(
            "eval: env.name=%s given, so the run's eval.env=%s is not used",
            merged["env"]["name"],
            merged["eval"]["env"],
        )
        merged["eval"]["env"] = ""
    cfg = from_dict(spec.config_cls, merged)
    if not hasattr(cfg, "env") or not hasattr(cfg, "eval"):
        raise ConfigError(
            f"checkpoint {meta.get('path', '?')}: runner {name!r} has no simulated env to evaluate "
            "in (its config has no 'env' / 'eval' sections)"
        )
    return cfg


def evaluate_config(
    policy: Policy,
    cfg: Any,
    episodes: int,
    seed: int,
    ood_splits: list[str] | None = None,
    video_path: str | None = None,
    deadline: float | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Per-split results ``{split: {success_rate, episode_return, ...}}`` for a policy and
    config."""
    results: dict[str, Any] = {}
    cut = EvalCut()
    for i, split in enumerate(ood_splits or cfg.eval.ood_splits):
        video = None
        if video_path:
            video = (
                video_path
                if i == 0
                else str(Path(video_path).with_name(f"{Path(video_path).stem}_{split}.mp4"))
            )
        results[split] = evaluate_policy(
            policy,
            cfg.eval.env or cfg.env.name,
            split_kwargs(cfg, split),
            episodes,
            cfg.eval.seed_offset + seed * 100_000,
            cfg.eval.num_envs,
            video,
            cfg.eval.video_episodes,
            deadline,
            progress,
            f"eval {split}",
            cut,
            cfg.eval.deterministic,
        )
        log.info(
            "eval split %-10s success %.3f over %d episodes",
            split,
            results[split]["success_rate"],
            results[split]["episodes"],
        )
    if cut.splits:
        log.warning("%s", cut.message())
    return results


def final_eval(cfg: Any, checkpoint: str | Path, deadline: float | None = None) -> dict[str, Any]:
    """Held-out success of a run's last checkpoint (its deterministic actor, or with
    ``eval.deterministic`` false its sampled actions), ``eval.episodes`` per split, on the run's
    own config: the closing figure every training runner adds to its metrics
    (``train.final_eval``). A video goes to ``<out_dir>/eval.mp4`` with ``eval.video``; rounds
    that would end past ``deadline`` (the run's time budget) are not started."""
    policy, _ = load_policy(checkpoint)
    video = str(Path(cfg.train.out_dir) / "eval.mp4") if cfg.eval.video else None
    return evaluate_config(
        policy,
        cfg,
        cfg.eval.episodes,
        seed=0,
        video_path=video,
        deadline=deadline,
        progress=cfg.train.progress,
    )


def evaluate_checkpoint(
    path: str,
    episodes: int | None = None,
    seed: int | None = None,
    ood_splits: list[str] | None = None,
    video_path: str | None = None,
    overrides: dict | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Load a checkpoint and evaluate it on held-out seeds, per OOD split.

    ``episodes`` / ``ood_splits`` default to the checkpoint config's ``eval`` section, ``seed`` to
    0 (seeds are always offset by ``eval.seed_offset``, far from training seeds). ``video_path``
    defaults to ``<checkpoint>/eval.mp4`` for library callers; pass ``""`` for no video
    (``rlinf eval`` always passes a path in its own output folder). ``overrides`` changes the stored
    training config (``{"eval.num_envs": 10}`` or nested dicts).

    Any embodied runner's checkpoint (:func:`checkpoint_config`). Returns ``{"checkpoint", "runner",
    "iteration", "seed", "episodes", "splits": {split: {success_rate,
    episode_return, episode_length, episodes, video?}}, "success_rate": {split: rate}}``.
    """
    policy, meta = load_policy(path)
    cfg = checkpoint_config(meta, overrides)
    episodes = episodes if episodes is not None else int(cfg.eval.episodes)
    seed = seed if seed is not None else 0
    if video_path is None:
        video_path = str(Path(meta["path"]) / "eval.mp4")
    splits = evaluate_config(
        policy, cfg, episodes, seed, ood_splits, video_path or None, progress=progress
    )
    return {
        "checkpoint": meta["path"],
        "runner": cfg.runner,
        "iteration": meta["iteration"],
        "seed": seed,
        "episodes": episodes,
        "splits": splits,
        "success_rate": {k: v["success_rate"] for k, v in splits.items()},
    }
