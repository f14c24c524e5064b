"""``actor.strategy: fsdp`` on two CPU ranks (gloo) equals single-process training.

One spawn of two ranks runs every scenario (loss + full gradients, three Adam steps, sharded
save -> resume) and sends rank 0's results back; each test reads its part. The converter runs
here, in one process, on the shards the ranks wrote. The embodied trainer's PPO / GRPO update of
a VLA under the strategy: tests/learner/actor/test_fsdp_vla.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from learner.actor.fsdp import FSDPStrategy, mixed_precision, shard_units
from learner.actor.fsdp_convert import convert_sharded, load_sharded_model
from learner.actor.strategies import make_strategy
from learner.sections import OptimConfig
from rlinf_contracts.config import ConfigError
from rlinf_contracts.weight_blob import weights_from_bytes
from tests.learner.two_ranks import run_two_ranks

STEPS, SAVE_AT, LR = 3, 2, 1e-2


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.tanh(self.fc(x))


class Tiny(nn.Module):
    """Embed, two blocks in a ModuleList (the shard units), an uneven head (3 rows over 2
    ranks: FSDP pads the last shard)."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.embed = nn.Linear(4, 8)
        self.blocks = nn.ModuleList([Block(8), Block(8)])
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        for b in self.blocks:
            h = b(h)
        return self.head(h)


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(8, 4, generator=g), torch.randn(8, 3, generator=g)


def _full(t: torch.Tensor) -> torch.Tensor:
    return t.full_tensor() if hasattr(t, "full_tensor") else t.detach().clone()


def _params(model: nn.Module) -> dict[str, torch.Tensor]:
    return {n: _full(p.detach()).clone() for n, p in model.named_parameters()}


def _step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> float:
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return float(loss.detach())


def _reference() -> dict[str, Any]:
    """Single process, the whole batch: the numbers the two ranks must reproduce."""
    x, y = _data()
    model = Tiny()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}  # type: ignore[union-attr]  # backward just set them
    model.zero_grad()
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    after: list[dict[str, torch.Tensor]] = []
    for _ in range(STEPS):
        _step(model, opt, x, y)
        after.append(_params(model))
    return {"loss": float(loss.detach()), "grads": grads, "params": after}


def _sharded_rank(rank: int, port: int, out: str) -> dict[str, Any]:
    sync = FSDPStrategy(rank, 2)
    sync.init(f"127.0.0.1:{port}", timeout_s=60)
    x, y = _data()
    xs, ys = x[4 * rank : 4 * rank + 4], y[4 * rank : 4 * rank + 4]
    model = sync.wrap(Tiny())
    res: dict[str, Any] = {"units": len(shard_units(Tiny())), "wrapped": sync.is_wrapped(model)}
    res["local_rows"] = int(sync.local_shard(model.embed.weight).shape[0])  # type: ignore[union-attr]  # a Linear
    loss = nn.functional.mse_loss(model(xs), ys)
    loss.backward()
    sync.average_grads([])  # a no-op: the backward reduce-scattered
    res["loss"] = float(sync.sum(loss.detach()) / 2)
    res["grads"] = {n: _full(p.grad) for n, p in model.named_parameters()}  # type: ignore[arg-type]  # backward set them
    res["grad_norm"] = sync.clip_grad_norm(list(model.parameters()), 1e9)
    model.zero_grad()
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    res["params"] = []
    for i in range(STEPS):
        _step(model, opt, xs, ys)
        res["params"].append(_params(model))
        if i + 1 == SAVE_AT:
            Path(out).mkdir(parents=True, exist_ok=True)
            assert sync.save_train_state(out, model, opt)
    res["full_state"] = sync.full_state_dict(model)  # rank 0 only; a collective
    sync.barrier()
    sync.close()
    return res


def _resumed_rank(rank: int, port: int, out: str) -> dict[str, Any]:
    """A fresh pair of processes (as a resumed run is): a differently initialised model and a
    fresh Adam, the shards, then the steps the first pair took after saving."""
    sync = FSDPStrategy(rank, 2)
    sync.init(f"127.0.0.1:{port}", timeout_s=60)
    x, y = _data()
    xs, ys = x[4 * rank : 4 * rank + 4], y[4 * rank : 4 * rank + 4]
    model = sync.wrap(Tiny(seed=5))
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    res: dict[str, Any] = {"loaded": sync.load_train_state(out, model, opt)}
    res["loaded_params"] = _params(model)
    for _ in range(STEPS - SAVE_AT):
        _step(model, opt, xs, ys)
    res["resumed"] = _params(model)
    # a full state dict into a sharded model: every rank keeps its shard of it
    full = sync.wrap(Tiny(seed=7))
    sync.load_full_state_dict(full, Tiny(seed=0).state_dict())
    res["full_loaded"] = _params(full)
    sync.close()
    return res


PHASES = {"train": _sharded_rank, "resume": _resumed_rank}


def _phase(rank: int, port: int, phase: str, out: str) -> dict[str, Any]:
    res = PHASES[phase](rank, port, out)
    return res if rank == 0 else {"full_state": res.get("full_state")}


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("fsdp") / "iter_000002"
    train = _spawn("train", out)
    return {**train, "resume": _spawn("resume", out)["rank0"], "out": out, "ref": _reference()}


def _spawn(phase: str, out: Path) -> dict[str, Any]:
    got = run_two_ranks(_phase, phase, str(out), timeout_s=120)
    return {"rank0": got[0], "rank1": got[1]}


def _close(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], tol: float = 1e-5) -> None:
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], atol=tol, rtol=tol, msg=k)


def test_blocks_are_the_shard_units_and_each_rank_holds_half(ranks):
    r0 = ranks["rank0"]
    assert r0["units"] == 2 and r0["wrapped"]
    assert r0["local_rows"] == 4  # embed.weight is [8, 4]: rows 0..3 on rank 0


def test_loss_and_full_gradients_equal_single_process(ranks):
    r0, ref = ranks["rank0"], ranks["ref"]
    assert r0["loss"] == pytest.approx(ref["loss"], rel=1e-6)
    _close(r0["grads"], ref["grads"], 1e-6)
    ref_norm = torch.linalg.vector_norm(torch.cat([g.reshape(-1) for g in ref["grads"].values()]))
    assert r0["grad_norm"] == pytest.approx(float(ref_norm), rel=1e-5)


def test_optimizer_steps_equal_single_process(ranks):
    for sharded, ref in zip(ranks["rank0"]["params"], ranks["ref"]["params"]):
        _close(sharded, ref)


def test_resume_from_shards_continues_like_uninterrupted_training(ranks):
    r0, resumed = ranks["rank0"], ranks["resume"]
    assert resumed["loaded"]
    _close(resumed["loaded_params"], r0["params"][SAVE_AT - 1], 0)
    _close(resumed["resumed"], r0["params"][-1], 1e-6)
    _close(resumed["full_loaded"], {n: p.detach() for n, p in Tiny(seed=0).named_parameters()}, 0)


def test_full_state_dict_is_gathered_on_rank_zero_only(ranks):
    full = ranks["rank0"]["full_state"]
    assert ranks["rank1"]["full_state"] == {}
    assert all(v.device.type == "cpu" and not hasattr(v, "to_local") for v in full.values())
    _close(full, ranks["rank0"]["params"][-1], 0)


def test_converted_shards_load_into_the_unsharded_model(ranks, tmp_path):
    out: Path = ranks["out"]
    saved = ranks["rank0"]["params"][SAVE_AT - 1]
    model = Tiny(seed=9)
    _close(load_sharded_model(out, model), saved, 0)
    _close({n: p.detach() for n, p in model.named_parameters()}, saved, 0)


def test_convert_writes_the_serve_format(ranks, tmp_path):
    out: Path = ranks["out"]
    src = tmp_path / "checkpoints" / "iter_000002"
    src.mkdir(parents=True)
    (src / "sharded").symlink_to(out / "sharded", target_is_directory=True)
    meta = {"format": "rlinf-ros/checkpoint/1", "iteration": 2, "weight_version": 2}
    import json

    (src / "meta.json").write_text(json.dumps({**meta, "model": {"name": "tiny", "kwargs": {}}}))
    dst = convert_sharded(tmp_path, tmp_path / "served" / "iter_000002", model=Tiny(seed=3))
    blob = weights_from_bytes((dst / "model.safetensors").read_bytes())
    saved = ranks["rank0"]["params"][SAVE_AT - 1]
    _close({k: torch.from_numpy(v) for k, v in blob.items()}, saved, 0)
    fresh = Tiny(seed=4)
    fresh.load_state_dict({k: torch.from_numpy(v) for k, v in blob.items()})
    x, _ = _data()
    assert json.loads((dst / "meta.json").read_text())["iteration"] == 2
    ref = Tiny(seed=4)
    ref.load_state_dict(saved)
    torch.testing.assert_close(fresh(x), ref(x), atol=0, rtol=0)


def test_strategy_config_names_the_known_ones():
    cfg = OptimConfig(strategy="zero")
    with pytest.raises(ConfigError, match=r"actor\.strategy.*\['ddp', 'fsdp'\]"):
        cfg.validate()
    OptimConfig(strategy="fsdp").validate()
    assert make_strategy("fsdp", 0, 1).wrap(m := Tiny()) is m  # one rank: nothing to shard


def test_cpu_keeps_fp32():
    assert mixed_precision(torch.device("cpu")) is None
