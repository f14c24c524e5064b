"""GPU check: the full-size VLA adapters, the served policy and MuJoCo EGL rendering on one CUDA
device, in one prepared run of about 8 minutes.

Why it exists: the adapters (OpenVLA-OFT 7B, π0 3B), the policy server and the EGL renderer are
tested on CPUs at tiny sizes only; a CUDA machine is lent rarely and briefly, so what to measure
there is written, time-boxed and tested here beforehand. Four parts, each in its own process
with its own time box, so a part that fails (out of memory, no EGL, a missing package) or hangs
records its error and the others still run:

- ``openvla_oft`` / ``pi0``: the adapter of ``configs/vla_openvla_gpu.yaml`` /
  ``configs/vla_pi0_gpu.yaml`` at its full size (the config's own load plan), random weights built
  directly on the device in bf16, nothing downloaded (byte tokenizer, made-up action statistics);
  a sampled forward (``act``) and one LoRA training step (``log_prob`` of the sampled chunk,
  backward, AdamW): time and peak GPU memory.
- ``policy_server``: the full-size π0 adapter served by the policy server (dynamic batching) on
  the device, closed-loop clients in 2 separate processes on the same machine at 1 / 8 / 32
  concurrent connections: req/s and p50 / p99 round trip, beside the in-process batched forward.
- ``render``: the MuJoCo Franka push scene rendered offscreen with ``MUJOCO_GL=egl`` at 128 px.

``--smoke`` runs the same code on the CPU at tiny sizes (tiny adapters, 1 / 2 clients, 32 px with
osmesa) in about a minute and writes to a temporary folder; only a CUDA run writes
``benchmarks/results/gpu_check.{json,md}``. ``scripts/gpu_check.sh`` installs the carried wheels
first and runs this.

    python benchmarks/gpu_check.py                   # CUDA device; exits 3 at once without one
    python benchmarks/gpu_check.py --smoke [--out DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_results import RESULTS, machine_meta, provenance  # noqa: E402

from rlinf_contracts.registry import Registry  # noqa: E402

STEM = "gpu_check"
NO_CUDA_EXIT = 3


@dataclass(frozen=True)
class Profile:
    """Sizes and time boxes of one kind of run: the CUDA check or its CPU smoke run."""

    name: str
    device: str
    full_size: bool  # the configs' real dimensions; else the adapters' tiny() configs
    gl: str  # MUJOCO_GL of the render part
    render_px: int
    clients: tuple[int, ...]
    time_box_s: dict[str, float]  # per part; the part's process is killed past it
    dtype: str = "bfloat16"
    batch: int = 4  # observations per adapter forward / training step
    serve_seconds: float = 3.0  # measured seconds per client count
    serve_warmup_s: float = 1.0
    serve_wait_ms: float = 20.0  # the server's batching wait (~ a third of a forward)
    render_seconds: float = 3.0
    served: str = "pi0"  # which adapter part's model the policy server serves


PROFILES: Registry[Profile] = Registry("gpu check profile")
PROFILES.add(
    "gpu",
    Profile(
        name="gpu",
        device="cuda",
        full_size=True,
        gl="egl",
        render_px=128,
        clients=(1, 8, 32),
        time_box_s={"openvla_oft": 150, "pi0": 110, "policy_server": 150, "render": 45},
    ),
)
PROFILES.add(
    "smoke",
    Profile(
        name="smoke",
        device="cpu",
        full_size=False,
        gl="osmesa",
        render_px=32,
        clients=(1, 2),
        time_box_s={"openvla_oft": 45, "pi0": 45, "policy_server": 60, "render": 30},
        batch=2,
        serve_seconds=1.0,
        serve_warmup_s=0.3,
        serve_wait_ms=5.0,
        render_seconds=1.0,
    ),
)


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


# -- parts, each in its own process --------------------------------------------------------------
@dataclass(frozen=True)
class Part:
    run: Callable[[Profile], dict[str, Any]]
    env: Callable[[Profile], dict[str, str]] = field(default=lambda p: {})


PARTS: Registry[Part] = Registry("gpu check part")
PARTS.add("openvla_oft", Part(lambda p: adapter_part("openvla_oft", p)))
PARTS.add("pi0", Part(lambda p: adapter_part("pi0", p)))
PARTS.add("policy_server", Part(policy_server_part))
PARTS.add("render", Part(render_part, lambda p: {"MUJOCO_GL": p.gl, "PYOPENGL_PLATFORM": p.gl}))


def run_part_here(name: str, profile: Profile, dest: Path) -> None:
    """Inside a part's process: run it and write its result (or its error) to ``dest``."""
    t0 = time.perf_counter()
    try:
        result: dict[str, Any] = {"ok": True, **PARTS.get(name).run(profile)}
    except Exception as e:  # a failing part is a result, not a crash
        result = {
            "ok": False,
            "error": f"{type(e).__name__}: {e}"[:2000],
            "traceback": traceback.format_exc()[-4000:],
        }
    result["seconds"] = round(time.perf_counter() - t0, 1)
    dest.write_text(json.dumps(result, indent=1, default=str))


def run_part(name: str, profile: Profile, time_box: float) -> dict[str, Any]:
    """Run one part in a fresh process (own device memory, own GL context), killed with its
    client processes past ``time_box`` seconds."""
    with tempfile.TemporaryDirectory(prefix=f"{STEM}_") as tmp:
        dest, log = Path(tmp) / "result.json", Path(tmp) / "stderr.log"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--profile", profile.name]
        cmd += ["--part", name, "--part-result", str(dest)]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **PARTS.get(name).env(profile)}
        t0 = time.perf_counter()
        with log.open("w") as err:
            proc = subprocess.Popen(cmd, env=env, stderr=err, start_new_session=True)
            try:
                code = proc.wait(timeout=time_box)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                code = None
        seconds = round(time.perf_counter() - t0, 1)
        tail = log.read_text(errors="replace")[-3000:]
        sys.stderr.write(tail)
        if dest.exists():
            return {**json.loads(dest.read_text()), "wall_s": seconds}
        why = f"killed at its {time_box:.0f} s time box" if code is None else f"exit code {code}"
        return {"ok": False, "error": f"{why}; stderr tail: {tail[-800:]}", "wall_s": seconds}


def run_all(profile: Profile, budget_s: float) -> dict[str, dict[str, Any]]:
    """Every part in turn; each gets its time box, cut to what is left of ``budget_s``."""
    results, t_end = {}, time.monotonic() + budget_s
    for name in PARTS.names():
        left = t_end - time.monotonic()
        box = min(profile.time_box_s[name], left)
        if box < 5:
            results[name] = {"ok": False, "error": f"skipped: {left:.0f} s of the budget left"}
            continue
        print(f"[{STEM}] part {name} (time box {box:.0f} s)", flush=True)
        results[name] = run_part(name, profile, box)
        r = results[name]
        print(f"[{STEM}] part {name}: {'ok' if r['ok'] else 'FAILED ' + r['error']}", flush=True)
    return results


# -- machine, results ----------------------------------------------------------------------------
def cuda_machine() -> str | None:
    """'GPU name, N GiB, torch X, CUDA Y' or None when torch sees no CUDA device."""
    import torch

    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(0)
    return (
        f"{props.name}, {props.total_memory / 2**30:.0f} GiB, torch {torch.__version__}, "
        f"CUDA {torch.version.cuda}"
    )


def report(profile: Profile, parts: dict[str, dict[str, Any]], gpu: str | None) -> dict[str, Any]:
    meta = machine_meta(
        gpu=gpu, python=platform.python_version(), profile=profile.name, sizes=asdict(profile)
    )
    return {"meta": meta, "ok": all(p["ok"] for p in parts.values()), "parts": parts}


def _adapter_line(name: str, r: dict[str, Any]) -> str:
    return (
        f"| {name} | {r['size']} | {r['params_M']:.1f} M ({r['trainable_M']:.1f} M trainable) | "
        f"{r['build_s']} | {r['batch']} | {' / '.join(map(str, r['forward_s']))} | "
        f"{' / '.join(map(str, r['train_step_s']))} | {r['peak_gib_forward']} | "
        f"{r['peak_gib_train']} |"
    )


def markdown(rep: dict[str, Any]) -> str:
    meta, parts = rep["meta"], rep["parts"]
    lines = ["# GPU check", "", *(f"{x}\n" for x in provenance(meta))]
    lines += [f"GPU: {meta.get('gpu')}; Python {meta.get('python')}.", ""]
    lines += [
        f"Adapters: those of configs/vla_openvla_gpu.yaml and configs/vla_pi0_gpu.yaml at "
        f"{'their full size' if meta['sizes']['full_size'] else 'tiny size'}, random "
        f"{meta['sizes']['dtype']} weights (no checkpoint); forward = `act` on a "
        "batch, train step = sampled chunk re-scored with gradients, backward, AdamW on LoRA and "
        "heads. Times in seconds (first / second call); peak GPU memory in GiB.",
        "",
        "| adapter | size | params | build s | batch | forward s | train step s | "
        "peak fwd GiB | peak train GiB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    failed = [f"- {name}: FAILED: {r['error']}" for name, r in parts.items() if not r["ok"]]
    lines += [_adapter_line(n, parts[n]) for n in ADAPTER_CONFIGS if parts[n]["ok"]]
    server = parts["policy_server"]
    if server["ok"]:
        lines += [
            "",
            f"Policy server: {server['served_model']} served with dynamic batching "
            f"(wait {server['max_wait_ms']} ms); closed-loop clients in 2 processes on the same "
            f"machine, {server['duration_s']} s per point.",
            "",
            "| clients | req/s | p50 ms | p99 ms | mean batch | raw forward ms at that batch |",
            "|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {n} | {c['req_per_s']} | {c['p50_ms']} | {c['p99_ms']} | "
            f"{c['mean_batch_so_far']} | {c['raw_forward_ms_at_batch']} |"
            for n, c in server["clients"].items()
        ]
    render = parts["render"]
    if render["ok"]:
        lines += [
            "",
            f"Rendering: {render['scene']} camera `{render['camera']}` at {render['px']} px, "
            f"MUJOCO_GL={render['gl']}: {render['frames_per_s']} frames/s; "
            f"{render['env_steps_per_s_with_camera']} env steps/s with the camera.",
        ]
    if failed:
        lines += ["", "Failed parts:", "", *failed]
    return "\n".join(lines) + "\n"


def write(rep: dict[str, Any], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{STEM}.json").write_text(json.dumps(rep, indent=1, default=str))
    (out_dir / f"{STEM}.md").write_text(markdown(rep))


# -- wheel folder: the Panda assets ---------------------------------------------------------------
PANDA_XML = ("robots/panda/robot.xml", "grippers/panda_gripper.xml")


def pack_panda_assets(dest: Path) -> int:
    """Zip the robosuite files the Franka scene reads (the Panda and its gripper: XML and the
    meshes they name) as ``robosuite/models/assets/...``: the whole robosuite wheel is far larger
    than a device run may carry. Returns the number of files."""
    from sim_bridges.mujoco_franka.model import robosuite_assets_dir

    assets = robosuite_assets_dir()
    names = list(PANDA_XML)
    for xml in PANDA_XML:
        base = Path(xml).parent
        refs = re.findall(r'file="([^"]+)"', (assets / xml).read_text())
        names += [str(base / r) for r in refs]
    dest.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for n in sorted(set(names)):
            z.write(assets / n, f"robosuite/models/assets/{n}")
    return len(set(names))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="CPU, tiny sizes, temporary output")
    ap.add_argument("--profile", default=None, choices=PROFILES.names(), help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=None, help="results folder (smoke: a temp dir)")
    ap.add_argument("--budget-s", type=float, default=470.0, help="all parts together")
    ap.add_argument("--part", choices=PARTS.names(), help=argparse.SUPPRESS)
    ap.add_argument("--part-result", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--pack-panda-assets", type=Path, metavar="ZIP", help="write ZIP and exit")
    args = ap.parse_args()
    if args.pack_panda_assets:
        print(f"{pack_panda_assets(args.pack_panda_assets)} files -> {args.pack_panda_assets}")
        return
    profile = PROFILES.get(args.profile or ("smoke" if args.smoke else "gpu"))
    if args.part:
        run_part_here(args.part, profile, args.part_result)
        return
    gpu = cuda_machine()
    if profile.device == "cuda" and gpu is None:
        _no_cuda()
    smoke_dir = None if profile.device == "cuda" else Path(tempfile.mkdtemp(prefix=f"{STEM}_"))
    out_dir = args.out or smoke_dir or RESULTS
    rep = report(profile, run_all(profile, args.budget_s), gpu)
    write(rep, out_dir)
    print(markdown(rep))
    print(f"[{STEM}] wrote {out_dir / STEM}.json and .md", flush=True)


def _no_cuda() -> None:
    print(
        f"{STEM}: no CUDA device visible to torch: this check needs one GPU. "
        "Run `bash scripts/gpu_check.sh --smoke` for the CPU version of the same code.",
        file=sys.stderr,
    )
    sys.exit(NO_CUDA_EXIT)


if __name__ == "__main__":
    main()
