"""``franka_language/<mix>``: the language-conditioned Franka family (see ``tasks/language.py``).

``make_env("franka_language/mix", num_envs=8, obs_mode="state+rgb", ood="semantic")`` builds a
:class:`LanguageVectorEnv`: the MuJoCo Franka vector env running the ``language`` task with a
per-env instruction in ``obs["instruction"]`` (a list of strings, what the wire and the policy
server carry), per-episode object colours painted at render time, and a close ``front``
camera (the default ``third`` view shows 5 cm objects as 3 px at 64 px).

Mixes (``<mix>``, instruction verbs and their weights): ``reach`` (reach only), ``mix``
(reach 0.6 / push 0.2 / lift 0.2: reach-dominant so a CPU can learn it in minutes), ``hard``
(reach 0.2 / push 0.4 / lift 0.4: an RL-only mix that oversamples the verbs SFT leaves room on).

OOD splits (``ood=<name>``, :data:`LANGUAGE_SPLITS`; ``id`` is the training distribution):
- ``vision``: unseen table colours (random per episode) and lighting (x0.4-1.4);
- ``semantic``: unseen instruction paraphrases and object names ("shove the navy block ...");
- ``position``: unseen layouts (object sampling box x1.6, shifted 4 cm away from the robot).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlinf_contracts.config import ConfigError
from rlinf_contracts.env import Observation
from rlinf_contracts.env_registry import UnknownEnvError, register_env
from sim_bridges.mujoco_franka.config import FrankaEnvConfig
from sim_bridges.mujoco_franka.model import FrankaModel, look_at
from sim_bridges.mujoco_franka.ood import OODConfig, VisualState, sample_visuals
from sim_bridges.mujoco_franka.render import CameraRig
from sim_bridges.mujoco_franka.tasks.language import COLOURS, SLOTS, LanguageTask
from sim_bridges.mujoco_franka.vector_env import FrankaVectorEnv

MIXES: dict[str, dict[str, float]] = {
    "reach": {"reach": 1.0},
    "push": {"push": 1.0},  # single-verb mixes: per-verb success (``rlinf eval ... env.name=...``)
    "lift": {"lift": 1.0},
    "mix": {"reach": 0.6, "push": 0.2, "lift": 0.2},
    # RL-only mix that oversamples the verbs SFT leaves room on (evaluate on ``mix``)
    "hard": {"reach": 0.2, "push": 0.4, "lift": 0.4},
}


@dataclass(frozen=True)
class LanguageSplit:
    """One evaluation split of the language family: the physics / vision knobs and the
    vocabulary."""

    ood: OODConfig
    vocab: str = "train"


LANGUAGE_SPLITS: dict[str, LanguageSplit] = {
    "train": LanguageSplit(OODConfig()),
    "vision": LanguageSplit(OODConfig(split="vision", random_table=True, light_range=(0.4, 1.4))),
    "semantic": LanguageSplit(OODConfig(split="semantic"), vocab="semantic"),
    "position": LanguageSplit(
        OODConfig(split="position", pos_scale=1.6, pos_shift=(0.04, 0.0, 0.0))
    ),
}
LANGUAGE_SPLITS["id"] = LANGUAGE_SPLITS["train"]


FRONT_CAMERA = ((0.32, 0.0, 0.48), look_at((0.32, 0.0, 0.48), (-0.1, 0.0, 0.0)))
LanguageTask.extra_cameras = {"front": FRONT_CAMERA}


@dataclass
class LanguageVisuals(VisualState):
    """Vision state of one env plus its per-slot object colours (RGBA rows)."""

    object_colors: np.ndarray | None = None


class LanguageRig(CameraRig):
    """Camera rig that also paints every object slot its episode colour before rendering."""

    def _apply_visuals(self, fm: FrankaModel, vis: VisualState | None) -> None:
        super()._apply_visuals(fm, vis)
        colors = getattr(vis, "object_colors", None)
        if colors is not None:
            for name, rgba in zip(SLOTS, colors):
                fm.model.geom_rgba[fm.object_geoms[name]] = rgba


class LanguageVectorEnv(FrankaVectorEnv):
    """:class:`FrankaVectorEnv` running the language task; see the module docstring."""

    def __init__(
        self, cfg: FrankaEnvConfig, mix: str = "mix", vocab: str = "train", colour_only: float = 0.3
    ) -> None:
        super().__init__(cfg)
        self.task: LanguageTask
        self.task.configure(MIXES[mix], vocab, colour_only)
        # per env: see obs["instruction"]
        self.spec = dataclasses.replace(self.spec, instruction="")
        if self._rig is not None:
            self._rig.close()
            self._rig = LanguageRig(*cfg.image_hw, cfg.robot_look)

    def _reset_one(self, i: int) -> None:
        super()._reset_one(i)
        ep = self.task.episode(self.datas[i])
        base = self._visuals[i] or sample_visuals(self.cfg.ood, self._rngs[i])
        colors = np.array([[*COLOURS[c], 1.0] for c in ep.colours])
        self._visuals[i] = LanguageVisuals(
            base.object_rgba, base.table_rgba, base.light_scale, colors
        )

    def instructions(self) -> list[str]:
        return [self.task.episode(d).instruction for d in self.datas]

    def _observe(
        self, idx: np.ndarray | None = None, obs: Observation | None = None
    ) -> Observation:
        obs = super()._observe(idx, obs)
        obs["instruction"] = (
            self.instructions()
        )  # a new list: a final_observation copy keeps its own
        return obs

    def render_frames(self) -> np.ndarray | None:
        if self._video_rig is None:
            self._video_rig = self._rig or LanguageRig(240, 320, "visual")
        return self._video_rig.render(self.fms, self.datas, "front", self._visuals)


def parse_language_ood(ood: None | str | dict[str, Any]) -> tuple[OODConfig, str]:
    """``ood`` of ``make_env("franka_language/...")``: a split name or ``{"split": ..., knobs}``
    -> (OOD config, vocabulary)."""
    if ood is None:
        ood = "train"
    knobs: dict[str, Any] = {"split": ood} if isinstance(ood, str) else dict(ood)
    name = knobs.pop("split", "train")
    if name not in LANGUAGE_SPLITS:
        raise ConfigError(
            f"franka_language ood split {name!r} unknown; use one of {sorted(LANGUAGE_SPLITS)}"
        )
    split = LANGUAGE_SPLITS[name]
    vocab = knobs.pop("vocab", split.vocab)
    names = {f.name for f in dataclasses.fields(OODConfig)}
    unknown = sorted(set(knobs) - names)
    if unknown:
        raise ValueError(f"unknown ood knob(s) {unknown}; known knobs: {sorted(names | {'vocab'})}")
    for key in ("pos_shift", "object_rgba", "table_rgba", "light_range"):
        if knobs.get(key) is not None:
            knobs[key] = tuple(knobs[key])
    return dataclasses.replace(split.ood, **knobs), vocab


@register_env("franka_language")
def make_language_env(
    task: str = "mix", num_envs: int = 1, ood: Any = None, colour_only: float = 0.3, **kwargs: Any
) -> LanguageVectorEnv:
    """Factory behind ``make_env("franka_language/<mix>", ...)``; the other kwargs are
    :class:`FrankaEnvConfig` fields (default ``cameras=("front",)``, ``obs_mode="state+rgb"``)."""
    mix = task or "mix"
    if mix not in MIXES:
        raise UnknownEnvError(
            f"unknown franka_language mix '{mix}'. Known mixes: {', '.join(sorted(MIXES))}."
        )
    ood_cfg, vocab = parse_language_ood(ood)
    kwargs.setdefault("cameras", ("front",))
    kwargs.setdefault("obs_mode", "state+rgb")
    cfg = FrankaEnvConfig.from_kwargs("language", num_envs, **kwargs)
    cfg = dataclasses.replace(cfg, ood=ood_cfg)
    return LanguageVectorEnv(cfg, mix=mix, vocab=vocab, colour_only=colour_only)
