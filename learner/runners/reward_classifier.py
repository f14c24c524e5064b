"""Reward classifier runner (``runner: reward_classifier``): a binary success classifier on
camera frames (+ optional state) from the episode store, served in the loop as a policy::

    episode store --> labelled frames (episode success, last k observations) --> split by episode
                  --> small CNN (BCE, positives re-weighted) --> val accuracy --> checkpoint

A frame is positive when it is one of the last ``data.last_k`` observations of a successful
episode (the final observation counts as the last one); the ``data.margin`` frames just before
them are left out (almost there: neither label), every other frame is negative. The
split is by episode, so near-identical neighbouring frames never sit on both sides. The
labelled episodes may come from several stores (``data.extra_stores``: policy rollouts or noisy
teleop, whose failed episodes are the near misses a policy would learn to exploit). The image
part is a small CNN trained with the head or, with ``model.backbone``, the frozen keypoint
backbone of the pixel encoder (its features computed once per frame, then only the head trains).
Validation reports, besides accuracy, the false-positive and false-negative rates per frame and
the share of failed held-out episodes with a frame called success. The
checkpoint is an ordinary policy checkpoint (model ``success_classifier``, one "action" =
``p_success``): ``rlinf serve --checkpoint RUN_DIR`` serves it, and the robot PC's reward node
(``rlinf_ros/nodes/reward.py``) asks it over the policy wire.
``rlinf train configs/reward_classifier.yaml``.

Retrained during an online run (``push.url``: the served classifier, the reward node's): the
operator's verdicts on the classifier's successes (the reward node's ``reward.corrections_dir``,
an episode store of the frames that fired each one) join ``data.extra_stores``, and the new
weights are pushed to the running ``rlinf serve`` of the previous classifier, which swaps them in
between two requests: the reward changes without a restart, and a rejected "success" becomes a
negative within minutes (HIL-SERL's false-positive corrections).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from learner.cluster import ClusterConfig
from learner.models import PolicySpec, build_policy, obs_to_tensors
from learner.models.encoder_kinds import load_weights
from learner.offline.supervised import ClassifierLearner
from learner.offpolicy.robot_sections import PushSection
from learner.runners.budget import Budget
from learner.runners.fit import Every, fit
from learner.runners.registry import RUNNERS, RunnerSpec
from learner.sections import RunConfig, TrainLoopConfig
from learner.sections import h as _h
from rlinf_contracts.config import ConfigError
from rlinf_contracts.registry import did_you_mean
from rlinf_data.demos import open_demos

log = logging.getLogger(__name__)


@dataclass
class ClassifierData:
    store: str = field(
        default="", metadata=_h("episode store of labelled episodes (rlinf collect ... --out DIR)")
    )
    extra_stores: list[str] = field(
        default_factory=list,
        metadata=_h(
            "more labelled episode stores, labelled the same way: recorded policy rollouts or "
            "noisy teleop, whose failed episodes are the near misses a policy would exploit"
        ),
    )
    camera: str = field(
        default="", metadata=_h("camera to classify ('' = the store's first camera)")
    )
    use_state: bool = field(default=False, metadata=_h("also feed the state vector to the head"))
    last_k: int = field(
        default=1, metadata=_h("positives: the last k observations of a successful episode")
    )
    margin: int = field(
        default=0,
        metadata=_h(
            "frames of a successful episode just before its positives are "
            "left out (neither label: the arm is almost there)"
        ),
    )
    val_fraction: float = field(
        default=0.2, metadata=_h("share of episodes held out for validation")
    )

    def validate(self) -> None:
        if not self.store:
            raise ConfigError("key 'data.store' is required: the episode store to learn from")
        if not all(isinstance(x, str) and x for x in self.extra_stores):
            raise ConfigError(
                f"key 'data.extra_stores' must be a list of episode store paths, got "
                f"{self.extra_stores!r}"
            )
        if self.last_k < 1 or self.margin < 0 or not 0.0 < self.val_fraction < 1.0:
            raise ConfigError(
                "keys 'data.last_k' >= 1, 'data.margin' >= 0 and 'data.val_fraction' in (0, 1)"
            )


@dataclass
class ClassifierModel:
    channels: list[int] = field(
        default_factory=lambda: [16, 32, 32], metadata=_h("conv channels (stride 2 each)")
    )
    hidden: int = field(default=64, metadata=_h("MLP head width"))
    backbone: str = field(
        default="",
        metadata=_h(
            "frozen pretrained keypoint backbone read by the head instead of the small CNN: the "
            "run directory of 'rlinf train configs/encoder_pretrain.yaml', a .safetensors or "
            "torch file ('' = the CNN, trained with the head)"
        ),
    )
    backbone_channels: list[int] = field(
        default_factory=lambda: [16, 16, 32],
        metadata=_h("conv channels of model.backbone (those its weights were trained with)"),
    )
    backbone_kind: str = field(
        default="keypoints",
        metadata=_h(
            "the network of model.backbone: keypoints | resnet10 (SERL / HIL-SERL's "
            "resnet10_params.pkl) | dinov2_vits14 / dinov2_vitb14 (model.encoder.backbone's)"
        ),
    )

    def validate(self) -> None:
        if self.backbone_kind != "keypoints":  # the registry imports torch: only when asked
            from learner.models.encoder_kinds import BACKBONES  # imports every entry

            known = BACKBONES.names()
            if self.backbone_kind not in known:
                raise ConfigError(
                    f"key 'model.backbone_kind'={self.backbone_kind!r} is unknown"
                    f"{did_you_mean(self.backbone_kind, known)}; choose one of {known}"
                )
        if self.backbone and not Path(self.backbone).exists():
            raise ConfigError(
                f"key 'model.backbone': no weights at {self.backbone!r}; pretrain them with "
                f"'rlinf train configs/encoder_pretrain.yaml train.out_dir={self.backbone}' or "
                "set model.backbone='' (the small CNN)"
            )


KEEP = ("best", "last")  # train.keep: the epoch the checkpoint holds


@dataclass
class ClassifierTrain(TrainLoopConfig):
    epochs: int = field(default=30, metadata=_h("passes over the training frames"))
    batch_size: int = field(default=64, metadata=_h("frames per update"))
    lr: float = field(default=1e-3, metadata=_h("Adam learning rate"))
    threshold: float = field(default=0.5, metadata=_h("p_success above this counts as success"))
    time_budget_s: float = field(default=50.0, metadata=_h("stop training after this many seconds"))
    keep: str = field(
        default="best",
        metadata=_h(
            "which epoch the checkpoint holds: best (the highest balanced accuracy on the "
            "held-out episodes) | last (every epoch's training on the negatives kept)"
        ),
    )
    out_dir: str = field(
        default="runs/reward_classifier", metadata=_h("run directory: checkpoints/, metrics.json")
    )

    def validate(self) -> None:
        if self.keep not in KEEP:
            raise ConfigError(
                f"key 'train.keep' must be one of {list(KEEP)}, got {self.keep!r}"
                f"{did_you_mean(self.keep, KEEP)}"
            )


@dataclass
class RewardClassifierConfig(RunConfig):
    """The reward classifier (``runner: reward_classifier``): one local process, no env."""

    runner: str = field(default="reward_classifier", metadata=_h("runner registry name"))
    name: str = field(default="reward_classifier", metadata=_h("run name (logs)"))
    seed: int = field(default=0, metadata=_h("global seed"))
    cluster: ClusterConfig = field(
        default_factory=ClusterConfig, metadata=_h("unused: one local process")
    )
    placement: dict[str, str | int] = field(
        default_factory=lambda: {"learner": "0"}, metadata=_h("learner -> slot")
    )
    data: ClassifierData = field(
        default_factory=ClassifierData, metadata=_h("episode store and labels")
    )
    model: ClassifierModel = field(default_factory=ClassifierModel, metadata=_h("network"))
    train: ClassifierTrain = field(default_factory=ClassifierTrain, metadata=_h("loop, outputs"))
    push: PushSection = field(
        default_factory=PushSection,
        metadata=_h(
            "the trained weights to a running `rlinf serve` of an earlier classifier of the same "
            "config (the reward node's), hot-swapped there; push.url '' = no push"
        ),
    )

    def validate(self) -> None:
        self.data.validate()
        self.model.validate()
        self.train.validate()
        self.push.validate()


def labelled_frames(
    store_path: str, camera: str, last_k: int, margin: int = 0, key: str = "data.store"
) -> dict[str, Any]:
    """Frames, states, labels and the episode of each frame (final observations included);
    ``margin`` frames before a success's positives are dropped. Episodes come from the one demo
    reader (:mod:`rlinf_data.demos`: an episode store or a LeRobot dataset, stepless ones
    skipped)."""
    need = [f"images/{camera}"] if camera else ["camera"]  # '' = each episode's first camera
    hint = "record frames of a camera and name it in data.camera"
    demos = open_demos(store_path, key=key, need=need, hint=hint)
    images, states, labels, episodes = [], [], [], []
    for i, ep in enumerate(demos.each()):
        cam = camera or next(iter(ep.info.layout.cameras))
        frames, st = ep.steps[f"images/{cam}"], ep.steps["state"]
        if ep.final is not None:
            frames = np.concatenate([frames, ep.final[f"images/{cam}"][None]])
            st = np.concatenate([st, ep.final["state"][None]])
        y = np.zeros(len(frames), np.float32)
        keep = np.ones(len(frames), bool)
        if ep.info.success:
            y[-last_k:] = 1.0
            keep[max(0, len(frames) - last_k - margin) : len(frames) - last_k] = False
        images.append(frames[keep]), states.append(st[keep]), labels.append(y[keep])
        episodes.append(np.full(int(keep.sum()), i))
    return {
        "camera": cam,
        "images": np.concatenate(images),
        "state": np.concatenate(states).astype(np.float32),
        "label": np.concatenate(labels),
        "episode": np.concatenate(episodes),
    }


def labelled_stores(stores: list[str], camera: str, last_k: int, margin: int = 0) -> dict[str, Any]:
    """:func:`labelled_frames` of each store, joined (episode ids stay distinct across stores;
    every store must hold frames of the same camera and size)."""
    parts = [
        labelled_frames(s, camera, last_k, margin, "data.store" if i == 0 else "data.extra_stores")
        for i, s in enumerate(stores)
    ]
    shapes = {p["images"].shape[1:] for p in parts}
    if len(shapes) > 1:
        raise ConfigError(
            f"keys 'data.store' / 'data.extra_stores': the stores' {parts[0]['camera']!r} frames "
            f"differ in size {sorted(shapes)}; record them at the same camera size"
        )
    offset, episodes = 0, []
    for p in parts:
        episodes.append(p["episode"] + offset)
        offset += int(p["episode"].max()) + 1 if len(p["episode"]) else 0
    out = {k: np.concatenate([p[k] for p in parts]) for k in ("images", "state", "label")}
    return {"camera": parts[0]["camera"], **out, "episode": np.concatenate(episodes)}


def split_by_episode(
    episode: np.ndarray, val_fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(train rows, val rows): whole episodes on one side.

    >>> tr, va = split_by_episode(np.array([0, 0, 1, 1, 2, 3]), 0.25, np.random.default_rng(0))
    >>> sorted(np.concatenate([tr, va]).tolist()), len(set(np.array([0, 0, 1, 1, 2, 3])[va]))
    ([0, 1, 2, 3, 4, 5], 1)
    """
    ids = rng.permutation(np.unique(episode))
    val_ids = ids[: max(1, int(round(val_fraction * len(ids))))]
    val = np.isin(episode, val_ids)
    return np.flatnonzero(~val), np.flatnonzero(val)


def accuracy(
    p: np.ndarray, y: np.ndarray, threshold: float = 0.5, episode: np.ndarray | None = None
) -> dict[str, float]:
    """Accuracy, balanced accuracy (mean of the per-class recalls), the false-positive and
    false-negative rates per frame and, given each frame's ``episode``, the share of failed
    episodes (no positive frame) with a frame called success: what online RL exploits, since the
    reward node ends an episode on the first success it hears.

    >>> accuracy(np.array([0.9, 0.2, 0.1, 0.6]), np.array([1.0, 1.0, 0.0, 0.0]), 0.5,
    ...          np.array([0, 0, 1, 2]))  # doctest: +NORMALIZE_WHITESPACE
    {'accuracy': 0.5, 'balanced_accuracy': 0.5, 'fp_rate': 0.5, 'fn_rate': 0.5,
     'false_success_episodes': 0.5}
    """
    pred = p > threshold
    pos, neg = y > 0.5, y <= 0.5
    recalls = [float(np.mean(pred[m] == (c == 1))) for c, m in ((1, pos), (0, neg)) if m.any()]
    out = {
        "accuracy": float(np.mean(pred == pos)),
        "balanced_accuracy": float(np.mean(recalls)),
        "fp_rate": float(np.mean(pred[neg])) if neg.any() else float("nan"),
        "fn_rate": float(np.mean(~pred[pos])) if pos.any() else float("nan"),
    }
    if episode is not None:
        failed = [e for e in np.unique(episode) if not pos[episode == e].any()]
        fired = [bool(pred[episode == e].any()) for e in failed]
        out["false_success_episodes"] = float(np.mean(fired)) if fired else float("nan")
    return out


def defined(rate: float) -> float | None:
    """A rate, or ``None`` where the split had nothing to count it on (no positive, no failed
    episode): ``null`` in metrics and results, never a NaN a JSON reader rejects."""
    return None if np.isnan(rate) else float(rate)


def shown(rate: float) -> str:
    """A rate as a log shows it (``n/a`` where undefined).

    >>> shown(0.25), shown(float("nan"))
    ('0.250', 'n/a')
    """
    return "n/a" if np.isnan(rate) else f"{rate:.3f}"


def _batch(data: dict[str, Any], rows: np.ndarray) -> dict[str, Any]:
    if "features" in data:  # a frozen image part: its features were computed once per frame
        return {
            "features": torch.as_tensor(data["features"][rows]),
            "state": torch.as_tensor(data["state"][rows]),
        }
    return obs_to_tensors(
        {"state": data["state"][rows], "images": {data["camera"]: data["images"][rows]}}
    )


def _predict(model: Any, data: dict[str, Any], rows: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return np.concatenate(
            [
                torch.sigmoid(model.logits(_batch(data, rows[i : i + 256]))).numpy()
                for i in range(0, len(rows), 256)
            ]
        )


def frozen_features(model: Any, data: dict[str, Any]) -> np.ndarray:
    """The frozen image part's features of every frame, once (the epochs then train the head
    alone, at the cost of a small MLP)."""
    out = []
    with torch.no_grad():
        for i in range(0, len(data["label"]), 256):
            rows = np.arange(i, min(i + 256, len(data["label"])))
            out.append(model.image_features(_batch(data, rows)).numpy())
    return np.concatenate(out)


def run(cfg: RewardClassifierConfig, cluster: Any) -> dict[str, Any]:
    """Train, validate, checkpoint; returns the metrics (``val_accuracy``, ``checkpoint``...)."""
    from learner.checkpoint import save_checkpoint
    from learner.metrics import checkpoint_dir, write_run
    from rlinf_contracts.config import to_dict

    t0 = time.perf_counter()
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    stores = [cfg.data.store, *cfg.data.extra_stores]
    data = labelled_stores(stores, cfg.data.camera, cfg.data.last_k, cfg.data.margin)
    train, val = split_by_episode(data["episode"], cfg.data.val_fraction, rng)
    h, w = data["images"].shape[1:3]
    spec = PolicySpec(
        state_dim=data["state"].shape[1], action_dim=1, chunk=1, cameras={data["camera"]: (h, w)}
    )
    model = build_policy(
        "success_classifier",
        spec,
        camera=data["camera"],
        channels=list(cfg.model.channels),
        hidden=cfg.model.hidden,
        use_state=cfg.data.use_state,
        backbone=list(cfg.model.backbone_channels) if cfg.model.backbone else None,
        backbone_kind=cfg.model.backbone_kind,
    )
    if cfg.model.backbone:
        load_weights(model.backbone, cfg.model.backbone, f"classifier's {cfg.model.backbone_kind}")
        data["features"] = frozen_features(model, data)
        log.info(
            "frozen backbone %s: features of %d frames computed once",
            cfg.model.backbone,
            len(data["label"]),
        )
    y = torch.as_tensor(data["label"])
    n_pos = float(data["label"][train].sum())
    # the rare positives weigh negatives / positives of the training split
    learner = ClassifierLearner(model, cfg.train.lr, (len(train) - n_pos) / max(n_pos, 1.0))
    per_epoch, queue = max(1, len(train) // cfg.train.batch_size), []

    def draw() -> tuple[dict[str, Any], torch.Tensor]:
        if not queue:  # a new epoch: the training frames in a fresh order
            queue.extend(np.array_split(rng.permutation(train), per_epoch))
        rows = queue.pop(0)
        return _batch(data, rows), y[rows]

    history: list[dict[str, float]] = []
    best: dict[str, Any] = {"row": None, "state": None}

    def validate(step: int, metrics: dict[str, float]) -> None:
        epoch = step // per_epoch
        model.eval()
        p_val = _predict(model, data, val)
        scores = accuracy(p_val, data["label"][val], cfg.train.threshold, data["episode"][val])
        row = {
            "iteration": float(epoch),
            "epoch": float(epoch),
            "updates": float(step),
            "time/wall_s": time.perf_counter() - t0,
            "train/loss": metrics["loss"],
            # a rate the split cannot count (no positive, no failed episode) is left out
            **{f"val/{k}": v for k, v in scores.items() if not np.isnan(v)},
        }
        history.append(row)
        if (
            best["row"] is None
            or cfg.train.keep == "last"
            or row["val/balanced_accuracy"] > best["row"]["val/balanced_accuracy"]
        ):
            # keep the best epoch on the held-out episodes
            best["row"] = row
            best["state"] = {k: v.clone() for k, v in model.state_dict().items()}
        log.info(
            "epoch %d: loss %.3f, val accuracy %.3f (balanced %.3f; false positives %s, "
            "false negatives %s of frames; failed episodes called success %s)",
            epoch,
            row["train/loss"],
            row["val/accuracy"],
            row["val/balanced_accuracy"],
            shown(scores["fp_rate"]),
            shown(scores["fn_rate"]),
            shown(scores["false_success_episodes"]),
        )

    budget = Budget(cfg.train.time_budget_s, t0)
    fit(learner, draw, cfg.train.epochs * per_epoch, [Every(per_epoch, validate)], budget)
    epoch, best_state, best_row = len(history), best["state"], best["row"]
    out = Path(cfg.train.out_dir)
    model.load_state_dict(best_state)
    final = best_row
    metrics = {
        "val_accuracy": final["val/accuracy"],
        "val_balanced_accuracy": final["val/balanced_accuracy"],
        **{
            f"val_{k}": final.get(f"val/{k}")
            for k in ("fp_rate", "fn_rate", "false_success_episodes")
        },
        "frames": int(len(data["label"])),
        "positives": int(data["label"].sum()),
        "val_frames": int(len(val)),
        "epochs": epoch,
        "best_epoch": int(final["epoch"]),
        "elapsed_s": time.perf_counter() - t0,
    }
    ckpt = save_checkpoint(
        checkpoint_dir(out, epoch),
        model,
        iteration=epoch,
        weight_version=1,
        config=to_dict(cfg),
        metrics=metrics,
    )
    metrics.update(
        checkpoint=str(ckpt),
        pushed=push_classifier(cfg.push, model.state_dict(), ckpt),
        iterations=epoch,
        eval={"val": {k.removeprefix("val/"): v for k, v in final.items() if "val/" in k}},
    )
    return write_run(out, "reward_classifier", metrics, history, title=cfg.name, tensorboard=True)


def push_classifier(push: PushSection, state: dict[str, Any], ckpt: Any) -> dict[str, int]:
    """The trained weights to each ``push`` target, through the weight-push client the CLI plugs
    in (``learner.offpolicy.remote.PUSH_CLIENTS``: ``learner`` does not import the server's
    package); {url: the version now serving}. A target that does not take them within
    ``push.timeout_s`` is one error that says the checkpoint is saved all the same."""
    if not push.targets:
        return {}
    from learner.offpolicy.remote import PUSH_CLIENTS

    if "websocket" not in PUSH_CLIENTS.names():
        raise ConfigError(
            "key 'push.url': no weight-push client is plugged into this process; train the "
            "classifier with `rlinf train` (rlinf_cli.wiring plugs in policy_server.push)"
        )
    out: dict[str, int] = {}
    for url in push.targets:
        pusher = PUSH_CLIENTS.get("websocket")(url, push.token_file or "", push.timeout_s)
        try:
            pusher.offer(state)
            served = pusher.flush(push.timeout_s)
        finally:
            pusher.stop()
        if not served:
            raise ConnectionError(
                f"the classifier is trained and saved ({ckpt}), but the push to {url} was not "
                f"acknowledged within push.timeout_s={push.timeout_s:g} s: is `rlinf serve` of "
                "the classifier running there?"
            )
        log.info("classifier pushed to %s: version %d serving", url, pusher.version)
        out[url] = pusher.version
    return out


RUNNERS.add(
    "reward_classifier",
    RunnerSpec(config_cls=RewardClassifierConfig, run=run, in_process=lambda cfg, slots: True),
)

__all__ = [
    "RewardClassifierConfig",
    "accuracy",
    "labelled_frames",
    "labelled_stores",
    "run",
    "split_by_episode",
]
