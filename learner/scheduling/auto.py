"""``placement: auto``: the planning step that replaces the word by the best predicted placement.

A config's ``validate`` only checks that ``auto`` is a well-formed value
(:func:`learner.placement.check_placement_value`): validation has no side effects, and ranking
placements may profile the workload for 10-40 s. :func:`plan` runs after validation and before
the pre-start checks and Ray -- ``rlinf train`` calls it (``--dry-run`` prints the chosen
placement), and so must any code that builds a config with ``placement: auto`` and starts a
runner itself (a runner refuses the bare word: :func:`learner.placement.parse_placement`). It
needs the slot count of the embedded cluster (:func:`learner.cluster.expected_slots`); a run
that joins a cluster (``cluster.address``) must name its placement. The workload profile is read
from the profile cache (:mod:`learner.scheduling.curves`) or taken in this process and cached;
the machine's comm profile is read from the cache that ``rlinf schedule`` fills, else
:data:`DEFAULT_COMM` (figures of this project's 2-core benchmark machine) is used and the log
says so -- never a Ray start while planning. A calibration cached by ``rlinf schedule CONFIG
--calibrate`` (:mod:`learner.scheduling.calibrate`) replaces both when present.
"""

from __future__ import annotations

import copy
import logging
import time
from typing import Any, TypeVar

from learner.placement import is_auto
from learner.sections import RunConfig
from rlinf_contracts.config.errors import ConfigError

log = logging.getLogger(__name__)
C = TypeVar("C", bound=RunConfig)

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


def plan(cfg: C) -> C:
    """The validated ``cfg``, or -- when its placement is ``auto`` -- a copy with the best
    predicted placement (and depth / driver) set and validated again.

    Logs one line before it profiles (10-40 s when the profile cache has nothing for this
    workload, well under a second when it has) and one with the choice and how long it took.
    """
    if not is_auto(cfg.placement):
        return cfg
    from learner.scheduling.curves import cache_dir

    out = copy.deepcopy(cfg)
    slots = _slots(out)
    log.info(
        "placement: auto: profiling the workload to rank placements on %d slots "
        "(profiles cached in %s)",
        slots,
        cache_dir(),
    )
    t0 = time.perf_counter()
    best = resolve(out)
    out.validate()  # type: ignore[attr-defined]  # the chosen placement, like a written one
    log.info(
        "placement: auto -> %s (%s; predicted %.3f s per iteration on %d slots; "
        "profiled and ranked in %.1f s)",
        best.candidate.placement,
        best.candidate.label,
        best.iteration_s,
        slots,
        time.perf_counter() - t0,
    )
    return out


def cached_comm() -> Any:
    from learner.scheduling.comm import COMM_VERSION, CommProfile
    from learner.scheduling.curves import load_cached, workload_key

    cached = load_cached(workload_key("comm", {"v": COMM_VERSION}))
    if cached is None:
        log.info(
            "placement: auto uses default comm figures; "
            "`rlinf schedule CONFIG` measures this machine's"
        )
    return CommProfile.from_dict(cached or DEFAULT_COMM)


def _slots(cfg: RunConfig) -> int:
    from learner.cluster import expected_slots

    slots = expected_slots(cfg.cluster)
    if slots is None:
        raise ConfigError(
            "key 'placement': auto needs the slot count before Ray starts, and with "
            "cluster.address set it is unknown; give the placement explicitly (`rlinf schedule "
            "CONFIG` on that cluster ranks the candidates)"
        )
    return slots[0]


def resolve(cfg: RunConfig) -> Any:
    """Set ``cfg.placement`` (and the candidate's knobs) to the best prediction, in place, and
    return that prediction (:func:`plan` is the step that calls it, on a copy)."""
    from learner.scheduling.calibrate import cached_calibration
    from learner.scheduling.candidates import with_candidate
    from learner.scheduling.plan import rank

    slots = _slots(cfg)
    # a one-process placement of the runner's components: valid while the workload is profiled
    cfg.placement = dict(STAND_IN.get(cfg.runner, STAND_IN["embodied"]))
    calibration = cached_calibration(cfg, slots)  # from `rlinf schedule CONFIG --calibrate`
    best = rank(cfg, slots, comm=cached_comm(), calibration=calibration)[0]
    chosen = with_candidate(cfg, best.candidate)
    for key in best.candidate.overrides():
        section = key.split(".")[0]
        setattr(cfg, section, getattr(chosen, section))
    return best
