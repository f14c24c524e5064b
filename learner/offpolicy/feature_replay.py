"""A replay storing a frozen encoder's features instead of pixels (``model.encoder.kind: frozen``).

Why: with a frozen pretrained backbone the expensive part of a pixel update -- the convs on
every sampled image, twice (``obs`` and ``next_obs``) -- always gives the same answer for a
frame, so :class:`FeatureReplay` runs the backbone once per frame, when the frame enters the
replay, and stores the result. An update then reads flat vectors and costs about a state update
plus the encoder's small head (:func:`learner.models.encoder_kinds.encode_cached`).

Rows: the inner :class:`~rlinf_data.replay.ReplayBuffer` holds one flat ``state`` per observation,
``[proprioceptive state | view_0 | ... | view_{K-1}]`` with ``K = model.encoder.cached_views``
views of ``feature_dim`` floats each, and no cameras. A step of ``B`` streams encodes only the
frames that are new: the ``next_obs`` of every stream and the ``obs`` of a stream that starts an
episode (otherwise its ``obs`` is the ``next_obs`` encoded one step before, whose features are
kept) -- so each frame goes through the backbone exactly once.

Augmentation (DrQ for cached features): view 0 is the frame itself, views ``1..K-1`` are random
shifts of up to ``model.augment_pad`` px, all computed in that one backbone pass; every sample
reads one view of its ``obs`` and, independently, one of its ``next_obs``, as DrQ shifts the two
independently. Shifting at update time would need the backbone per update, which is the cost the
cache removes; ``K`` views keep most of the regulariser for ``K x`` the row size (4 views of two
cameras of 64 keypoint coordinates: 2 KB a row, 200 MB per 100k rows).

Where the backbone runs (``model.encoder.features_on``): with env workers, each worker runs it
over its finished episode's frames (:class:`FrameFeatures`, the same frozen weights) and ships
the views beside the episode, so the learner's core is left to the updates; otherwise (one
process, robots streaming) the replay runs it as frames arrive.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import torch

from learner.models.encoder_kinds import feature_rng
from rlinf_contracts.episode import Episode, StepLayout
from rlinf_data.replay import ReplayBuffer, ReplayConfig, restore_routed


class FrameFeatures:
    """The frozen backbone's cached views of frames: ``[n, K * feature_dim]`` per batch of
    observations, shifts drawn from ``seed``. One object encodes for the replay or, on an env
    worker, for the episodes it ships (:meth:`episode`), so both sides cut the same rows."""

    def __init__(
        self, pixels: Any, cameras: list[str], views: int = 1, pad: int = 0, seed: int = 0
    ) -> None:
        self.pixels, self.cameras = pixels, list(cameras)
        self.views, self.pad = int(views), int(pad)
        self.dim = self.views * int(pixels.feature_dim)
        self.generator = feature_rng(seed)

    def __call__(self, images: dict[str, np.ndarray]) -> np.ndarray:
        """``[n, K * feature_dim]`` of ``n`` observations' frames (one backbone pass)."""
        imgs = [torch.as_tensor(np.asarray(images[c], np.uint8)) for c in self.cameras]
        if not len(imgs[0]):
            return np.zeros((0, self.dim), np.float32)
        feats = self.pixels.cached_views(imgs, self.views, self.pad, self.generator)
        return feats.numpy().astype(np.float32)

    def episode(self, episode: Episode) -> np.ndarray:
        """``[len(episode) (+1 with a final observation), K * feature_dim]``: every frame of
        ``episode``, the final one last, in batches of 256 frames."""
        images = {c: np.asarray(episode.steps[f"images/{c}"]) for c in self.cameras}
        if episode.final is not None:
            images = {
                c: np.concatenate([v, episode.final[f"images/{c}"][None]])
                for c, v in images.items()
            }
        n = len(images[self.cameras[0]])
        return np.concatenate(
            [self({c: v[i : i + 256] for c, v in images.items()}) for i in range(0, n, 256)]
            or [np.zeros((0, self.dim), np.float32)]
        )


class FeatureReplay:
    """:class:`ReplayBuffer`'s interface over feature rows; see the module docstring."""

    def __init__(
        self,
        layout: StepLayout,
        cfg: ReplayConfig,
        pixels: Any,
        cameras: list[str],
        views: int = 1,
        pad: int = 0,
        seed: int = 0,
    ) -> None:
        self.layout, self.cameras = layout, list(cameras)
        self.frames = FrameFeatures(pixels, cameras, views, pad, seed)
        self.views = self.frames.views
        self.state_dim, self.feature_dim = layout.state_dim, int(pixels.feature_dim)
        self.row_layout = StepLayout(self.state_dim + self.frames.dim, layout.action_dim, {})
        self.inner = ReplayBuffer(self.row_layout, cfg)
        self.cfg = self.inner.cfg
        # source -> (flat rows of the last step's next_obs, which streams go on from them)
        self._last: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    # ------------------------------------------------------------------ sizes
    @property
    def rings(self) -> dict[str, Any]:
        return self.inner.rings

    def __len__(self) -> int:
        return len(self.inner)

    def size(self, source: str) -> int:
        return self.inner.size(source)

    # ----------------------------------------------------------------- adding
    def encode(self, state: np.ndarray, images: dict[str, np.ndarray]) -> np.ndarray:
        """Flat rows ``[n, state | K views]`` of ``n`` observations (one backbone pass)."""
        state = np.asarray(state, np.float32)
        if not len(state):
            return np.zeros((0, self.row_layout.state_dim), np.float32)
        return np.concatenate([state, self.frames(images)], axis=1)

    def add(
        self,
        source: str,
        obs: dict[str, Any],
        action: np.ndarray,
        reward: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        next_obs: dict[str, Any],
        intervention: np.ndarray | None = None,
    ) -> None:
        """:meth:`ReplayBuffer.add` of one vector-env step, frames encoded once each."""
        b = len(action)
        flat = np.zeros((b, self.row_layout.state_dim), np.float32)
        last, going = self._last.get(source, (None, np.zeros(b, bool)))
        if last is not None and len(last) == b:
            flat[going] = last[going]
        else:
            going = np.zeros(b, bool)
        fresh = np.flatnonzero(~going)
        if len(fresh):
            flat[fresh] = self.encode(
                np.asarray(obs["state"])[fresh],
                {c: np.asarray(obs["images"][c])[fresh] for c in self.cameras},
            )
        flat_next = self.encode(next_obs["state"], next_obs["images"])
        ended = np.asarray(terminated, bool) | np.asarray(truncated, bool)
        self._last[source] = (flat_next, ~ended)
        self.inner.add(
            source,
            {"state": flat},
            action,
            reward,
            terminated,
            truncated,
            {"state": flat_next},
            intervention,
        )

    def add_episode(
        self, episode: Episode, source: str, features: np.ndarray | None = None
    ) -> None:
        """:meth:`ReplayBuffer.add_episode` with every frame (final one included) encoded once:
        here, or already by an env worker (``features``, :meth:`FrameFeatures.episode`'s rows)."""
        s, n = episode.steps, len(episode)
        if n == 0:
            return
        rows = n + (episode.final is not None)
        if features is None:
            features = self.frames.episode(episode)
        elif np.shape(features) != (rows, self.frames.dim):
            raise ValueError(
                f"an episode of {rows} frames came with features {np.shape(features)}; the "
                f"replay caches {self.views} views of {self.feature_dim} per frame "
                f"({(rows, self.frames.dim)}): env workers and learner disagree on "
                "model.encoder"
            )
        state = np.asarray(s["state"], np.float32)
        if episode.final is not None:
            state = np.concatenate([state, np.asarray(episode.final["state"], np.float32)[None]])
        flat = np.concatenate([state, np.asarray(features, np.float32)], axis=1)
        steps = {k: v for k, v in s.items() if k != "state" and not k.startswith("images/")}
        steps["state"] = flat[:n]
        final = None if episode.final is None else {"state": flat[n]}
        self.inner.add_episode(Episode(episode.info, steps, final), source)

    def restore(self, episodes: Iterable[Episode]) -> int:
        """:meth:`ReplayBuffer.restore`, every frame encoded on the way in (:meth:`add_episode`)."""
        return restore_routed(self, episodes)

    # --------------------------------------------------------------- sampling
    def pick_view(self, flat: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``[n, state | K views]`` -> ``[n, state | one view]``, a random view per row."""
        n, f = len(flat), self.feature_dim
        view = rng.integers(0, self.views, size=n) if self.views > 1 else np.zeros(n, np.int64)
        cols = self.state_dim + view[:, None] * f + np.arange(f)[None, :]
        return np.concatenate([flat[:, : self.state_dim], np.take_along_axis(flat, cols, 1)], 1)

    def sample(self, batch_size: int, rng: np.random.Generator) -> dict[str, Any]:
        """:meth:`ReplayBuffer.sample` whose ``state`` is ``[state | features of one view]``
        (views drawn independently for ``obs`` and ``next_obs``) and with no images."""
        out = self.inner.sample(batch_size, rng)
        for key in ("obs", "next_obs"):
            out[key] = {"state": self.pick_view(out[key]["state"], rng), "images": {}}
        return out


def replay_for(
    layout: StepLayout, cfg: ReplayConfig, policy: Any, model_cfg: Any, seed: int
) -> ReplayBuffer | FeatureReplay:
    """The replay of a run: a :class:`FeatureReplay` when the policy's encoder caches features
    (``model.encoder.kind: frozen``), else the pixel (or state) :class:`ReplayBuffer`."""
    pixels = policy.encoder.pixels
    if not getattr(pixels, "caches_features", False):
        return ReplayBuffer(layout, cfg)
    return FeatureReplay(
        layout,
        cfg,
        pixels,
        policy.encoder.cameras,
        views=model_cfg.encoder.cached_views,
        pad=model_cfg.augment_pad,
        seed=seed,
    )


__all__ = ["FeatureReplay", "FrameFeatures", "replay_for"]
