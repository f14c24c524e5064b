"""Language-conditioned multi-task: reach / push / lift *the named object* among distractors.

Every scene holds three objects, one per shape slot (``obj0`` box, ``obj1`` cylinder, ``obj2``
sphere), each painted a different colour of the palette per episode (at render time, see
``sim_bridges.mujoco_franka.language_env``). One of them is the target; an instruction
sampled from templates names it by colour and shape ("push the red cube to the left"), or by
colour only ("lift the blue object"), so grounding needs the language and, for colour-only
instructions, the image.

Success per verb (dense reward in brackets, plus 1 on success like the other tasks):
- reach: grip site within 4 cm of the point 6 cm above the target (``-distance``);
- push: target's centre within 4 cm (in the plane) of its start moved 8 cm toward the named
  direction (``-|ee - obj| - 2 |obj - goal|``);
- lift: target 5 cm above its rest height (reach + grasp + height stages, as ``lift``).

Why per-episode data lives in hidden mocap markers: the vector env scores every env with a few
batched numpy calls over views into ``MjData``; the verb, the target slot and the goal are
written into two mocap bodies parked 10 m below the floor (never rendered), so the batched
scorer reads them like any other raw quantity. The instruction string itself (not numeric)
lives in :attr:`LanguageTask.episodes`, keyed by the env's ``MjData``.

The state's task part is every slot's ``position - ee`` (9 floats): where things are, but not
which one the instruction means.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from rlinf_contracts.spec import StateField
from sim_bridges.mujoco_franka.model import TABLE_HEIGHT, FrankaModel, ObjectSpec
from sim_bridges.mujoco_franka.tasks.base import FrankaTask, Workspace, register_task, set_free_pose
from sim_bridges.mujoco_franka.tasks.lift import _finger_targets

VERBS = ("reach", "push", "lift")
SLOTS = ("obj0", "obj1", "obj2")
SLOT_SHAPES = ("box", "cylinder", "sphere")
HALF = 0.025  # every object is 5 cm across; rest height is the same for all shapes
OBJECT_BOX = Workspace(center=(-0.08, 0.0, 0.0), half=(0.09, 0.14, 0.0))
MIN_SEPARATION = 0.09
HOME_EE_XY, KEEP_OUT = (
    np.array([-0.10, 0.0]),
    0.08,
)  # no object under the gripper's start (no free success)
HIDE_Z = -10.0  # hidden markers: world z offset of the data they carry
REACH_ABOVE, REACH_RADIUS = 0.06, 0.04
PUSH_DISTANCE, PUSH_RADIUS = 0.08, 0.04
LIFT_HEIGHT = 0.05
DIRECTIONS = {
    "left": (0.0, 1.0),
    "right": (0.0, -1.0),
    "forward": (1.0, 0.0),
    "backward": (-1.0, 0.0),
}

# vocabularies: "train" (in distribution) and "semantic" (unseen paraphrases and object names)
COLOURS = {
    "red": (0.85, 0.12, 0.12),
    "green": (0.12, 0.7, 0.2),
    "blue": (0.12, 0.3, 0.9),
    "yellow": (0.92, 0.82, 0.1),
}
VOCAB = {
    "train": {
        "shape": ("cube", "cylinder", "sphere"),
        "colour": {c: c for c in COLOURS},
        "reach": ("reach the {obj}", "move the gripper to the {obj}", "go to the {obj}"),
        "push": ("push the {obj} {dir}", "push the {obj} {dir} a bit"),
        "lift": ("lift the {obj}", "pick up the {obj}"),
        "object": "object",
    },
    "semantic": {
        "shape": ("block", "can", "ball"),
        "colour": {"red": "crimson", "green": "lime", "blue": "navy", "yellow": "golden"},
        "reach": ("touch the {obj}", "approach the {obj} with the hand"),
        "push": ("shove the {obj} {dir}", "slide the {obj} {dir} along the table"),
        "lift": ("raise the {obj}", "grab the {obj} and hold it up"),
        "object": "thing",
    },
}


@dataclass(frozen=True)
class LanguageEpisode:
    """What one env is asked to do this episode."""

    verb: str
    target: int  # slot index
    colours: tuple[str, ...]  # palette name per slot
    instruction: str
    direction: str = ""


def make_instruction(
    rng: np.random.Generator,
    verb: str,
    target: int,
    colour: str,
    direction: str,
    vocab: str = "train",
    colour_only: float = 0.3,
) -> str:
    """A templated instruction naming slot ``target`` (of palette ``colour``) in ``vocab``."""
    v = VOCAB[vocab]
    noun = v["object"] if rng.random() < colour_only else v["shape"][target]
    obj = f"{v['colour'][colour]} {noun}"
    templates = v[verb]
    return templates[int(rng.integers(len(templates)))].format(obj=obj, dir=direction)


@register_task("language")
class LanguageTask(FrankaTask):
    instruction = "reach the red cube"  # a sample; the per-env instruction is in the observation
    markers = ("goal", "code")
    state_fields = tuple(StateField(f"{s}_minus_ee", 3) for s in SLOTS)
    feature_dim = 9
    needs_object = True
    default_control = "ee_delta_pos"
    default_max_steps = 40
    raw_dim = 17  # 3 object positions, goal, code, finger targets

    def __init__(
        self, pos_scale: float = 1.0, pos_shift: tuple[float, float, float] = (0.0, 0.0, 0.0)
    ):
        super().__init__(pos_scale, pos_shift)
        self.mix: dict[str, float] = {"reach": 1.0}
        self.vocab = "train"
        self.colour_only = 0.3
        self.episodes: dict[int, LanguageEpisode] = {}  # id(MjData) -> this episode
        self.configured = False  # set by LanguageVectorEnv, which also paints the colours named

    def configure(self, mix: dict[str, float], vocab: str, colour_only: float) -> None:
        bad = sorted(set(mix) - set(VERBS))
        if bad or not mix or min(mix.values()) < 0 or sum(mix.values()) <= 0:
            raise ValueError(
                f"language task mix {mix!r}: weights >= 0 over verbs {VERBS}, not all zero"
            )
        if vocab not in VOCAB:
            raise ValueError(f"language vocab {vocab!r}; use one of {sorted(VOCAB)}")
        self.mix, self.vocab, self.colour_only = dict(mix), vocab, float(colour_only)
        self.configured = True

    def objects(self, shape: str = "box") -> tuple[ObjectSpec, ...]:
        sizes = {"box": (HALF, HALF, HALF), "cylinder": (HALF, HALF), "sphere": (HALF,)}
        return tuple(ObjectSpec(name=n, shape=s, size=sizes[s]) for n, s in zip(SLOTS, SLOT_SHAPES))

    # ----------------------------------------------------------------- episode
    def reset(self, fm: FrankaModel, d: mujoco.MjData, rng: np.random.Generator) -> None:
        if not self.configured:
            raise ValueError(
                "the language task paints per-episode object colours and instructions; "
                "build it with make_env('franka_language/<mix>'), not 'mujoco_franka/language'"
            )
        placed: list[np.ndarray] = []
        for name in SLOTS:
            for _ in range(100):  # rejection sampling keeps objects apart
                pos = OBJECT_BOX.sample(rng, self.pos_scale, self.pos_shift)
                if np.linalg.norm(pos[:2] - HOME_EE_XY) > KEEP_OUT and all(
                    np.linalg.norm(pos[:2] - p[:2]) > MIN_SEPARATION for p in placed
                ):
                    break
            pos[2] = TABLE_HEIGHT + HALF
            placed.append(pos)
            set_free_pose(fm, d, name, pos, yaw=float(rng.uniform(-0.5, 0.5)))
        verbs = list(self.mix)
        p = np.array([self.mix[v] for v in verbs], float)
        verb = verbs[int(rng.choice(len(verbs), p=p / p.sum()))]
        target = int(rng.integers(len(SLOTS) if verb == "reach" else 2))  # no push/lift of the ball
        colours = tuple(str(c) for c in rng.permutation(list(COLOURS))[: len(SLOTS)])
        direction = str(rng.choice(list(DIRECTIONS))) if verb == "push" else ""
        text = make_instruction(
            rng, verb, target, colours[target], direction, self.vocab, self.colour_only
        )
        goal = placed[target].copy()
        if verb == "push":
            goal[:2] += PUSH_DISTANCE * np.asarray(DIRECTIONS[direction])
        d.mocap_pos[fm.marker_mocap["goal"]] = goal + [0.0, 0.0, HIDE_Z]
        d.mocap_pos[fm.marker_mocap["code"]] = [VERBS.index(verb), target, HIDE_Z]
        self.episodes[id(d)] = LanguageEpisode(verb, target, colours, text, direction)

    def episode(self, d: mujoco.MjData) -> LanguageEpisode:
        return self.episodes[id(d)]

    # ------------------------------------------------------------------ scoring
    def raw_views(self, fm: FrankaModel, d: mujoco.MjData) -> tuple[np.ndarray, ...]:
        objs = tuple(d.qpos[fm.object_qpos[n] : fm.object_qpos[n] + 3] for n in SLOTS)
        return (
            *objs,
            d.mocap_pos[fm.marker_mocap["goal"]],
            d.mocap_pos[fm.marker_mocap["code"]],
            _finger_targets(fm, d),
        )

    def raw_const(self, fm: FrankaModel) -> float:
        return TABLE_HEIGHT + HALF

    def _raw(self, fm: FrankaModel, d: mujoco.MjData) -> np.ndarray:
        return np.concatenate(self.raw_views(fm, d))[None]

    def batch_features(self, ee: np.ndarray, raw: np.ndarray, const: np.ndarray) -> np.ndarray:
        return (raw[:, :9].reshape(-1, 3, 3) - ee[:, None, :]).reshape(-1, 9)

    def batch_evaluate(
        self, ee: np.ndarray, raw: np.ndarray, width: np.ndarray, const: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        verb = np.rint(raw[:, 12]).astype(int)
        target = np.rint(raw[:, 13]).astype(int)
        obj = raw[:, :9].reshape(-1, 3, 3)[np.arange(len(raw)), target]
        goal = raw[:, 9:12] - [0.0, 0.0, HIDE_Z]
        reach_pt = obj + [0.0, 0.0, REACH_ABOVE]
        d_reach = np.linalg.norm(reach_pt - ee, axis=1)
        d_obj = np.linalg.norm(obj - ee, axis=1)
        d_goal = np.linalg.norm(obj[:, :2] - goal[:, :2], axis=1)
        height = obj[:, 2] - const
        target_width = raw[:, 15] - raw[:, 16]
        grasped = (d_obj < 0.02) & (width > 0.01) & (target_width < width - 0.01)
        lift_r = -(
            d_obj + 0.5 * (1.0 - grasped) + 0.5 * (1.0 - np.clip(height / LIFT_HEIGHT, 0.0, 1.0))
        )
        ok = np.select(
            [verb == 0, verb == 1],
            [d_reach < REACH_RADIUS, d_goal < PUSH_RADIUS],
            height > LIFT_HEIGHT,
        )
        reward = np.select([verb == 0, verb == 1], [-d_reach, -d_obj - 2.0 * d_goal], lift_r)
        return ok.astype(bool), reward

    def features(self, fm: FrankaModel, d: mujoco.MjData, ee: np.ndarray) -> np.ndarray:
        return self.batch_features(ee[None], self._raw(fm, d), np.array([self.raw_const(fm)]))[0]

    def evaluate(self, fm: FrankaModel, d: mujoco.MjData, ee: np.ndarray) -> tuple[bool, float]:
        width = np.array([d.qpos[fm.grip_qpos[0]] - d.qpos[fm.grip_qpos[1]]])
        ok, r = self.batch_evaluate(
            ee[None], self._raw(fm, d), width, np.array([self.raw_const(fm)])
        )
        return bool(ok[0]), float(r[0])

    # ------------------------------------------------------------------- oracle
    def oracle(self, fm: FrankaModel, d: mujoco.MjData, ee: np.ndarray) -> np.ndarray:
        ep = self.episode(d)
        name = SLOTS[ep.target]
        obj = d.qpos[fm.object_qpos[name] : fm.object_qpos[name] + 3].copy()
        if ep.verb == "reach":
            return np.concatenate([obj + [0.0, 0.0, REACH_ABOVE] - ee, [1.0]])
        if ep.verb == "push":
            goal = d.mocap_pos[fm.marker_mocap["goal"]] - [0.0, 0.0, HIDE_Z]
            return np.concatenate([_push_waypoint(obj, goal, ee) - ee, [-1.0]])
        width = float(d.qpos[fm.grip_qpos[0]] - d.qpos[fm.grip_qpos[1]])
        target, grip = _lift_waypoint(obj, ee, width)
        return np.concatenate([target - ee, [grip]])


def _push_waypoint(obj: np.ndarray, goal: np.ndarray, ee: np.ndarray) -> np.ndarray:
    """Hover behind the object (seen from the goal), descend, then push through it."""
    direction = goal[:2] - obj[:2]
    direction /= max(float(np.linalg.norm(direction)), 1e-6)
    behind = obj[:2] - direction * (HALF + 0.04)
    rel = obj[:2] - ee[:2]
    along = float(rel @ direction)
    lateral = float(np.linalg.norm(rel - along * direction))
    low = obj[2] - 0.005
    if 0.02 < along < HALF + 0.07 and lateral < 0.02 and abs(ee[2] - low) < 0.02:
        return np.array([*(obj[:2] + direction * 0.05), low])
    if np.linalg.norm(ee[:2] - behind) > 0.015:
        return np.array([*behind, obj[2] + 0.08])
    return np.array([*behind, low])


def _lift_waypoint(obj: np.ndarray, ee: np.ndarray, width: float) -> tuple[np.ndarray, float]:
    """Above the object, down with open fingers, close, lift (the ``lift`` oracle's stages)."""
    near = np.linalg.norm(obj - ee) < 0.015
    if near and width < 2 * HALF + 0.005:
        return obj + [0.0, 0.0, 0.12], -1.0
    if near:
        return obj, -1.0
    if np.linalg.norm(obj[:2] - ee[:2]) > 0.01:
        return obj + [0.0, 0.0, 0.08], 1.0
    return obj, 1.0
