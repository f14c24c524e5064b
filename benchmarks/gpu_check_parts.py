"""The GPU check's per-part measurements: the full-size VLA adapters' forward and LoRA training
step, the policy server under concurrent clients and MuJoCo offscreen rendering.

Why it exists: ``benchmarks/gpu_check.py`` grew past what one file reads well; it keeps the
driver (profiles, running each part in its own time-boxed process, the report) and this module
holds what each part measures. The part processes (``gpu_check.py --part NAME``) and the policy
server's spawned client processes import it from ``benchmarks/`` (the script's own folder, first
on their ``sys.path``).
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rlinf_contracts.registry import Registry  # noqa: E402

if TYPE_CHECKING:
    from gpu_check import Profile

STEM = "gpu_check"  # results file stem; also the served policy's name

# -- adapters: full-size config, offline ---------------------------------------------------------
ADAPTER_CONFIGS = {"openvla_oft": "configs/vla_openvla_gpu.yaml", "pi0": "configs/vla_pi0_gpu.yaml"}


def bounds_stats(dim: int) -> dict[str, Any]:
    """OpenVLA ``bounds_q99`` action statistics (last dimension the unnormalised gripper)."""
    return {
        "q01": [-0.05] * (dim - 1) + [0.0],
        "q99": [0.05] * (dim - 1) + [1.0],
        "mask": [True] * (dim - 1) + [False],
    }


def flow_stats(state_dim: int, action_dim: int) -> dict[str, Any]:
    """openpi ``norm_stats`` with both schemes' keys (π0 mean_std, π0.5 quantile)."""

    def one(d: int) -> dict[str, list[float]]:
        return {"mean": [0.0] * d, "std": [1.0] * d, "q01": [-1.0] * d, "q99": [1.0] * d}

    return {"state": one(state_dim), "actions": one(action_dim)}


def _offline_openvla(cfg: Any) -> Any:
    cfg.checkpoint, cfg.tokenizer, cfg.norm_stats_path = "", "", ""
    cfg.norm_stats = bounds_stats(cfg.action_dim)
    return cfg


def _offline_oft(cfg: Any) -> Any:
    _offline_openvla(cfg.vla)
    return cfg


def _offline_pi0(cfg: Any) -> Any:
    cfg.checkpoint, cfg.tokenizer = "", ""
    cfg.norm_stats = flow_stats(cfg.state_dim, cfg.action_dim)
    return cfg


# adapter name -> what makes its config buildable with nothing on disk: no checkpoint (random
# weights), the byte tokenizer (every vocabulary here has >= 259 ids), made-up statistics
OFFLINE: Registry[Callable[[Any], Any]] = Registry("offline adapter config")
OFFLINE.add("openvla", _offline_openvla)
OFFLINE.add("openvla_oft", _offline_oft)
OFFLINE.add("pi0", _offline_pi0)
OFFLINE.add("pi05", _offline_pi0)


def adapter_config(part: str, profile: Profile) -> tuple[str, Any]:
    """(adapter name, model config) of a GPU config: its load plan's full-size config, or the
    adapter's tiny() config in a smoke run; checkpoint-free either way."""
    from learner.models.adapters.gpu_config import (
        AdapterSection,
        load_gpu_config,
        load_plan,
        tiny_plan,
    )

    gpu_cfg = load_gpu_config(ROOT / ADAPTER_CONFIGS[part])
    name = gpu_cfg.adapter.name
    if profile.full_size:
        cfg = load_plan(gpu_cfg)["config"]
    else:
        cfg = tiny_plan(AdapterSection(name=name, tiny=True))
    return name, OFFLINE.get(name)(cfg)


def build_on_device(name: str, cfg: Any, device: str, dtype: str) -> Any:
    """Build the adapter with its weights initialised on ``device`` in ``dtype`` (a 7B model
    initialised in float32 on the host would take minutes and 30 GB), then ``.to`` as
    ``gpu_config.load_adapter`` does."""
    import torch

    from learner.models.adapters import build_adapter

    dt, previous = getattr(torch, dtype), torch.get_default_dtype()
    torch.set_default_dtype(dt)
    try:
        with torch.device(device):
            adapter = build_adapter(name, cfg=cfg)
    finally:
        torch.set_default_dtype(previous)
    return adapter.to(device=device, dtype=dt)


def observation(adapter: Any, batch: int | None, seed: int = 0) -> dict[str, Any]:
    """A batched (``batch``) or single (``None``) observation of the adapter's cameras at its
    image size, so nothing is resized."""
    rng = np.random.default_rng(seed)
    lead = () if batch is None else (batch,)
    s = adapter.image_size
    words = ["pick up the red cube", "push the blue ball to the left", "open the top drawer"]
    return {
        "state": rng.normal(0, 0.3, (*lead, adapter.state_dim)).astype(np.float32),
        "images": {
            c: rng.integers(0, 255, (*lead, s, s, 3), dtype=np.uint8) for c in adapter.cameras
        },
        "instruction": words[0] if batch is None else [words[i % 3] for i in range(batch)],
    }


class DeviceClock:
    """Wall seconds of a block, waiting for the device's queued work at both ends."""

    def __init__(self, device: str) -> None:
        self.device, self.seconds = device, 0.0

    def _sync(self) -> None:
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.synchronize()

    def __enter__(self) -> DeviceClock:
        self._sync()
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self._sync()
        self.seconds = time.perf_counter() - self._t0


def reset_peak(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.reset_peak_memory_stats()


def peak_gib(device: str) -> float | None:
    """Peak allocated device memory since the last reset (None on the CPU)."""
    if not device.startswith("cuda"):
        return None
    import torch

    return round(torch.cuda.max_memory_allocated() / 2**30, 2)


def train_step(adapter: Any, obs: dict[str, Any], opt: Any) -> float:
    """One RL step as the runners take it: sample a chunk without gradients, score it again with
    gradients, raise its log-prob (LoRA and heads only), AdamW."""
    import torch

    with torch.no_grad():
        out = adapter.act(obs, deterministic=False)
    loss = -adapter.log_prob(obs, out.extras).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return float(loss.detach())


def model_facts(name: str, adapter: Any, cfg: Any, profile: Profile) -> dict[str, Any]:
    params = list(adapter.parameters())
    return {
        "adapter": name,
        "size": "full" if profile.full_size else "tiny",
        "device": str(adapter.device),
        "dtype": profile.dtype,
        "params_M": round(sum(p.numel() for p in params) / 1e6, 2),
        "trainable_M": round(sum(p.numel() for p in params if p.requires_grad) / 1e6, 2),
        "weights_gib": round(sum(p.numel() * p.element_size() for p in params) / 2**30, 2),
        "chunk": adapter.chunk,
        "cameras": list(adapter.cameras),
        "image_size": adapter.image_size,
        "config": _short_config(cfg),
    }


def _short_config(cfg: Any) -> str:
    """The model config without its statistics, on one line."""
    text = re.sub(r"norm_stats=\{.*?\}\}?\)?,", "", repr(cfg))
    return text if len(text) < 2000 else text[:2000] + "..."


def adapter_part(part: str, profile: Profile) -> dict[str, Any]:
    import torch

    torch.manual_seed(0)
    name, cfg = adapter_config(part, profile)
    reset_peak(profile.device)
    with DeviceClock(profile.device) as build:
        adapter = build_on_device(name, cfg, profile.device, profile.dtype)
    out = model_facts(name, adapter, cfg, profile)
    out.update(build_s=round(build.seconds, 2), peak_gib_build=peak_gib(profile.device))
    obs = observation(adapter, profile.batch)
    reset_peak(profile.device)
    forward_s = []
    for _ in range(2):  # the first call includes kernel selection and allocator warm-up
        with DeviceClock(profile.device) as c, torch.no_grad():
            act = adapter.act(obs, deterministic=True)
        forward_s.append(round(c.seconds, 3))
    if not np.all(np.isfinite(act.actions)):
        raise FloatingPointError(f"{name}: non-finite actions from the forward")
    out.update(
        batch=profile.batch,
        forward_s=forward_s,
        actions_shape=list(act.actions.shape),
        peak_gib_forward=peak_gib(profile.device),
    )
    lora_b = next(p for n, p in adapter.named_parameters() if "lora_B" in n and p.requires_grad)
    before = lora_b.detach().clone()
    opt = torch.optim.AdamW(adapter.trainable_parameters(), lr=1e-5)
    reset_peak(profile.device)
    step_s, losses = [], []
    for _ in range(2):  # the first step also allocates AdamW's state
        with DeviceClock(profile.device) as c:
            losses.append(train_step(adapter, obs, opt))
        step_s.append(round(c.seconds, 3))
    if not np.all(np.isfinite(losses)):
        raise FloatingPointError(f"{name}: non-finite loss {losses}")
    if torch.equal(before, lora_b.detach()):
        raise AssertionError(f"{name}: the training step left the LoRA weights unchanged")
    out.update(train_step_s=step_s, loss=losses, peak_gib_train=peak_gib(profile.device))
    return out


# -- policy server --------------------------------------------------------------------------------
def _client_proc(
    url: str, conns: int, obs: dict[str, Any], start_at: float, span: float, q: Any
) -> None:
    """``conns`` closed-loop connections (one request in flight each) until ``start_at + span``:
    (time, round-trip ms) per request. As benchmarks/policy_server.py's clients, with a VLA
    observation (state, camera images, instruction) instead of a state vector."""
    from policy_server.client import AsyncPolicyClient

    async def one() -> list[tuple[float, float]]:
        client = await AsyncPolicyClient.connect(url, timeout_s=120)
        out: list[tuple[float, float]] = []
        await asyncio.sleep(max(0.0, start_at - time.time()))
        while time.time() < start_at + span:
            t0 = time.perf_counter()
            await client.infer(obs)
            out.append((time.time(), (time.perf_counter() - t0) * 1000.0))
        await client.close()
        return out

    async def main() -> list[tuple[float, float]]:
        results = await asyncio.gather(*(one() for _ in range(conns)))
        return [r for rs in results for r in rs]

    q.put(asyncio.run(main()))


def drive_clients(
    url: str, clients: int, obs: dict[str, Any], warmup: float, duration: float
) -> dict[str, float]:
    """Closed-loop load from ``clients`` connections in 2 processes: req/s, p50 / p99 ms."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    n_procs = min(2, clients)
    split = [clients // n_procs + (1 if i < clients % n_procs else 0) for i in range(n_procs)]
    start_at = time.time() + 4.0  # spawned interpreters need a moment to import
    procs = [
        ctx.Process(target=_client_proc, args=(url, n, obs, start_at, warmup + duration, q))
        for n in split
    ]
    for p in procs:
        p.start()
    wait = start_at - time.time() + warmup + duration + 60
    samples = [s for _ in procs for s in q.get(timeout=wait)]
    for p in procs:
        p.join(10)
    lo, hi = start_at + warmup, start_at + warmup + duration
    window = [ms for t, ms in samples if lo <= t <= hi]
    if not window:
        raise RuntimeError(f"no request completed in the measured window with {clients} clients")
    return {
        "req_per_s": round(len(window) / duration, 2),
        "p50_ms": round(float(np.percentile(window, 50)), 2),
        "p99_ms": round(float(np.percentile(window, 99)), 2),
        "requests": len(window),
    }


def raw_forward_ms(served: Any, adapter: Any, batch: int, device: str) -> float:
    """Mean ms of the served model's in-process ``infer`` on a batch (after one warm-up)."""
    obs = observation(adapter, batch, seed=1)
    served.infer(obs)
    times = []
    for _ in range(3):
        with DeviceClock(device) as c:
            served.infer(obs)
        times.append(c.seconds * 1000.0)
    return round(float(np.mean(times)), 2)


def policy_server_part(profile: Profile) -> dict[str, Any]:
    import torch

    from learner.models.adapters.common import serve
    from policy_server.background import ServerThread
    from policy_server.config import ServerConfig
    from policy_server.server import PolicyServer

    torch.manual_seed(0)
    name, cfg = adapter_config(profile.served, profile)
    adapter = build_on_device(name, cfg, profile.device, profile.dtype)
    served = serve(adapter)
    facts = model_facts(name, adapter, cfg, profile)
    out: dict[str, Any] = {
        "served_model": f"{name} ({facts['size']}-size, random weights, {profile.dtype}, "
        f"{facts['device']})",
        "params_M": facts["params_M"],
        "max_wait_ms": profile.serve_wait_ms,
        "warmup_s": profile.serve_warmup_s,
        "duration_s": profile.serve_seconds,
        "clients": {},
    }
    server_cfg = ServerConfig(
        host="127.0.0.1", port=0, max_batch=max(profile.clients), max_wait_ms=profile.serve_wait_ms
    )
    one_obs = observation(adapter, None, seed=2)
    with ServerThread(PolicyServer(served, server_cfg, policy_name=STEM)) as srv:
        for n in profile.clients:
            point = drive_clients(
                srv.url, n, one_obs, profile.serve_warmup_s, profile.serve_seconds
            )
            m = srv.server.metrics
            point["mean_batch_so_far"] = round(m.batch_sum / max(1, m.batches), 2)
            point["raw_forward_ms_at_batch"] = raw_forward_ms(served, adapter, n, profile.device)
            out["clients"][str(n)] = point
            print(f"[policy_server] {n} clients: {point}", flush=True)
    out["peak_gib"] = peak_gib(profile.device)
    return out


# -- MuJoCo rendering ----------------------------------------------------------------------------
def render_part(profile: Profile) -> dict[str, Any]:
    """Offscreen frames/s of the Franka push scene's third-person camera (one renderer, one
    env), and env steps/s with that camera in the observation."""
    import mujoco

    from rlinf_contracts.env_registry import make_env
    from sim_bridges.mujoco_franka.render import CameraRig

    px, cam = profile.render_px, "third"
    env = make_env(
        "mujoco_franka/push", num_envs=1, obs_mode="state+rgb", image_size=px, cameras=(cam,)
    )
    env.reset(seed=0)
    rig = CameraRig(px, px)
    frame = rig.render(env.fms, env.datas, cam)  # creates the GL context
    frames, t_end = 0, time.perf_counter() + profile.render_seconds
    t0 = time.perf_counter()
    while time.perf_counter() < t_end:
        rig.render(env.fms, env.datas, cam, out=frame)
        frames += 1
    render_fps = frames / (time.perf_counter() - t0)
    rig.close()
    steps, rng = 0, np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (64, 1, env.spec.action_dim)).astype(np.float32)
    t_end = time.perf_counter() + profile.render_seconds / 2
    t0 = time.perf_counter()
    while time.perf_counter() < t_end:
        env.step(actions[steps % len(actions)])
        steps += 1
    env_sps = steps / (time.perf_counter() - t0)
    env.close()
    if float(frame.std()) == 0.0:
        raise RuntimeError(f"MUJOCO_GL={os.environ.get('MUJOCO_GL')} rendered a blank frame")
    return {
        "mujoco": mujoco.__version__,
        "gl": os.environ.get("MUJOCO_GL", ""),
        "scene": "mujoco_franka/push",
        "camera": cam,
        "px": px,
        "frames_per_s": round(render_fps, 1),
        "env_steps_per_s_with_camera": round(env_sps, 1),
        "frame_mean": round(float(frame.mean()), 2),
    }
