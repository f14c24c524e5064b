"""``placement: auto``: replace the word by the best predicted placement (and depth).

Called from the config's own ``validate`` (``EmbodiedConfig``, ``ReasoningConfig``,
``OffPolicyConfig``), so it
happens when the typed config is built: before the pre-start checks and before Ray starts,
like every other key; ``rlinf train --dry-run`` prints the chosen placement. It needs the slot
count of the embedded cluster (:func:`learner.cluster.expected_slots`); a run that joins a
cluster (``cluster.address``) must name its placement. The workload profile is taken (or read
from the cache) in this process; the machine's comm profile is read from the cache that
``rlinf schedule`` fills, else :data:`DEFAULT_COMM` (figures of this project's 2-core
benchmark machine) is used and the log says so -- never a Ray start inside validation. A
calibration cached by ``rlinf schedule CONFIG --calibrate`` (:mod:`learner.scheduling.calibrate`)
replaces both when present.
"""

from __future__ import annotations

import logging
from typing import Any

from rlinf_contracts.config.errors import ConfigError

log = logging.getLogger(__name__)

AUTO = "auto"
DEFAULT_COMM = {
    "hop_s": {"same": {"1": 0.002, "1024": 0.0075}, "cross": {"1": 0.0018, "1024": 0.005}},
    "occupancy_s": {"same": 0.0013, "cross": 0.0025},
    "weight_fetch": {"64": 0.0014, "4096": 0.013},
    "ray_init_s": 5.0,
    "spawn_s": 8.0,
    "call_s": 0.004,
}


STAND_IN = {
    "embodied": {"env,rollout,actor": "0"},
    "reasoning": {"rollout,reward,actor": "0"},
    "offpolicy": {"env,learner,replay": "0"},
}
"""Per runner, the one-process placement a config holds while its workload is profiled."""


def is_auto(placement: Any) -> bool:
    return isinstance(placement, str) and placement.strip() == AUTO


def check_value(placement: Any) -> None:
    """A placement is a mapping or the word ``auto``."""
    if isinstance(placement, str) and not is_auto(placement):
        raise ConfigError(
            f"key 'placement' is a mapping of components to slots or 'auto', got {placement!r}"
        )


def cached_comm() -> Any:
    from learner.scheduling.comm import COMM_VERSION, CommProfile
    from learner.scheduling.curves import load_cached, workload_key

    cached = load_cached(workload_key("comm", {"v": COMM_VERSION}))
    if cached is None:
        log.info(
            "placement: auto uses default comm figures; `rlinf schedule CONFIG` measures this machine's"
        )
    return CommProfile.from_dict(cached or DEFAULT_COMM)


def resolve(cfg: Any) -> None:
    """Set ``cfg.placement`` (and the candidate's knobs) to the best prediction, in place."""
    from learner.cluster import expected_slots
    from learner.scheduling.plan import rank, with_candidate

    slots = expected_slots(cfg.cluster)
    if slots is None:
        raise ConfigError(
            "key 'placement': auto needs the slot count before Ray starts, and with "
            "cluster.address set it is unknown; give the placement explicitly (`rlinf schedule "
            "CONFIG` on that cluster ranks the candidates)"
        )
    cfg.placement = dict(
        STAND_IN.get(getattr(cfg, "runner", ""), STAND_IN["embodied"])
    )  # valid while profiling
    from learner.scheduling.calibrate import cached_calibration

    calibration = cached_calibration(
        cfg, slots[0]
    )  # from `rlinf schedule CONFIG --calibrate`, if run
    best = rank(cfg, slots[0], comm=cached_comm(), calibration=calibration)[0]
    chosen = with_candidate(cfg, best.candidate)
    for key in best.candidate.overrides():
        section = key.split(".")[0]
        setattr(cfg, section, getattr(chosen, section))
    log.info(
        "placement: auto -> %s (%s; predicted %.3f s per iteration on %d slots)",
        best.candidate.placement,
        best.candidate.label,
        best.iteration_s,
        slots[0],
    )
