"""The off-policy runner (``runner: offpolicy``): SAC, RLPD, CrossQ on state or images::

    env --(transitions | episodes)--> replay (+ demos) --> updates (utd_ratio) --> publish
     ^                                                                              |
     +------------------------ the newest weights ----------------------------------+

The placement decides how that runs (``learner.offpolicy.topology``): ``fused`` (env and
learner in one process, k env steps then the owed updates; in the calling process without Ray
on a laptop) or ``async`` (env workers collect with the newest published weights and stream
finished episodes to the learner). With ``ingest.enabled`` robots are the env (``remote``): they
stream transitions to the learner's ingest and it pushes weights to their policy server every
``push.every_updates`` updates (``learner.offpolicy.remote``); ``env`` then names the sim twin
used for the spec and the final eval. The learner side -- replay, UTD updates, the DrQ pixel
encoder, checkpoints, the episode store of online transitions -- is ``learner.offpolicy``.

Outputs in ``train.out_dir``: ``checkpoints/`` (actor servable with ``rlinf serve``; critics,
optimisers, temperature, counters, RNG beside it), ``episodes/`` (online episodes, zarr),
``metrics.json``, ``curves.png``, ``tb/``. ``train.resume`` continues from a checkpoint with the
replay refilled from the episode store.
"""

from __future__ import annotations

import logging
from typing import Any

# imported before any cluster starts: it picks a headless MuJoCo GL default that workers inherit
from learner.eval.embodied import final_eval
from learner.offpolicy.config import COMPONENTS, OPTIONAL, OffPolicyConfig
from learner.offpolicy.topology import TOPOLOGIES, runs_in_process, select
from learner.placement import parse_placement
from learner.runners.budget import Budget
from learner.runners.registry import RUNNERS, RunnerSpec
from learner.sections import EnvRunConfig

log = logging.getLogger(__name__)


def run(cfg: OffPolicyConfig, cluster: Any) -> dict[str, Any]:
    """Train per ``cfg`` on ``cluster``; returns the final metrics (incl. held-out eval)."""
    budget = Budget.start(cfg.train.time_budget_s)
    placement = parse_placement(cfg.placement, cluster.num_slots, list(COMPONENTS), OPTIONAL)
    name = select(cfg, placement)
    log.info("placement %s -> %s off-policy topology", placement.describe(), name)
    topo = TOPOLOGIES.get(name)(cfg, cluster, placement)
    try:
        result = topo.train(budget.left())
    finally:
        topo.shutdown()
    final = {
        **result["last"],
        **{k: float(v) for k, v in result["counters"].items()},
        "checkpoint": result["checkpoint"],
        "iterations": len(result["history"]),
        "topology": name,
        "placement_mode": placement.mode,
        "in_process": bool(getattr(cluster, "in_process", False)),
        "out_dir": cfg.train.out_dir,
    }
    if cfg.train.final_eval:
        final["eval"] = final_eval(cfg, result["checkpoint"], budget.deadline)
        if cfg.live.enabled:  # the run's static live page shows it too
            from learner.live.recorder import add_final_eval

            add_final_eval(cfg.train.out_dir, final["eval"])
    final["elapsed_s"] = budget.elapsed()
    return write_outputs(cfg, "offpolicy", result["history"], final, cfg.train.tensorboard)


def write_outputs(
    cfg: EnvRunConfig,
    runner: str,
    history: list[dict[str, float]],
    final: dict[str, Any],
    tensorboard: bool = True,
) -> dict[str, Any]:
    """The run directory's ``metrics.json``, ``curves.png`` and (with ``tensorboard``) ``tb/``
    eval scalars (:func:`learner.metrics.write_run`); returns ``final`` as written. The caller
    passes its own ``train.tensorboard``: not every runner's ``train`` section has one."""
    from learner.metrics import write_run

    return write_run(
        cfg.train.out_dir,
        runner,
        final,
        history,
        title=cfg.name,
        tensorboard=tensorboard,
        logged_live=runner == "offpolicy",
    )


def in_process(cfg: OffPolicyConfig, num_slots: int) -> bool:
    return runs_in_process(cfg, num_slots)


RUNNERS.add("offpolicy", RunnerSpec(config_cls=OffPolicyConfig, run=run, in_process=in_process))
__all__ = ["run", "OffPolicyConfig", "in_process", "final_eval", "write_outputs"]
