"""The full-size VLA adapters trained by the existing runners, proven with tiny random-weight
models.

Per adapter family: ``rlinf train`` (CLI entry) on the tiny franka_language config for 2
iterations -> the trained (LoRA / head) weights moved and the frozen backbone did not -> the
checkpoint reloads to identical actions -> ``rlinf eval`` runs -> ``rlinf serve``'s loading path
behind the policy server answers a client with the same actions. Plus, without an env: a rollout
sample's log-prob equals the update's re-scored log-prob (the PPO ratio starts at 1), and the GPU
configs validate on a CPU up to the missing checkpoint directory. Not learning tests: random
weights.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("peft")

from learner.checkpoint import load_checkpoint, load_policy
from learner.models import PolicySpec, build_policy, obs_to_tensors
from learner.rollout.collect import derive_seed
from rlinf_cli.main import main

ROOT = Path(__file__).resolve().parents[1]
OPENVLA = str(ROOT / "configs/sim_franka_language_openvla_tiny_ppo.yaml")
PI0 = str(ROOT / "configs/sim_franka_language_pi0_tiny_grpo.yaml")
SMALL = [
    "train.iterations=2",
    "env.num_envs=2",
    "train.progress=false",
    "eval.episodes=2",
    "eval.num_envs=2",
    "eval.ood_splits=[id]",
]
RUNS = {
    "openvla": (OPENVLA, ["rollout.steps_per_iteration=4"]),
    "openvla_oft": (
        OPENVLA,
        ["rollout.steps_per_iteration=4", "adapter.name=openvla_oft", "model.chunk=2"],
    ),
    "pi0": (PI0, []),
}


def _request(spec: PolicySpec, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    ((cam, (h, w)),) = spec.cameras.items()
    return {
        "state": rng.normal(size=spec.state_dim).astype(np.float32),
        "images": {cam: rng.integers(0, 255, (h, w, 3), dtype=np.uint8)},
        "instruction": "push the red cube",
    }


def _batch(req: dict) -> dict:
    return {
        "state": req["state"][None],
        "images": {k: v[None] for k, v in req["images"].items()},
        "instruction": [req["instruction"]],
    }


@pytest.mark.parametrize("family", sorted(RUNS))
def test_tiny_adapter_trains_reloads_evals_and_serves(family, tmp_path):
    config, extra = RUNS[family]
    out = tmp_path / "run"
    assert main(["train", config, f"train.out_dir={out}", *SMALL, *extra]) == 0
    ckpt = load_checkpoint(out)
    assert ckpt.meta["model"]["name"] == "vla_adapter" and ckpt.iteration == 2
    # the run's initial weights, rebuilt as the trainer built them (same seed): LoRA / heads moved,
    # the frozen backbone did not
    spec = PolicySpec.from_dict(ckpt.meta["spec"])
    torch.manual_seed(derive_seed(0, "init"))
    init = build_policy("vla_adapter", spec, **ckpt.meta["model"]["kwargs"])
    trainable = {k for k, p in init.named_parameters() if p.requires_grad}
    frozen = {k for k, p in init.named_parameters() if not p.requires_grad}
    assert trainable and frozen
    first = init.state_dict()
    moved = [k for k in trainable if not torch.equal(first[k], ckpt.model_state[k])]
    assert any("lora" in k or "action" in k for k in moved), moved[:5]
    assert all(torch.equal(first[k], ckpt.model_state[k]) for k in frozen)
    # reload: two independent loads act identically (deterministic actions)
    req = _request(spec, 1)
    a1 = load_policy(out)[0].act(_batch(req), deterministic=True)[0]
    a2 = load_policy(out)[0].act(_batch(req), deterministic=True)[0]
    assert a1.shape == (1, spec.chunk, spec.action_dim) and np.array_equal(a1, a2)
    # rlinf eval of the checkpoint
    assert (
        main(
            [
                "eval",
                str(out),
                "--episodes",
                "2",
                "--no-video",
                "--out",
                str(tmp_path / "eval"),
                "eval.num_envs=2",
            ]
        )
        == 0
    )
    report = json.loads((tmp_path / "eval" / "results.json").read_text())
    assert "id" in json.dumps(report)
    # rlinf serve's loading path behind the policy server: a client gets the same actions
    from policy_server.background import ServerThread
    from policy_server.client import PolicyClient
    from policy_server.server import PolicyServer
    from rlinf_cli.main import build_parser, parse_args
    from rlinf_cli.serve import build_config, load_served_policy

    cfg = build_config(
        parse_args(
            build_parser(),
            ["serve", "--checkpoint", str(out), "--host", "127.0.0.1", "--port", "0"],
        )
    )
    policy, version, name = load_served_policy(cfg)
    with (
        ServerThread(
            PolicyServer(policy, cfg.server, weight_version=version, policy_name=name)
        ) as srv,
        PolicyClient(srv.url) as client,
    ):
        served = np.asarray(client.infer(req)["actions"], np.float32)
    np.testing.assert_allclose(served.reshape(a1.shape), a1, atol=1e-5)


def _tiny_policy(name: str, chunk: int) -> tuple[torch.nn.Module, dict]:
    spec = PolicySpec(
        state_dim=6, action_dim=3, chunk=chunk, cameras={"front": (32, 32)}, uses_instruction=True
    )
    torch.manual_seed(0)
    policy = build_policy(
        "vla_adapter",
        spec,
        adapter={"name": name, "tiny": True, "device": "cpu", "dtype": "float32", "model": {}},
    )
    reqs = [_request(spec, s) for s in range(3)]
    obs = {
        "state": np.stack([r["state"] for r in reqs]),
        "images": {"front": np.stack([r["images"]["front"] for r in reqs])},
        "instruction": ["push the red cube", "lift the blue ball", "reach the green cylinder"],
    }
    return policy, obs


@pytest.mark.parametrize(
    "name,chunk", [("openvla", 1), ("openvla_oft", 2), ("pi0", 4), ("pi05", 4)]
)
def test_rollout_log_prob_is_the_update_log_prob(name, chunk):
    policy, obs = _tiny_policy(name, chunk)
    torch.manual_seed(3)
    actions, logp, value = policy.act(obs, deterministic=False)
    assert actions.shape[:2] == (3, chunk) and actions.shape[-1] > 3  # latent columns ride along
    assert value is not None and value.shape == (3,)
    out = policy(obs_to_tensors(obs))
    again = out.dist.log_prob(torch.as_tensor(actions))
    np.testing.assert_allclose(again.detach().numpy(), logp, rtol=1e-4, atol=1e-3)
    # the update's gradient reaches only what the adapter leaves trainable (and the critic)
    again.sum().backward()
    grads = {
        k for k, p in policy.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0
    }
    assert grads and all(p.requires_grad for k, p in policy.named_parameters() if k in grads)
    # SFT through the runner interface: the adapter's own loss on robot chunks
    policy.zero_grad()
    loss = policy.sft_loss(obs_to_tensors(obs), torch.zeros(3, chunk, 3))
    assert torch.isfinite(loss) and loss.requires_grad


def test_gpu_configs_validate_on_a_cpu_up_to_the_checkpoint(tmp_path, capsys):
    for cfg in ("vla_openvla_gpu", "vla_pi0_gpu"):
        # an out_dir of its own: a dry run refuses the default runs/<name> once it holds a run
        path, out = str(ROOT / f"configs/{cfg}.yaml"), f"train.out_dir={tmp_path / 'out' / cfg}"
        assert main(["train", path, "--dry-run", out]) == 2
        assert "key 'adapter.checkpoint': no checkpoint directory" in capsys.readouterr().err
        ckpt = tmp_path / cfg
        ckpt.mkdir()
        (ckpt / "model-00001.safetensors").write_bytes(b"")
        for f in ("dataset_statistics.json", "norm_stats.json"):
            (ckpt / f).write_text("{}")
        assert main(["train", path, "--dry-run", f"adapter.checkpoint={ckpt}", out]) == 0
        resolved = json.loads(capsys.readouterr().out)
        assert resolved["model"]["name"] == "vla_adapter"
        assert resolved["model"]["kwargs"]["adapter"]["device"] == "cuda"
        assert (
            main(["train", path, "--dry-run", f"adapter.checkpoint={ckpt}", "model.chunk=3"]) == 2
        )
        assert "key 'model.chunk' (3) must equal" in capsys.readouterr().err
        assert (
            main(
                [
                    "train",
                    path,
                    "--dry-run",
                    f"adapter.checkpoint={ckpt}",
                    "model.kwargs.action_index=[0,1,2,7]",
                ]
            )
            == 2
        )
        assert "key 'model.kwargs.action_index'" in capsys.readouterr().err
    assert (
        main(["train", str(ROOT / "configs/vla_pi0_gpu.yaml"), "--dry-run", "model.name=mlp"]) == 2
    )
    assert "model.name=vla_adapter" in capsys.readouterr().err


def test_sft_then_grpo_from_the_sft_checkpoint(tmp_path):
    """The recipe of the full-size adapters (SFT on demos -> RL from that checkpoint), tiny π0."""
    demos, sft, rl = tmp_path / "demos", tmp_path / "sft", tmp_path / "rl"
    assert (
        main(
            [
                "collect",
                "franka_language/mix",
                "--episodes",
                "2",
                "--obs-mode",
                "state+rgb",
                "--noise",
                "0.1",
                "--out",
                str(demos),
                "cameras=[front]",
                "image_size=32",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "train",
                str(ROOT / "configs/sim_franka_language_pi0_tiny_sft.yaml"),
                f"sft.demos={demos}",
                "sft.steps=4",
                "train.log_every=2",
                f"train.out_dir={sft}",
                "train.final_eval=false",
                "train.progress=false",
            ]
        )
        == 0
    )
    losses = [
        h["train/sft_loss"] for h in json.loads((sft / "metrics.json").read_text())["history"]
    ]
    assert len(losses) == 2 and all(np.isfinite(losses))
    assert (
        main(
            [
                "train",
                PI0,
                f"train.init_from={sft}",
                f"train.out_dir={rl}",
                "train.iterations=1",
                "env.num_envs=2",
                "train.final_eval=false",
                "train.progress=false",
            ]
        )
        == 0
    )
    before, after = load_checkpoint(sft).model_state, load_checkpoint(rl).model_state
    frozen = [k for k in before if "embed_tokens" in k]
    assert frozen and all(torch.equal(before[k], after[k]) for k in frozen)
    meta = load_checkpoint(sft).meta
    torch.manual_seed(derive_seed(0, "init"))
    init = build_policy(
        "vla_adapter", PolicySpec.from_dict(meta["spec"]), **meta["model"]["kwargs"]
    ).state_dict()
    trained = [
        k
        for k, p in build_policy(
            "vla_adapter", PolicySpec.from_dict(meta["spec"]), **meta["model"]["kwargs"]
        ).named_parameters()
        if p.requires_grad
    ]
    dist = lambda a, b: max(float((a[k] - b[k]).abs().max()) for k in trained)  # noqa: E731
    # RL started from the SFT weights: closer to them than SFT is to the initial weights
    assert 0.0 < dist(after, before) < dist(before, init)
