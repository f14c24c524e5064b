"""What power-cut durability costs the episode store: ms per appended step, ``fsync`` off vs on.

``EpisodeStore(..., fsync=True)`` (``IngestConfig.fsync``) flushes a step's chunk files, then its
commit point (the episode's ``zarr.json``) and their directories, before ``append`` returns; off,
a step survives kill -9 but not a power cut. Each repeat appends ``--steps`` steps to a fresh
episode in a fresh store, once with fsync off and once on (interleaved, order alternating, so
the machine's load hits both alike); the figure is the median ms/step over ``--repeats`` with the
spread (min-max). Two step shapes: state-only (39-d, like push) and state + one 64x64 camera.
Episode creation (``begin``: staged, then renamed) is timed the same way.

    .venv/bin/python benchmarks/store_durability.py            # ~1-3 min on 2 busy cores
    .venv/bin/python benchmarks/store_durability.py --quick    # smoke run

Writes ``benchmarks/results/store_durability.md``. The store directory is made under ``--dir``
(default ``runs/``, on the repository's disk; a tmpfs would make fsync free).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from rlinf_contracts.episode import EpisodeInfo, Step, StepLayout
from rlinf_data.store import EpisodeStore

RESULTS = Path(__file__).parent / "results"
log = logging.getLogger("store_durability")
SHAPES = {
    "state 39-d": StepLayout(39, 4),
    "state 39-d + 64x64 camera": StepLayout(39, 4, {"wrist": (64, 64)}),
}


def _one(root: Path, layout: StepLayout, steps: int, fsync: bool) -> tuple[float, float]:
    """(ms per step, ms per begin) of one fresh episode in a fresh store."""
    d = Path(tempfile.mkdtemp(dir=root))
    try:
        store = EpisodeStore(d / "s", fsync=fsync)
        t = time.perf_counter()
        w = store.begin(EpisodeInfo(task="bench", layout=layout, source="online"))
        begin_ms = (time.perf_counter() - t) * 1e3
        rng = np.random.default_rng(0)
        images = {
            c: rng.integers(0, 255, (h, wd, 3), np.uint8) for c, (h, wd) in layout.cameras.items()
        }
        step = Step(
            state=rng.standard_normal(layout.state_dim).astype(np.float32),
            action=np.zeros(layout.action_dim, np.float32),
            images=images,
        )
        t = time.perf_counter()
        for _ in range(steps):
            w.append(step)
        step_ms = (time.perf_counter() - t) / steps * 1e3
        w.end()
        return step_ms, begin_ms
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def _filesystem(path: Path) -> str:
    """The filesystem type of ``path`` (from /proc/mounts: fsync costs depend on it)."""
    best, kind = "", "unknown"
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            _, mnt, fs, *_ = line.split()
            if str(path.resolve()).startswith(mnt) and len(mnt) > len(best):
                best, kind = mnt, fs
    except OSError:
        pass
    return kind


def _fmt(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--dir", default="runs")
    p.add_argument("--quick", action="store_true", help="3 repeats of 40 steps")
    a = p.parse_args(argv)
    logging.basicConfig(level="INFO", format="%(message)s")
    if a.quick:
        a.repeats, a.steps = 3, 40
    root = Path(a.dir)
    root.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()[0]
    res: dict[tuple[str, bool], list[tuple[float, float]]] = {}
    for r in range(a.repeats):
        for name, layout in SHAPES.items():
            for fsync in (False, True) if r % 2 == 0 else (True, False):
                res.setdefault((name, fsync), []).append(_one(root, layout, a.steps, fsync))
        log.info("repeat %d/%d done", r + 1, a.repeats)
    load1 = os.getloadavg()[0]
    rows = [
        "| step shape | ms/step fsync off | ms/step fsync on | on / off | ms/begin off | "
        "ms/begin on |",
        "|---|---|---|---|---|---|",
    ]
    for name in SHAPES:
        off, on = res[(name, False)], res[(name, True)]
        ratio = statistics.median(s for s, _ in on) / statistics.median(s for s, _ in off)
        rows.append(
            f"| {name} | {_fmt([s for s, _ in off])} | {_fmt([s for s, _ in on])} | {ratio:.1f}x | "
            f"{_fmt([b for _, b in off])} | {_fmt([b for _, b in on])} |"
        )
    cmd = "python benchmarks/store_durability.py" + (
        " --quick" if a.quick else f" --repeats {a.repeats} --steps {a.steps}"
    )
    text = "\n".join(
        [
            "# Episode store: the cost of fsync (power-cut durability) per step",
            "",
            f"Command: `{cmd}`",
            "",
            f"Machine: {_cpu_model()}, {os.cpu_count()} CPUs, filesystem {_filesystem(root)} under "
            f"`{a.dir}/`",
            "",
            f"Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
            "",
            f"Load average {load0:.1f} at start, {load1:.1f} at end. Median (min-max) of "
            f"{a.repeats} "
            f"repeats, each a fresh store and episode of {a.steps} steps, fsync off and on "
            "interleaved "
            "in alternating order.",
            "",
            *rows,
            "",
            "- fsync off: a step survives kill -9 (its commit point is an atomic rename), not a "
            "power cut.",
            "- fsync on (`EpisodeStore(fsync=True)`, `IngestConfig.fsync`): the step's chunk "
            "files, its commit "
            "point and their directories are flushed before `append` returns.",
            "- The machine is shared: compare the two columns of one run, not absolute figures "
            "across runs.",
            "",
        ]
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "store_durability.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
