"""Encoder pretraining runner (``runner: encoder_pretrain``): a frozen-encoder backbone, learnt
self-supervised from recorded camera frames, for ``model.encoder: {kind: frozen, weights: DIR}``::

    episode stores (demos + random play) --> frames per camera (final observations included)
        --> split by episode --> deep spatial autoencoder (learner.algorithms.spatial_autoencoder)
        [+ demo steps (frames, state, action) --> their actions, predicted from the points]
        --> checkpoint of the backbone alone (model.safetensors: what model.encoder.weights loads)

No pretrained vision weights are downloaded: the frames of the task's own scene are the data, so
the keypoints learn the cube, the goal marker and the gripper this scene draws. The checkpoint is
the one format (``learner.checkpoint``; model ``keypoint_backbone`` and its ``channels``), and
the run directory holds ``metrics.json`` / ``curves.png`` like every runner's.
``rlinf train configs/encoder_pretrain.yaml``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from learner.algorithms.keypoint_decoders import DECODERS, DEFAULT_DECODER
from learner.algorithms.spatial_autoencoder import (
    ActionTargets,
    AutoencoderConfig,
    SpatialAutoencoderLearner,
)
from learner.cluster import ClusterConfig
from learner.models.encoder_kinds import KeypointBackbone
from learner.runners.budget import Budget
from learner.runners.fit import Every, Rows, fit
from learner.runners.registry import RUNNERS, RunnerSpec
from learner.sections import RunConfig, TrainLoopConfig
from learner.sections import h as _h
from rlinf_contracts.config import ConfigError
from rlinf_contracts.registry import did_you_mean
from rlinf_data.demos import open_demos

log = logging.getLogger(__name__)
MODEL_NAME = "keypoint_backbone"


@dataclass
class PretrainData:
    stores: list[str] = field(
        default_factory=list,
        metadata=_h(
            "episode stores (or LeRobot datasets) whose frames are the data: the RL run's demos "
            "plus random play ('rlinf collect ENV --noise 2.0 --obs-mode rgb ...')"
        ),
    )
    cameras: list[str] = field(
        default_factory=list,
        metadata=_h("cameras to learn from ([] = every camera of the first episode)"),
    )
    val_fraction: float = field(
        default=0.1, metadata=_h("share of episodes held out for the validation loss")
    )
    max_frames: int = field(
        default=50_000, metadata=_h("most frames read per camera (the rest are left out)")
    )
    action_stores: list[str] = field(
        default_factory=list,
        metadata=_h(
            "episode stores whose steps (frames, state, action) also train the backbone to "
            "predict the demonstrated action (the RL run's demos; needs train.action_weight > 0)"
        ),
    )

    def validate(self) -> None:
        if not self.stores:
            raise ConfigError("key 'data.stores' is required: episode stores with camera frames")
        if not 0.0 < self.val_fraction < 1.0 or self.max_frames < 2:
            raise ConfigError(
                f"keys 'data.val_fraction' (in (0, 1)) / 'data.max_frames' (>= 2) out of range: "
                f"{self.val_fraction}, {self.max_frames}"
            )


@dataclass
class PretrainModel:
    channels: list[int] = field(
        default_factory=lambda: [16, 16, 32],
        metadata=_h(
            "backbone conv channels (first stride 2, then stride 1; keypoints = the last); the "
            "RL config's model.encoder.channels must equal them"
        ),
    )

    def validate(self) -> None:
        if not self.channels or min(self.channels) < 1:
            raise ConfigError(f"key 'model.channels' needs positive sizes, got {self.channels}")


@dataclass
class PretrainTrain(TrainLoopConfig):
    updates: int = field(default=3000, metadata=_h("Adam steps"))
    batch_size: int = field(default=64, metadata=_h("frames per update (per camera)"))
    lr: float = field(default=1e-3, metadata=_h("Adam learning rate"))
    target_size: int = field(
        default=32, metadata=_h("side of the downsampled frame the decoder reconstructs")
    )
    pad: int = field(default=4, metadata=_h("random shift of the input frames, px (0 = off)"))
    foreground_weight: float = field(
        default=0.0,
        metadata=_h(
            "extra loss weight of pixels that differ from the batch's median frame, so small "
            "moving objects are reconstructed, not only the arm and table (0 = plain MSE)"
        ),
    )
    decoder: str = field(
        default=DEFAULT_DECODER,
        metadata=_h(
            "how the keypoints are drawn back into the frame: linear (Finn et al.: one linear "
            "map) | heatmap (a Gaussian blob per point, painted by a small CNN: the points must "
            "sit on what they draw)"
        ),
    )
    action_weight: float = field(
        default=0.0,
        metadata=_h(
            "weight of the demo-action loss beside reconstruction (0 = reconstruction only; "
            "> 0 needs data.action_stores)"
        ),
    )
    action_batch_size: int = field(default=64, metadata=_h("demo steps per update"))
    log_every: int = field(default=250, metadata=_h("updates between metrics rows (val loss)"))
    time_budget_s: float | None = field(
        default=None, metadata=_h("stop training after this many seconds (null = no bound)")
    )
    out_dir: str = field(
        default="runs/encoder_pretrain",
        metadata=_h("run directory: checkpoints/ (the backbone), metrics.json, curves.png"),
    )

    def validate(self) -> None:
        if (
            min(
                self.updates,
                self.batch_size,
                self.log_every,
                self.target_size,
                self.action_batch_size,
            )
            < 1
            or self.pad < 0
            or self.foreground_weight < 0
            or self.action_weight < 0
        ):
            raise ConfigError(
                "keys 'train.updates', 'train.batch_size', 'train.action_batch_size', "
                "'train.log_every', 'train.target_size' must be >= 1, 'train.pad', "
                "'train.foreground_weight' and 'train.action_weight' >= 0"
            )
        if self.time_budget_s is not None and self.time_budget_s <= 0:
            raise ConfigError(f"key 'train.time_budget_s' must be > 0, got {self.time_budget_s}")
        known = DECODERS.names()
        if self.decoder not in known:
            raise ConfigError(
                f"key 'train.decoder'={self.decoder!r} is unknown"
                f"{did_you_mean(self.decoder, known)}; choose one of {known}"
            )


@dataclass
class EncoderPretrainConfig(RunConfig):
    """Encoder pretraining (``runner: encoder_pretrain``): one local process, no env."""

    runner: str = field(default="encoder_pretrain", metadata=_h("runner registry name"))
    name: str = field(default="encoder_pretrain", metadata=_h("run name (logs)"))
    seed: int = field(default=0, metadata=_h("global seed"))
    cluster: ClusterConfig = field(
        default_factory=ClusterConfig, metadata=_h("unused: one local process")
    )
    placement: dict[str, str | int] = field(
        default_factory=lambda: {"learner": "0"}, metadata=_h("learner -> slot")
    )
    data: PretrainData = field(default_factory=PretrainData, metadata=_h("frames to learn from"))
    model: PretrainModel = field(default_factory=PretrainModel, metadata=_h("backbone"))
    train: PretrainTrain = field(default_factory=PretrainTrain, metadata=_h("loop, outputs"))

    def validate(self) -> None:
        if (self.train.action_weight > 0) != bool(self.data.action_stores):
            raise ConfigError(
                "keys 'train.action_weight' and 'data.action_stores' go together: the demo-action "
                f"loss needs demo stores and a weight > 0 (got weight {self.train.action_weight}, "
                f"stores {self.data.action_stores})"
            )


def require_store(store: str, key: str) -> None:
    """A store the config names that is not on disk: say which, and where its command is.

    >>> require_store("/nonexistent/frames", "data.stores")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rlinf_contracts.config.errors.ConfigError: key 'data.stores': /nonexistent/frames does not ...
    """
    if not Path(store).exists():
        raise ConfigError(
            f"key {key!r}: {store} does not exist; record it with 'rlinf collect' first (a "
            "shipped config's header gives the command for each store it names)"
        )


def read_frames(stores: list[str], cameras: list[str], max_frames: int) -> dict[str, Any]:
    """``{"images": {cam: uint8 [N, H, W, 3]}, "episode": [N], "cameras": [...]}`` of every
    observation (final ones included) of the episodes in ``stores``, at most ``max_frames``."""
    cams = list(cameras)
    images: dict[str, list[np.ndarray]] = {}
    episode: list[np.ndarray] = []
    n = ep_id = 0
    for store in stores:
        need = [f"images/{c}" for c in cams] if cams else ["camera"]
        hint = "record frames with 'rlinf collect ENV --obs-mode rgb cameras=[...]'"
        require_store(store, "data.stores")
        for ep in open_demos(store, key="data.stores", need=need, hint=hint).each():
            cams = cams or sorted(ep.info.layout.cameras)
            for c in cams:
                frames = ep.steps[f"images/{c}"]
                if ep.final is not None:
                    frames = np.concatenate([frames, ep.final[f"images/{c}"][None]])
                images.setdefault(c, []).append(frames[: max_frames - n])
            k = len(images[cams[0]][-1])
            episode.append(np.full(k, ep_id))
            n, ep_id = n + k, ep_id + 1
            if n >= max_frames:
                break
        if n >= max_frames:
            break
    return {
        "cameras": cams,
        "images": {c: np.concatenate(v) for c, v in images.items()},
        "episode": np.concatenate(episode),
    }


def read_demo_steps(stores: list[str], cameras: list[str]) -> dict[str, np.ndarray]:
    """``{camera: uint8 [N, H, W, 3], "state": [N, S], "action": [N, A], "episode": [N]}`` of
    every step of the episodes in ``stores`` (a final observation has no action)."""
    need = [*(f"images/{c}" for c in cameras), "state", "action"]
    hint = "record demos with 'rlinf collect ENV --obs-mode rgb cameras=[...]'"
    cols: dict[str, list[np.ndarray]] = {k: [] for k in (*cameras, "state", "action", "episode")}
    ep_id = 0
    for store in stores:
        require_store(store, "data.action_stores")
        for ep in open_demos(store, key="data.action_stores", need=need, hint=hint).each():
            for c in cameras:
                cols[c].append(ep.steps[f"images/{c}"])
            cols["state"].append(np.asarray(ep.steps["state"], np.float32))
            cols["action"].append(np.asarray(ep.steps["action"], np.float32))
            cols["episode"].append(np.full(len(ep.steps["action"]), ep_id))
            ep_id += 1
    if ep_id < 2:
        raise ConfigError(
            f"key 'data.action_stores': {ep_id} episode(s) in {stores}; the demo-action loss "
            "needs at least 2 (one is held out for validation)"
        )
    return {k: np.concatenate(v) for k, v in cols.items()}


def action_targets(steps: dict[str, np.ndarray]) -> ActionTargets:
    """The proprioception scale and action size of the demo steps (zeroed features stay 0)."""
    state = torch.as_tensor(steps["state"])
    return ActionTargets(state.mean(0), state.std(0).clamp_min(1e-3), int(steps["action"].shape[1]))


def run(cfg: EncoderPretrainConfig, cluster: Any) -> dict[str, Any]:
    """Pretrain, validate, checkpoint the backbone; returns the final metrics."""
    from learner.checkpoint import write_checkpoint
    from learner.metrics import checkpoint_dir, write_run
    from learner.runners.reward_classifier import split_by_episode
    from rlinf_contracts.config import to_dict

    t0 = time.perf_counter()
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    data = read_frames(cfg.data.stores, cfg.data.cameras, cfg.data.max_frames)
    cams, images = data["cameras"], data["images"]
    train, val = split_by_episode(data["episode"], cfg.data.val_fraction, rng)
    val = val[rng.permutation(len(val))[:512]]  # a fixed validation batch
    backbone = KeypointBackbone(tuple(cfg.model.channels))
    t = cfg.train
    demos = read_demo_steps(cfg.data.action_stores, cams) if t.action_weight > 0 else None
    algo = SpatialAutoencoderLearner(
        backbone,
        backbone.out_dim,
        cams,
        AutoencoderConfig(
            lr=t.lr,
            target_hw=(t.target_size, t.target_size),
            pad=t.pad,
            seed=cfg.seed,
            foreground_weight=t.foreground_weight,
            action_weight=t.action_weight,
            decoder=t.decoder,
        ),
        action_targets(demos) if demos is not None else None,
    )

    def frames(rows: np.ndarray) -> dict[str, Any]:
        return {c: torch.as_tensor(images[c][rows]) for c in cams}

    demo_train, demo_val = np.zeros(0, int), np.zeros(0, int)
    if demos is not None:
        demo_train, demo_val = split_by_episode(demos["episode"], cfg.data.val_fraction, rng)

    def demo_steps(rows: np.ndarray) -> dict[str, torch.Tensor]:
        assert demos is not None
        return {k: torch.as_tensor(demos[k][rows]) for k in (*cams, "state", "action")}

    def draw() -> dict[str, Any]:
        batch = frames(rng.choice(train, size=t.batch_size))
        if demos is not None:
            batch["demo"] = demo_steps(rng.choice(demo_train, size=t.action_batch_size))
        return batch

    rows = Rows(t0=t0)
    val_batch = frames(val)

    def log_row(step: int, metrics: dict[str, float]) -> None:
        rows.extra = {"val/recon_mse": algo.evaluate(val_batch)}
        if demos is not None:
            rows.extra["val/action_mse"] = algo.evaluate_actions(demo_steps(demo_val))
        rows(step, metrics)
        log.info(
            "update %d: loss %.5f, %s",
            step,
            metrics["loss"],
            ", ".join(f"{k} {v:.5f}" for k, v in rows.extra.items()),
        )

    steps, _ = fit(
        algo, draw, t.updates, [Every(t.log_every, log_row)], Budget(t.time_budget_s, t0)
    )
    final_row = rows.history[-1]
    metrics = {
        "val_recon_mse": final_row["val/recon_mse"],
        **({"val_action_mse": final_row["val/action_mse"]} if demos is not None else {}),
        "train_loss": final_row["train/loss"],
        "frames": int(len(data["episode"])),
        "val_frames": int(len(val)),
        "updates": steps,
        "elapsed_s": time.perf_counter() - t0,
    }
    out = Path(t.out_dir)
    ckpt = write_checkpoint(
        checkpoint_dir(out, steps),
        backbone.state_dict(),
        {"name": MODEL_NAME, "kwargs": {"channels": list(cfg.model.channels)}},
        iteration=steps,
        weight_version=1,
        config=to_dict(cfg),
        metrics=metrics,
        extra={"cameras": cams},
    )
    metrics.update(checkpoint=str(ckpt), iterations=steps)
    return write_run(out, "encoder_pretrain", metrics, rows.history, title=cfg.name)


RUNNERS.add(
    "encoder_pretrain",
    RunnerSpec(config_cls=EncoderPretrainConfig, run=run, in_process=lambda cfg, slots: True),
)

__all__ = ["EncoderPretrainConfig", "read_demo_steps", "read_frames", "run"]
