"""``rlinf train CONFIG --seeds N``: the same config trained under several seeds, then aggregated.

Each seed is its own ``rlinf train`` process (``seed=<k> train.out_dir=<out_dir>/seed_<k>``,
output to ``seed_<k>/train.log``), so a crashing seed costs only itself and every seed's run
directory is an ordinary one that ``rlinf eval`` and the benchmarks read as usual. When all have
ended, :func:`learner.eval.seed_report.write_report` writes ``seeds.json`` / ``seeds.md`` /
``seeds.png`` under ``<out_dir>``.

How many run at once (:func:`concurrency`): a config that runs as one local process on CPU
slots (the fused default) needs the cores its placement names, so as many seeds as the free
cores hold run side by side, each pinned to its own cores; anything else (a Ray placement over
several processes, a GPU, a joined cluster) already uses the machine, so the seeds run one after
another. Why separate processes, not threads: the fused runner pins its process to its cores
and sets torch's thread count, and a seed's crash or leak must not reach its siblings.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from rlinf_cli.errors import PreflightError

if TYPE_CHECKING:
    from learner.eval.seed_report import SeedFailure, SeedRun
    from learner.sections import RunConfig

log = logging.getLogger(__name__)

LOG_NAME = "train.log"
POLL_S = 0.5


def parse_seeds(text: str) -> list[int]:
    """``"3"`` -> seeds 0, 1, 2; ``"0,3,7"`` -> those seeds. A mistake is a one-line error.

    >>> parse_seeds("3"), parse_seeds("0,3,7")
    ([0, 1, 2], [0, 3, 7])
    >>> parse_seeds("0")
    Traceback (most recent call last):
    ...
    rlinf_cli.errors.PreflightError: --seeds 0: N must be >= 1 (or list seeds: --seeds 0,3,7)
    """
    words = [w.strip() for w in str(text).split(",")]
    if not all(w.isdigit() for w in words):
        raise PreflightError(
            f"--seeds {text}: expected a count N >= 1 or a list of seeds >= 0, e.g. --seeds 5 or "
            "--seeds 0,3,7"
        )
    if len(words) == 1:
        n = int(words[0])
        if n < 1:
            raise PreflightError(f"--seeds {text}: N must be >= 1 (or list seeds: --seeds 0,3,7)")
        return list(range(n))
    seeds = [int(w) for w in words]
    repeated = sorted({s for s in seeds if seeds.count(s) > 1})
    if repeated:
        raise PreflightError(f"--seeds {text}: seed(s) {repeated} listed twice")
    return seeds


def free_cores(cores: int, load: float) -> int:
    """Cores not busy now: this process's cores less the 1-minute load, at least one.

    >>> free_cores(16, 0.3), free_cores(2, 1.7), free_cores(2, 5.0)
    (16, 1, 1)
    """
    return max(1, min(cores, cores - round(load)))


def concurrency(n_seeds: int, cores_per_seed: int | None, free: int) -> int:
    """Seeds run at once: as many as ``free`` cores hold when each needs ``cores_per_seed``
    (None: the run is not one local CPU process, so one at a time).

    >>> concurrency(5, 1, 2), concurrency(5, 2, 5), concurrency(2, 1, 16), concurrency(5, None, 16)
    (2, 2, 2, 1)
    """
    if cores_per_seed is None:
        return 1
    return max(1, min(n_seeds, free // max(1, cores_per_seed)))


def cores_per_seed(spec: Any, cfg: RunConfig) -> int | None:
    """Cores one seed needs when it runs as one local CPU process (the highest slot its placement
    names + 1, so the placement stays valid on a seed's own cores); None otherwise."""
    from learner.cluster import expected_slots
    from learner.placement import PlacementError, parse_placement

    slots = expected_slots(cfg.cluster)
    if slots is None or slots[1] != "cpu" or spec.in_process is None:
        return None
    if not spec.in_process(cfg, slots[0]) or isinstance(cfg.placement, str):
        return None  # `placement: auto` is planned per seed, so its cores are not known here
    try:
        placement = parse_placement(cfg.placement, slots[0])
    except PlacementError:
        return None
    used = [s for p in placement.components.values() for s in p.slots]
    return max(used) + 1 if used else None


def _affinity() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return list(range(os.cpu_count() or 1))


def _load() -> float:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0.0


@dataclass(frozen=True)
class SeedPlan:
    """What ``--seeds`` runs: the config and overrides each seed repeats, and where."""

    config: str
    overrides: list[str]
    out_dir: Path
    seeds: list[int]
    parallel: int = 1
    cores_per_seed: int = 1
    extra_args: list[str] = field(default_factory=list)

    def describe(self) -> str:
        how = f"{self.parallel} at a time" if self.parallel > 1 else "one after another"
        return (
            f"seeds {', '.join(map(str, self.seeds))} of {self.config}, {how}, into "
            f"{self.out_dir}/seed_<k>/"
        )


def seed_plan(
    config: str,
    overrides: list[str],
    seeds: list[int],
    spec: Any,
    cfg: RunConfig,
    ray_address: str | None = None,
) -> SeedPlan:
    """The plan for a built config; a config ``--seeds`` cannot repeat is a one-line error."""
    # not every runner can resume (the base train section has no `resume`): a capability check
    if getattr(cfg.train, "resume", None):
        raise PreflightError(
            "--seeds cannot resume: train.resume names one run, and each seed writes its own "
            "seed_<k>/ (resume a seed with `rlinf train CONFIG seed=K train.out_dir=DIR/seed_K "
            "train.resume=...`)"
        )
    if not hasattr(cfg, "seed"):
        raise PreflightError(f"--seeds: runner '{cfg.runner}' has no 'seed' key to vary")
    extra = ["--ray-address", ray_address] if ray_address else []
    quiet = ["train.progress=false"] if hasattr(cfg.train, "progress") else []
    need = cores_per_seed(spec, cfg)
    parallel = concurrency(len(seeds), need, free_cores(len(_affinity()), _load()))
    return SeedPlan(
        config,
        [*overrides, *quiet],
        Path(cfg.train.out_dir),
        seeds,
        parallel,
        need or 1,
        extra,
    )


def seed_command(plan: SeedPlan, seed: int) -> list[str]:
    """The ``rlinf train`` command line of one seed."""
    from learner.eval.seed_report import seed_dir

    return [
        sys.executable,
        "-m",
        "rlinf_cli.main",
        "train",
        plan.config,
        *plan.extra_args,
        *plan.overrides,
        f"seed={seed}",
        f"train.out_dir={seed_dir(plan.out_dir, seed)}",
    ]


@dataclass
class _Running:
    seed: int
    proc: subprocess.Popen[bytes]
    log_file: IO[bytes]
    log_path: Path
    cores: list[int]
    started: float


def _start(plan: SeedPlan, seed: int, cores: list[int]) -> _Running:
    from learner.eval.seed_report import seed_dir

    out = seed_dir(plan.out_dir, seed)
    out.mkdir(parents=True, exist_ok=True)
    log_path = out / LOG_NAME
    log_file = log_path.open("wb")
    env = dict(os.environ)
    pin = None
    if cores:  # side by side: each seed on its own cores, the runner does not re-pin to slot 0
        env["RLINF_PIN_CPUS"] = "0"
        pin = _pinner(set(cores))
    proc = subprocess.Popen(
        seed_command(plan, seed),
        stdout=log_file,
        stderr=subprocess.STDOUT,
        env=env,
        preexec_fn=pin,
    )
    where = f" on core(s) {','.join(map(str, cores))}" if cores else ""
    print(f"seed {seed}: started{where}; log {log_path}", flush=True)
    return _Running(seed, proc, log_file, log_path, cores, time.perf_counter())


def _pinner(cores: set[int]) -> Any:
    def pin() -> None:
        os.sched_setaffinity(0, cores)

    return pin


def _figures_text(figures: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in figures.items()) or "no final figures"


def _finish(run: _Running) -> SeedRun | SeedFailure:
    """A :class:`SeedRun` or a :class:`SeedFailure` for an ended seed, with its progress line."""
    from learner.eval.seed_report import SeedFailure, SeedRun

    run.log_file.close()
    code = run.proc.returncode
    elapsed = time.perf_counter() - run.started
    if code == 0:
        try:
            done = SeedRun.read(run.seed, run.log_path.parent)
        except (OSError, ValueError) as e:
            print(
                f"seed {run.seed}: FAILED: exit status 0 but no readable metrics.json ({e}); "
                f"log {run.log_path}",
                flush=True,
            )
            return SeedFailure(run.seed, code, str(run.log_path))
        print(
            f"seed {run.seed}: finished in {elapsed:.0f} s; {_figures_text(done.figures())}",
            flush=True,
        )
        return done
    print(f"seed {run.seed}: FAILED with exit status {code}; log {run.log_path}", flush=True)
    return SeedFailure(run.seed, code, str(run.log_path))


def run_seeds(plan: SeedPlan) -> int:
    """Run every seed of ``plan`` (``plan.parallel`` at a time), write the report; 0 when every
    seed finished, 1 when any failed (the others still ran and are aggregated)."""
    from learner.eval.seed_report import SeedFailure, SeedRun, write_report

    log.info("%s", plan.describe())
    todo = deque(plan.seeds)
    # highest cores first: a fused run left to itself pins to slot 0, so low cores are busiest
    pool = [] if plan.parallel == 1 else _affinity()[::-1]
    running: list[_Running] = []
    ended: list[SeedRun | SeedFailure] = []
    try:
        while todo or running:
            while todo and len(running) < plan.parallel:
                cores = pool[: plan.cores_per_seed]
                del pool[: len(cores)]
                running.append(_start(plan, todo.popleft(), cores))
            time.sleep(POLL_S)
            for run in [r for r in running if r.proc.poll() is not None]:
                running.remove(run)
                pool[:0] = run.cores
                ended.append(_finish(run))
    finally:
        for run in running:  # interrupted: stop the seeds this process started
            run.proc.terminate()
            run.proc.wait()
            run.log_file.close()
    order = {s: i for i, s in enumerate(plan.seeds)}
    runs = sorted((e for e in ended if isinstance(e, SeedRun)), key=lambda r: order[r.seed])
    failures = [e for e in ended if isinstance(e, SeedFailure)]
    report = write_report(plan.out_dir, runs, failures, config=plan.config)
    print(_report_line(report), flush=True)
    return 1 if failures else 0


def _report_line(report: dict[str, Any]) -> str:
    """``seeds: 2 of 2 finished; eval/id/success_rate IQM 0.95 [0.90, 1.00]; ...; report P``."""
    from learner.eval.aggregate import Estimate

    finished, failed = report["finished"], report["failed"]
    parts = [f"seeds: {len(finished)} of {len(finished) + len(failed)} finished"]
    if failed:
        parts.append("failed " + ", ".join(f"{f['seed']} (exit {f['exit_code']})" for f in failed))
    for name, m in report["metrics"].items():
        est = Estimate(m["iqm"], m["ci"][0], m["ci"][1], tuple(m["values"]))
        parts.append(f"{name} IQM {est.text()}")
    parts.append(f"report {report['files']['md']}")
    return "; ".join(parts)
