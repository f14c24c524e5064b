"""Randomisation knobs for out-of-distribution evaluation, in the style of ManiSkill's OOD splits.

Three axes, each a few fields of :class:`OODConfig`:
- position (``pos_scale``, ``pos_shift``): object / target sampling box grown or moved;
- vision (``object_rgba``, ``table_rgba``, ``random_colors``, ``light_range``): colours and
  lighting, applied per env at render time (they change pixels, never physics);
- semantic (``object_shapes``): object identity; env ``i`` gets ``object_shapes[i % n]``
  (one compiled model per shape, shared by the envs that use it).

``make_env(..., ood="vision")`` picks a named preset from :data:`OOD_SPLITS`;
``ood={"split": "position", "pos_scale": 2.0}`` starts from a preset and overrides fields.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlinf_contracts.config import ConfigError

SHAPES = ("box", "cylinder", "sphere", "capsule")


@dataclass(frozen=True)
class OODConfig:
    """Randomisation of one evaluation split; the default is the training distribution."""

    split: str = "train"
    pos_scale: float = 1.0  # multiplies the half-extents of every sampling box
    pos_shift: tuple[float, float, float] = (0.0, 0.0, 0.0)  # moves the sampling boxes (m)
    object_rgba: tuple[float, float, float, float] | None = None  # fixed object colour
    table_rgba: tuple[float, float, float, float] | None = None  # fixed table colour
    random_colors: bool = False  # new random object and table colours every episode
    random_table: bool = False  # new random table colour every episode (objects keep theirs)
    light_range: tuple[float, float] = (1.0, 1.0)  # per-episode light intensity multiplier
    object_shapes: tuple[str, ...] = ("box",)

    def __post_init__(self) -> None:
        bad = [s for s in self.object_shapes if s not in SHAPES]
        if bad or not self.object_shapes:
            raise ValueError(
                f"ood.object_shapes={self.object_shapes!r}: each must be one of {SHAPES}"
            )
        if self.pos_scale <= 0:
            raise ValueError(f"ood.pos_scale must be > 0, got {self.pos_scale}")

    @property
    def varies_vision(self) -> bool:
        return (
            self.random_colors
            or self.random_table
            or self.object_rgba is not None
            or self.table_rgba is not None
            or self.light_range != (1.0, 1.0)
        )


OOD_SPLITS: dict[str, OODConfig] = {
    "train": OODConfig(),
    "position": OODConfig(split="position", pos_scale=1.5, pos_shift=(0.03, 0.0, 0.0)),
    "vision": OODConfig(split="vision", random_colors=True, light_range=(0.4, 1.4)),
    "semantic": OODConfig(split="semantic", object_shapes=("cylinder", "sphere", "capsule")),
}
# names the learner's eval config uses for the same splits
OOD_SPLITS["id"] = OOD_SPLITS["train"]
OOD_SPLITS["pose"] = OOD_SPLITS["position"]


def parse_ood(ood: None | str | dict[str, Any] | OODConfig) -> OODConfig:
    """Normalise the ``ood`` argument of ``make_env`` (None, split name, dict or config)."""
    if ood is None:
        return OOD_SPLITS["train"]
    if isinstance(ood, OODConfig):
        return ood
    if isinstance(ood, str):
        ood = {"split": ood}
    ood = dict(ood)
    split = ood.get("split", "train")
    if split not in OOD_SPLITS:
        raise ConfigError(
            f"ood split {split!r} unknown; use one of {sorted(OOD_SPLITS)} or a dict of knobs"
        )
    names = {f.name for f in dataclasses.fields(OODConfig)}
    unknown = sorted(set(ood) - names)
    if unknown:
        raise ValueError(f"unknown ood knob(s) {unknown}; known knobs: {sorted(names)}")
    for key in ("pos_shift", "object_rgba", "table_rgba", "light_range", "object_shapes"):
        if ood.get(key) is not None:
            ood[key] = tuple(ood[key])
    return dataclasses.replace(OOD_SPLITS[split], **ood)


@dataclass
class VisualState:
    """Per-env colours and light scale, sampled each episode, applied before rendering."""

    object_rgba: np.ndarray | None
    table_rgba: np.ndarray | None
    light_scale: float


def sample_visuals(cfg: OODConfig, rng: np.random.Generator) -> VisualState:
    obj = np.asarray(cfg.object_rgba) if cfg.object_rgba is not None else None
    table = np.asarray(cfg.table_rgba) if cfg.table_rgba is not None else None
    if cfg.random_colors:
        obj = np.concatenate([rng.uniform(0.05, 1.0, 3), [1.0]])
        table = np.concatenate([rng.uniform(0.1, 0.9, 3), [1.0]])
    elif cfg.random_table:
        table = np.concatenate([rng.uniform(0.1, 0.9, 3), [1.0]])
    lo, hi = cfg.light_range
    return VisualState(obj, table, float(rng.uniform(lo, hi)) if hi > lo else float(lo))
