"""configs/reward_classifier_push.yaml trains from a demo store's labelled front-camera frames by
one command (here ``rlinf train`` on a tiny store in seconds): the last frames of a successful
episode are the positives, its checkpoint is served as ``[p_success]``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]


def write_tiny_store(path: Path, episodes: int = 8, steps: int = 10, size: int = 16) -> None:
    """Episodes of dark frames; a successful episode's last frames (and final) are bright:
    the classifier's positives under ``last_k`` (the push config's camera ``front``)."""
    from rlinf_contracts.episode import EpisodeInfo, StepLayout
    from rlinf_contracts.transitions import StepRecord
    from rlinf_data.store import EpisodeStore

    store = EpisodeStore(str(path), mode="a")
    layout = StepLayout(36, 4, {"front": (size, size), "wrist": (size, size)})
    rng = np.random.default_rng(0)
    for e in range(episodes):
        success = e % 2 == 0
        w = store.begin(EpisodeInfo(task="mujoco_franka/push", layout=layout, source="demo"))

        def frame(bright: bool) -> np.ndarray:
            base = 220 if bright else 30
            return (base + rng.integers(0, 20, (size, size, 3))).astype(np.uint8)

        for i in range(steps):
            bright = success and i >= steps - 2
            rec = StepRecord(
                episode=e,
                state=np.zeros(36, np.float32),
                action=np.zeros(4, np.float32),
                images={"front": frame(bright), "wrist": frame(False)},
            )
            w.append(
                rec.step(1.0 if success and i == steps - 1 else 0.0, success and i == steps - 1)
            )
        final = {
            "state": np.zeros(36, np.float32),
            "images/front": frame(success),
            "images/wrist": frame(False),
        }
        w.end(status="complete" if success else "truncated", success=success, final=final)


def train_push_classifier(*overrides: str, dry_run: bool = False) -> subprocess.CompletedProcess:
    """``rlinf train configs/reward_classifier_push.yaml OVERRIDES`` as a user runs it."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "rlinf_cli.main",
            "train",
            "configs/reward_classifier_push.yaml",
            *overrides,
            *(["--dry-run"] if dry_run else []),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_push_classifier_trains_from_the_demo_store_by_one_command(tmp_path: Path) -> None:
    store, out = tmp_path / "demos", tmp_path / "rc"
    write_tiny_store(store)
    proc = train_push_classifier(
        f"data.store={store}",
        "data.extra_stores=[]",
        f"train.out_dir={out}",
        "train.epochs=15",
        "train.batch_size=16",
        "train.time_budget_s=600",
        "model.backbone=",  # the small CNN trained with the head
        "model.channels=[8,8]",
        "model.hidden=16",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    from learner.metrics import read_metrics

    final = read_metrics(out)["final"]
    # labels: the last 3 observations (2 steps + the final one) of each of the 4 successes
    assert final["positives"] == 4 * 3
    # margin 4 frames left out of each successful episode: 8 x 11 frames - 4 x 4
    assert final["frames"] == 8 * 11 - 4 * 4
    assert final["val_accuracy"] > 0.8, final
    assert (Path(final["checkpoint"]) / "meta.json").exists()


def test_push_classifier_on_a_frozen_backbone_with_near_miss_stores(tmp_path: Path) -> None:
    """The config's own path: the learner's frozen keypoint backbone (weights from a file) and a
    second store of failed episodes as extra negatives. The backbone never trains (the
    checkpoint holds the file's weights), its features are computed once per frame, and
    validation reports the error rates a learned reward is judged by."""
    import torch
    from safetensors.torch import save_file

    from learner.checkpoint import load_policy
    from learner.metrics import read_metrics
    from learner.models.encoder_kinds import KeypointBackbone

    store, misses, out = tmp_path / "demos", tmp_path / "misses", tmp_path / "rc"
    write_tiny_store(store)
    write_tiny_store(misses, episodes=6, steps=6)
    torch.manual_seed(0)
    weights = {k: v.contiguous() for k, v in KeypointBackbone((4, 8)).state_dict().items()}
    save_file(weights, str(tmp_path / "backbone.safetensors"))
    proc = train_push_classifier(
        f"data.store={store}",
        f"data.extra_stores=[{misses}]",
        f"model.backbone={tmp_path / 'backbone.safetensors'}",
        "model.backbone_channels=[4,8]",
        "model.hidden=16",
        f"train.out_dir={out}",
        "train.epochs=10",
        "train.batch_size=16",
        "train.time_budget_s=600",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "features of 102 frames computed once" in proc.stderr, proc.stderr[-2000:]
    final = read_metrics(out)["final"]
    # the second store's 3 successes add 3 positives each and its 6 x 7 frames less 3 x 4 margin
    assert (final["positives"], final["frames"]) == (4 * 3 + 3 * 3, 72 + 6 * 7 - 3 * 4), final
    assert final["best_epoch"] == final["epochs"] == 10  # the config's train.keep: last
    for key in ("val_fp_rate", "val_fn_rate", "val_false_success_episodes"):
        assert 0.0 <= final[key] <= 1.0, final
    model, _ = load_policy(final["checkpoint"])
    assert model.frozen_features
    for k, v in weights.items():  # the backbone is the file's, untouched by training
        assert torch.equal(model.backbone.state_dict()[k], v), k
    frames = np.full((2, 16, 16, 3), 30, np.uint8)
    frames[1] = 230
    obs = {"state": torch.zeros(2, 36), "images": {"front": torch.as_tensor(frames)}}
    p = model(obs).dist.mode().flatten()
    assert p.shape == (2,) and bool(((p >= 0) & (p <= 1)).all())
    # rlinf eval scores any labelled store by the same rates (here the near-miss store)
    from learner.eval.classifier import evaluate_classifier_checkpoint

    scores = evaluate_classifier_checkpoint(str(out), dataset=str(misses))
    assert scores["split"] == "dataset" and scores["frames"] == 6 * 7 - 3 * 4, scores
    assert set(scores) >= {"fp_rate", "fn_rate", "false_success_episodes"}, scores


def test_a_missing_backbone_is_refused_with_the_command_that_makes_it(tmp_path: Path) -> None:
    proc = train_push_classifier(
        f"data.store={tmp_path}", f"model.backbone={tmp_path / 'nope'}", dry_run=True
    )
    assert proc.returncode != 0
    err = proc.stderr + proc.stdout
    assert "model.backbone" in err and "configs/encoder_pretrain.yaml" in err, err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    proc = train_push_classifier(
        f"data.store={tmp_path}", "model.backbone=", "train.keep=lsat", dry_run=True
    )
    assert proc.returncode != 0 and "did you mean 'last'" in proc.stderr, proc.stderr[-2000:]


def test_push_classifier_reads_a_released_resnet10_from_its_pickle(tmp_path: Path) -> None:
    """``model.backbone_kind: resnet10``: HIL-SERL's classifier encoder, from its flax pickle."""
    import pickle

    import torch

    from learner.checkpoint import load_policy
    from learner.metrics import read_metrics
    from learner.models.resnet10 import ResNet10

    torch.manual_seed(0)
    flax: dict = {}
    for key, value in ResNet10().state_dict().items():  # the released layout: nested, HWIO
        *path, leaf = key.split(".")
        node = flax
        for name in path:
            node = node.setdefault(name, {})
        if value.dim() == 4:
            node["kernel"] = value.permute(2, 3, 1, 0).numpy()
        else:
            node["scale" if leaf == "weight" else leaf] = value.numpy()
    (tmp_path / "resnet10_params.pkl").write_bytes(pickle.dumps(flax))
    store, out = tmp_path / "demos", tmp_path / "rc"
    write_tiny_store(store)
    common = (
        f"data.store={store}",
        "data.extra_stores=[]",
        f"model.backbone={tmp_path / 'resnet10_params.pkl'}",
        "model.hidden=16",
        f"train.out_dir={out}",
        "train.epochs=3",
        "train.batch_size=16",
    )
    proc = train_push_classifier(*common, "model.backbone_kind=resnet01", dry_run=True)
    assert proc.returncode != 0 and "did you mean 'resnet10'" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    proc = train_push_classifier(*common, "model.backbone_kind=resnet10")
    assert proc.returncode == 0, proc.stderr[-3000:]
    model, _ = load_policy(read_metrics(out)["final"]["checkpoint"])
    want = torch.from_numpy(flax["conv_init"]["kernel"]).permute(3, 2, 0, 1)
    assert torch.equal(model.backbone.conv_init.weight, want)  # the file's, untouched
