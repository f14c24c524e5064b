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
import json
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_results import RESULTS, machine_meta, provenance  # noqa: E402
from gpu_check_parts import (  # noqa: E402
    ADAPTER_CONFIGS,
    STEM,
    adapter_part,
    policy_server_part,
    render_part,
)

from rlinf_contracts.registry import Registry  # noqa: E402

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
