"""Pixel encoder kinds: the registry, the frozen pretrained encoder, its weights, the feature
replay (features computed once per frame, stored instead of pixels) and the pretraining runner."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from learner.models.encoder_kinds import (
    ENCODER_KINDS,
    EncoderWeightsError,
    FrozenEncoder,
    KeypointBackbone,
    load_weights,
)
from learner.models.offpolicy import PixelEncoder, SquashedGaussianPolicy
from learner.models.policy import PolicySpec
from learner.offpolicy.feature_replay import FeatureReplay
from rlinf_contracts.config import ConfigError, from_dict, load_config
from rlinf_contracts.episode import Episode, EpisodeInfo, StepLayout
from rlinf_data.replay import ReplayConfig

ROOT = Path(__file__).resolve().parents[3]
CAMS = {"third": (16, 16), "wrist": (16, 16)}
CHANNELS = (4, 4)


def spec(state_dim: int = 5) -> PolicySpec:
    return PolicySpec(state_dim=state_dim, action_dim=2, chunk=1, cameras=dict(CAMS))


def weights(tmp_path: Path, channels: tuple[int, ...] = CHANNELS) -> Path:
    path = tmp_path / "backbone.safetensors"
    save_file(KeypointBackbone(channels).state_dict(), str(path))
    return path


def images(b: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {c: rng.integers(0, 255, (b, *hw, 3), dtype=np.uint8) for c, hw in CAMS.items()}


# ------------------------------------------------------------------------------ registry
def test_registry_has_cnn_and_frozen_and_builds_each() -> None:
    assert {"cnn", "frozen"} <= set(ENCODER_KINDS.names())
    cnn = SquashedGaussianPolicy(spec(), use_images=True, cnn_channels=(4, 4), image_feat_dim=8)
    frozen = SquashedGaussianPolicy(
        spec(), use_images=True, image_feat_dim=8, encoder={"kind": "frozen", "channels": [4, 4]}
    )
    assert isinstance(cnn.encoder.pixels, PixelEncoder)
    assert isinstance(frozen.encoder.pixels, FrozenEncoder)
    obs = {
        "state": torch.zeros(3, 5),
        "images": {c: torch.as_tensor(v) for c, v in images(3).items()},
    }
    assert cnn(obs).dist.mode().shape == frozen(obs).dist.mode().shape == (3, 1, 2)
    # the backbone never trains; the head does (the critic trains it)
    assert not any(p.requires_grad for p in frozen.encoder.pixels.backbone.parameters())
    assert all(p.requires_grad for p in frozen.encoder.pixels.head.parameters())


def test_unknown_kind_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="frozen"):
        SquashedGaussianPolicy(spec(), use_images=True, encoder={"kind": "resnet-99"})


def test_frozen_policy_reads_cached_rows_like_images() -> None:
    """A replay row ``[state | features]`` gives the same features as the images it came from."""
    policy = SquashedGaussianPolicy(
        spec(), use_images=True, image_feat_dim=8, encoder={"kind": "frozen", "channels": [4, 4]}
    )
    enc = policy.encoder
    imgs = {c: torch.as_tensor(v) for c, v in images(4).items()}
    state = torch.randn(4, 5)
    direct = enc({"state": state, "images": imgs})
    feats = enc.pixels.features([imgs[c] for c in enc.cameras])
    assert torch.allclose(enc(torch.cat([state, feats], dim=-1)), direct, atol=1e-6)


# ------------------------------------------------------------------------------- weights
def test_weights_load_and_a_mismatched_key_is_named(tmp_path: Path) -> None:
    enc = FrozenEncoder(2, (16, 16), CHANNELS, 8)
    path = weights(tmp_path)
    load_weights(enc.backbone, path)
    want = KeypointBackbone(CHANNELS).state_dict()
    from safetensors.torch import load_file

    saved = load_file(str(path))
    assert torch.equal(enc.backbone.state_dict()["convs.0.weight"], saved["convs.0.weight"])
    assert set(saved) == set(want)

    renamed = {("convs.9.weight" if k == "convs.0.weight" else k): v for k, v in saved.items()}
    bad = tmp_path / "bad.pt"
    torch.save(renamed, bad)
    with pytest.raises(EncoderWeightsError) as e:
        load_weights(enc.backbone, bad)
    msg = str(e.value)
    assert "model.encoder.weights" in msg
    assert "missing keys ['convs.0.weight']" in msg and "unexpected keys ['convs.9.weight']" in msg

    wide = tmp_path / "wide"
    wide.mkdir()
    with pytest.raises(EncoderWeightsError, match=r"convs.0.weight: file \(8, 3, 3, 3\) vs model"):
        load_weights(enc.backbone, weights(wide, (8, 4)))


def test_missing_weights_path_is_a_clear_error(tmp_path: Path) -> None:
    enc = FrozenEncoder(1, (16, 16), CHANNELS, 8)
    with pytest.raises(EncoderWeightsError, match="no weights at"):
        load_weights(enc.backbone, tmp_path / "nope")


# -------------------------------------------------------------------------- feature replay
def replay(views: int = 2) -> tuple[FeatureReplay, FrozenEncoder]:
    enc = FrozenEncoder(2, (16, 16), CHANNELS, 8)
    layout = StepLayout(5, 2, dict(CAMS))
    cfg = ReplayConfig(capacity=64, mix={"online": 1.0}, n_step=1, gamma=0.9)
    return FeatureReplay(layout, cfg, enc, sorted(CAMS), views=views, pad=2, seed=0), enc


def test_features_are_computed_once_per_frame() -> None:
    """B streams, T steps, one reset: every distinct frame goes through the backbone once."""
    rep, enc = replay()
    frames = 0
    real = enc.features

    def counting(imgs):  # count frames (not calls): views of one frame are one frame's work
        nonlocal frames
        frames += len(imgs[0]) // rep.views
        return real(imgs)

    enc.features = counting
    b, steps = 3, 5
    obs = {"state": np.zeros((b, 5), np.float32), "images": images(b, 0)}
    for t in range(steps):
        nxt = {"state": np.full((b, 5), t + 1, np.float32), "images": images(b, t + 1)}
        trunc = np.array([t == 2, False, False])  # stream 0 ends at t=2 and restarts
        rep.add("online", obs, np.zeros((b, 2)), np.zeros(b), np.zeros(b, bool), trunc, nxt)
        obs = {
            "state": nxt["state"].copy(),
            "images": {c: v.copy() for c, v in nxt["images"].items()},
        }
        if trunc[0]:  # stream 0's next obs is a reset frame, not the final observation
            obs["images"]["third"][0] = 7
    # b initial frames, b next frames per step, and stream 0's reset frame after its end
    assert frames == b + steps * b + 1
    assert enc.backbone_calls == steps + 2  # the 2 steps with new starts encode obs too


def test_replay_stores_features_not_pixels() -> None:
    rep, enc = replay(views=3)
    assert rep.inner.layout.cameras == {}
    ring_fields = set(rep.inner.rings["online"].obs)
    assert ring_fields == {"state"}
    assert rep.inner.rings["online"].obs["state"].shape[1] == 5 + 3 * enc.feature_dim
    b = 2
    obs = {"state": np.ones((b, 5), np.float32), "images": images(b, 0)}
    nxt = {"state": np.ones((b, 5), np.float32), "images": images(b, 1)}
    rep.add("online", obs, np.zeros((b, 2)), np.zeros(b), np.ones(b, bool), np.zeros(b, bool), nxt)
    out = rep.sample(4, np.random.default_rng(0))
    assert out["obs"]["images"] == {}
    assert out["obs"]["state"].shape == (4, 5 + enc.feature_dim)
    # view 0 is the unshifted frame: the same features the acting path computes
    flat = rep.inner.rings["online"].obs["state"][:1]
    direct = enc.features([torch.as_tensor(obs["images"][c][:1]) for c in sorted(CAMS)])
    np.testing.assert_allclose(flat[0, 5 : 5 + enc.feature_dim], direct[0].numpy(), atol=1e-6)


def test_episodes_enter_the_feature_replay() -> None:
    rep, enc = replay()
    layout = StepLayout(5, 2, dict(CAMS))
    n = 4
    steps = {
        "state": np.zeros((n, 5), np.float32),
        "action": np.zeros((n, 2), np.float32),
        "reward": np.ones(n, np.float32),
        "terminated": np.zeros(n, bool),
        "truncated": np.eye(n, dtype=bool)[-1],
        "intervention": np.zeros(n, bool),
        **{f"images/{c}": v for c, v in images(n).items()},
    }
    final = {
        "state": np.zeros(5, np.float32),
        **{f"images/{c}": v[0] for c, v in images(1).items()},
    }
    rep.add_episode(Episode(EpisodeInfo(task="t", layout=layout), steps, final), "online")
    assert rep.size("online") == n + 1
    assert enc.backbone_calls == 1
    assert rep.sample(3, np.random.default_rng(0))["reward"].tolist() == [1.0, 1.0, 1.0]


# ----------------------------------------------------------------------- config + learner
def frozen_cfg(tmp_path: Path, *extra: str):
    from learner.offpolicy.config import OffPolicyConfig

    raw = load_config(
        ROOT / "configs/sim_franka_push_rlpd_pixels.yaml",
        [
            f"model.encoder.weights={weights(tmp_path, (16, 16, 32))}",
            "env.num_envs=2",
            "env.kwargs.image_size=32",
            "algorithm.batch_size=8",
            *extra,
        ],
    )
    return from_dict(OffPolicyConfig, raw)


@pytest.mark.parametrize(
    "name", ["sim_franka_push_rlpd_pixels", "sim_franka_push_rlpd_pixels_cnn", "encoder_pretrain"]
)
def test_new_configs_load_and_validate(name: str) -> None:
    from learner.runners.registry import get_runner

    raw = load_config(ROOT / f"configs/{name}.yaml", [])

    cfg = from_dict(get_runner(raw["runner"]).config_cls, raw)
    if name.startswith("sim_"):
        assert cfg.env.obs_mode == "rgb" and sorted(cfg.env.kwargs["cameras"]) == ["front", "wrist"]
        assert cfg.model.use_images
        assert cfg.model.encoder.kind == ("cnn" if name.endswith("cnn") else "frozen")


def test_grid_readout_keeps_both_places_a_channel_fires() -> None:
    """A keypoint is the mean of its channel's softmax: two blobs read as one point between them.
    The grid readout keeps the mass in both cells, and adds no weights (the same file loads)."""
    net = KeypointBackbone((4,), grid=2)
    assert set(net.state_dict()) == set(KeypointBackbone((4,)).state_dict())
    net.convs = torch.nn.Identity()  # feed the softmax a map directly: channels = 3
    maps = torch.full((1, 3, 8, 8), -50.0)
    maps[0, 0, 1, 1] = maps[0, 0, 6, 6] = 50.0  # channel 0: top-left and bottom-right
    out = net(maps)
    assert out.shape == (1, (2 + 4) * 3)
    x, y = out[0, 0], out[0, 3]
    assert abs(float(x)) < 1e-4 and abs(float(y)) < 1e-4  # the keypoint: the empty middle
    cells = out[0, 6:].view(3, 2, 2)
    assert torch.allclose(cells.sum((1, 2)), torch.ones(3))  # each channel's mass, all of it
    assert torch.allclose(cells[0], torch.tensor([[0.5, 0.0], [0.0, 0.5]]), atol=1e-4)


def test_grid_is_a_config_key_with_a_range() -> None:
    from learner.offpolicy.config import OffPolicyConfig

    raw = load_config(ROOT / "configs/sim_franka_push_rlpd_pixels.yaml", ["model.encoder.grid=4"])
    cfg = from_dict(OffPolicyConfig, raw)
    assert cfg.model.encoder.build_kwargs() == {
        "kind": "frozen",
        "channels": [16, 16, 32],
        "grid": 4,
    }
    enc = FrozenEncoder(2, (16, 16), (4, 4), 8, grid=4)
    assert enc.feature_dim == 2 * (2 + 16) * 4
    raw["model"]["encoder"]["grid"] = 40
    with pytest.raises(ConfigError, match="model.encoder.grid"):
        from_dict(OffPolicyConfig, raw)


def test_raw_head_hands_the_policy_the_features_themselves() -> None:
    enc = FrozenEncoder(2, (16, 16), (4, 4), 8, head="raw")
    imgs = [torch.randint(0, 255, (3, 16, 16, 3), dtype=torch.uint8)] * 2
    assert enc.out_dim == enc.feature_dim == 2 * 8
    assert torch.equal(enc(imgs), enc.features(imgs))
    assert not list(enc.head.parameters())
    encoder = {"kind": "frozen", "channels": [4, 4], "head": "raw"}
    pol = SquashedGaussianPolicy(spec(), use_images=True, encoder=encoder)
    assert pol.encoder.out_dim == 5 + 16
    from learner.offpolicy.config import OffPolicyConfig

    with pytest.raises(ConfigError, match="model.encoder.head"):
        from_dict(
            OffPolicyConfig,
            {"model": {"encoder": {"kind": "frozen", "weights": "x", "head": "mlp"}}},
        )


def test_frozen_kind_needs_weights_and_images() -> None:
    from learner.offpolicy.config import OffPolicyConfig

    raw = load_config(
        ROOT / "configs/sim_franka_push_rlpd_pixels.yaml", ["model.encoder.weights=null"]
    )
    with pytest.raises(ConfigError, match="model.encoder.weights"):
        from_dict(OffPolicyConfig, raw)
    with pytest.raises(ConfigError, match="model.encoder.kind"):
        from_dict(OffPolicyConfig, {"model": {"encoder": {"kind": "frozn", "weights": "x"}}})


def test_learner_of_a_frozen_config_trains_on_feature_rows(tmp_path: Path) -> None:
    from learner.offpolicy.collect import StepBatch
    from learner.offpolicy.learner import OffPolicyLearner
    from rlinf_contracts.env_registry import make_env

    cfg = frozen_cfg(tmp_path, "train.demos=null", "algorithm.name=sac", "train.learning_starts=0")
    env = make_env(cfg.env.name, 2, obs_mode="rgb", cameras=["third", "wrist"], image_size=32)
    core = OffPolicyLearner(cfg, env.spec)
    assert isinstance(core.replay, FeatureReplay) and core.cameras == []
    pixels = core.policy.encoder.pixels
    before = {k: v.clone() for k, v in pixels.backbone.state_dict().items()}
    head = pixels.head[0].weight.detach().clone()
    obs = env.reset(seed=0)
    for _ in range(3):
        act = np.zeros((2, env.spec.action_dim), np.float32)
        nxt, rew, term, trunc, _ = env.step(act)
        core.ingest_step(StepBatch(obs, act, rew, term, trunc, nxt))
        obs = nxt
    assert core.train_owed() > 0
    after = pixels.backbone.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # frozen
    assert not torch.equal(head, pixels.head[0].weight)  # the head trains
    env.close()


def test_env_worker_encodes_its_episodes_and_the_learner_adds_them_as_they_are(
    tmp_path: Path,
) -> None:
    """features_on: env -- the env worker runs the frozen backbone (the pretrained weights,
    loaded before any weights are published) over its finished episode; the learner's replay
    takes those rows without a backbone pass of its own, the same rows it would cut itself."""
    from learner.offpolicy.learner import OffPolicyLearner
    from learner.offpolicy.workers import CollectorWorker

    cfg = frozen_cfg(
        tmp_path,
        "train.demos=null",
        "algorithm.name=sac",
        "env.kwargs.max_episode_steps=3",
        "model.encoder.cached_views=1",  # no random shifts: both sides' rows comparable
    )
    worker = CollectorWorker(cfg)
    assert worker.features is not None
    finished = []
    while not finished:
        finished = worker.collector.step(random=True).finished
    ep = finished[0]
    feats = worker.features.episode(ep)
    assert feats.shape == (len(ep) + 1, worker.features.dim)
    core = OffPolicyLearner(cfg, worker.env.spec)
    pixels = core.policy.encoder.pixels
    calls = pixels.backbone_calls
    core.ingest_episode(ep, features=feats)
    assert pixels.backbone_calls == calls  # the learner's core ran no backbone
    rows = core.replay.inner.rings["online"].obs["state"][: len(ep)]
    own = core.replay.frames.episode(ep)  # the learner's own pass over the same frames
    d = core.replay.state_dim
    np.testing.assert_allclose(rows[:, d:], own[: len(ep)], atol=1e-5)
    np.testing.assert_allclose(rows[:, :d], ep.steps["state"], atol=1e-6)
    with pytest.raises(ValueError, match="model.encoder"):
        core.ingest_episode(ep, features=feats[:, :-1])
    worker.close()


def test_features_on_learner_leaves_the_env_worker_to_acting(tmp_path: Path) -> None:
    from learner.offpolicy.workers import CollectorWorker

    cfg = frozen_cfg(
        tmp_path, "train.demos=null", "algorithm.name=sac", "model.encoder.features_on=learner"
    )
    worker = CollectorWorker(cfg)
    assert worker.features is None
    worker.close()
    with pytest.raises(ConfigError, match="features_on.*did you mean 'learner'"):
        frozen_cfg(tmp_path, "model.encoder.features_on=lerner")


# --------------------------------------------------------------------------- pretraining
def tiny_store(path: Path, episodes: int = 3, n: int = 5) -> Path:
    from rlinf_data.store import EpisodeStore

    layout = StepLayout(5, 2, dict(CAMS))
    store = EpisodeStore(path)
    for i in range(episodes):
        steps = {
            "state": np.zeros((n, 5), np.float32),
            "action": np.zeros((n, 2), np.float32),
            "reward": np.zeros(n, np.float32),
            "terminated": np.zeros(n, bool),
            "truncated": np.eye(n, dtype=bool)[-1],
            "intervention": np.zeros(n, bool),
            "policy_version": np.zeros(n, np.int64),
            "timestamp": np.arange(n, dtype=np.float64),
            **{f"images/{c}": v for c, v in images(n, i).items()},
        }
        store.write(Episode(EpisodeInfo(task="t", layout=layout, status="truncated"), steps))
    return path


def test_pretraining_runner_runs_two_updates_and_writes_the_run(tmp_path: Path) -> None:
    from learner.metrics import read_metrics
    from learner.runners.encoder_pretrain import EncoderPretrainConfig, run

    store = tiny_store(tmp_path / "frames")
    cfg = from_dict(
        EncoderPretrainConfig,
        load_config(
            ROOT / "configs/encoder_pretrain.yaml",
            [
                f"data.stores=[{store}]",
                f"data.action_stores=[{store}]",
                "data.cameras=[third,wrist]",
                "model.channels=[4,4]",
                "train.updates=2",
                "train.batch_size=4",
                "train.log_every=1",
                "train.target_size=8",
                f"train.out_dir={tmp_path / 'run'}",
            ],
        ),
    )
    final = run(cfg, None)
    from learner.algorithms.protocol import Algorithm
    from learner.algorithms.spatial_autoencoder import AutoencoderConfig, SpatialAutoencoderLearner

    assert isinstance(
        SpatialAutoencoderLearner(KeypointBackbone((4,)), 8, ["third"], AutoencoderConfig()),
        Algorithm,
    )
    assert final["iterations"] == 2 and final["runner"] == "encoder_pretrain"
    hist = read_metrics(tmp_path / "run")["history"]
    assert [r["updates"] for r in hist] == [1.0, 2.0]
    assert all("val/recon_mse" in r and "train/loss" in r for r in hist)
    assert all("val/action_mse" in r and "train/action_loss" in r for r in hist)
    # its checkpoint is what model.encoder.weights loads (the run dir: the latest checkpoint)
    enc = FrozenEncoder(2, (16, 16), (4, 4), 8)
    load_weights(enc.backbone, tmp_path / "run")
    assert Path(final["checkpoint"], "model.safetensors").is_file()


def test_pretraining_refuses_an_action_weight_without_demo_stores_and_stores_without_weight(
    tmp_path: Path,
) -> None:
    from learner.runners.encoder_pretrain import EncoderPretrainConfig

    base = ROOT / "configs/encoder_pretrain.yaml"
    with pytest.raises(ConfigError, match="action_weight.*action_stores"):
        from_dict(EncoderPretrainConfig, load_config(base, ["data.action_stores=[]"]))
    with pytest.raises(ConfigError, match="action_weight.*action_stores"):
        from_dict(EncoderPretrainConfig, load_config(base, ["train.action_weight=0"]))
    with pytest.raises(ConfigError, match="action_weight"):
        from_dict(EncoderPretrainConfig, load_config(base, ["train.action_weight=-1"]))
    ok = from_dict(
        EncoderPretrainConfig, load_config(base, ["train.action_weight=0", "data.action_stores=[]"])
    )
    assert ok.train.action_weight == 0  # reconstruction only


def test_the_demo_action_loss_trains_the_backbone_to_tell_where_a_marker_is() -> None:
    """Frames with a bright square on the left have action -1, on the right +1: the action head
    can only read that from the keypoints, so its loss falls only if the backbone learns it."""
    from learner.algorithms.spatial_autoencoder import (
        ActionTargets,
        AutoencoderConfig,
        SpatialAutoencoderLearner,
    )

    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)

    def demo(n: int) -> dict[str, torch.Tensor]:
        side = torch.randint(0, 2, (n,), generator=gen)
        img = torch.zeros(n, 16, 16, 3, dtype=torch.uint8)
        for i, s in enumerate(side.tolist()):
            col = 2 if s == 0 else 10
            img[i, 6:10, col : col + 4] = 255
        action = (side.float() * 2 - 1)[:, None]
        return {"third": img, "state": torch.zeros(n, 3), "action": action}

    backbone = KeypointBackbone((8, 8))
    algo = SpatialAutoencoderLearner(
        backbone,
        backbone.out_dim,
        ["third"],
        AutoencoderConfig(lr=3e-3, target_hw=(8, 8), pad=0, action_weight=1.0, action_hidden=32),
        ActionTargets(torch.zeros(3), torch.ones(3), 1),
    )
    held_out = demo(64)
    before = algo.evaluate_actions(held_out)
    for _ in range(150):
        batch = demo(32)
        m = algo.update({"third": batch["third"], "demo": batch})
    after = algo.evaluate_actions(held_out)
    assert {"loss", "recon_loss", "action_loss", "grad_norm"} <= set(m)
    assert before > 0.5 and after < 0.1 * before, (before, after)
    # without the weight the head is not built and the batch's demo steps are ignored
    plain = SpatialAutoencoderLearner(
        KeypointBackbone((8, 8)),
        16,
        ["third"],
        AutoencoderConfig(target_hw=(8, 8)),
        ActionTargets(torch.zeros(3), torch.ones(3), 1),
    )
    assert plain.action_head is None and "action_loss" not in plain.update(
        {"third": held_out["third"], "demo": held_out}
    )
