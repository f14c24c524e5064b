"""Candidate placements and pipeline depths a scheduler compares, per runner.

Every candidate is an ordinary placement of the one grammar (:mod:`learner.placement`) plus
the knobs that go with it (pipeline depth; for the embodied runner whether a collocated
placement is fused). Candidates are generated from the slot count, so the same code ranks
2 CPU cores here and 8 GPUs elsewhere.

>>> [c.label for c in embodied_candidates(2, 32)][:3]
['fused x1 d1', 'fused x1 d2', 'fused x2 d1']
>>> [c.label for c in reasoning_candidates(2)]
['inline', 'collocated', 'disaggregated']
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Candidate:
    label: str
    placement: dict[str, str] = field(hash=False)
    stages: int = 1
    fuse: bool = True
    extra: dict[str, Any] = field(default_factory=dict, hash=False)  # other config keys it sets

    def overrides(self) -> dict[str, Any]:
        """The config keys this candidate sets (embodied: rollout.*; reasoning: train.driver)."""
        return {"placement": dict(self.placement), **self.extra}


def with_candidate(cfg: Any, cand: Candidate) -> Any:
    """A copy of ``cfg`` with the candidate's placement and knobs set."""
    out = copy.deepcopy(cfg)
    for key, value in cand.overrides().items():
        obj, *path = key.split(".")
        target = out if not path else getattr(out, obj)
        setattr(target, path[-1] if path else obj, value)
    return out


def _span(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo}-{hi}"


def embodied_candidates(
    num_slots: int, num_envs: int, depths: tuple[int, ...] = (1, 2), group: int = 1
) -> list[Candidate]:
    """Fused (1 and all slots), collocated with channels, split (env+rollout | actor), disaggregated
    (three disjoint sets, from 3 slots) and hybrid (env | rollout, actor over all)."""
    n = num_slots
    layouts: list[tuple[str, dict[str, str], bool]] = [
        ("fused x1", {"env,rollout,actor": "0"}, True)
    ]
    if n > 1:
        layouts += [
            (f"fused x{n}", {"env,rollout,actor": _span(0, n - 1)}, True),
            ("collocated", {"env,rollout,actor": _span(0, n - 1)}, False),
            ("split", {"env,rollout": "0", "actor": _span(1, n - 1)}, True),
            ("hybrid", {"env": "0", "rollout": "1", "actor": _span(0, n - 1)}, True),
        ]
    if n > 2:
        layouts.insert(
            4, ("disaggregated", {"env": "0", "rollout": "1", "actor": _span(2, n - 1)}, True)
        )
    out = []
    for label, placement, fuse in layouts:
        procs = _env_procs(placement, n)
        for d in depths:
            if num_envs % (procs * d) == 0 and (num_envs // (procs * d)) % group == 0:
                out.append(
                    Candidate(
                        f"{label} d{d}",
                        placement,
                        d,
                        fuse,
                        {"rollout.pipeline_stages": d, "rollout.fuse_collocated": fuse},
                    )
                )
    return out


def _env_procs(placement: dict[str, str], n: int) -> int:
    from learner.placement import parse_placement

    return parse_placement(placement, n)["env"].num_processes


def reasoning_candidates(num_slots: int) -> list[Candidate]:
    """One process (inline driver), worker groups collocated on slot 0, actor on its own slot."""
    out = [
        Candidate("inline", {"rollout,reward,actor": "0"}, extra={"train.driver": "inline"}),
        Candidate("collocated", {"rollout,reward,actor": "0"}, extra={"train.driver": "workers"}),
    ]
    if num_slots > 1:
        out.append(
            Candidate(
                "disaggregated",
                {"rollout,reward": "0", "actor": "1"},
                extra={"train.driver": "workers"},
            )
        )
    return out
